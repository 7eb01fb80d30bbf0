"""The observation record: the one contract between collectors and pipeline, defined once.

A record is a JSON object on the observations topic. Its shape is declared below as a small tree of
field specs; `spark_schema()` turns the tree into the pipeline's StructType and `check()` validates a
collector's dict against the same tree before it is published. Bump SCHEMA_VERSION on any change
that is not purely additive; the pipeline quarantines versions it does not know.

Kinds of record (field `kind`):
- `cluster`: one per poll per cluster: brokers (live or not), controller, and the poll's size, so
  the pipeline knows what a complete poll is. `error` is set when the cluster could not be reached.
- `topic`: one per topic per poll: topic configs, the live broker ids of that poll (so each record
  can be judged on its own), and every partition's leader, epoch, replicas, ISR and offline replicas,
  the leader's high watermark, each replica's log end offset, and what consecutive polls reveal
  (write rate, HW stalled since, the previous state when an epoch changed or an offset went back).
- `broker_metrics`: one per broker per JMX exporter scrape: the broker's own replication gauges and
  per-partition fetcher lag and log end offsets; `error` when the endpoint did not answer.
- `canary` (v2): one per canary round: for each partition of the canary topic, whether an acks=all
  write to it was acknowledged and read back, and how long that took.
Additions are optional fields (and new kinds), so records of older collectors stay valid.

Versions (`v`): 1 the first; 2 adds, all optional, `elr` / `last_known_elr` per partition and in
`previous` (KRaft, Kafka 4's Eligible Leader Replicas, KIP-966), the cluster's `quorum` (KRaft
DescribeQuorum), the topic's `unreachable_brokers` (client-visible availability), the cluster's
`error_reason` and `denied` (secured clusters), a partition's `adding_replicas` / `removing_replicas`
(reassignments), a down broker's `controlled_shutdown` / `down_since_ms`, and the cluster's
`capabilities` / `unsupported` (requests its brokers announce). A v1 record is read as "no ELR and no quorum known",
which is what a v1 collector knew. 3 adds a partition's `lagging`, `changed` / `keyframe` (true or absent):
absent in a v3 record means "as before", so the history path writes the partition only on those;
it writes every partition of a v1 or v2 record, whose collector did not say. Also optional in v3, added
later: a topic's `remote_storage` and a partition's `local_log_start_offset` / `highest_remote_offset`
(tiered storage), and a cluster's `migration_phase` / `migration_phase_since_ms` (ZooKeeper → KRaft);
a record without them is read as "not tiered", "no migration known"; and a down broker's
`departure` (`controlled`, `crash`, `unknown`), read from `controlled_shutdown` when absent. Optional in v4,
added later: a cluster's `topic_share` (a cluster split across collector processes; absent: one process
polls it whole). A pipeline that predates it must not be fed by a split collector: it would judge every
share's cluster record. And a cluster's `holds_s` (a collector apart from the pipeline keeps the polls
that repeat this one home for that long; absent: it publishes the next one); a pipeline that predates it
sees such a cluster's view age between the published polls. Also a topic's `failed_log_dir_brokers`
(absent: Metadata's offline replicas read as failed directories, as before), a broker's `log_dirs`
(absent: nothing known of its disks) and
`disk_full` (absent: false), and a partition's `stalled_followers` (absent: none known) and
`leader_error` / `leader_error_since_ms` (absent: its leader did not refuse it), and a canary record's
`waiting` with its partitions' `waiting_ms` (a round's early record: writes still waiting past the latency
objective; a pipeline that predates it would read them as failed writes, so upgrade the pipeline first), and a
canary partition's `writes` (absent: one). 4: a topic record
may leave out its quiet partitions (schemas/quiet.py: healthy, unchanged, no rule can judge them), and then
says what the pipeline counted from all of them: `partition_count` (the topic's size) and `broker_load`
(per broker: leaders, replicas, preferred, preferred not leading). A topic record without `broker_load`
carries every partition, as every v1-v3 record does. Not additive (a v3 pipeline would count a partial
list as the whole topic), hence a new version: a pipeline that does not know it quarantines it. The pipeline
accepts every version in SUPPORTED_VERSIONS and quarantines others.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Callable, Mapping, TypeVar, overload

from foundation.errors import SchemaError
from schemas import fast_check

if TYPE_CHECKING:
    from pyspark.sql.types import DataType, StructType

SCHEMA_VERSION = 4
SUPPORTED_VERSIONS = (1, 2, 3, 4)
KINDS = ("cluster", "topic", "broker_metrics", "canary")


@dataclass(frozen=True)
class Scalar:
    name: str  # string | int | long | bool


@dataclass(frozen=True)
class Array:
    element: Type


@dataclass(frozen=True)
class Struct:
    fields: tuple[tuple[str, Type, bool], ...]  # (name, type, required)


Type = Scalar | Array | Struct  # a node of the schema tree
Check = Callable[[object], None]  # raises _Mismatch where the value does not fit its node


STRING, INT, LONG, BOOL, DOUBLE = Scalar("string"), Scalar("int"), Scalar("long"), Scalar("bool"), Scalar("double")

LOG_DIR = Struct((  # one log directory of a broker, as its DescribeLogDirs answer says (collectors/disk_watch.py)
    ("path", STRING, True),
    ("failed", BOOL, True),  # the broker took it offline (KAFKA_STORAGE_ERROR)
    ("total_bytes", LONG, False),  # its filesystem's size and the bytes still usable (Kafka 3.3+, KIP-827)
    ("usable_bytes", LONG, False),
    # seconds until usable_bytes reaches 0 at the recent growth rate; absent when not growing, or further
    # out than [collector] log_dir_horizon_s
    ("full_in_s", DOUBLE, False),
))

BROKER = Struct((
    ("id", INT, True),
    ("host", STRING, False),
    ("port", INT, False),
    ("rack", STRING, False),
    ("live", BOOL, True),  # registered (ZooKeeper) / unfenced (KRaft): the controller's view
    # answered the collector's offsets requests in time, or answers its answer-time prober, late, within
    # unreachable_after_s (collectors/answer_times.py: a starved broker, BROKER_SLOW's); null: not asked
    ("reachable", BOOL, False),
    # v2, while the broker is down (not registered, or registered but unreachable): whether it had
    # handed over, when krm first saw it down, every leadership and ISR place another replica could
    # take (a controlled shutdown: true) or went down holding them (a crash or a hang: false)
    ("controlled_shutdown", BOOL, False),
    ("down_since_ms", LONG, False),  # v2: when krm first saw it down (epoch ms)
    # v3, added later, while the broker is down: how it went (collectors/departures.py): `controlled`
    # (controlled_shutdown true), `crash` (false) or `unknown` (null: no evidence, or not judged yet).
    # Absent (an older collector): read from controlled_shutdown, null as a crash.
    ("departure", STRING, False),
    # v4, optional, added later: its log directories as last sampled (every [collector] log_dir_poll_s);
    # absent: not asked or not answered
    ("log_dirs", Array(LOG_DIR), False),
    # v4, optional, added later, while the broker is down: true when its every log directory had failed or
    # was forecast full by the time it stopped serving (collectors/disk_watch.py); absent: no such evidence
    ("disk_full", BOOL, False),
    # v4, optional, added later: how late it answers the collector now: the median round trip of the
    # reachability probes it answered in the last few seconds (collectors/reachability.py); absent: none
    ("answer_ms", DOUBLE, False),
    # v4, optional, added later: a high quantile (the 90th percentile) of the round trips of the probes it answered
    # over the last few seconds (collectors/answer_times.py `steady_s`), when it answered enough of them and none
    # stalled; a milder slow spell is read from it
    ("answer_steady_ms", DOUBLE, False),
))

REPLICA_OFFSET = Struct((
    ("broker", INT, True),
    ("log_end_offset", LONG, True),  # that replica's own LEO (ListOffsets, replica id -2)
))

PREVIOUS = Struct((  # the partition at the previous poll (last known offsets), see collectors/memory.py
    ("leader", INT, True),
    ("leader_epoch", INT, False),
    ("isr", Array(INT), True),
    ("elr", Array(INT), False),  # v2
    ("last_known_elr", Array(INT), False),  # v2
    ("high_watermark", LONG, False),
    ("max_high_watermark", LONG, False),  # the highest HW this collector saw: committed data
    ("replica_offsets", Array(REPLICA_OFFSET), False),
    ("replicas", Array(INT), False),  # v2: the replica set then (a reassignment changes it)
    ("adding_replicas", Array(INT), False),  # v2: replicas a reassignment was adding then
))

PARTITION = Struct((
    ("partition", INT, True),
    ("leader", INT, True),  # -1: no leader
    ("leader_epoch", INT, False),
    ("replicas", Array(INT), True),  # assignment order: replicas[0] is the preferred leader
    ("isr", Array(INT), True),
    # v2, KRaft with ELR (Kafka 4 default): replicas out of the ISR that still hold every committed
    # message and may lead when the ISR is empty; the last known leader(s) when the ELR is empty too.
    # Absent: the broker does not say (ZooKeeper mode, Kafka < 3.8, older collector).
    ("elr", Array(INT), False),
    ("last_known_elr", Array(INT), False),
    ("offline_replicas", Array(INT), False),
    ("high_watermark", LONG, False),  # the leader's; null when the leader did not answer
    ("log_start_offset", LONG, False),  # the leader's (ListOffsets EARLIEST); null when not answered
    ("replica_offsets", Array(REPLICA_OFFSET), False),  # replicas that answered, in assignment order
    ("write_rate", DOUBLE, False),  # messages/s appended to the leader since the previous poll
    ("hw_stalled_since_ms", LONG, False),  # HW unmoved since then while the leader's LEO is ahead
    ("previous", PREVIOUS, False),  # only when the leader epoch changed or an offset went backwards
    ("zk_mtime_ms", LONG, False),  # ZooKeeper mode: mtime of the state znode leader/epoch/ISR came from
    # v2, only while a reassignment moves the partition (KIP-455): `replicas` then holds the old and
    # the new replicas; these are the ones being added (not yet a full replica) and being removed
    ("adding_replicas", Array(INT), False),
    ("removing_replicas", Array(INT), False),
    ("reassignment_progress_ms", LONG, False),  # v2: when an adding replica's log last grew (collectors/memory.py)
    # v3 (collectors/memory.py): the followers that lag (absent: none); true or absent: leader, epoch,
    # replicas, ISR or lagging followers differ from the collector's previous poll (or it has none);
    # the first poll of a keyframe interval. The history path writes those polls.
    ("lagging", Array(INT), False),
    # v4, optional, added later (collectors/memory.py): followers whose log end offset stood still since the
    # collector's previous poll while the leader had more for them then: they fetched nothing (absent: none)
    ("stalled_followers", Array(INT), False),
    # v4, optional, added later: why the elected leader does not serve the partition, and since when the
    # collector has seen it so (absent: it serves it): the error it gave instead of its HW
    # (NOT_LEADER_OR_FOLLOWER, OFFSET_NOT_AVAILABLE: collectors/offsets.py REFUSALS), or STALE_METADATA
    # (ZooKeeper mode: the brokers' metadata names another leader than the controller's)
    ("leader_error", STRING, False),
    ("leader_error_since_ms", LONG, False),
    ("changed", BOOL, False),
    ("keyframe", BOOL, False),
    # tiered topics only (KIP-405, collectors/tiered.py): the leader's local log start offset (the first
    # offset still on its disk) and the highest offset copied to remote storage (-1: none yet); null
    # when the leader did not answer or cannot say (Kafka < 3.9)
    ("local_log_start_offset", LONG, False),
    ("highest_remote_offset", LONG, False),
))

VOTER = Struct((  # one KRaft controller quorum voter, as the quorum leader reports it
    ("id", INT, True),
    ("log_end_offset", LONG, True),  # -1: unknown to the leader
    ("last_fetch_ms", LONG, False),  # the leader's clock; null for the leader itself or never heard from
    ("last_caught_up_ms", LONG, False),
))

QUORUM = Struct((  # v2, KRaft: DescribeQuorum of __cluster_metadata-0
    ("leader_id", INT, True),  # -1: no leader known (or the request failed: see error)
    ("leader_epoch", INT, False),
    ("high_watermark", LONG, False),
    ("voters", Array(VOTER), True),
    ("observers", INT, False),
    ("error", STRING, False),
))

# The values of a cluster record's `error_reason` (why `error`; told apart by collectors/access.py),
# also the `reason` label of krm_cluster_reachable and the causes of CLUSTER_UNREACHABLE.
AUTHENTICATION_FAILED = "authentication_failed"  # the broker refused the credentials (SASL)
TLS_FAILED = "tls_failed"  # the handshake failed (certificate not trusted, name mismatch, client cert refused)
PROTOCOL_MISMATCH = "protocol_mismatch"  # the listener speaks another security protocol than configured
AUTHORIZATION_FAILED = "authorization_failed"  # logged in, but an ACL krm needs is missing
UNREACHABLE = "unreachable"  # nothing answered (down, wrong address, firewall)

# The values of a partition's `leader_error` (why its elected leader does not serve it), read by
# PARTITION_UNAVAILABLE `leader_not_serving` (pipelines/detectors/availability.py). The first two are Kafka's
# error names as the leader gives them for the partition instead of its HW (collectors/offsets.py REFUSALS);
# STALE_METADATA is krm's word: in ZooKeeper mode the brokers' metadata, which clients read, names another
# leader than the one the controller wrote to ZooKeeper (collectors/poll_records.py).
NOT_LEADER_OR_FOLLOWER = "NOT_LEADER_OR_FOLLOWER"
OFFSET_NOT_AVAILABLE = "OFFSET_NOT_AVAILABLE"
STALE_METADATA = "STALE_METADATA"

TOPIC_SHARE = Struct((
    ("index", INT, True),  # 1-based
    ("count", INT, True),
))

CLUSTER_STATE = Struct((
    ("controller_id", INT, False),  # -1 or null: no active controller known
    ("brokers", Array(BROKER), True),
    ("topic_count", INT, True),
    ("partition_count", INT, True),
    ("error", STRING, False),  # set when the poll failed; brokers is then empty
    ("replica_lag_time_max_ms", LONG, False),  # a broker's replica.lag.time.max.ms (HW-stall window)
    ("leader_imbalance_per_broker_percentage", INT, False),  # a broker's, for PREFERRED_LEADER_IMBALANCE
    ("reassignment_in_progress", BOOL, False),  # ZooKeeper mode: /admin/reassign_partitions exists
    ("quorum", QUORUM, False),  # v2, KRaft only
    ("error_reason", STRING, False),  # v2: why `error` (collectors/access.py: authentication_failed, ...)
    ("denied", Array(STRING), False),  # v2: ACLs the poll found missing ("DESCRIBE_CONFIGS on TOPIC t")
    ("capabilities", Array(STRING), False),  # v2: what krm could ask the brokers (collectors/capabilities.py)
    ("unsupported", Array(STRING), False),  # v2: what it could not: the brokers lack the request
    # ZooKeeper-mode clusters (added in v3, optional): the ZooKeeper → KRaft migration's phase as Kafka's
    # ZkMigrationState numbers (4 none, 2 copying, 1 dual writes, 3 finalized) and when krm first saw it
    ("migration_phase", INT, False),
    ("migration_phase_since_ms", LONG, False),
    # v4, optional: one cluster's topics split across collector processes (collectors/topic_share.py):
    # {index, count}; only share 1's record is judged, the others' say their share is alive
    ("topic_share", TOPIC_SHARE, False),
    # v4, optional: a steady poll a collector with no pipeline in its process published: polls that find the
    # same are kept home for up to this long (collectors/unchanged.py); until then the record vouches that
    # the cluster is as it says (pipelines/alert_path.py); absent: the next poll is published
    ("holds_s", DOUBLE, False),
))

TOPIC_STATE = Struct((
    ("topic", STRING, True),
    ("min_insync_replicas", INT, False),
    ("unclean_leader_election", BOOL, False),
    ("live_brokers", Array(INT), True),
    ("replica_lag_time_max_ms", LONG, False),  # as in the cluster record: each record stands alone
    ("has_offsets", BOOL, False),  # false: metadata only (ZooKeeper watch), judges no offset incident
    ("assignment", STRING, False),  # "changed" (first sight or replicas moved) | "snapshot" (periodic) | null
    # v2: brokers clients cannot reach while still registered: connection refused or reset at this
    # poll, or silent (timeouts) for [collector] unreachable_after_s; absent when none
    ("unreachable_brokers", Array(INT), False),
    # v2: false when no broker answered the poll (ZooKeeper's view alone): its findings open incidents
    # and resolve none, so a restarting cluster's partitions stay in their outage's incident; absent: true
    ("resolves", BOOL, False),
    ("remote_storage", BOOL, False),  # true: the topic has remote.storage.enable=true (tiered storage)
    # v4, optional: where a partition lists an offline replica on a live broker, the live brokers whose own
    # DescribeLogDirs answer names a failed log directory (none: []); absent: not asked (an older
    # collector: Metadata's offline_replicas are read as failed directories)
    ("failed_log_dir_brokers", Array(INT), False),
    # v4, with broker_load: the partitions that are not quiet (schemas/quiet.py); without it, every partition
    ("partitions", Array(PARTITION), True),
    ("partition_count", INT, False),  # v4: the topic's partitions, published or not
    # v4: per broker holding a replica, [broker, leaders, replicas, preferred, preferred_not_leading] over
    # every partition of the topic (schemas/quiet.py broker_load); present when partitions may be left out
    ("broker_load", Array(Array(INT)), False),
))

BROKER_METRICS_STATE = Struct((  # one per broker per JMX scrape (collectors/jmx.py)
    ("broker", INT, True),
    ("endpoint", STRING, True),
    ("error", STRING, False),  # set when the exporter did not answer; gauges are then empty
    ("scrape_ms", DOUBLE, False),
    ("gauges", Array(Struct((("name", STRING, True), ("value", DOUBLE, True)))), True),
    ("partitions", Array(Struct((("metric", STRING, True), ("topic", STRING, True), ("partition", INT, True),
                                 ("value", DOUBLE, True)))), False),
))

CANARY_STATE = Struct((  # v2: one per canary round of a cluster (collectors/canary.py)
    ("topic", STRING, True),
    ("partitions", Array(Struct((
        ("partition", INT, True),
        ("broker", INT, True),  # the broker meant to lead it: its first replica (preferred leader)
        ("leader", INT, False),  # the leader the metadata named this round (-1: none)
        ("isr", Array(INT), False),  # the in-sync replicas the producer's metadata named: those the write waited on
        ("produced", BOOL, True),  # an acks=all write was acknowledged within the round's timeout
        ("produce_ms", DOUBLE, False),  # the slowest acknowledged write of the round to it
        # how many writes it got this round, when more than one: a train while a broker it holds answers krm late
        ("writes", INT, False),
        ("waiting_ms", DOUBLE, False),  # in an early record: how long the write has waited so far, unanswered
        ("consumed", BOOL, False),  # the record was read back within the timeout (null: not produced)
        ("e2e_ms", DOUBLE, False),  # produce call -> record read back
        ("error", STRING, False),
    ))), True),
    # the round's early record: only its writes still waiting once the latency objective passed (its own follows)
    ("waiting", BOOL, False),
))

OBSERVATION = Struct((
    ("v", INT, True),
    ("kind", STRING, True),
    ("cluster", STRING, True),
    ("source", STRING, True),  # admin | zookeeper | jmx | probe
    ("poll_id", LONG, True),  # increases by one per poll of one collector for one cluster
    ("observed_at_ms", LONG, True),  # epoch milliseconds when the source answered
    ("cluster_state", CLUSTER_STATE, False),
    ("topic_state", TOPIC_STATE, False),
    ("broker_metrics_state", BROKER_METRICS_STATE, False),
    ("canary_state", CANARY_STATE, False),
))

_PY_TYPES: dict[str, tuple[type, ...]] = {"string": (str,), "int": (int,), "long": (int,), "bool": (bool,),
                                          "double": (int, float)}
_INT_RANGE: dict[str, tuple[int, int]] = {"int": (-(2**31), 2**31 - 1), "long": (-(2**63), 2**63 - 1)}


R = TypeVar("R", bound=Mapping[str, Any])


def check(record: R) -> R:
    """Validate a record against OBSERVATION; returns it unchanged or raises SchemaError."""
    if not _FAST_OBSERVATION(record):  # the generated checker; the walker decides and words a rejection
        try:
            _CHECK_OBSERVATION(record)
        except _Mismatch as e:
            raise SchemaError(f"${e.path}: {e.problem}") from None
    if record["v"] not in SUPPORTED_VERSIONS:
        raise SchemaError(f"$.v: expected one of {SUPPORTED_VERSIONS}, got {record['v']}")
    kind = record["kind"]
    if kind not in KINDS:
        raise SchemaError(f"$.kind: expected one of {KINDS}, got {kind!r}")
    body = f"{kind}_state"
    if record.get(body) is None:
        raise SchemaError(f"$.{body}: required for kind {kind!r}")
    return record


class _Mismatch(Exception):
    """Raised deep in a record; each enclosing level prepends its step to `path` on the way out, so
    a valid record (every record the collector builds) never pays for formatting paths."""

    def __init__(self, problem: str) -> None:
        super().__init__(problem)
        self.problem = problem
        self.path = ""


def _compile(t: Type) -> Check:
    """One checking function per node of the schema tree, built once: the collector checks every
    partition of every poll, and walking the tree generically cost nearly twice as much."""
    if isinstance(t, Scalar):
        types: Any = _PY_TYPES[t.name]  # (Any: an isinstance() on it must not narrow `value` below)
        is_bool = t.name == "bool"
        bounds = _INT_RANGE.get(t.name)

        def scalar(value: Any) -> None:  # (Any: compared with its bounds once its type is checked)
            if not isinstance(value, types) or (not is_bool and isinstance(value, bool)):
                raise _Mismatch(f"expected {t.name}, got {type(value).__name__} {value!r}")
            if bounds is not None and not bounds[0] <= value <= bounds[1]:
                raise _Mismatch(f"{value} does not fit in {t.name}")
        return scalar
    if isinstance(t, Array):
        element = _compile(t.element)

        def array(value: object) -> None:
            if not isinstance(value, list):
                raise _Mismatch(f"expected a list, got {type(value).__name__}")
            for i, item in enumerate(value):
                try:
                    element(item)
                except _Mismatch as e:
                    e.path = f"[{i}]{e.path}"
                    raise
        return array
    fields = [(name, _compile(ft), required) for name, ft, required in t.fields]

    def struct(value: object) -> None:
        if not isinstance(value, dict):
            raise _Mismatch(f"expected an object, got {type(value).__name__}")
        for name, field_check, required in fields:
            v = value.get(name)
            if v is None:
                if required:
                    e = _Mismatch("required field is missing")
                    e.path = f".{name}"
                    raise e
                continue
            try:
                field_check(v)
            except _Mismatch as e:
                e.path = f".{name}{e.path}"
                raise
    return struct


_CHECK_OBSERVATION = _compile(OBSERVATION)
_FAST_OBSERVATION = fast_check.generate(OBSERVATION, _INT_RANGE)


@overload
def spark_schema(t: Struct = OBSERVATION) -> StructType: ...


@overload
def spark_schema(t: Type) -> DataType: ...


def spark_schema(t: Type = OBSERVATION) -> DataType:
    """The same tree as a pyspark StructType (pyspark imported here only: collectors don't need it)."""
    from pyspark.sql import types as T

    if isinstance(t, Scalar):
        return {"string": T.StringType(), "int": T.IntegerType(), "long": T.LongType(), "bool": T.BooleanType(),
                "double": T.DoubleType()}[t.name]
    if isinstance(t, Array):
        return T.ArrayType(spark_schema(t.element), containsNull=False)
    return T.StructType([T.StructField(n, spark_schema(ft), nullable=True) for n, ft, _ in t.fields])
