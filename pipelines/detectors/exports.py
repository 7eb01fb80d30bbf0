"""What an incident type exports beside its incidents: its Prometheus series and its alert rules.

A rule declares them (`Rule.series`, `Rule.alerts`); pipelines/metrics.py builds the exposition from
the series, and pipelines/alert_rules.py writes dashboards/prometheus/krm-alerts.yml from the alerts
(a unit test holds the shipped file equal to it). Both are pure data: no Prometheus client, no YAML
library here.
"""

from __future__ import annotations

import json
import textwrap
from dataclasses import dataclass
from typing import Any, Callable, Iterable

# Incident attributes a series label may name (after `cluster`, which every series has).
INCIDENT_LABELS = ("topic", "partition", "broker", "cause", "severity")


@dataclass(frozen=True)
class Series:
    """A gauge exported from the open incidents of the rule's type.

    kind `incident`: one sample per open incident, labels `cluster` + `labels` (incident attributes),
    value `value(incident, now)` (1 when not given; None leaves the incident out). Several rules may
    declare the same series (same name, help and labels; pipelines/detectors/registry.py checks): with
    `one_per`, one sample per those labels, the rule first in the registry winning
    (krm_partition_unavailable: the controller's offline cause before krm's own).
    kind `count`: one sample per cluster krm watches, always present: how many incidents of the type
    are open (0 included, so an alert's `== 0` and a dashboard's graph have a series to read).
    """

    name: str
    help: str
    labels: tuple[str, ...] = ("topic", "partition")
    kind: str = "incident"
    value: Callable[[Any, float], float | None] | None = None
    cause_default: str | None = None  # the `cause` label of an incident without one
    one_per: tuple[str, ...] | None = None  # labels naming one sample, when several rules share the series

    def __post_init__(self) -> None:
        if self.kind not in ("incident", "count"):
            raise ValueError(f"{self.name}: kind is incident or count")
        if self.kind == "count" and self.labels:
            raise ValueError(f"{self.name}: a count is per cluster, labels ()")
        unknown = set(self.labels) - set(INCIDENT_LABELS)
        if unknown:
            raise ValueError(f"{self.name}: labels must be incident attributes {INCIDENT_LABELS}, not {sorted(unknown)}")
        if self.one_per is not None and not set(self.one_per) <= set(self.labels):
            raise ValueError(f"{self.name}: one_per names labels of the series")

    def sample(self, inc: Any, now: float) -> tuple[tuple[str, ...], float] | None:
        """(label values after `cluster`, value) of an open incident, or None when it exports nothing."""
        value = 1.0 if self.value is None else self.value(inc, now)
        if value is None:
            return None
        return tuple(_label(inc, name, self.cause_default) for name in self.labels), float(value)


def _label(inc: Any, name: str, cause_default: str | None) -> str:
    value = getattr(inc, name)
    if name == "cause" and not value:
        value = cause_default
    return "" if value is None else str(value)


@dataclass(frozen=True)
class Alert:
    """A Prometheus alerting rule: `why` is the comment above it in the shipped file (when it waits,
    why it pages or not); `links` are the annotations before the summary (`incident_info`, `console`)."""

    name: str
    expr: str
    severity: str
    summary: str
    runbook: str
    wait: str | None = None  # the rule's `for:`
    links: tuple[tuple[str, str], ...] = ()
    why: str = ""

    def __post_init__(self) -> None:
        if self.severity not in ("warning", "critical"):
            raise ValueError(f"{self.name}: an alert is a warning or critical")

    def as_dict(self) -> dict[str, Any]:
        """The rule as Prometheus reads it (what the shipped file parses to)."""
        out: dict[str, Any] = {"alert": self.name, "expr": self.expr}
        if self.wait:
            out["for"] = self.wait
        out["labels"] = {"severity": self.severity}
        out["annotations"] = {**dict(self.links), "summary": self.summary, "runbook": self.runbook}
        return out


# appended to a partition page's expression: it waits while a critically slow broker it names pages for it
# (KafkaBrokerSlow: one page naming the broker and the kind; pipelines/slowed.py)
UNLESS_SLOWED = " unless on(cluster, topic, partition) krm_partition_slowed_by == 1"


def incident_info(incident_type: str, label: str, by: tuple[str, ...] = ("topic", "partition")) -> str:
    """An annotation template reading `label` of the alert's incident from krm_incident_info: the
    alert's own labels stay those of the series it fires on, the page still carries the answer."""
    fields = ",".join(f"{name}=%q" for name in by)
    args = " ".join(f"$labels.{name}" for name in ("cluster", *by))
    return (f'{{{{ with printf "krm_incident_info{{cluster=%q,type=\\"{incident_type}\\",{fields}}}" {args} '
            f'| query }}}}{{{{ . | first | label "{label}" }}}}{{{{ end }}}}')


def console(path: str = "/") -> str:
    """An annotation template: the console's address (krm_console_info) followed by `path`."""
    return f'{{{{ with query "krm_console_info" }}}}{{{{ . | first | label "url" }}}}{path}{{{{ end }}}}'


INCIDENTS_OF_TYPE = "/incidents?cluster={{ $labels.cluster }}&type={{ $labels.type }}"
BROKER_PAGE = "/brokers/{{ $labels.cluster }}/{{ $labels.broker }}"


def render_alert_file(groups: Iterable[tuple[str, Iterable[Alert]]], header: str) -> str:
    """The YAML text of a rule file, written by hand so the `why` of each alert stays beside it as a
    comment (a YAML library would drop it). Scalars are written plain only where YAML reads them back
    unchanged; tests/unit/test_alert_rules.py parses the text and compares it with `Alert.as_dict`."""
    out = [f"# {line}".rstrip() for line in header.splitlines()]
    out.append("groups:")
    for name, alerts in groups:
        out += [f"  - name: {name}", "    rules:"]
        for i, alert in enumerate(alerts):
            if i:
                out.append("")
            out += [f"      # {line}" for line in textwrap.wrap(alert.why, 96)]
            out += _mapping(alert.as_dict(), 6, first="- ")
        out.append("")
    return "\n".join(out[:-1]) + "\n"


def _mapping(d: dict[str, Any], indent: int, first: str = "") -> list[str]:
    lines: list[str] = []
    for i, (key, value) in enumerate(d.items()):
        pad = " " * indent + (first if i == 0 else " " * len(first))
        if isinstance(value, dict):
            lines.append(f"{pad}{key}:")
            lines += _mapping(value, len(pad) + 2)
        else:
            lines += _scalar(f"{pad}{key}:", value, len(pad) + 2)
    return lines


def _scalar(prefix: str, text: str, indent: int) -> list[str]:
    pad = " " * indent
    if "\n" in text:
        body = text[:-1] if text.endswith("\n") else text
        if body and not body.endswith("\n") and not body.startswith((" ", "\n")):
            # `|` keeps the one final newline, `|-` strips it: the text back as it was
            return [f"{prefix} {'|' if text.endswith(chr(10)) else '|-'}"] + [
                f"{pad}{line}" if line else "" for line in body.split("\n")]
        return [f"{prefix} {json.dumps(text)}"]  # a JSON string is a YAML double-quoted scalar
    if len(prefix) + len(text) > 110 and _foldable(text) and not text.startswith("{{"):
        return [f"{prefix} >-"] + [f"{pad}{line}" for line in textwrap.wrap(text, 100, break_long_words=False,
                                                                           break_on_hyphens=False)]
    if _plain(text):
        return [f"{prefix} {text}"]
    if text.isprintable():
        return [f"{prefix} '{text.replace(chr(39), chr(39) * 2)}'"]
    return [f"{prefix} {json.dumps(text)}"]


def _foldable(text: str) -> bool:
    """Folded (`>-`) reads back lines joined by single spaces: only for text without runs of spaces."""
    return text == text.strip() and "  " not in text and text.isprintable()


def _plain(text: str) -> bool:
    """A plain scalar YAML reads back as the same string (the conservative subset)."""
    if not text or not text.isprintable() or text != text.strip() or text[0] in "!&*-?:,[]{}#|>@`'\"%":
        return False
    if ": " in text or " #" in text or text.endswith(":"):
        return False
    return not (text.lower() in ("true", "false", "null", "yes", "no", "on", "off", "~") or _number(text))


def _number(text: str) -> bool:
    try:
        float(text)
    except ValueError:
        return False
    return True

