"""Kafka source and parsing: raw observation bytes to typed rows, or to quarantine with a reason."""

from __future__ import annotations

from typing import TYPE_CHECKING, Callable

from foundation.config import Config
from foundation.security import spark_kafka_options
from pipelines.columns import built_once
from schemas.observation import KINDS, OBSERVATION, SUPPORTED_VERSIONS, Array, Scalar, Struct, spark_schema

if TYPE_CHECKING:
    from pyspark.sql import Column, DataFrame, SparkSession

Predicate = Callable[["Column"], "Column"]  # a one-argument predicate for F.exists


FETCH_MAX_WAIT_MS = 10  # how long a broker may hold the source's fetch at the end of the log


def read_observations(spark: SparkSession, config: Config, since_ms: int | None = None) -> DataFrame:
    """The observations topic as a streaming DataFrame (Spark's Kafka source), connecting with the
    observations cluster's security settings (foundation/security.py). A query with no checkpoint yet
    starts at `[pipeline] starting_offsets`, or, when that is "latest" and `since_ms` is given, at the
    first record published at or after it (Spark's `startingTimestamp`; a partition with none starts at
    its end, `startingOffsetsByTimestampStrategy=latest`, KafkaSourceProvider): `krm run` passes the
    moment its collector started, so the history keeps the first polls, published while Spark was
    still starting, which hold every partition's first state."""
    start = ({"startingTimestamp": str(since_ms), "startingOffsetsByTimestampStrategy": "latest"}
             if since_ms is not None and config.pipeline.starting_offsets == "latest"
             else {"startingOffsets": config.pipeline.starting_offsets})
    return (
        spark.readStream.format("kafka")
        .options(**spark_kafka_options(config.observations.security))
        .option("kafka.bootstrap.servers", config.observations.bootstrap_servers)
        .option("subscribe", config.observations.topic)
        .options(**start)
        # Retention may delete records while the pipeline is down: keep going, Spark logs the gap.
        .option("failOnDataLoss", "false")
        # Spark's driver lists offsets through a Kafka AdminClient whose default timeout is 60 s:
        # when the broker leading an observations partition dies, that stalled every batch for a
        # minute. Short timeouts and fresh metadata make it retry against the new leader instead.
        .option("kafka.default.api.timeout.ms", "5000")
        .option("kafka.request.timeout.ms", "5000")
        .option("kafka.metadata.max.age.ms", "5000")
        .option("kafka.reconnect.backoff.max.ms", "1000")
        .option("fetchOffset.retryIntervalMs", "200")
        # Every read of an offset range asks the partition's earliest and latest offsets after its
        # poll (Spark's InternalKafkaConsumer.fetch -> getAvailableOffsetRange). That poll has already
        # sent the next fetch, from the end of the log (the consumer pipelines its fetches:
        # KafkaConsumer.poll), and the broker holds a fetch that finds no new data for
        # fetch.max.wait.ms while it serves no other request of that connection (SocketServer mutes a
        # channel until its response is sent: KafkaChannel.ChannelMuteState). At Kafka's default
        # (500 ms) every alert batch waited that long for nothing (benchmarks/BENCHMARKS.md, "The alert
        # batch's half second of waiting"); a fetch that finds data is answered at once either way.
        .option("kafka.fetch.max.wait.ms", str(FETCH_MAX_WAIT_MS))
        .load()
    )


def _missing(t: Struct, col: Column, path: str) -> list[tuple[Column, str]]:
    """(condition, reason) pairs that flag a required field missing anywhere in the tree."""
    from pyspark.sql import functions as F

    out: list[tuple[Column, str]] = []
    for name, ft, required in t.fields:
        c = col[name]
        if required:
            out.append((c.isNull(), f"required field {path}{name} is missing or not a {_type_name(ft)}"))
        if isinstance(ft, Struct):
            out += [(col.isNotNull() & c.isNotNull() & cond, r) for cond, r in _missing(ft, c, f"{path}{name}.")]
        if isinstance(ft, Array):
            out.append((c.isNotNull() & F.exists(c, _is_null),
                        f"an element of {path}{name}[] is not a {_type_name(ft.element)}"))
        if isinstance(ft, Array) and isinstance(ft.element, Struct):
            names = [n for n, _, req in ft.element.fields if req]
            if names:
                cond = F.exists(c, _any_null(names))
                why = f"required field {path}{name}[].{{{','.join(names)}}} is missing or of the wrong type"
                out.append((c.isNotNull() & cond, why))
            if _has_nested(ft.element):
                out.append((c.isNotNull() & F.exists(c, _element_broken(ft.element, nested_only=True)),
                            f"a required field or an array element inside {path}{name}[] is missing or of the "
                            "wrong type"))
    return out


def _has_nested(t: Struct) -> bool:
    return any(isinstance(ft, (Struct, Array)) for _, ft, _ in t.fields)


def _is_null(y: Column) -> Column:
    """A one-argument predicate for F.exists: Spark's JSON reader leaves an array element of the wrong
    type null (`[3, "x"]` as [3, null], `[[1]]` for an array of objects as [null]); no collector
    publishes a null element (schemas/observation.py refuses them), so a null element is a bad one."""
    return y.isNull()


def _null_or_broken(t: Struct) -> Predicate:
    element_broken = _element_broken(t)

    def pred(y: Column) -> Column:
        return _is_null(y) | element_broken(y)
    return pred


def _nested_broken(t: Struct, x: Column) -> Column:
    """Within one array element `x` of type `t`: a struct or struct array below it misses a required
    field, or an array below it has an element of the wrong type (Spark's JSON reader leaves a
    mistyped field or element null, so a broken element would pass)."""
    from pyspark.sql import functions as F

    cond = F.lit(False)
    for name, ft, _ in t.fields:
        if isinstance(ft, Struct):
            required = [n for n, _, req in ft.fields if req]
            inner = _any_null(required)(x[name]) if required else F.lit(False)
            if _has_nested(ft):
                inner = inner | _nested_broken(ft, x[name])
            cond = cond | (x[name].isNotNull() & inner)
        elif isinstance(ft, Array):
            broken = _null_or_broken(ft.element) if isinstance(ft.element, Struct) else _is_null
            cond = cond | F.coalesce(F.exists(x[name], broken), F.lit(False))
    return cond


def _element_broken(t: Struct, nested_only: bool = False) -> Predicate:
    """A one-argument predicate for F.exists (PySpark counts a lambda's parameters, so no defaults)."""
    from pyspark.sql import functions as F

    names = [n for n, _, req in t.fields if req]

    def pred(y: Column) -> Column:
        b = _any_null(names)(y) if names and not nested_only else F.lit(False)
        return (b | _nested_broken(t, y)) if _has_nested(t) else b
    return pred


def _type_name(t: object) -> str:
    return t.name if isinstance(t, Scalar) else ("list" if isinstance(t, Array) else "object")


def _any_null(names: list[str]) -> Predicate:
    """A one-argument predicate for F.exists: is any of `names` null in the element?"""

    def pred(x: Column) -> Column:
        cond = x[names[0]].isNull()
        for n in names[1:]:
            cond = cond | x[n].isNull()
        return cond

    return pred


def parse(raw: DataFrame) -> DataFrame:
    """Columns: the observation's fields, plus kafka_* provenance, `raw` text and `reject_reason`
    (null for a good record). Nothing is dropped here: callers split on `reject_reason`."""
    fields, reason = built_once("ingest.parse", _parse_columns)
    return raw.select(*fields).select("*", reason.alias("reject_reason"))


def _parse_columns() -> tuple[list[Column], Column]:
    """parse's two projections: the parsed record with its provenance, then the reject reason."""
    from pyspark.sql import functions as F

    text = F.col("value").cast("string")
    # Parsed inside a generator (explode of a one-element array): Catalyst pushes no filter below a
    # Generate on the column it generates. As a plain projection, the filter on reject_reason
    # (valid/rejected) was pushed below it with from_json inlined into each of its ~100 references:
    # every record parsed ~100 times (several times slower: benchmarks/BENCHMARKS.md). Non-deterministic
    # barriers are refused in streaming queries.
    obs = F.explode(F.array(F.from_json(text, spark_schema(), {"mode": "PERMISSIVE"})))
    fields = [text.alias("raw"), obs.alias("o"), F.col("topic").alias("kafka_topic"),
              F.col("partition").alias("kafka_partition"), F.col("offset").alias("kafka_offset"),
              F.col("timestamp").alias("kafka_timestamp")]
    o = F.col("o")
    reason = F.when(F.col("raw").isNull(), F.lit("empty record value"))
    reason = reason.when(o.isNull() | o["v"].isNull(),
                         F.lit("not a JSON observation object (malformed JSON, or no integer 'v')"))
    reason = reason.when(~o["v"].isin(*SUPPORTED_VERSIONS), F.concat(F.lit("unsupported schema version "), o["v"].cast("string")))
    reason = reason.when(~o["kind"].isin(*KINDS), F.concat(F.lit("unknown kind "), F.coalesce(o["kind"], F.lit("null"))))
    for cond, why in _missing(OBSERVATION, o, ""):
        reason = reason.when(cond, F.lit(why))
    for kind in KINDS:
        reason = reason.when((o["kind"] == kind) & o[f"{kind}_state"].isNull(),
                             F.lit(f"{kind}_state is required for kind '{kind}'"))
    for cond, said in contract(o):
        reason = reason.when(cond, said)
    return fields, reason


# Kafka's rule for topic names (clients/src/main/java/org/apache/kafka/common/internals/Topic.java,
# `validate`: ASCII letters, digits, '.', '_', '-', at most 249, not "." or "..") and krm's for
# cluster names (foundation/config.py)
TOPIC_NAME = r"^(?!\.\.?$)[a-zA-Z0-9._-]{1,249}$"
CLUSTER_NAME = r"^[A-Za-z0-9._-]+$"


def contract(o: Column) -> list[tuple[Column, Column]]:
    """(condition, reason) for what no correct collector can publish, whatever the cluster does:
    names that are names (cluster, topic), and what Kafka itself keeps (a leader is one of the
    replicas, the ISR a subset of them, log start <= HW on the broker that answered both, in that
    order — collectors/offsets.py). The
    reason names the first partition that breaks it. Not here, because sampling can legitimately
    break them: HW <= the leader's LEO (an unclean election makes a leader with less than the old
    HW — exactly what the truncation detectors must see) and follower LEO <= leader LEO; the data-
    quality suite (pipelines/quality.py) measures those beside the alert path."""
    from pyspark.sql import functions as F

    parts = o["topic_state"]["partitions"]
    brokers = o["cluster_state"]["brokers"]

    def first(pred: Predicate, what: str) -> tuple[Column, Column]:
        bad = F.filter(parts, pred)
        return ((o["kind"] == "topic") & (F.size(bad) > 0),
                F.concat(F.lit(f"contract: {what} (topic "), o["topic_state"]["topic"], F.lit(", partition "),
                         bad[0]["partition"].cast("string"), F.lit(")")))

    def named(kind: str, name: Column, pattern: str, what: str) -> tuple[Column, Column]:
        # Spark's JSON reader turns any JSON value in a string field into its text (an array into
        # "[...]"): a name that is not a name is how a mistyped or hostile one shows here.
        return ((o["kind"] == kind) & ~name.rlike(pattern),
                F.concat(F.lit(f"contract: not a legal {what}: "), F.substring(name, 1, 80)))

    checks = [
        ((~o["cluster"].rlike(CLUSTER_NAME)),
         F.concat(F.lit("contract: not a legal cluster name: "), F.substring(o["cluster"], 1, 80))),
        named("topic", o["topic_state"]["topic"], TOPIC_NAME, "Kafka topic name"),
        named("canary", o["canary_state"]["topic"], TOPIC_NAME, "Kafka topic name"),
        first(lambda p: p["partition"] < 0, "negative partition id"),
        first(lambda p: F.size(p["replicas"]) == 0, "no replicas"),
        first(lambda p: F.size(F.array_distinct(p["replicas"])) != F.size(p["replicas"]), "a broker twice in replicas"),
        first(lambda p: F.exists(p["replicas"], lambda b: b < 0), "negative broker id in replicas"),
        first(lambda p: (p["leader"] != -1) & ~F.array_contains(p["replicas"], p["leader"]),
              "leader is neither -1 nor one of the replicas"),
        first(lambda p: F.exists(p["isr"], lambda b: ~F.array_contains(p["replicas"], b)), "ISR not a subset of replicas"),
        first(lambda p: (p["high_watermark"] < 0) | (p["log_start_offset"] < 0)
              | F.exists(F.coalesce(p["replica_offsets"], F.array()), lambda r: r["log_end_offset"] < 0),
              "negative offset"),
        first(lambda p: p["log_start_offset"] > p["high_watermark"], "log start offset above the high watermark"),
        ((o["kind"] == "topic") & (F.size(F.array_distinct(F.transform(parts, lambda p: p["partition"]))) != F.size(parts)),
         F.concat(F.lit("contract: a partition twice in one record (topic "), o["topic_state"]["topic"], F.lit(")"))),
        # v4 (schemas/quiet.py): the counts stand for every partition, the list for some of them
        ((o["kind"] == "topic") & o["topic_state"]["broker_load"].isNotNull()
         & F.coalesce(o["topic_state"]["partition_count"] < F.size(parts), F.lit(True)),
         F.concat(F.lit("contract: broker_load without a partition_count covering the partitions (topic "),
                  o["topic_state"]["topic"], F.lit(")"))),
        ((o["kind"] == "topic") & F.exists(F.coalesce(o["topic_state"]["broker_load"], F.array()),
                                           lambda b: (F.size(b) != 5) | F.exists(b, lambda n: n.isNull() | (n < 0))),
         F.concat(F.lit("contract: a broker_load entry is not five counts [broker, leaders, replicas, preferred, "
                        "preferred_not_leading] (topic "), o["topic_state"]["topic"], F.lit(")"))),
        ((o["kind"] == "topic") & o["topic_state"]["broker_load"].isNotNull() & o["topic_state"]["assignment"].isNotNull(),
         F.concat(F.lit("contract: an assignment record leaves partitions out (topic "), o["topic_state"]["topic"],
                  F.lit(")"))),
        ((o["kind"] == "cluster") & F.exists(brokers, lambda b: b["id"] < 0),
         F.lit("contract: negative broker id in cluster_state.brokers")),
        ((o["kind"] == "cluster") & (F.size(F.array_distinct(F.transform(brokers, lambda b: b["id"]))) != F.size(brokers)),
         F.lit("contract: a broker twice in cluster_state.brokers")),
    ]
    return checks


def valid(parsed: DataFrame) -> DataFrame:
    """Good records, flattened to the observation's own columns."""
    from pyspark.sql import functions as F

    return parsed.where(F.col("reject_reason").isNull()).select("o.*", "kafka_timestamp")


def rejected(parsed: DataFrame) -> DataFrame:
    """Quarantine rows: the raw text, where it came from and why it was refused."""
    from pyspark.sql import functions as F

    return parsed.where(F.col("reject_reason").isNotNull()).select(
        "raw", F.col("reject_reason").alias("reason"), "kafka_topic", "kafka_partition", "kafka_offset",
        "kafka_timestamp", F.current_timestamp().alias("quarantined_at"),
    )
