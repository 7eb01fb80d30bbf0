"""The registry is the one list of incident types: the docs and the shipped alert rules must match it."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from pipelines.detectors.registry import BY_TYPE, EVENT_TYPES, RULES, of_subject
from pipelines.detectors.rule import Rule

ROOT = Path(__file__).resolve().parents[2]


def readme_rows() -> dict[str, tuple[set[str], str]]:
    """incident -> (severities, the row's text) from docs/detections.md's table."""
    rows = {}
    for line in (ROOT / "docs" / "detections.md").read_text().splitlines():
        m = re.match(r"\| `([A-Z_]+)` \| ([a-z /]+) \|(.*)", line)
        if m:
            rows[m.group(1)] = ({s.strip() for s in m.group(2).split("/")}, m.group(3))
    return rows


def test_one_rule_per_type_with_known_severities():
    assert len(BY_TYPE) == len(RULES)
    for rule in RULES:
        assert set(rule.severity.values()) <= {"critical", "warning", "info"}, rule.type
        assert rule.summary, rule.type


def test_readme_table_lists_every_type_with_its_severities_and_causes():
    rows = readme_rows()
    assert set(rows) == set(BY_TYPE)
    for rule in RULES:
        severities, text = rows[rule.type]
        assert severities == rule.severities, rule.type
        for cause in rule.causes:
            assert f"`{cause}`" in text, (rule.type, cause)


def test_alert_rules_name_only_registered_types():
    rules = (ROOT / "dashboards/prometheus/krm-alerts.yml").read_text()
    named = set()
    for m in re.finditer(r'type=~?"([^"]+)"', rules):
        named.update(m.group(1).split("|"))
    assert named and named <= set(BY_TYPE), named - set(BY_TYPE)


def test_events_are_the_types_comparing_two_polls():
    assert EVENT_TYPES == {"UNCLEAN_LEADER_ELECTION", "OFFSET_REGRESSION", "LOG_TRUNCATION"}


def test_spark_rules_have_plans_and_driver_rules_none():
    assert all(r.plan is not None for r in of_subject("partition") + of_subject("cluster"))
    assert all(r.plan is None for r in of_subject("driver"))


@pytest.mark.parametrize("kwargs, message", [
    ({"subject": "topic"}, "unknown subject"),
    ({"subject": "partition", "plan": None}, "needs plan"),
    ({"subject": "driver", "plan": lambda v: v}, "has no plan"),
    ({"subject": "partition", "plan": lambda v: v, "scope": "cluster", "affected": lambda v: v}, "scope"),
])
def test_a_malformed_rule_is_refused(kwargs, message):
    with pytest.raises(ValueError, match=message):
        Rule("X", {None: "warning"}, summary="x", **{"routine": "none", **kwargs})


def test_a_rule_must_say_what_routine_operations_do_to_it():
    with pytest.raises(ValueError, match="routine"):
        Rule("X", {None: "warning"}, "driver", "x")


def test_routine_operations_doc_is_generated_from_the_rules():
    from pipelines.detectors.registry import routine_table

    doc = (ROOT / "docs" / "routine-operations.md").read_text()
    assert routine_table() in doc, "regenerate docs/routine-operations.md's table (see its header)"


def test_escalations_are_data_and_severity_of_decides_them():
    """A severity raised while a condition holds is declared beside the causes (`Rule.escalations`) and
    decided by `severity_of` alone; the Spark form is checked equal in tests/spark/test_rule_severities.py."""
    from pipelines.detectors import brokers, slow, unclean

    escalated = {r.type: r for r in RULES if r.escalations}
    assert set(escalated) == {brokers.BROKER_DOWN, unclean.TYPE, slow.TYPE}  # declared, never written in a plan
    down = brokers.RULE
    assert down.severity_of(brokers.STOPPED) == "warning"
    assert down.severity_of(brokers.STOPPED, [brokers.PAST_PLANNED_STOP]) == "critical"
    assert down.severity_of(brokers.UNKNOWN, [brokers.PAST_PLANNED_STOP]) == "critical"
    assert down.severity_of(brokers.UNREACHABLE, [brokers.PAST_PLANNED_STOP]) == "warning"  # not its cause
    assert unclean.RULE.severity_of(unclean.LAST_KNOWN_ELR, [unclean.HW_WENT_BACK]) == "critical"
    assert unclean.RULE.severity_of(unclean.UNCONFIRMED, [unclean.HW_WENT_BACK]) == "info"


@pytest.mark.parametrize("escalation, why", [
    (("stopped",), "undeclared"),  # a cause the rule does not have
    (("a",), "must raise"),  # critical is not raised
])
def test_an_escalation_that_names_no_cause_or_lowers_is_refused(escalation, why):
    from pipelines.detectors.rule import Escalation

    with pytest.raises(ValueError, match=why):
        Rule("T", {"a": "critical", "b": "warning"}, "driver", "t", routine="r",
             escalations=(Escalation(escalation, "cond", "critical", "why"),))


def test_details_read_outside_their_type_are_read_by_attribute():
    """What the metrics, the CLI and the demo read of an incident's details comes through its type's model
    (the JSON keys stay in the type's module), with the same defaults a missing key had."""
    from pipelines.detectors.hw_stall import StallDetails
    from pipelines.detectors.lag import LagDetails
    from pipelines.detectors.offline import OfflineDetails
    from pipelines.incidents import Incident

    from pipelines.detectors.details import parse

    assert parse(OfflineDetails, {"must_return": [3, 1]}).must_return == (3, 1) and parse(OfflineDetails, {}).must_return == ()
    stall = parse(StallDetails, {"hw_stalled_since_ms": 5, "holding_back": [2]})
    assert (stall.hw_stalled_since_ms, stall.holding_back) == (5, (2,))
    assert parse(StallDetails, {}).holding_back == () and parse(LagDetails, {"lag_messages": 7}).lag_messages == 7

    def incident(cause, details):
        return Incident("i", "c", "s", "BROKER_DOWN", "warning", None, None, 1, cause, details, 0, 0, None, "open")

    assert incident("stopped", {}).root_cause == "stopped" and incident("stopped", {}).cause_history == ["stopped"]
    moved = incident("stopped", {"root_cause": "crash", "cause_history": ["crash", "stopped"]})
    assert moved.root_cause == "crash" and moved.cause_history == ["crash", "stopped"]


def test_a_cluster_rule_that_reads_the_observation_time_declares_what_time_alone_changes():
    """A cluster record stays home while steady (collectors/unchanged.py): a cluster rule that compares the
    observation time with something in the record must declare it (an escalation's since/after, a finding
    time alone opens: judged by pipelines/clock.py), or it would wait for a published poll. Partition rules
    read it only on partitions that are not quiet, whose polls always go out."""
    import inspect

    for rule in of_subject("cluster"):
        reads_time = "observed_at_ms" in inspect.getsource(inspect.getmodule(rule.plan))
        declared = any(e.since is not None for e in rule.escalations) or bool(rule.opens)
        assert not reads_time or declared, (
            f"{rule.type}: its plan reads the observation time; declare on the rule what time alone changes")
