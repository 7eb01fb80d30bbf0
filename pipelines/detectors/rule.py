"""What each incident type declares once: its causes and their severities, what it is judged on, and
(when the alert projection judges it) its Spark form.

Every detector module ends with one `Rule` per incident type it raises; pipelines/detectors/
registry.py lists them. The alert projection (pipelines/findings.py) loops over the rules of its
subjects, the driver-side judges (balance, canary, quorum, JMX) take their severities from them,
/metrics builds each rule's declared series and the shipped alert file is generated from its alerts
(pipelines/detectors/exports.py), and docs are checked against the registry
(tests/unit/test_rule_registry.py). Adding an incident type: a detector module with its rule, one
line in the registry, its golden table, the regenerated alert file.

Subjects:
- `partition`: judged in the alert projection on each partition of a `topic` record (`PartitionView`);
  `plan(view)` gives an array of finding rows (nulls dropped), `affected(view)` a cheap condition that
  must hold for any finding (partitions for which every rule's `affected` is false are skipped).
- `cluster`: judged in the alert projection on each successful `cluster` record (`ClusterRecordView`);
  with `failed_polls`, on a failed poll's record too (BROKER_DOWN from ZooKeeper's registrations,
  CLUSTER_UNREACHABLE).
- `driver`: judged in Python on the driver (counts, canary rounds, quorum, JMX); no Spark form.
A type judged in several places (CONTROLLER_ANOMALY) has one rule whose `plan` covers the Spark part.
"""

from __future__ import annotations

import builtins
from dataclasses import dataclass
from functools import cached_property
from typing import TYPE_CHECKING, Any, Callable, Iterable, Mapping, TypeVar, TypeAlias

from pipelines.columns import leo_of
from pipelines.detectors.details import Details
from pipelines.detectors.exports import Alert, Series
from pipelines.detectors.settings import DetectorSettings

if TYPE_CHECKING:
    from pyspark.sql import Column

# The columns of every row the alert projection hands the driver (findings, poll markers, states).
ROW_FIELDS = [("row_type", "string"), ("scope", "string"), ("type", "string"), ("severity", "string"),
              ("topic", "string"), ("partition", "int"), ("broker", "int"), ("cause", "string"),
              ("details", "string")]


SEVERITIES = ("info", "warning", "critical")  # in rising order
T = TypeVar("T")


@dataclass(frozen=True)
class Escalation:
    """A cause's declared severity raised while a named condition holds: data beside the causes, so
    `Rule.severity_of` and the Spark form (`Rule.severity_column`, which the rule's plan hands the
    condition's Column by that name) say the same."""

    causes: tuple[str, ...]
    when: str  # the condition's name, e.g. "past_planned_stop"
    severity: str
    why: str
    # time alone: the condition holds once `after` (a DetectorSettings field, ms) has passed since the
    # incident's details[`since`] (ms); the pipeline's clock raises it then, with no poll needed (pipelines/clock.py)
    since: str | None = None
    after: str | None = None

    def after_ms(self, settings: DetectorSettings | None) -> int | None:
        """How long after `since` a time-alone condition holds (None: not one, or no settings)."""
        return None if self.after is None or settings is None else int(getattr(settings, self.after))

    def due_ms(self, details: Mapping[str, Any], settings: DetectorSettings | None) -> int | None:
        """When this time-alone condition starts to hold for an incident with `details` (None: never): the
        clock's form (pipelines/clock.py) of `holds`."""
        start = details.get(self.since) if self.since is not None else None
        after = self.after_ms(settings)
        return None if start is None or after is None else int(start) + after + 1

    def holds(self, observed_at_ms: Column | None, start_ms: Column, settings: DetectorSettings | None) -> Column | None:
        """The Spark form: a Column true once the observation is past `due_ms` (None: not one by time)."""
        from pyspark.sql import functions as F

        after = self.after_ms(settings)
        if after is None or observed_at_ms is None:
            return None
        return observed_at_ms - start_ms > F.lit(after)


@dataclass(frozen=True)
class TimedOpening:
    """A cluster rule's finding that time alone opens: `after` (a DetectorSettings field, ms) since the
    cluster state's `since` (ms) while `when(state)` holds. The rule's Spark plan says the same of each
    record it judges; the pipeline's clock opens it between records (pipelines/clock.py), with the
    cluster state's `details` fields as its details."""

    cause: str
    since: str
    after: str
    when: Callable[[Mapping[str, Any]], bool]
    details: tuple[str, ...] = ()

    def due_ms(self, state: Mapping[str, Any], settings: DetectorSettings) -> int | None:
        """When the finding holds for a cluster staying in `state` (None: never)."""
        start = state.get(self.since)
        if start is None or not self.when(state):
            return None
        return int(start) + int(getattr(settings, self.after))


@dataclass(frozen=True)
class Rule:
    type: str
    severity: Mapping[str | None, str]  # by cause; the key None for a type without causes
    subject: str  # "partition" | "cluster" | "driver"
    summary: str
    scope: str | None = None  # partition rules: "topic" (metadata alone resolves it) or "offsets"
    plan: Callable[..., Column] | None = None  # view -> array<finding row> Column (nulls allowed)
    affected: Callable[..., Column] | None = None  # PartitionView -> boolean Column; shared callables count once
    event: bool = False  # a moment, not a state: held open for `event_hold_s`, then resolved
    failed_polls: bool = False  # cluster rules: judged on a failed poll's record too (it resolves nothing)
    # what routine operations (rolling restart or upgrade, an operator's stop and start, a broker added,
    # a reassignment, a preferred election) do to it, and why it pages or not: critical means clients
    # fail or one more failure loses data; what an operator caused on purpose and Kafka heals is a warning
    routine: str = ""
    escalations: tuple[Escalation, ...] = ()  # a cause's severity raised while a condition holds
    opens: tuple[TimedOpening, ...] = ()  # cluster rules: findings time alone opens (pipelines/clock.py)
    series: tuple[Series, ...] = ()  # the gauges its open incidents export (pipelines/metrics.py)
    alerts: tuple[Alert, ...] = ()  # its Prometheus alert rules (pipelines/alert_rules.py writes the file)
    # the declared shape of its incidents' details (pipelines/detectors/details.py): what readers get
    details: builtins.type[Details] = Details

    def __post_init__(self) -> None:
        if self.subject not in ("partition", "cluster", "driver"):
            raise ValueError(f"{self.type}: unknown subject {self.subject!r}")
        if (self.plan is None) != (self.subject == "driver"):
            raise ValueError(f"{self.type}: a {self.subject} rule {'needs' if self.plan is None else 'has no'} plan")
        if not self.routine:
            raise ValueError(f"{self.type}: say what routine operations do to it (`routine`)")
        if self.failed_polls and self.subject != "cluster":
            raise ValueError(f"{self.type}: only cluster rules see failed polls")
        if self.subject == "partition" and (self.scope not in ("topic", "offsets") or self.affected is None):
            raise ValueError(f"{self.type}: a partition rule needs scope 'topic' or 'offsets' and `affected`")
        if any(level not in SEVERITIES for level in self.severity.values()):
            raise ValueError(f"{self.type}: severities are {', '.join(SEVERITIES)}")
        for e in self.escalations:
            if not e.causes or not set(e.causes) <= set(self.causes) or e.severity not in SEVERITIES:
                raise ValueError(f"{self.type}: escalation {e.when!r} names undeclared causes or severity")
            if any(SEVERITIES.index(e.severity) <= SEVERITIES.index(self.severity[c]) for c in e.causes):
                raise ValueError(f"{self.type}: escalation {e.when!r} must raise the declared severity")
            if (e.since is None) != (e.after is None):
                raise ValueError(f"{self.type}: escalation {e.when!r} by time needs both `since` and `after`")
        for o in self.opens:
            if o.cause not in self.causes or self.subject != "cluster":
                raise ValueError(f"{self.type}: a cluster rule opens its own declared causes by time ({o.cause!r})")

    @property
    def causes(self) -> tuple[str, ...]:
        return tuple(c for c in self.severity if c is not None)

    @property
    def severities(self) -> set[str]:
        """Every severity its incidents can have: the declared ones and those its escalations raise to."""
        return set(self.severity.values()) | {e.severity for e in self.escalations}

    def severity_of(self, cause: str | None = None, holding: Iterable[str] = ()) -> str:
        """The one place a severity is decided: the cause's declared severity, raised by the first of its
        escalations whose condition is among `holding`."""
        held = set(holding)
        for e in self.escalations:
            if cause in e.causes and e.when in held:
                return e.severity
        return self.severity[cause]

    def timed(self, observed_at_ms: Column | None, settings: DetectorSettings | None, **since: Column) -> dict[str, Column]:
        """The conditions of its escalations by time as Columns, by name, from the Columns of their `since`
        details: what `severity_column` takes, said once with the clock's `Escalation.due_ms`."""
        out = {}
        for e in self.escalations:
            if e.since in since and (held := e.holds(observed_at_ms, since[e.since], settings)) is not None:
                out[e.when] = held
        return out

    def severity_column(self, cause: Column, **conditions: Column) -> Column:
        """`severity_of` as a Column: the declared severity of a cause Column (one `when` per cause;
        constant when all agree), raised by the escalations whose condition Column is given by name
        (one not given is taken as not holding)."""
        from pyspark.sql import functions as F

        unknown = set(conditions) - {e.when for e in self.escalations}
        if unknown:
            raise ValueError(f"{self.type}: no escalation is named {sorted(unknown)}")
        levels = set(self.severity.values())
        out: Column | None = None
        if len(levels) == 1:
            out = F.lit(levels.pop())
        else:
            for c, level in self.severity.items():
                cond = cause.isNull() if c is None else cause == F.lit(c)
                out = F.when(cond, F.lit(level)) if out is None else out.when(cond, F.lit(level))
        for e in reversed(self.escalations):  # the first escalation that holds wins, as in severity_of
            if e.when in conditions:
                out = F.when(cause.isin(*e.causes) & F.coalesce(conditions[e.when], F.lit(False)),
                             F.lit(e.severity)).otherwise(out)
        assert out is not None  # (a rule declares a severity)
        return out


def row(**values: Column | None) -> Column:
    """A struct with every ROW_FIELDS field, nulls where not given, so all rows share one type."""
    from pyspark.sql import functions as F

    return F.struct(*[(v if (v := values.get(n)) is not None else F.lit(None)).cast(t).alias(n) for n, t in ROW_FIELDS])


Cell: TypeAlias = "Column | str | int | float | None"  # a Column, or a value `lit` makes one of


def lit(value: Cell) -> Column | None:
    from pyspark.sql import functions as F

    return value if value is None or not isinstance(value, (str, int, float)) else F.lit(value)


class PartitionView:
    """One partition struct `p` of a topic record, with what several rules read: the topic's state,
    live and unreachable brokers, the previous state (on a leader change), the common details, and a
    memo so a column two rules use is built once per plan."""

    def __init__(self, p: Column, topic_state: Column, observed_at_ms: Column, settings: DetectorSettings) -> None:
        from pyspark.sql import functions as F

        self.p = p
        self.ts = topic_state
        self.observed_at_ms = observed_at_ms
        self.settings = settings
        self.topic = topic_state["topic"]
        self.live = topic_state["live_brokers"]
        self.unreachable = F.coalesce(topic_state["unreachable_brokers"], F.array().cast("array<int>"))
        self.prev = p["previous"]
        self._memo: dict[str, Any] = {}

    def memo(self, key: str, build: Callable[[], T]) -> T:
        if key not in self._memo:
            self._memo[key] = build()
        built: T = self._memo[key]
        return built

    @cached_property
    def base(self) -> list[Column]:
        """Every partition finding's details start with these. elr / last_known_elr (Kafka 4): with
        ELR the ISR may shrink below min ISR, even to empty, while the ELR still holds the committed
        data; null where the broker does not report them."""
        p = self.p
        return [p["leader"].alias("leader"), p["leader_epoch"].alias("leader_epoch"), p["replicas"].alias("replicas"),
                p["isr"].alias("isr"), p["elr"].alias("elr"), p["last_known_elr"].alias("last_known_elr")]

    @cached_property
    def offsets_details(self) -> list[Column]:
        from pyspark.sql import functions as F

        p = self.p
        return [p["high_watermark"].alias("high_watermark"),
                leo_of(F.coalesce(p["replica_offsets"], F.array()), p["leader"]).alias("leader_leo")]

    @cached_property
    def change_details(self) -> Column:
        """Details of the findings that compare this poll with the previous state."""
        p, prev = self.p, self.prev
        return self.details(
            *self.offsets_details, prev["leader"].alias("previous_leader"),
            prev["leader_epoch"].alias("previous_leader_epoch"), prev["isr"].alias("previous_isr"),
            prev["elr"].alias("previous_elr"), prev["last_known_elr"].alias("previous_last_known_elr"),
            prev["high_watermark"].alias("previous_high_watermark"),
            (prev["high_watermark"] - p["high_watermark"]).alias("hw_lost"),
            self.ts["unclean_leader_election"].alias("unclean_leader_election"))

    def details(self, *columns: Column) -> Column:
        from pyspark.sql import functions as F

        return F.to_json(F.struct(*self.base, *columns))

    def finding(self, rule: Rule, cause: Cell = None, details: Column | None = None, severity: Cell = None,
                broker: Cell = None) -> Column:
        """A finding row of `rule` for this partition, in the rule's scope; severity: the declared one."""
        from pyspark.sql import functions as F

        cause_c = lit(cause)
        if severity is None:
            severity = rule.severity_column(cause_c) if cause_c is not None else F.lit(rule.severity_of(None))
        scope = F.concat(F.lit(f"{rule.scope}:"), self.topic)
        return row(row_type=F.lit("finding"), scope=scope, type=F.lit(rule.type), severity=lit(severity),
                   topic=self.topic, partition=self.p["partition"], broker=lit(broker), cause=cause_c, details=details)


def changed(view: PartitionView) -> Column:
    """The collector attached the previous state (the leader epoch changed, or offsets went back):
    the condition of every rule that compares two polls."""
    return view.prev.isNotNull()


class ClusterRecordView:
    """One `cluster` record's state (a successful poll) as Spark columns, for the `cluster` rules (as
    PartitionView is a partition's); not the pipeline's view of a cluster (pipelines/state.py ClusterView)."""

    def __init__(self, cluster_state: Column, observed_at_ms: Column | None = None,
                 settings: DetectorSettings | None = None) -> None:
        self.cs = cluster_state
        self.observed_at_ms = observed_at_ms
        self.settings = settings

    def finding(self, rule: Rule, cause: Column | str, details: Column, broker: Column | None = None,
                severity: Column | None = None) -> Column:
        from pyspark.sql import functions as F

        if severity is None:
            assert isinstance(cause, str), "a cause Column comes with its severity Column"
            severity = F.lit(rule.severity_of(cause))
        return row(row_type=F.lit("finding"), scope=F.lit("cluster"), type=F.lit(rule.type), severity=severity,
                   broker=broker, cause=lit(cause), details=details)
