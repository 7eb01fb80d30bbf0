"""The alert path's Spark plan: valid observations -> one small frame the driver collects per batch.

Only what the driver needs comes back: findings (unhealthy subjects: they grow with problems, not
with partition count), one marker per polled scope (what can resolve incidents) and each cluster's
broker list. Every record maps to an array of such rows that is exploded in the same projection:
one scan of the batch, no shuffle, no union, one Spark job.
"""

from __future__ import annotations

from typing import Any

from pipelines.detectors import offline

ROW_FIELDS = [("row_type", "string"), ("scope", "string"), ("type", "string"), ("severity", "string"),
              ("topic", "string"), ("partition", "int"), ("broker", "int"), ("cause", "string"),
              ("details", "string")]


def _row(**values: Any) -> Any:
    """A struct with every ROW_FIELDS field, nulls where not given, so all rows share one type."""
    from pyspark.sql import functions as F

    return F.struct(*[(values[n] if n in values else F.lit(None)).cast(t).alias(n) for n, t in ROW_FIELDS])


def topic_rows(obs: Any) -> Any:
    """For a `topic` record: its poll marker, then one finding per offline partition."""
    from pyspark.sql import functions as F

    ts = obs["topic_state"]
    live = ts["live_brokers"]
    scope = F.concat(F.lit("topic:"), ts["topic"])

    def cols(p: Any) -> dict[str, Any]:
        return offline.offline_columns(p["leader"], p["replicas"], p["isr"], live)

    def finding(p: Any) -> Any:
        c = cols(p)
        details = F.to_json(F.struct(
            p["leader"].alias("leader"), p["leader_epoch"].alias("leader_epoch"), p["replicas"].alias("replicas"),
            p["isr"].alias("isr"), live.alias("live_brokers"), c["must_return"].alias("must_return"),
            c["live_isr"].alias("live_isr"), ts["unclean_leader_election"].alias("unclean_leader_election"),
        ))
        return _row(row_type=F.lit("finding"), scope=scope, type=F.lit(offline.TYPE),
                    severity=F.lit(offline.SEVERITY), topic=ts["topic"], partition=p["partition"],
                    cause=c["cause"], details=details)

    offline_parts = F.filter(ts["partitions"], lambda p: cols(p)["is_offline"])
    return F.concat(F.array(_row(row_type=F.lit("poll"), scope=scope, topic=ts["topic"])),
                    F.transform(offline_parts, finding))


def cluster_rows(obs: Any) -> Any:
    """For a `cluster` record: its state, plus a poll marker when the poll succeeded."""
    from pyspark.sql import functions as F

    cs = obs["cluster_state"]
    state = _row(row_type=F.lit("cluster"), scope=F.lit("cluster"), details=F.to_json(cs))
    marker = _row(row_type=F.lit("poll"), scope=F.lit("cluster"))
    return F.when(cs["error"].isNull(), F.array(state, marker)).otherwise(F.array(state))


def alert_rows(observations: Any) -> Any:
    """Everything the driver needs from one micro-batch: cluster, poll_id, observed_at_ms + ROW_FIELDS."""
    from pyspark.sql import functions as F

    o = F.struct(*[F.col(c) for c in ("cluster_state", "topic_state")])
    rows = F.when(F.col("kind") == "topic", topic_rows(o)).otherwise(cluster_rows(o))
    return observations.select("cluster", "poll_id", "observed_at_ms", F.explode(rows).alias("r")).select(
        "cluster", "poll_id", "observed_at_ms", "r.*")
