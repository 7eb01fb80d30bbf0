"""Two KRaft-era requests kafka-python 2.3 does not define, declared with its own protocol types.

- DescribeTopicPartitions (API 75, brokers 3.7+, KIP-966): per partition the leader, epoch, replicas,
  ISR and also the Eligible Leader Replicas (ELR) and last known ELR, which the Metadata response
  lacks. Paged: at most `ResponsePartitionLimit` partitions per answer, then a cursor.
- DescribeQuorum (API 55, KRaft, KIP-595 / KIP-836): the metadata quorum's leader, epoch, high
  watermark and every voter's log end offset, last fetch and last caught-up time. A broker forwards
  it to the active controller.

Field layouts follow Kafka's message definitions (clients/src/main/resources/common/message/
DescribeTopicPartitions{Request,Response}.json, DescribeQuorum{Request,Response}.json); both are
"flexible" messages: compact strings and arrays, tagged fields, request header v2.
"""

from __future__ import annotations

from typing import Any

from kafka.protocol.api import Request, Response
from kafka.protocol.types import (
    AbstractType,
    Boolean,
    CompactArray,
    CompactString,
    Int8,
    Int16,
    Int32,
    Int64,
    Schema,
    TaggedFields,
)

DESCRIBE_TOPIC_PARTITIONS_KEY = 75
DESCRIBE_QUORUM_KEY = 55
METADATA_TOPIC = "__cluster_metadata"  # the KRaft quorum's log (partition 0)


class _Uuid(AbstractType):
    """A 16-byte UUID, kept as bytes (the topic id; krm names topics)."""

    @classmethod
    def encode(cls, value: bytes) -> bytes:
        return value

    @classmethod
    def decode(cls, data: Any) -> bytes:
        return bytes(data.read(16))


class _NullableStruct(AbstractType):
    """A nullable struct field of a flexible message: int8 -1 for null, else 1 and the struct."""

    def __init__(self, schema: Schema) -> None:
        self.schema = schema

    def encode(self, value: Any) -> bytes:
        if value is None:
            return bytes(Int8.encode(-1))
        return bytes(Int8.encode(1) + self.schema.encode(value))

    def decode(self, data: Any) -> Any:
        return None if Int8.decode(data) < 0 else self.schema.decode(data)

    def repr(self, value: Any) -> str:
        return repr(value)


_CURSOR = Schema(("topic_name", CompactString("utf-8")), ("partition_index", Int32), ("tags", TaggedFields))


class DescribeTopicPartitionsResponse_v0(Response):
    API_KEY = DESCRIBE_TOPIC_PARTITIONS_KEY
    API_VERSION = 0
    FLEXIBLE_VERSION = True
    SCHEMA = Schema(
        ("throttle_time_ms", Int32),
        ("topics", CompactArray(Schema(
            ("error_code", Int16),
            ("name", CompactString("utf-8")),
            ("topic_id", _Uuid),
            ("is_internal", Boolean),
            ("partitions", CompactArray(Schema(
                ("error_code", Int16),
                ("partition_index", Int32),
                ("leader_id", Int32),
                ("leader_epoch", Int32),
                ("replica_nodes", CompactArray(Int32)),
                ("isr_nodes", CompactArray(Int32)),
                ("eligible_leader_replicas", CompactArray(Int32)),  # null: ELR not in use
                ("last_known_elr", CompactArray(Int32)),
                ("offline_replicas", CompactArray(Int32)),
                ("tags", TaggedFields)))),
            ("topic_authorized_operations", Int32),
            ("tags", TaggedFields)))),
        ("next_cursor", _NullableStruct(_CURSOR)),
        ("tags", TaggedFields),
    )


class DescribeTopicPartitionsRequest_v0(Request):
    API_KEY = DESCRIBE_TOPIC_PARTITIONS_KEY
    API_VERSION = 0
    FLEXIBLE_VERSION = True
    RESPONSE_TYPE = DescribeTopicPartitionsResponse_v0
    SCHEMA = Schema(
        ("topics", CompactArray(Schema(("name", CompactString("utf-8")), ("tags", TaggedFields)))),
        ("response_partition_limit", Int32),
        ("cursor", _NullableStruct(_CURSOR)),
        ("tags", TaggedFields),
    )


def describe_topic_partitions_request(topics: list[str], limit: int, cursor: tuple[str, int] | None) -> Request:
    """`topics` empty: every topic the caller may describe (DescribeTopicPartitionsRequestHandler)."""
    return DescribeTopicPartitionsRequest_v0(
        topics=[(t, {}) for t in topics], response_partition_limit=limit,
        cursor=None if cursor is None else (cursor[0], cursor[1], {}), tags={})


_REPLICA_STATE_V1 = Schema(
    ("replica_id", Int32),
    ("log_end_offset", Int64),
    ("last_fetch_timestamp", Int64),  # -1 for the leader itself and for voters it has not heard from
    ("last_caught_up_timestamp", Int64),
    ("tags", TaggedFields),
)


class DescribeQuorumResponse_v1(Response):
    API_KEY = DESCRIBE_QUORUM_KEY
    API_VERSION = 1
    FLEXIBLE_VERSION = True
    SCHEMA = Schema(
        ("error_code", Int16),
        ("topics", CompactArray(Schema(
            ("topic_name", CompactString("utf-8")),
            ("partitions", CompactArray(Schema(
                ("partition_index", Int32),
                ("error_code", Int16),
                ("leader_id", Int32),
                ("leader_epoch", Int32),
                ("high_watermark", Int64),
                ("current_voters", CompactArray(_REPLICA_STATE_V1)),
                ("observers", CompactArray(_REPLICA_STATE_V1)),
                ("tags", TaggedFields)))),
            ("tags", TaggedFields)))),
        ("tags", TaggedFields),
    )


class DescribeQuorumRequest_v1(Request):
    API_KEY = DESCRIBE_QUORUM_KEY
    API_VERSION = 1
    FLEXIBLE_VERSION = True
    RESPONSE_TYPE = DescribeQuorumResponse_v1
    SCHEMA = Schema(
        ("topics", CompactArray(Schema(
            ("topic_name", CompactString("utf-8")),
            ("partitions", CompactArray(Schema(("partition_index", Int32), ("tags", TaggedFields)))),
            ("tags", TaggedFields)))),
        ("tags", TaggedFields),
    )


def describe_quorum_request() -> Request:
    return DescribeQuorumRequest_v1(topics=[(METADATA_TOPIC, [(0, {})], {})], tags={})
