"""The pipeline's clock: what time passing alone changes, judged without waiting for a poll.

Rules declare it (a held event: `Rule.event`; an escalation by time: `Escalation.since/after`), and the
alert path advances them every second to each cluster's `through_ms`: the time through which its view is
known, the newest poll processed or a later one the collector kept home as the same
(collectors/unchanged.py). So a poll's staying home never delays an end or an escalation, and the
collector needs to know no rule. A vanished topic is forgotten the same way (pipelines/load.py).
Each change happens at the moment the rule names (a hold's end, `since` + `after`), not at the tick
that finds it: a pipeline restarted meanwhile makes the same change at the same moment.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any, Iterable, Mapping

from pipelines.detectors.registry import RULES
from pipelines.detectors.rule import SEVERITIES, Rule
from pipelines.incidents import Incident

TIMED: dict[str, Rule] = {r.type: r for r in RULES if any(e.since is not None for e in r.escalations)}


def escalations_due(incidents: Iterable[Incident], through_ms: Mapping[str, int], settings: Any,
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
