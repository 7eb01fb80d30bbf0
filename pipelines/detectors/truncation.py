"""OFFSET_REGRESSION and LOG_TRUNCATION: offsets that went backwards between two polls.

- OFFSET_REGRESSION: the partition's high watermark is lower than before. Everything at or above the
  new HW that consumers could already read was committed, and is lost: the signature of an unclean
  election (docs/cases/restart-order-truncation.md). Critical.
- LOG_TRUNCATION: one replica's log end offset is lower than before. A follower becoming follower of
  a new leader truncates to where the leader's epoch ended (KIP-101, `Partition.truncateTo` via
  `AbstractFetcherThread.truncateToEpochEndOffsets`), which is normal for an uncommitted suffix
  (cause `uncommitted_suffix`, warning) and data loss when it cuts below the highest HW the
  partition had (cause `below_high_watermark`, critical): an HW that already regressed after an
  unclean election does not hide what was committed before it. A follower that cuts below that HW
  while the leader's HW still covers it loses nothing the partition had: it fetches the messages
  again (a follower restarted during a rolling restart truncates to its leader-epoch boundary; seen
  in tests/e2e/test_maintenance.py): cause `follower_refetch`, warning. A follower whose LEO fell to or
  below the first offset the leader keeps on disk (its log start, or on a tiered topic its local log
  start) holds none of its old log: it restarted empty (a wiped or replaced disk) and rebuilds from the
  leader, from that offset on a tiered topic (KIP-405: `TierStateMachine` builds the remote log's
  auxiliary state, then `truncateFullyAndStartAt` the leader's local log start). Nothing was cut:
  no LOG_TRUNCATION; its catch-up is REPLICA_LAG and UNDER_REPLICATED.
Offsets compared are the last known ones (collectors/memory.py), so a broker that was down shows its
truncation on the first poll after it returns. Both are events (held open for `event_hold_s`).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from pipelines.columns import leo_of
from pipelines.detectors.details import PartitionChange, PartitionDetails
from pipelines.detectors.exports import Alert, INCIDENTS_OF_TYPE, console
from pipelines.detectors.rule import PartitionView, Rule, changed

if TYPE_CHECKING:
    from pyspark.sql import Column

REGRESSION = "OFFSET_REGRESSION"
TRUNCATION = "LOG_TRUNCATION"
UNCOMMITTED = "uncommitted_suffix"
BELOW_HW = "below_high_watermark"
REFETCH = "follower_refetch"  # a follower below the highest HW, which the leader's HW still covers


def regression_column(p: Column) -> Column:
    from pyspark.sql import functions as F

    prev = p["previous"]
    return F.coalesce(prev.isNotNull() & (p["high_watermark"] < prev["high_watermark"]), F.lit(False))


def truncation_column(p: Column) -> Column:
    """array<struct<broker, before, after, cause>> of the replicas whose LEO went backwards."""
    from pyspark.sql import functions as F

    prev = p["previous"]
    before_offsets = F.coalesce(prev["replica_offsets"], F.array())
    cur = F.coalesce(p["replica_offsets"], F.array())
    peak = F.coalesce(prev["max_high_watermark"], prev["high_watermark"])
    covered = F.coalesce(p["high_watermark"] >= peak, F.lit(False))
    on_disk_from = F.greatest(p["log_start_offset"], p["local_log_start_offset"])  # nulls skipped; both null: null
    rows = F.transform(cur, lambda o: F.struct(
        o["broker"].alias("broker"), leo_of(before_offsets, o["broker"]).alias("before"),
        o["log_end_offset"].alias("after"),
        F.when(o["log_end_offset"] < peak,
               F.when(F.coalesce((p["high_watermark"] >= peak) & (o["broker"] != p["leader"]), F.lit(False)),
                      F.lit(REFETCH)).otherwise(F.lit(BELOW_HW)))
        .otherwise(F.lit(UNCOMMITTED))
        .alias("cause")))

    def restarted_empty(x: Column) -> Column:
        return covered & (x["broker"] != p["leader"]) & F.coalesce(x["after"] <= on_disk_from, F.lit(False))

    return F.when(prev.isNotNull(), F.filter(rows, lambda x: x["before"].isNotNull() & (x["after"] < x["before"])
                                             & ~restarted_empty(x))) \
        .otherwise(F.array().cast("array<struct<broker:int,before:bigint,after:bigint,cause:string>>"))


def _regression_plan(view: PartitionView) -> Column:
    from pyspark.sql import functions as F

    return F.array(F.when(regression_column(view.p), view.finding(REGRESSION_RULE, None, view.change_details)))


def _truncation_plan(view: PartitionView) -> Column:
    from pyspark.sql import functions as F

    prev = view.prev
    return F.transform(truncation_column(view.p), lambda x: view.finding(
        TRUNCATION_RULE, x["cause"], view.details(
            x["before"].alias("log_end_offset_before"), x["after"].alias("log_end_offset_after"),
            (x["before"] - x["after"]).alias("truncated_messages"),
            prev["high_watermark"].alias("previous_high_watermark"), prev["max_high_watermark"].alias("max_high_watermark")),
        broker=x["broker"]))


TRUNCATION_ALERTS = (
    Alert("KafkaLogTruncated", 'krm_incidents_open{type="LOG_TRUNCATION",severity="critical"} > 0', "critical",
          summary="{{ $labels.cluster }}: a replica truncated committed data",
          runbook=("A replica's log end offset went below the partition's high watermark: data consumers could read is gone "
                   "from that replica (usually after an unclean election). `krm incidents --open --type LOG_TRUNCATION "
                   "--json` names the broker and how many messages were cut."),
          links=(("incidents", console(INCIDENTS_OF_TYPE)),)),
)


class TruncationDetails(PartitionDetails):
    """A LOG_TRUNCATION incident's details (the incident's `broker` is the replica whose log went back)."""

    log_end_offset_before: int | None = None
    log_end_offset_after: int | None = None
    truncated_messages: int | None = None
    previous_high_watermark: int | None = None
    max_high_watermark: int | None = None  # the highest HW krm saw for the partition


REGRESSION_RULE = Rule(REGRESSION, {None: "critical"}, "partition",
                       "the high watermark went back: committed messages are lost", scope="offsets",
                       plan=_regression_plan, affected=changed, event=True, details=PartitionChange,
            routine=(
            "No routine operation moves a high watermark back: always data loss, critical."))
TRUNCATION_RULE = Rule(TRUNCATION, {UNCOMMITTED: "warning", REFETCH: "warning", BELOW_HW: "critical"}, "partition",
                       "a replica's log end offset went back", scope="offsets", plan=_truncation_plan,
                       affected=changed, event=True, details=TruncationDetails,
            alerts=TRUNCATION_ALERTS, routine=(
            "A restarted old leader truncating its uncommitted suffix is normal (warning), and so is a restarted "
            "follower cutting below the HW the leader still covers (`follower_refetch`, warning: it fetches "
            "again); a follower whose disk was wiped or replaced restarts empty and rebuilds from the leader (on a tiered "
            "topic from its local log start): no truncation at all, its catch-up is REPLICA_LAG; below the highest HW "
            "with the leader's HW lower too is data loss (critical)."))
