"""UNDER_REPLICATED, UNDER_MIN_ISR and AT_MIN_ISR: the ISR against the assignment and min ISR.

The broker's definitions (`core/src/main/scala/kafka/cluster/Partition.scala`, Kafka 3.9):
- under-replicated: the partition has a leader and |ISR| < replication factor;
- under min ISR: |ISR| < effectiveMinIsr, where effectiveMinIsr = min(min.insync.replicas, RF):
  a min.insync.replicas above the replication factor is clamped, not enforced;
- at min ISR: |ISR| == effectiveMinIsr.
These are what the broker enforces (acks=all producers get NotEnoughReplicas under min ISR), so
they drive the incidents. Partitions without a live leader are OFFLINE_PARTITION instead.

Kafka 4 (ELR on, KIP-966): the ISR still counts exactly as above; what changes is that replicas
leaving an ISR already below min ISR move to the Eligible Leader Replicas, which hold every
committed message and may lead when the ISR empties. The incidents' details carry `elr` (and
`last_known_elr`) beside `isr`, so an ISR of one with an ELR of two reads as what it is.

kafka-topics sees it differently (`tools/src/main/java/org/apache/kafka/tools/TopicCommand.java`,
`PartitionDescription`, read from the 3.9.1 jar): `--under-min-isr-partitions` compares |ISR| with
the raw min.insync.replicas and lists leaderless partitions too; `--at-min-isr-partitions` uses the
raw value. `details.cli_view` records what kafka-topics would say where it differs.

During a reassignment (KIP-455) the replica list holds the old and the new replicas, and the adding
ones are not yet full replicas: Kafka's replication factor is then the replicas minus the adding
ones (`TopicCommand.getReplicationFactor`; the broker's `OngoingReassignmentState.replicationFactor`
in Partition.scala), so a partition being moved is under-replicated only when its ISR is smaller
than that (collectors/reassignments.py). Min ISR is clamped by the whole replica list, as the
broker's `effectiveMinIsr` counts every replica it has, adding ones included.

At min ISR by the broker's definition holds permanently for every healthy partition whose RF equals
its min ISR (e.g. RF 1): that is a configuration choice, not an event. AT_MIN_ISR therefore opens
only when the partition got there by losing ISR members (|ISR| < RF).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Callable, Sequence

from pipelines.detectors import offline
from pipelines.detectors.details import Brokers, Part, PartitionDetails
from pipelines.detectors.exports import Alert, Series, incident_info, UNLESS_SLOWED
from pipelines.detectors.rule import PartitionView, Rule

if TYPE_CHECKING:
    from pyspark.sql import Column

UNDER_REPLICATED = "UNDER_REPLICATED"
UNDER_MIN_ISR = "UNDER_MIN_ISR"
AT_MIN_ISR = "AT_MIN_ISR"
DEFAULT_MIN_ISR = 1  # Kafka's default min.insync.replicas; used when the config is unknown


@dataclass(frozen=True)
class IsrVerdict:
    types: tuple[str, ...]  # subset of (UNDER_REPLICATED, UNDER_MIN_ISR, AT_MIN_ISR), in that order
    effective_min_isr: int
    out_of_sync: tuple[int, ...]  # replicas not in the ISR (adding ones aside), in assignment order
    cli_view: dict[str, bool]  # kafka-topics' verdicts where they differ from the broker's


def reassignment_in_progress(replicas: Sequence[int], adding: Sequence[int] | None,
                             removing: Sequence[int] | None) -> bool:
    """TopicCommand.isReassignmentInProgress: some replica is being added or removed."""
    moving = set(adding or ()) | set(removing or ())
    return any(r in moving for r in replicas)


def replication_factor(replicas: Sequence[int], adding: Sequence[int] | None = None,
                       removing: Sequence[int] | None = None) -> int:
    """TopicCommand.getReplicationFactor: during a move, the replicas minus the adding ones."""
    if reassignment_in_progress(replicas, adding, removing):
        return len(replicas) - len(adding or ())
    return len(replicas)


def effective_min_isr(min_insync_replicas: int | None, replicas: Sequence[int]) -> int:
    return min(min_insync_replicas if min_insync_replicas is not None else DEFAULT_MIN_ISR, len(replicas))


def classify_isr(replicas: Sequence[int], isr: Sequence[int], min_insync_replicas: int | None,
                 adding: Sequence[int] | None = None, removing: Sequence[int] | None = None) -> IsrVerdict:
    """For a partition with a live leader (offline partitions are classified by `offline`)."""
    eff = effective_min_isr(min_insync_replicas, replicas)
    n = len(isr)
    under_rep = n < replication_factor(list(replicas), adding, removing)
    types = []
    if under_rep:
        types.append(UNDER_REPLICATED)
    if n < eff:
        types.append(UNDER_MIN_ISR)
    elif n == eff and under_rep:
        types.append(AT_MIN_ISR)
    raw = min_insync_replicas if min_insync_replicas is not None else DEFAULT_MIN_ISR
    cli: dict[str, bool] = {}
    if (n < raw) != (n < eff):
        cli["under_min_isr"] = n < raw
    if (n == raw) != (n == eff):
        cli["at_min_isr"] = n == raw
    return IsrVerdict(tuple(types), eff, tuple(r for r in replicas if r not in isr and r not in (adding or ())), cli)


def reassignment_column(replicas: Column, adding: Column, removing: Column) -> Column:
    """`reassignment_in_progress` as a Column (adding / removing null when the partition is not moved)."""
    from pyspark.sql import functions as F

    empty = F.array().cast("array<int>")
    return F.arrays_overlap(replicas, F.concat(F.coalesce(adding, empty), F.coalesce(removing, empty)))


def replication_factor_column(replicas: Column, adding: Column, removing: Column) -> Column:
    """`replication_factor` as a Column."""
    from pyspark.sql import functions as F

    add = F.coalesce(adding, F.array().cast("array<int>"))
    return F.when(reassignment_column(replicas, adding, removing), F.size(replicas) - F.size(add)) \
        .otherwise(F.size(replicas))


def isr_columns(replicas: Column, isr: Column, min_insync_replicas: Column, adding: Column | None = None,
                removing: Column | None = None) -> dict[str, Any]:
    """The same rule as Spark Columns: {"under_replicated", "under_min_isr", "at_min_isr",
    "effective_min_isr", "out_of_sync", "cli_under_min_isr", "cli_at_min_isr"}."""
    from pyspark.sql import functions as F

    raw = F.coalesce(min_insync_replicas, F.lit(DEFAULT_MIN_ISR))
    eff = F.least(raw, F.size(replicas))
    n = F.size(isr)
    none = F.lit(None).cast("array<int>")
    adding = none if adding is None else adding
    removing = none if removing is None else removing
    under_rep = n < replication_factor_column(replicas, adding, removing)
    add = F.coalesce(adding, F.array().cast("array<int>"))
    return {
        "under_replicated": under_rep,
        "under_min_isr": n < eff,
        "at_min_isr": (n == eff) & under_rep,
        "effective_min_isr": eff,
        "out_of_sync": F.filter(replicas, lambda r: ~F.array_contains(isr, r) & ~F.array_contains(add, r)),
        "cli_under_min_isr": n < raw,
        "cli_at_min_isr": n == raw,
    }


def incomplete(view: PartitionView) -> Column:
    """|ISR| < RF: what each of the three ISR rules needs first (one shared prefilter)."""
    from pyspark.sql import functions as F

    return F.size(view.p["isr"]) < F.size(view.p["replicas"])


def of(view: PartitionView) -> dict[str, Any]:
    """`isr_columns` of a partition view, built once per plan (the ISR rules and HW_STALL read them)."""
    p, ts = view.p, view.ts
    return view.memo("isr", lambda: isr_columns(p["replicas"], p["isr"], ts["min_insync_replicas"],
                                                p["adding_replicas"], p["removing_replicas"]))


def _plan_of(kind: str) -> Callable[[PartitionView], Column]:
    def plan(view: PartitionView) -> Column:
        from pyspark.sql import functions as F

        ts = view.ts
        i = of(view)
        details = view.memo("isr_details", lambda: view.details(
            i["out_of_sync"].alias("out_of_sync"), i["effective_min_isr"].alias("effective_min_isr"),
            ts["min_insync_replicas"].alias("min_insync_replicas"),
            F.struct(i["cli_under_min_isr"].alias("under_min_isr"), i["cli_at_min_isr"].alias("at_min_isr"))
            .alias("cli_view")))
        column = {UNDER_REPLICATED: "under_replicated", UNDER_MIN_ISR: "under_min_isr", AT_MIN_ISR: "at_min_isr"}[kind]
        return F.array(F.when(~offline.of(view)["is_offline"] & i[column], view.finding(RULES[kind], None, details)))
    return plan


UNDER_REPLICATED_SERIES = (
    Series("krm_partition_under_replicated", "Partition ISR is smaller than its replica set."),
    Series("krm_cluster_under_replicated_partitions", "Partitions with a leader and |ISR| < RF.", (), kind="count"),
)
UNDER_MIN_ISR_SERIES = (
    Series("krm_partition_under_min_isr", "ISR below min(min.insync.replicas, RF): acks=all producers are refused."),
    Series("krm_cluster_under_min_isr_partitions", "Partitions below the effective min ISR.", (), kind="count"),
)
AT_MIN_ISR_SERIES = (Series("krm_partition_at_min_isr", "ISR lost members down to the effective min ISR."),)

UNDER_MIN_ISR_ALERTS = (
    Alert("KafkaPartitionUnderMinIsr", "krm_partition_under_min_isr == 1" + UNLESS_SLOWED, "critical", wait="30s",
          summary="{{ $labels.cluster }}: {{ $labels.topic }}-{{ $labels.partition }} is below min.insync.replicas",
          runbook=("acks=all producers of this partition get NotEnoughReplicas. Find the replicas that left the ISR "
                   "(details.out_of_sync of the UNDER_REPLICATED incident) and the brokers behind them (down, paused, slow "
                   "disk, network); bring them back in sync."),
          links=(("incident", incident_info(UNDER_MIN_ISR, "url")),),
          why=("acks=all producers get NotEnoughReplicas, which they retry (delivery.timeout.ms: 2 min by default): a dip "
               "shorter than their retries fails no write. A cluster starting up, or a broker's return, passes through it "
               "for seconds while the followers rejoin the ISR.")),
)


AT_MIN_ISR_ALERTS = (
    Alert("KafkaPartitionAtMinIsr", "krm_partition_at_min_isr == 1", "warning", wait="1m",
          summary=("{{ $labels.cluster }}: {{ $labels.topic }}-{{ $labels.partition }} is at min ISR: one more loss stops "
                   "acks=all writes"),
          runbook=("Do not restart or stop any broker holding this partition's ISR now. Restore the out-of-sync replicas "
                   "first."),
          links=(("incident", incident_info(AT_MIN_ISR, "url")),)),
)


UNDER_REPLICATED_ALERTS = (
    Alert("KafkaPartitionUnderReplicated", "krm_partition_under_replicated == 1", "warning", wait="5m",
          summary="{{ $labels.cluster }}: {{ $labels.topic }}-{{ $labels.partition }} under-replicated for 5 minutes",
          runbook=("A follower has not caught up within replica.lag.time.max.ms. Look at the broker named in "
                   "details.out_of_sync: is it up, is its disk or network saturated, is it catching up?"),
          links=(("incident", incident_info(UNDER_REPLICATED, "url")),)),
)


class CliView(Part):
    """What kafka-topics --under-min-isr-partitions / --at-min-isr-partitions would say, where krm differs."""

    under_min_isr: bool | None = None
    at_min_isr: bool | None = None


class IsrDetails(PartitionDetails):
    """UNDER_REPLICATED, UNDER_MIN_ISR and AT_MIN_ISR incidents' details."""

    ACT_ON = ("out_of_sync",)
    out_of_sync: Brokers = ()  # replicas not in the ISR (adding replicas of a reassignment left out)
    effective_min_isr: int | None = None  # min(min.insync.replicas, RF), as the broker judges it
    min_insync_replicas: int | None = None  # the topic's configured value
    cli_view: CliView | None = None


RULES = {
    UNDER_REPLICATED: Rule(UNDER_REPLICATED, {None: "warning"}, "partition", "a led partition with |ISR| < RF",
                           scope="topic", plan=_plan_of(UNDER_REPLICATED), affected=incomplete, details=IsrDetails,
            series=UNDER_REPLICATED_SERIES, alerts=UNDER_REPLICATED_ALERTS, routine=(
            "Every rolling restart, upgrade or broker stop makes the stopped broker's partitions under-replicated "
            "until it catches up; Kafka heals it. A reassignment does not (RF = replicas minus adding ones). "
            "Warning only, its alert waits 5 minutes.")),
    UNDER_MIN_ISR: Rule(UNDER_MIN_ISR, {None: "critical"}, "partition",
                        "|ISR| < min(min.insync.replicas, RF): acks=all producers fail", scope="topic",
                        plan=_plan_of(UNDER_MIN_ISR), affected=incomplete, details=IsrDetails,
            series=UNDER_MIN_ISR_SERIES, alerts=UNDER_MIN_ISR_ALERTS, routine=(
            "A gated rolling restart (`krm check shutdown --wait`) never goes below min ISR where RF > min ISR; a "
            "cluster starting up, or a broker's return, dips below it for seconds while followers rejoin: its alert "
            "waits 30 s (producers retry NotEnoughReplicas). Where RF = min ISR any stop refuses acks=all writes: "
            "critical by design.")),
    AT_MIN_ISR: Rule(AT_MIN_ISR, {None: "warning"}, "partition",
                     "ISR members lost down to min ISR: one more loss stops acks=all", scope="topic",
                     plan=_plan_of(AT_MIN_ISR), affected=incomplete, details=IsrDetails,
            series=AT_MIN_ISR_SERIES, alerts=AT_MIN_ISR_ALERTS, routine=(
            "Each stop of a rolling restart with RF = min ISR + 1 puts the stopped broker's partitions here: the "
            "warning is the advice not to stop another broker now (its alert waits 1 minute).")),
}
