"""History tables derived from valid observations (written by the history path, beside the alerts).

- `partition_state`: one row per partition per observation: leader, epoch, replicas, ISR, the
  leader's HW and LEO, write rate and HW-stalled-since. What a partition looked like at any time.
- `replica_lag`: one row per replica per observation that reported offsets: its LEO, the leader's,
  the lag in messages and the estimated lag in seconds (messages / the partition's write rate), and
  whether it was in the ISR. `krm lag` reads it.
- `assignments`: a topic's whole partition -> replicas map whenever it changed (or was first seen)
  and periodically for every topic (`assignment_snapshot_s`): partition-count and broker-set
  changes over time, for explaining imbalance after expansion.
All are partitioned by `date` (UTC day of observed_at), then `cluster`, so a `--since` query reads
only its days and a one-cluster query only that cluster's files.
Pure DataFrame transformations: no action, no I/O.
"""

from __future__ import annotations

from typing import Any

from pipelines.columns import leo_of

PARTITION_COLUMNS = ("date", "cluster")


def partition_state(good: Any) -> Any:
    from pyspark.sql import functions as F

    topics = good.where(F.col("kind") == "topic").select(
        "cluster", "source", "poll_id", "observed_at_ms", F.col("topic_state.topic").alias("topic"),
        F.explode("topic_state.partitions").alias("p"))
    p = F.col("p")
    return topics.select(
        "cluster", "topic", p["partition"].alias("partition"),
        F.timestamp_millis("observed_at_ms").alias("observed_at"), "source", "poll_id",
        p["leader"].alias("leader"), p["leader_epoch"].alias("leader_epoch"), p["replicas"].alias("replicas"),
        p["isr"].alias("isr"), p["high_watermark"].alias("high_watermark"),
        leo_of(F.coalesce(p["replica_offsets"], F.array()), p["leader"]).alias("leader_leo"),
        p["write_rate"].alias("write_rate"), p["hw_stalled_since_ms"].alias("hw_stalled_since_ms"),
        F.to_date(F.timestamp_millis("observed_at_ms")).alias("date"))


def replica_lag(good: Any) -> Any:
    from pyspark.sql import functions as F

    parts = good.where(F.col("kind") == "topic").select(
        "cluster", "observed_at_ms", F.col("topic_state.topic").alias("topic"),
        F.explode("topic_state.partitions").alias("p"))
    p = F.col("p")
    with_leader = parts.select(
        "cluster", "observed_at_ms", "topic", p["partition"].alias("partition"), p["leader"].alias("leader"),
        p["isr"].alias("isr"), p["write_rate"].alias("write_rate"),
        leo_of(F.coalesce(p["replica_offsets"], F.array()), p["leader"]).alias("leader_leo"),
        F.explode(F.coalesce(p["replica_offsets"], F.array())).alias("r"))
    lag = F.greatest(F.col("leader_leo") - F.col("r.log_end_offset"), F.lit(0))
    return with_leader.select(
        "cluster", "topic", "partition", F.col("r.broker").alias("broker"),
        F.timestamp_millis("observed_at_ms").alias("observed_at"), "leader",
        (F.col("r.broker") == F.col("leader")).alias("is_leader"),
        F.array_contains("isr", F.col("r.broker")).alias("in_isr"),
        F.col("r.log_end_offset").alias("log_end_offset"), "leader_leo", lag.alias("lag_messages"),
        F.when(F.col("write_rate") > 0, lag / F.col("write_rate")).alias("lag_seconds"),
        F.to_date(F.timestamp_millis("observed_at_ms")).alias("date"))


def assignments(good: Any) -> Any:
    from pyspark.sql import functions as F

    ts = F.col("topic_state")
    return good.where((F.col("kind") == "topic") & ts["assignment"].isNotNull()).select(
        "cluster", ts["topic"].alias("topic"), F.timestamp_millis("observed_at_ms").alias("observed_at"),
        ts["assignment"].alias("reason"), F.size(ts["partitions"]).alias("partition_count"),
        F.transform(ts["partitions"], lambda p: F.struct(p["partition"].alias("partition"),
                                                         p["replicas"].alias("replicas"))).alias("partitions"),
        F.to_date(F.timestamp_millis("observed_at_ms")).alias("date"))
