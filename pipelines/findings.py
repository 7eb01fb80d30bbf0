"""The alert path's Spark plan: valid observations -> one small frame the driver collects per batch.

Only what the driver needs comes back: findings (unhealthy subjects: they grow with problems, not
with partition count), one marker per polled scope (what can resolve incidents) and each cluster's
broker list. Every record maps to an array of such rows that is exploded in the same projection:
one scan of the batch, no shuffle, no union, one Spark job. Healthy partitions cost two cheap
predicates; only unhealthy ones are turned into finding structs.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from pipelines.columns import let
from pipelines.detectors import availability, brokers, hw_stall, isr, lag, offline, truncation, unclean


@dataclass(frozen=True)
class DetectorSettings:
    """Thresholds baked into the plan (it is built once per stream)."""

    hw_stall_window_ms: int | None = None  # None: each cluster's replica.lag.time.max.ms
    lag_messages: int = lag.DEFAULT_MESSAGES
    lag_seconds: float = lag.DEFAULT_SECONDS

# judged from leader / ISR / replicas alone (scope topic:<t>); every other topic finding needs offsets
METADATA_TYPES = {offline.TYPE, isr.UNDER_REPLICATED, isr.UNDER_MIN_ISR, isr.AT_MIN_ISR}

ROW_FIELDS = [("row_type", "string"), ("scope", "string"), ("type", "string"), ("severity", "string"),
              ("topic", "string"), ("partition", "int"), ("broker", "int"), ("cause", "string"),
              ("details", "string")]


def _row(**values: Any) -> Any:
    """A struct with every ROW_FIELDS field, nulls where not given, so all rows share one type."""
    from pyspark.sql import functions as F

    return F.struct(*[(values[n] if values.get(n) is not None else F.lit(None)).cast(t).alias(n) for n, t in ROW_FIELDS])


def topic_rows(obs: Any, observed_at_ms: Any, settings: DetectorSettings) -> Any:
    """For a `topic` record: its poll marker, then the findings of its unhealthy partitions."""
    from pyspark.sql import functions as F

    ts = obs["topic_state"]
    live = ts["live_brokers"]
    unreachable = F.coalesce(ts["unreachable_brokers"], F.array().cast("array<int>"))
    topic = ts["topic"]
    scope = F.concat(F.lit("topic:"), topic)
    # Offset incidents have their own scope: a metadata-only record (ZooKeeper watch) must not
    # resolve them, since it carries no offsets to judge them by.
    offsets_scope = F.concat(F.lit("offsets:"), topic)
    has_offsets = F.coalesce(ts["has_offsets"], F.lit(True))
    window = (F.lit(settings.hw_stall_window_ms) if settings.hw_stall_window_ms is not None
              else F.coalesce(ts["replica_lag_time_max_ms"], F.lit(hw_stall.DEFAULT_WINDOW_MS)))

    def stall(p: Any) -> dict[str, Any]:
        return hw_stall.stall_columns(p, observed_at_ms, window)

    def lags(p: Any) -> Any:
        return lag.lag_columns(p, F.lit(settings.lag_messages), F.lit(settings.lag_seconds))

    def off(p: Any) -> dict[str, Any]:
        return offline.offline_columns(p["leader"], p["replicas"], p["isr"], live, p["elr"], p["last_known_elr"])

    def unavailable(p: Any) -> Any:
        return availability.leader_unreachable_column(p["leader"], live, unreachable)

    def isr_cols(p: Any) -> dict[str, Any]:
        return isr.isr_columns(p["replicas"], p["isr"], ts["min_insync_replicas"])

    def partition_findings(p: Any) -> Any:
        o, i = off(p), isr_cols(p)
        # elr / last_known_elr (Kafka 4): with ELR the ISR may shrink below min ISR, even to empty,
        # while the ELR still holds the committed data; null where the broker does not report them
        base = [p["leader"].alias("leader"), p["leader_epoch"].alias("leader_epoch"), p["replicas"].alias("replicas"),
                p["isr"].alias("isr"), p["elr"].alias("elr"), p["last_known_elr"].alias("last_known_elr")]
        offline_details = F.to_json(F.struct(
            *base, live.alias("live_brokers"), o["must_return"].alias("must_return"), o["live_isr"].alias("live_isr"),
            ts["unclean_leader_election"].alias("unclean_leader_election")))
        isr_details = F.to_json(F.struct(
            *base, i["out_of_sync"].alias("out_of_sync"), i["effective_min_isr"].alias("effective_min_isr"),
            ts["min_insync_replicas"].alias("min_insync_replicas"),
            F.struct(i["cli_under_min_isr"].alias("under_min_isr"), i["cli_at_min_isr"].alias("at_min_isr"))
            .alias("cli_view")))

        def finding(kind: str, cause: Any, details: Any, severity: Any = None, broker: Any = None) -> Any:
            if severity is None:
                severity = F.lit(offline.SEVERITY if kind == offline.TYPE else isr.SEVERITY[kind])
            in_scope = scope if kind in METADATA_TYPES else offsets_scope
            return _row(row_type=F.lit("finding"), scope=in_scope, type=F.lit(kind), severity=severity,
                        topic=topic, partition=p["partition"], broker=broker, cause=cause, details=details)

        st = stall(p)
        prev = p["previous"]
        offsets_details = [p["high_watermark"].alias("high_watermark"),
                           hw_stall.leo_of(F.coalesce(p["replica_offsets"], F.array()), p["leader"]).alias("leader_leo")]
        stall_details = F.to_json(F.struct(
            *base, *offsets_details, st["stalled_ms"].alias("stalled_ms"),
            p["hw_stalled_since_ms"].alias("hw_stalled_since_ms"), window.alias("window_ms"),
            st["holding_back"].alias("holding_back"), st["unreachable"].alias("unreachable")))
        change_details = F.to_json(F.struct(
            *base, *offsets_details, prev["leader"].alias("previous_leader"),
            prev["leader_epoch"].alias("previous_leader_epoch"), prev["isr"].alias("previous_isr"),
            prev["elr"].alias("previous_elr"), prev["last_known_elr"].alias("previous_last_known_elr"),
            prev["high_watermark"].alias("previous_high_watermark"),
            (prev["high_watermark"] - p["high_watermark"]).alias("hw_lost"),
            ts["unclean_leader_election"].alias("unclean_leader_election")))

        healthy_leader = ~o["is_offline"]
        election = unclean.election_columns(p)
        candidates = F.array(
            F.when(o["is_offline"], finding(offline.TYPE, o["cause"], offline_details)),
            F.when(healthy_leader & i["under_replicated"], finding(isr.UNDER_REPLICATED, F.lit(None), isr_details)),
            F.when(healthy_leader & i["under_min_isr"], finding(isr.UNDER_MIN_ISR, F.lit(None), isr_details)),
            F.when(healthy_leader & i["at_min_isr"], finding(isr.AT_MIN_ISR, F.lit(None), isr_details)),
            F.when(healthy_leader & st["stalled"],
                   finding(hw_stall.TYPE, st["cause"], stall_details, F.lit(hw_stall.SEVERITY))),
            F.when(election["unclean"], finding(unclean.TYPE, election["cause"], change_details, election["severity"])),
            F.when(unavailable(p), finding(availability.TYPE, F.lit(availability.LEADER_UNREACHABLE), F.to_json(
                F.struct(*base, unreachable.alias("unreachable_brokers"))), F.lit(availability.SEVERITY))),
            F.when(truncation.regression_column(p),
                   finding(truncation.REGRESSION, F.lit(None), change_details,
                           F.lit(truncation.SEVERITY[truncation.REGRESSION]))),
        )
        lag_findings = F.transform(lags(p), lambda x: finding(
            lag.TYPE, F.lit(None), F.to_json(F.struct(*base, x["messages"].alias("lag_messages"),
                                                     x["seconds"].alias("lag_seconds"), x["in_isr"].alias("in_isr"),
                                                     x["leader_leo"].alias("leader_leo"),
                                                     x["follower_leo"].alias("follower_leo"),
                                                     p["write_rate"].alias("write_rate"))),
            F.lit(lag.SEVERITY), x["broker"]))
        truncation_findings = F.transform(truncation.truncation_column(p), lambda x: finding(
            truncation.TRUNCATION, x["cause"], F.to_json(F.struct(
                *base, x["before"].alias("log_end_offset_before"), x["after"].alias("log_end_offset_after"),
                (x["before"] - x["after"]).alias("truncated_messages"),
                prev["high_watermark"].alias("previous_high_watermark"),
                prev["max_high_watermark"].alias("max_high_watermark"))),
            F.when(x["cause"] == truncation.BELOW_HW, F.lit("critical")).otherwise(F.lit("warning")), x["broker"]))
        return F.concat(F.filter(candidates, lambda x: x.isNotNull()), lag_findings, truncation_findings)

    unhealthy = F.filter(ts["partitions"],
                         lambda p: off(p)["is_offline"] | (F.size(p["isr"]) < F.size(p["replicas"])) | unavailable(p)
                         | p["previous"].isNotNull() | stall(p)["stalled"] | (F.size(lags(p)) > 0))
    marker = _row(row_type=F.lit("poll"), scope=scope, topic=topic, details=broker_counts(ts["partitions"]))
    markers = F.when(has_offsets, F.array(marker, _row(row_type=F.lit("poll"), scope=offsets_scope, topic=topic))) \
        .otherwise(F.array(marker))
    return F.concat(markers, F.flatten(F.transform(unhealthy, partition_findings)))


def broker_counts(partitions: Any) -> Any:
    """The topic's size and, per broker, [broker, leaders, replicas, preferred, preferred_not_leading]
    as JSON: the inputs of krm_broker_leaders / krm_broker_replicas and of the balance detectors. The
    preferred leader is the first replica (Kafka's definition); a leaderless partition counts as not
    led by its preferred replica, as in KafkaController.checkAndTriggerAutoLeaderRebalance.

    Cost matters: this runs for every partition of every poll. The four arrays are built once (one
    lambda call per partition each) and counted per broker with the native array_remove. Counting
    with a filter lambda per broker, over arrays rebuilt per broker, made the projection of a
    200k-partition poll take 2.4 s instead of 1.4 s (benchmarks/BENCHMARKS.md)."""
    from pyspark.sql import functions as F

    arrays = F.struct(
        F.transform(partitions, lambda p: p["leader"]).alias("leaders"),
        F.flatten(F.transform(partitions, lambda p: p["replicas"])).alias("replicas"),
        F.transform(partitions, lambda p: F.element_at(p["replicas"], 1)).alias("preferred"),
        F.transform(F.filter(partitions, lambda p: F.element_at(p["replicas"], 1) != p["leader"]),
                    lambda p: F.element_at(p["replicas"], 1)).alias("not_leading"))

    def per_broker(a: Any) -> Any:
        def count(arr: Any, b: Any) -> Any:
            return F.size(arr) - F.size(F.array_remove(arr, b))

        return F.transform(F.array_distinct(a["replicas"]), lambda b: F.array(
            b, count(a["leaders"], b), count(a["replicas"], b), count(a["preferred"], b), count(a["not_leading"], b)))

    return F.to_json(F.struct(F.size(partitions).alias("partitions"), let(arrays, per_broker).alias("brokers")))


def cluster_rows(obs: Any) -> Any:
    """For a `cluster` record: its state; when the poll succeeded, a poll marker and the findings
    about brokers and the controller."""
    from pyspark.sql import functions as F

    cs = obs["cluster_state"]
    b = brokers.broker_columns(cs)
    scope = F.lit("cluster")
    state = _row(row_type=F.lit("cluster"), scope=scope, details=F.to_json(cs))
    marker = _row(row_type=F.lit("poll"), scope=scope)
    down = F.transform(b["down"], lambda br: _row(
        row_type=F.lit("finding"), scope=scope, type=F.lit(brokers.BROKER_DOWN),
        severity=F.lit(brokers.SEVERITY[brokers.BROKER_DOWN]), broker=br["id"], cause=F.lit(brokers.NOT_REGISTERED),
        details=F.to_json(F.struct(br["host"].alias("host"), br["port"].alias("port"), br["rack"].alias("rack")))))
    unreachable = F.transform(b["unreachable"], lambda br: _row(
        row_type=F.lit("finding"), scope=scope, type=F.lit(brokers.BROKER_DOWN), severity=F.lit("warning"),
        broker=br["id"], cause=F.lit(brokers.UNREACHABLE),
        details=F.to_json(F.struct(br["host"].alias("host"), br["port"].alias("port"), br["rack"].alias("rack")))))
    no_controller = F.filter(F.array(F.when(b["no_controller"], _row(
        row_type=F.lit("finding"), scope=scope, type=F.lit(brokers.CONTROLLER_ANOMALY),
        severity=F.lit(brokers.SEVERITY[brokers.CONTROLLER_ANOMALY]), cause=F.lit(brokers.NO_CONTROLLER),
        details=F.lit("{}")))), lambda x: x.isNotNull())
    ok = F.concat(F.array(state, marker), down, unreachable, no_controller)
    return F.when(cs["error"].isNull(), ok).otherwise(F.array(state))


def jmx_rows(obs: Any) -> Any:
    """For a `broker_metrics` record: the broker's own gauges (or the scrape error), for /metrics and
    the controller split-brain check (pipelines/jmx_view.py)."""
    from pyspark.sql import functions as F

    bm = obs["broker_metrics_state"]
    return F.array(_row(row_type=F.lit("jmx"), scope=F.lit("jmx"), broker=bm["broker"],
                        details=F.to_json(F.struct(bm["error"].alias("error"), bm["gauges"].alias("gauges")))))


def canary_rows(obs: Any) -> Any:
    """For a `canary` record: the round as it is; the driver judges it (pipelines/detectors/canary.py)."""
    from pyspark.sql import functions as F

    cs = obs["canary_state"]
    return F.array(_row(row_type=F.lit("canary"), scope=F.lit("canary"), topic=cs["topic"], details=F.to_json(cs)))


def alert_rows(observations: Any, settings: DetectorSettings | None = None) -> Any:
    """Everything the driver needs from one micro-batch: cluster, poll_id, observed_at_ms + ROW_FIELDS."""
    from pyspark.sql import functions as F

    o = F.struct(*[F.col(c) for c in ("cluster_state", "topic_state", "broker_metrics_state", "canary_state")])
    rows = (F.when(F.col("kind") == "topic", topic_rows(o, F.col("observed_at_ms"), settings or DetectorSettings()))
            .when(F.col("kind") == "cluster", cluster_rows(o))
            .when(F.col("kind") == "canary", canary_rows(o))
            .otherwise(jmx_rows(o)))
    return observations.select("cluster", "poll_id", "observed_at_ms", F.explode(rows).alias("r")).select(
        "cluster", "poll_id", "observed_at_ms", "r.*")
