"""The alert path's Spark plan: valid observations -> one small frame the driver collects per batch.

Only what the driver needs comes back: findings (unhealthy subjects: they grow with problems, not
with partition count), one marker per polled scope (what can resolve incidents) and each cluster's
broker list. Every record maps to an array of such rows that is exploded in the same projection:
one scan of the batch, no shuffle, no union, one Spark job. Healthy partitions cost two cheap
predicates; only unhealthy ones are turned into finding structs.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from pipelines.columns import built_once, let
from pipelines.detectors import registry
from pipelines.detectors.rule import ROW_FIELDS, ClusterRecordView, PartitionView
from pipelines.detectors.rule import row as _row
from pipelines.detectors.settings import DetectorSettings

if TYPE_CHECKING:
    from pyspark.sql import Column, DataFrame

__all__ = ["ROW_FIELDS", "DetectorSettings", "alert_rows", "broker_counts"]


def topic_rows(obs: Column, observed_at_ms: Column, settings: DetectorSettings) -> Column:
    """For a `topic` record: its poll markers, then the findings of every partition rule over the
    partitions some rule says may be affected (healthy partitions cost those cheap checks only)."""
    from pyspark.sql import functions as F

    ts = obs["topic_state"]
    topic = ts["topic"]
    rules = registry.of_subject("partition")
    # Offset incidents have their own scope: a metadata-only record (ZooKeeper watch) must not
    # resolve them, since it carries no offsets to judge them by.
    has_offsets = F.coalesce(ts["has_offsets"], F.lit(True))
    prefilters = [a for a in {id(r.affected): r.affected for r in rules}.values() if a is not None]  # shared: once
    plans = [r.plan for r in rules if r.plan is not None]

    def view(p: Column) -> PartitionView:
        return PartitionView(p, ts, observed_at_ms, settings)

    def maybe_affected(p: Column) -> Column:
        v = view(p)
        out = prefilters[0](v)
        for check in prefilters[1:]:
            out = out | check(v)
        return out

    def partition_findings(p: Column) -> Column:
        v = view(p)
        return F.filter(F.concat(*[plan(v) for plan in plans]), lambda x: x.isNotNull())

    unhealthy = F.filter(ts["partitions"], maybe_affected)
    # A record of a poll that reached no broker (`resolves` false) opens incidents and resolves none:
    # its marker is a "view" (the broker counts only), not a "poll" (collectors/admin.py, _failed_poll).
    resolves = F.coalesce(ts["resolves"], F.lit(True))
    # A v4 record that left quiet partitions out (schemas/quiet.py) brings the counts of all of them
    counts = F.when(ts["broker_load"].isNotNull(), F.to_json(F.struct(
        ts["partition_count"].alias("partitions"), ts["broker_load"].alias("brokers")))).otherwise(
        broker_counts(ts["partitions"]))
    marker = _row(row_type=F.when(resolves, F.lit("poll")).otherwise(F.lit("view")),
                  scope=F.concat(F.lit("topic:"), topic), topic=topic, details=counts)
    offsets_marker = _row(row_type=F.lit("poll"), scope=F.concat(F.lit("offsets:"), topic), topic=topic)
    markers = F.when(has_offsets, F.array(marker, offsets_marker)).otherwise(F.array(marker))
    tiered = F.when(F.coalesce(ts["remote_storage"], F.lit(False)) & has_offsets,
                    F.array(_row(row_type=F.lit("tiered"), scope=F.lit("tiered"), topic=topic,
                                 details=tiered_offsets(ts["partitions"])))).otherwise(F.array())
    return F.concat(markers, tiered, F.flatten(F.transform(unhealthy, partition_findings)))


def tiered_offsets(partitions: Column) -> Column:
    """A tiered topic's [partition, high watermark, log start, local log start, highest remote offset]
    per partition as JSON (pipelines/tiered_view.py). Only topics with remote.storage.enable=true
    pay for it: their offsets are the series, healthy or not."""
    from pyspark.sql import functions as F

    return F.to_json(F.transform(partitions, lambda p: F.array(
        p["partition"].cast("long"), p["high_watermark"], p["log_start_offset"], p["local_log_start_offset"],
        p["highest_remote_offset"])))


def broker_counts(partitions: Column) -> Column:
    """The topic's size and, per broker, [broker, leaders, replicas, preferred, preferred_not_leading]
    as JSON: the inputs of krm_broker_leaders / krm_broker_replicas and of the balance detectors. The
    preferred leader is the first replica (Kafka's definition); a leaderless partition counts as not
    led by its preferred replica, as in KafkaController.checkAndTriggerAutoLeaderRebalance.

    Cost matters: this runs for every partition of every record that carries them all (before v4,
    and since for assignment snapshots, tiered topics and ZooKeeper's mirror; a v4 record that left
    quiet partitions out brings these counts itself: schemas/quiet.py). The four arrays are built once (one
    lambda call per partition each) and counted per broker with the native array_remove; a filter
    lambda per broker, over arrays rebuilt per broker, made the whole projection much slower
    (benchmarks/BENCHMARKS.md, "after profiling the alert projection")."""
    from pyspark.sql import functions as F

    arrays = F.struct(
        F.transform(partitions, lambda p: p["leader"]).alias("leaders"),
        F.flatten(F.transform(partitions, lambda p: p["replicas"])).alias("replicas"),
        F.transform(partitions, lambda p: F.element_at(p["replicas"], 1)).alias("preferred"),
        F.transform(F.filter(partitions, lambda p: F.element_at(p["replicas"], 1) != p["leader"]),
                    lambda p: F.element_at(p["replicas"], 1)).alias("not_leading"))

    def per_broker(a: Column) -> Column:
        def count(arr: Column, b: Column) -> Column:
            return F.size(arr) - F.size(F.array_remove(arr, b))

        return F.transform(F.array_distinct(a["replicas"]), lambda b: F.array(
            b, count(a["leaders"], b), count(a["replicas"], b), count(a["preferred"], b), count(a["not_leading"], b)))

    return F.to_json(F.struct(F.size(partitions).alias("partitions"), let(arrays, per_broker).alias("brokers")))


def cluster_rows(obs: Column, observed_at_ms: Column | None = None, settings: DetectorSettings | None = None) -> Column:
    """For a `cluster` record: its state; when the poll succeeded, a poll marker and the findings of
    the cluster rules (brokers, controller). A failed poll (no broker answered) is judged by the rules
    with `failed_polls`: CLUSTER_UNREACHABLE, or BROKER_DOWN when it still carries who is registered
    (ZooKeeper); without a marker it resolves none (pipelines/incidents.py)."""
    from pyspark.sql import functions as F

    cs = obs["cluster_state"]
    scope = F.lit("cluster")
    state = _row(row_type=F.lit("cluster"), scope=scope, details=F.to_json(cs))
    marker = _row(row_type=F.lit("poll"), scope=scope)
    view = ClusterRecordView(cs, observed_at_ms, settings or DetectorSettings())

    def present(rows: Column) -> Column:
        return F.filter(rows, lambda x: x.isNotNull())

    rules = registry.of_subject("cluster")
    found = present(F.concat(*[r.plan(view) for r in rules if r.plan is not None]))
    on_failure = present(F.concat(*[r.plan(view) for r in rules if r.failed_polls and r.plan is not None]))
    # a split cluster (collectors/topic_share.py): only share 1 speaks for it; another share's record
    # says only that the share is alive (its state row: the view's freshness), judged by no rule
    other_share = F.coalesce(cs["topic_share"]["index"], F.lit(1)) > 1
    return F.when(other_share, F.array(state)) \
        .when(cs["error"].isNull(), F.concat(F.array(state, marker), found)) \
        .otherwise(F.concat(F.array(state), on_failure))


def jmx_rows(obs: Column) -> Column:
    """For a `broker_metrics` record: the broker's own gauges (or the scrape error), for /metrics and
    the controller split-brain check (pipelines/jmx_view.py)."""
    from pyspark.sql import functions as F

    bm = obs["broker_metrics_state"]
    return F.array(_row(row_type=F.lit("jmx"), scope=F.lit("jmx"), broker=bm["broker"],
                        details=F.to_json(F.struct(bm["error"].alias("error"), bm["gauges"].alias("gauges"),
                                                   bm["scrape_ms"].alias("scrape_ms")))))


def canary_rows(obs: Column) -> Column:
    """For a `canary` record: the round as it is; the driver judges it (pipelines/detectors/canary.py)."""
    from pyspark.sql import functions as F

    cs = obs["canary_state"]
    return F.array(_row(row_type=F.lit("canary"), scope=F.lit("canary"), topic=cs["topic"], details=F.to_json(cs)))


def alert_rows(observations: DataFrame, settings: DetectorSettings | None = None) -> DataFrame:
    """Everything the driver needs from one micro-batch: cluster, poll_id, observed_at_ms + ROW_FIELDS."""
    settings = settings or DetectorSettings()
    rows = built_once(("findings.alert_rows", settings), lambda: _rows_column(settings))
    return observations.select("cluster", "poll_id", "observed_at_ms", rows).select(
        "cluster", "poll_id", "observed_at_ms", "r.*")


def _rows_column(settings: DetectorSettings) -> Column:
    """Each record exploded into its rows (`r`): the projection every alert batch runs."""
    from pyspark.sql import functions as F

    o = F.struct(*[F.col(c) for c in ("cluster_state", "topic_state", "broker_metrics_state", "canary_state")])
    rows = (F.when(F.col("kind") == "topic", topic_rows(o, F.col("observed_at_ms"), settings))
            .when(F.col("kind") == "cluster", cluster_rows(o, F.col("observed_at_ms"), settings))
            .when(F.col("kind") == "canary", canary_rows(o))
            .otherwise(jmx_rows(o)))
    return F.explode(rows).alias("r")
