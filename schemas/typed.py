"""The observation record (schemas/observation.py) as types a checker can follow where records are built
and read. Records stay plain dicts (the collector builds and encodes hundreds of thousands per poll, the
pipeline reads them as JSON); these TypedDicts only name their keys and values.

A record is one of four kinds, each with its body required (schemas/observation.py `check`): `Observation`
is their union, and a builder returns the kind it builds. The schema stays the one source:
tests/unit/test_typed_records.py holds every TypedDict here against its Struct there, key by key
(required or not, and the value's type), so a field added to one and not the other fails the unit tier.
A required field is `Required`; an optional one may be absent or null.
"""

from typing import Literal, Required, TypedDict, Union  # (no postponed annotations: TypedDict reads `Required` at class creation)


class LogDir(TypedDict, total=False):
    path: Required[str]
    failed: Required[bool]
    total_bytes: int | None
    usable_bytes: int | None
    full_in_s: float | None


class Broker(TypedDict, total=False):
    id: Required[int]
    host: str | None
    port: int | None
    rack: str | None
    live: Required[bool]
    reachable: bool | None
    controlled_shutdown: bool | None
    down_since_ms: int | None
    departure: str | None
    log_dirs: list[LogDir] | None
    disk_full: bool | None
    answer_ms: float | None
    answer_steady_ms: float | None


class ReplicaOffset(TypedDict):
    broker: int
    log_end_offset: int


class Previous(TypedDict, total=False):
    leader: Required[int]
    leader_epoch: int | None
    isr: Required[list[int]]
    elr: list[int] | None
    last_known_elr: list[int] | None
    high_watermark: int | None
    max_high_watermark: int | None
    replica_offsets: list[ReplicaOffset] | None
    replicas: list[int] | None
    adding_replicas: list[int] | None


class Partition(TypedDict, total=False):
    partition: Required[int]
    leader: Required[int]
    leader_epoch: int | None
    replicas: Required[list[int]]
    isr: Required[list[int]]
    elr: list[int] | None
    last_known_elr: list[int] | None
    offline_replicas: list[int] | None
    high_watermark: int | None
    log_start_offset: int | None
    replica_offsets: list[ReplicaOffset] | None
    write_rate: float | None
    hw_stalled_since_ms: int | None
    previous: Previous | None
    zk_mtime_ms: int | None
    adding_replicas: list[int] | None
    removing_replicas: list[int] | None
    reassignment_progress_ms: int | None
    lagging: list[int] | None
    stalled_followers: list[int] | None
    leader_error: str | None
    leader_error_since_ms: int | None
    changed: bool | None
    keyframe: bool | None
    local_log_start_offset: int | None
    highest_remote_offset: int | None


class Voter(TypedDict, total=False):
    id: Required[int]
    log_end_offset: Required[int]
    last_fetch_ms: int | None
    last_caught_up_ms: int | None


class Quorum(TypedDict, total=False):
    leader_id: Required[int]
    leader_epoch: int | None
    high_watermark: int | None
    voters: Required[list[Voter]]
    observers: int | None
    error: str | None


class TopicShareField(TypedDict):
    index: int
    count: int


class ClusterState(TypedDict, total=False):
    controller_id: int | None
    brokers: Required[list[Broker]]
    topic_count: Required[int]
    partition_count: Required[int]
    error: str | None
    replica_lag_time_max_ms: int | None
    leader_imbalance_per_broker_percentage: int | None
    reassignment_in_progress: bool | None
    quorum: Quorum | None
    error_reason: str | None
    denied: list[str] | None
    capabilities: list[str] | None
    unsupported: list[str] | None
    migration_phase: int | None
    migration_phase_since_ms: int | None
    topic_share: TopicShareField | None
    holds_s: float | None


class TopicState(TypedDict, total=False):
    topic: Required[str]
    min_insync_replicas: int | None
    unclean_leader_election: bool | None
    live_brokers: Required[list[int]]
    replica_lag_time_max_ms: int | None
    has_offsets: bool | None
    assignment: str | None
    unreachable_brokers: list[int] | None
    resolves: bool | None
    remote_storage: bool | None
    failed_log_dir_brokers: list[int] | None
    partitions: Required[list[Partition]]
    partition_count: int | None
    broker_load: list[list[int]] | None


class Gauge(TypedDict):
    name: str
    value: float


class PartitionMetric(TypedDict):
    metric: str
    topic: str
    partition: int
    value: float


class BrokerMetricsState(TypedDict, total=False):
    broker: Required[int]
    endpoint: Required[str]
    error: str | None
    scrape_ms: float | None
    gauges: Required[list[Gauge]]
    partitions: list[PartitionMetric] | None


class CanaryPartition(TypedDict, total=False):
    partition: Required[int]
    broker: Required[int]
    leader: int | None
    isr: list[int] | None
    produced: Required[bool]
    produce_ms: float | None
    writes: int | None
    waiting_ms: float | None
    consumed: bool | None
    e2e_ms: float | None
    error: str | None


class CanaryState(TypedDict, total=False):
    topic: Required[str]
    partitions: Required[list[CanaryPartition]]
    waiting: bool | None


class Envelope(TypedDict):
    """What every record carries besides its kind (OBSERVATION's required fields)."""
    v: int
    cluster: str
    source: str
    poll_id: int
    observed_at_ms: int


class ClusterObservation(Envelope):
    kind: Literal["cluster"]
    cluster_state: ClusterState


class TopicObservation(Envelope):
    kind: Literal["topic"]
    topic_state: TopicState


class BrokerMetricsObservation(Envelope):
    kind: Literal["broker_metrics"]
    broker_metrics_state: BrokerMetricsState


class CanaryObservation(Envelope):
    kind: Literal["canary"]
    canary_state: CanaryState


Observation = Union[ClusterObservation, TopicObservation, BrokerMetricsObservation, CanaryObservation]
"""One observation record, as schemas/observation.py `check` accepts it: its kind's body is required."""
