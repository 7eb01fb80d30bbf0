"""PARTITION_REASSIGNING: a reassignment (kafka-reassign-partitions, Cruise Control, KIP-455's API) is
moving the partition: some replica is being added or removed (TopicCommand.isReassignmentInProgress,
tools/src/main/java/org/apache/kafka/tools/TopicCommand.java).

It is routine work, not a fault: severity `info`, one incident per moved partition from the first
poll that lists it to the first that does not, feeding `krm_partition_reassigning`. It turns
`stalled` (warning) when an adding replica still has messages to copy and none of them copied
anything for `[pipeline] reassignment_stall_s` (the collector's `reassignment_progress_ms`): a
throttle set too low, an adding broker down or out of disk. Its details
carry the move (adding, removing) and its progress: how many messages each adding replica still has
to copy (the leader's log end offset minus the replica's), where the poll read offsets. While it
runs, UNDER_REPLICATED counts the replicas minus the adding ones (pipelines/detectors/isr.py) and
REPLICA_LAG leaves the adding replicas alone (pipelines/detectors/lag.py): a throttled copy is
progress, not lag.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from pipelines.columns import leo_of
from pipelines.detectors.isr import reassignment_column
from pipelines.detectors.details import Brokers, Part, PartitionDetails
from pipelines.detectors.exports import Alert, Series, INCIDENTS_OF_TYPE, console
from pipelines.detectors.rule import PartitionView, Rule

if TYPE_CHECKING:
    from pyspark.sql import Column

TYPE = "PARTITION_REASSIGNING"
IN_PROGRESS = "in_progress"
STALLED = "stalled"  # an adding replica still has to copy, and none copied anything for reassignment_stall_s


def _moving(view: PartitionView) -> Column:
    p = view.p
    return view.memo("moving", lambda: reassignment_column(p["replicas"], p["adding_replicas"], p["removing_replicas"]))


def _plan(view: PartitionView) -> Column:
    from pyspark.sql import functions as F

    p = view.p
    offsets = F.coalesce(p["replica_offsets"], F.array())
    leader_leo = leo_of(offsets, p["leader"])
    adding = F.coalesce(p["adding_replicas"], F.array().cast("array<int>"))
    progress = F.transform(
        F.filter(offsets, lambda o: F.array_contains(adding, o["broker"]) & leader_leo.isNotNull()),
        lambda o: F.struct(o["broker"].alias("broker"),
                           F.greatest(leader_leo - o["log_end_offset"], F.lit(0)).alias("messages_to_copy")))
    details = view.details(adding.alias("adding"), F.coalesce(p["removing_replicas"], F.array().cast("array<int>"))
                           .alias("removing"), progress.alias("progress"),
                           p["reassignment_progress_ms"].alias("last_progress_ms"))
    still_to_copy = F.exists(progress, lambda x: x["messages_to_copy"] > 0)
    idle = view.observed_at_ms - p["reassignment_progress_ms"] > F.lit(view.settings.reassignment_stall_ms)
    cause = F.when(F.coalesce(still_to_copy & idle, F.lit(False)), F.lit(STALLED)).otherwise(F.lit(IN_PROGRESS))
    return F.array(F.when(_moving(view), view.finding(RULE, cause, details)))


SERIES = (Series("krm_partition_reassigning", "A reassignment is adding or removing replicas of the partition."),)

ALERTS = (
    Alert("KafkaReassignmentStalled",
          'krm_incidents_open{type="PARTITION_REASSIGNING",severity="warning"} > 0',
          "warning", wait="5m",
          summary="{{ $labels.cluster }}: {{ $value }} partition reassignment(s) copied nothing for reassignment_stall_s",
          runbook=("`krm incidents --open --type PARTITION_REASSIGNING --json` lists them with details.progress (messages "
                   "each adding replica still has to copy). Usual causes: a replication throttle too low for the write rate "
                   "(kafka-reassign-partitions --execute --throttle, raise it), an adding broker down or out of disk. The "
                   "old replicas keep serving meanwhile."),
          links=(("incidents", console(INCIDENTS_OF_TYPE)),),
          why=("A reassignment is routine (PARTITION_REASSIGNING info); one whose adding replicas stopped copying is worth a"
               " look, never a page: the old replicas still serve.")),
)


class Copying(Part):
    """An adding replica and what it still has to copy from the leader."""

    broker: int | None = None
    messages_to_copy: int | None = None


class ReassignmentDetails(PartitionDetails):
    """A PARTITION_REASSIGNING incident's details."""

    ACT_ON = ("adding",)
    adding: Brokers = ()
    removing: Brokers = ()
    progress: tuple[Copying, ...] = ()
    last_progress_ms: int | None = None


RULE = Rule(TYPE, {IN_PROGRESS: "info", STALLED: "warning"}, "partition",
            "a reassignment is adding or removing replicas of the partition", scope="topic", plan=_plan, affected=_moving,
            details=ReassignmentDetails,
            series=SERIES, alerts=ALERTS, routine=(
            "A reassignment is routine: info and the `krm_partition_reassigning` series; a warning (5-minute "
            "alert) only when its adding replicas stopped copying for `reassignment_stall_s`. Never a page."))
