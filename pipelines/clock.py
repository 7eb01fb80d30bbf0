"""The pipeline's clock: what time passing alone changes, judged without waiting for a poll.

Rules declare it (a held event: `Rule.event`; an escalation by time: `Escalation.since/after`; a finding
time alone opens: `Rule.opens`), and the alert path advances them every second to each cluster's
`through_ms`: the time through which its view is known, the newest poll processed or a later one the
collector kept home as the same (collectors/unchanged.py). So a poll's staying home never delays an
end, an escalation or an opening, and the collector needs to know no rule. A vanished topic is forgotten
the same way (pipelines/load.py). Each change happens at the moment the rule names (a hold's end,
`since` + `after`), not at the tick that finds it: a pipeline restarted meanwhile makes the same change
at the same moment.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any, Iterable, Mapping

from pipelines.detectors.registry import RULES
from pipelines.detectors.rule import SEVERITIES, Rule
from pipelines.detectors.settings import DetectorSettings
from pipelines.incidents import Finding, Incident

TIMED: dict[str, Rule] = {r.type: r for r in RULES if any(e.since is not None for e in r.escalations)}
OPENING: dict[str, Rule] = {r.type: r for r in RULES if r.opens}

SINCE: dict[str, tuple[str, ...]] = {t: tuple(e.since for e in r.escalations if e.since is not None)
                                     for t, r in TIMED.items()}
"""type -> the details an escalation counts from: the incident book keeps them at their earliest while
the incident is open (a collector restarted meanwhile reports the broker down since its own start)."""

# (type, cause, due_ms, details): a finding time alone opens on a cluster staying as its record says
Opening = tuple[str, str, int, dict[str, Any]]


def openings(state: Mapping[str, Any], settings: DetectorSettings, rules: Mapping[str, Rule] = OPENING) -> tuple[Opening, ...]:
    """What time alone will open on a cluster whose record says `state` (its cluster_state), and when."""
    out = []
    for rule in rules.values():
        for o in rule.opens:
            due = o.due_ms(state, settings)
            if due is not None:
                out.append((rule.type, o.cause, due, {k: state.get(k) for k in o.details}))
    return tuple(out)


def openings_due(cluster: str, due: Iterable[Opening], at_ms: int, poll_id: int, is_open: Any,
                 rules: Mapping[str, Rule] = OPENING) -> list[Finding]:
    """The findings of `due` whose moment has come by `at_ms` and whose incident is not open yet
    (`is_open(key)`), observed at that moment: they open incidents and resolve none (no poll marker)."""
    out = []
    for type_, cause, when, details in due:
        key = (cluster, type_, None, None, None)
        if when <= at_ms and not is_open(key):
            out.append(Finding(cluster, "cluster", type_, rules[type_].severity_of(cause), None, None, None, cause,
                               dict(details), when, poll_id))
    return out


def escalations_due(incidents: Iterable[Incident], through_ms: Mapping[str, int], settings: DetectorSettings,
                    rules: Mapping[str, Rule] = TIMED) -> list[Incident]:
    """Open incidents whose escalation by time is due by their cluster's `through_ms`, raised: the
    severity the escalation names, last seen at the moment it became due (what a poll then would have said)."""
    out = []
    for inc in incidents:
        rule, at = rules.get(inc.type), through_ms.get(inc.cluster)
        if rule is None or at is None or inc.status != "open":
            continue
        for e in rule.escalations:
            if inc.cause not in e.causes or SEVERITIES.index(inc.severity) >= SEVERITIES.index(e.severity):
                continue
            due = e.due_ms(inc.details, settings)
            if due is not None and due <= at:
                out.append(replace(inc, severity=e.severity, last_seen_at_ms=max(inc.last_seen_at_ms, due)))
                break
    return out
