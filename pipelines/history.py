"""History tables derived from valid observations (written by the history path, beside the alert path).

- `partition_state`: a partition's leader, epoch, replicas, ISR, the leader's HW and LEO, write rate
  and HW-stalled-since — written when the collector marked the poll `changed` (leader, epoch,
  replicas, ISR or lagging followers differ from its previous poll, or it had none) or `keyframe` (the first poll of a
  `history_keyframe_s` interval, which keeps the HW and write-rate trend); every poll of a v1/v2
  record, whose collector did not mark them. The `changed` column tells changes from keyframes.
  Every poll of every partition would be ~2 billion rows a day at 50k partitions and 2 s polls;
  changes are exact, the steady state costs one row per keyframe, and the collector's own memory
  of the previous poll (collectors/memory.py) decides it: no state, window or shuffle here.
- `replica_lag`: one row per replica at each poll where the collector marked its follower
  `lagging` (out of the ISR, or at least `history_lag_floor_s` behind at the partition's write
  rate, or behind at all on a partition nobody writes to), and every replica of a `changed` poll,
  so the poll where a follower stopped lagging is a row too. A follower within a second of its
  leader is the normal state of replication — its fetch in flight — and is not history. `krm lag`
  reads it.
- `assignments`: a topic's whole partition -> replicas map whenever it changed (or was first seen)
  and periodically for every topic (`assignment_snapshot_s`): partition-count and broker-set
  changes over time, for explaining imbalance after expansion.
All are partitioned by `date` (UTC day of observed_at), then `cluster`, so a `--since` query reads
only its days and a one-cluster query only that cluster's files.
Pure DataFrame transformations: no action, no I/O. docs/history.md describes the volumes.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from pyspark.sql import Column, DataFrame

from pipelines.columns import leo_of

PARTITION_COLUMNS = ("date", "cluster")


def _changed(p: Column, v: Column) -> Column:
    """A partition poll (`p`, of a record of version `v`) the collector marked changed; every poll of a
    v1/v2 record, whose collector did not say."""
    from pyspark.sql import functions as F

    return F.coalesce(p["changed"], F.lit(False)) | (v < 3)


def _kept(p: Column, v: Column) -> Column:
    """A partition poll partition_state keeps: changed, or its topic's keyframe."""
    from pyspark.sql import functions as F

    return _changed(p, v) | F.coalesce(p["keyframe"], F.lit(False))


def _lagging(p: Column) -> Column:
    """The followers the collector marked lagging at this poll (none when absent)."""
    from pyspark.sql import functions as F

    return F.coalesce(p["lagging"], F.array().cast("array<int>"))


def partition_polls(good: DataFrame) -> DataFrame:
    """One row per partition per poll: partition_state's columns, `keep` (the row is written), the
    poll's replica offsets and `lagging` (module docstring)."""
    from pyspark.sql import functions as F

    topics = good.where(F.col("kind") == "topic").select(
        "v", "cluster", "source", "poll_id", "observed_at_ms", F.col("topic_state.topic").alias("topic"),
        F.explode("topic_state.partitions").alias("p"))
    p, v = F.col("p"), F.col("v")
    offsets = F.coalesce(p["replica_offsets"], F.array())
    return topics.select(
        "cluster", "topic", p["partition"].alias("partition"), "observed_at_ms",
        F.timestamp_millis("observed_at_ms").alias("observed_at"), "source", "poll_id",
        p["leader"].alias("leader"), p["leader_epoch"].alias("leader_epoch"), p["replicas"].alias("replicas"),
        p["isr"].alias("isr"), p["high_watermark"].alias("high_watermark"),
        leo_of(offsets, p["leader"]).alias("leader_leo"),
        p["write_rate"].alias("write_rate"), p["hw_stalled_since_ms"].alias("hw_stalled_since_ms"),
        _changed(p, v).alias("changed"), _kept(p, v).alias("keep"),
        offsets.alias("replica_offsets"), _lagging(p).alias("lagging"),
        F.to_date(F.timestamp_millis("observed_at_ms")).alias("date"))


def contents(parsed: DataFrame) -> DataFrame:
    """One row saying what a batch of `ingest.parse` output holds for each table: `keep` (a partition
    poll for partition_state), `lag` (one that may give replica_lag rows), `assignment` (an assignments
    row) and `rejected` (records refused). One Spark job answers all four; a quiet cluster's batch
    holds none of the first three, and each would otherwise be a job of its own. `lag` may be true
    where replica_lag gets no row (a changed partition without replica offsets): it only saves work."""
    from pyspark.sql import functions as F

    ok = F.col("reject_reason").isNull()
    ts, v = F.col("o.topic_state"), F.col("o.v")
    parts = F.coalesce(ts["partitions"], F.array())
    topic = ok & (F.col("o.kind") == "topic")

    def anywhere(cond: Column) -> Column:
        return F.coalesce(F.max((topic & cond).cast("int")), F.lit(0)) > 0

    return parsed.agg(
        anywhere(F.exists(parts, lambda p: _kept(p, v))).alias("keep"),
        anywhere(F.exists(parts, lambda p: _changed(p, v) | (F.size(_lagging(p)) > 0))).alias("lag"),
        anywhere(ts["assignment"].isNotNull()).alias("assignment"),
        F.count(F.when(~ok, 1)).alias("rejected"))


def partition_state(polls: DataFrame) -> DataFrame:
    from pyspark.sql import functions as F

    return polls.where(F.col("keep")).select(
        "cluster", "topic", "partition", "observed_at", "source", "poll_id", "leader", "leader_epoch",
        "replicas", "isr", "high_watermark", "leader_leo", "write_rate", "hw_stalled_since_ms", "changed", "date")


def replica_lag(polls: DataFrame) -> DataFrame:
    from pyspark.sql import functions as F

    rows = polls.where(F.col("changed") | (F.size("lagging") > 0)).select(
        "cluster", "observed_at_ms", "topic", "partition", "leader", "isr", "write_rate", "leader_leo", "changed",
        "lagging", F.explode("replica_offsets").alias("r"))
    lag = F.greatest(F.col("leader_leo") - F.col("r.log_end_offset"), F.lit(0))
    return rows.where(F.col("changed") | F.array_contains("lagging", F.col("r.broker"))).select(
        "cluster", "topic", "partition", F.col("r.broker").alias("broker"),
        F.timestamp_millis("observed_at_ms").alias("observed_at"), "leader",
        (F.col("r.broker") == F.col("leader")).alias("is_leader"),
        F.array_contains("isr", F.col("r.broker")).alias("in_isr"),
        F.col("r.log_end_offset").alias("log_end_offset"), "leader_leo", lag.alias("lag_messages"),
        F.when(F.col("write_rate") > 0, lag / F.col("write_rate")).alias("lag_seconds"),
        F.to_date(F.timestamp_millis("observed_at_ms")).alias("date"))


def assignments(good: DataFrame) -> DataFrame:
    from pyspark.sql import functions as F

    ts = F.col("topic_state")
    return good.where((F.col("kind") == "topic") & ts["assignment"].isNotNull()).select(
        "cluster", ts["topic"].alias("topic"), F.timestamp_millis("observed_at_ms").alias("observed_at"),
        ts["assignment"].alias("reason"), F.size(ts["partitions"]).alias("partition_count"),
        F.transform(ts["partitions"], lambda p: F.struct(p["partition"].alias("partition"),
                                                         p["replicas"].alias("replicas"))).alias("partitions"),
        F.to_date(F.timestamp_millis("observed_at_ms")).alias("date"))
