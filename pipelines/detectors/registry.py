"""Every incident type krm raises, one rule each (pipelines/detectors/rule.py), in report order.

The alert projection judges the `partition` and `cluster` rules, in this order; the driver judges the
others. `krm incidents --type`, the docs and the shipped alert rules are checked against this list.
"""

from __future__ import annotations

from pipelines.detectors import (availability, balance, brokers, cluster_reachability, controllers, hw_stall, isr,
                                 isr_flapping, lag, offline, reassignment, slow, truncation, unclean)
from pipelines.detectors.details import Details, parse
from pipelines.detectors.exports import Series
from pipelines.detectors.rule import Rule

RULES: tuple[Rule, ...] = (
    offline.RULE,
    isr.RULES[isr.UNDER_REPLICATED],
    isr.RULES[isr.UNDER_MIN_ISR],
    isr.RULES[isr.AT_MIN_ISR],
    isr_flapping.RULE,
    hw_stall.RULE,
    unclean.RULE,
    availability.RULE,
    truncation.REGRESSION_RULE,
    lag.RULE,
    truncation.TRUNCATION_RULE,
    reassignment.RULE,
    brokers.RULE,
    slow.RULE,
    controllers.RULE,
    cluster_reachability.RULE,
    balance.RULES[balance.PREFERRED],
    balance.RULES[balance.LEADER_SKEW],
    balance.RULES[balance.REPLICA_IMBALANCE],
)
BY_TYPE: dict[str, Rule] = {r.type: r for r in RULES}
assert len(BY_TYPE) == len(RULES), "one rule per incident type"
INCIDENT_TYPES: tuple[str, ...] = tuple(BY_TYPE)
EVENT_TYPES: frozenset[str] = frozenset(r.type for r in RULES if r.event)


def _series_by_name() -> dict[str, Series]:
    """Every series a rule exports, by name; rules sharing one must declare it alike (but for the
    `cause` default and the value, which are each rule's own)."""
    out: dict[str, Series] = {}
    for rule in RULES:
        for s in rule.series:
            first = out.setdefault(s.name, s)
            if (first.help, first.labels, first.kind, first.one_per) != (s.help, s.labels, s.kind, s.one_per):
                raise ValueError(f"{rule.type}: {s.name} is declared otherwise by another rule")
            if first is not s and s.one_per is None:
                raise ValueError(f"{rule.type}: {s.name} is shared, so it needs one_per")
    return out


SERIES: dict[str, Series] = _series_by_name()


def details_of(type_: str, raw: object) -> Details:
    """An incident's stored details in its type's declared shape (an unknown type: the common fields only)."""
    rule = BY_TYPE.get(type_)
    return parse(rule.details if rule is not None else Details, raw)


def of_subject(subject: str) -> tuple[Rule, ...]:
    return tuple(r for r in RULES if r.subject == subject)


def routine_table() -> str:
    """docs/routine-operations.md's table, from each rule's own `routine` text (a test keeps them equal):
    `.venv/bin/python -c 'from pipelines.detectors.registry import routine_table; print(routine_table())'`."""
    rows = ["| incident | severities | what routine operations do to it |", "|---|---|---|"]
    for r in RULES:
        levels = " / ".join(s for s in ("critical", "warning", "info") if s in r.severities)
        rows.append(f"| `{r.type}` | {levels} | {r.routine} |")
    return "\n".join(rows) + "\n"
