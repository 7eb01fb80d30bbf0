"""The shipped alert file is generated from the rules' declarations (pipelines/alert_rules.py)."""

from pathlib import Path

import pytest
import yaml

from pipelines.alert_rules import alert_file, groups
from pipelines.detectors.exports import Alert, console, incident_info, render_alert_file
from pipelines.detectors.registry import BY_TYPE

pytestmark = pytest.mark.unit

SHIPPED = Path(__file__).resolve().parents[2] / "dashboards" / "prometheus" / "krm-alerts.yml"


def test_the_shipped_file_is_the_generated_one():
    assert SHIPPED.read_text() == alert_file(), (
        "regenerate: .venv/bin/python -m pipelines.alert_rules > dashboards/prometheus/krm-alerts.yml")


def test_the_file_reads_back_as_declared():
    parsed = yaml.safe_load(alert_file())
    declared = [(name, [a.as_dict() for a in alerts]) for name, alerts in groups()]
    assert [(g["name"], g["rules"]) for g in parsed["groups"]] == declared
    names = [a["alert"] for _, rules in declared for a in rules]
    assert len(names) == len(set(names))


def test_an_incident_link_names_the_rules_own_type():
    for rule in BY_TYPE.values():
        for alert in rule.alerts:
            for _, link in alert.links:
                if "krm_incident_info" in link:
                    assert f'type=\\"{rule.type}\\"' in link, (rule.type, alert.name)


@pytest.mark.parametrize("text", [
    "a: b", "x #y", "true", "1.5", "'quoted'", '"double"', "{{ $labels.cluster }} down", "- dash", "ends:",
    "two  spaces inside a long text " * 5, "a\nb\n", "  leading", "% percent", "no", "@at", "plain text",
    "a " * 80, "a\nb", " lead\nx", "a\n\n", "a\n\nb\n", "\nfirst empty", "tab\there",
])
def test_any_text_reads_back_unchanged(text):
    alert = Alert("X", text, "warning", summary=text, runbook=text, links=(("l", text),), why="why " * 40)
    parsed = yaml.safe_load(render_alert_file([("g", [alert])], "header"))
    assert parsed["groups"][0]["rules"] == [alert.as_dict()]


def test_link_templates_are_prometheus_queries():
    assert incident_info("HW_STALL", "holding_back") == (
        '{{ with printf "krm_incident_info{cluster=%q,type=\\"HW_STALL\\",topic=%q,partition=%q}" '
        '$labels.cluster $labels.topic $labels.partition | query }}{{ . | first | label "holding_back" }}{{ end }}')
    assert incident_info("BROKER_DOWN", "url", by=("broker",)).count("%q") == 2
    assert console() == '{{ with query "krm_console_info" }}{{ . | first | label "url" }}/{{ end }}'


def test_an_alert_is_a_warning_or_critical():
    with pytest.raises(ValueError, match="warning or critical"):
        Alert("X", "up == 0", "info", summary="s", runbook="r")
