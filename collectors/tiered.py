"""Tiered storage offsets (KIP-405): where a leader's local log starts and how far its remote copy got.

For a topic with remote.storage.enable=true, each poll asks the partition's leader two more
ListOffsets questions, both with the consumer's replica id:
- EARLIEST_LOCAL_TIMESTAMP (-4): the local log start offset, `UnifiedLog.localLogStartOffset()`: the
  first offset still on the leader's disk; below it, reads are served from the remote tier;
- LATEST_TIERED_TIMESTAMP (-5, KIP-1005): the highest offset copied to remote storage,
  `UnifiedLog.highestOffsetInRemoteStorage()`, -1 while none is
  (storage/src/main/java/org/apache/kafka/storage/internals/log/UnifiedLog.java, fetchOffsetByTimestamp).
A broker refuses both sentinels below the versions that introduced them (UNSUPPORTED_VERSION at
v5: -4 needs v8, -5 needs v9; clients/.../requests/ListOffsetsRequest.java), so they go at v9, the
first version that has both, a "flexible" message kafka-python 2.3 does not define: declared here
with its own protocol types (clients/src/main/resources/common/message/ListOffsets{Request,Response}.json).
Brokers before Kafka 3.9 do not answer v9: the capability `tiered_offsets` is then unsupported.
"""

from __future__ import annotations

from typing import Any, Iterable

from kafka.protocol.api import Request, Response
from kafka.protocol.types import CompactArray, CompactString, Int8, Int16, Int32, Int64, Schema, TaggedFields

from collectors.wire import OffsetsAnswer

LIST_OFFSETS_KEY = 2
VERSION = 9
EARLIEST_LOCAL_TIMESTAMP = -4
LATEST_TIERED_TIMESTAMP = -5
KINDS = {"local_start": EARLIEST_LOCAL_TIMESTAMP, "remote": LATEST_TIERED_TIMESTAMP}


class ListOffsetsResponseV9(Response):
    API_KEY = LIST_OFFSETS_KEY
    API_VERSION = VERSION
    FLEXIBLE_VERSION = True
    SCHEMA = Schema(
        ("throttle_time_ms", Int32),
        ("topics", CompactArray(
            ("name", CompactString("utf-8")),
            ("partitions", CompactArray(
                ("partition_index", Int32),
                ("error_code", Int16),
                ("timestamp", Int64),
                ("offset", Int64),
                ("leader_epoch", Int32),
                ("tags", TaggedFields))),
            ("tags", TaggedFields))),
        ("tags", TaggedFields),
    )

    @classmethod
    def decode(cls, data: Any) -> Any:
        """As the v4/v5 answers read (collectors/wire.py OffsetsAnswer): topics as (name, [(partition,
        error_code, timestamp, offset, leader_epoch)]), tagged fields dropped."""
        decoded = super().decode(data)
        return OffsetsAnswer([(name, [p[:5] for p in parts]) for name, parts, _ in decoded.topics])


class ListOffsetsRequestV9(Request):
    API_KEY = LIST_OFFSETS_KEY
    API_VERSION = VERSION
    FLEXIBLE_VERSION = True
    RESPONSE_TYPE = ListOffsetsResponseV9
    SCHEMA = Schema(
        ("replica_id", Int32),
        ("isolation_level", Int8),
        ("topics", CompactArray(
            ("name", CompactString("utf-8")),
            ("partitions", CompactArray(
                ("partition_index", Int32),
                ("current_leader_epoch", Int32),
                ("timestamp", Int64),
                ("tags", TaggedFields))),
            ("tags", TaggedFields))),
        ("tags", TaggedFields),  # (timeout_ms comes in v10)
    )


def request(kind: str, tps: Iterable[tuple[str, int]]) -> ListOffsetsRequestV9:
    """The question `kind` ("local_start" or "remote") for these partitions of one leader."""
    by_topic: dict[str, list[int]] = {}
    for t, p in tps:
        by_topic.setdefault(t, []).append(p)
    timestamp = KINDS[kind]
    return ListOffsetsRequestV9(
        replica_id=-1, isolation_level=0,
        topics=[(t, [(p, -1, timestamp, {}) for p in ps], {}) for t, ps in by_topic.items()], tags={})


def supported(api_versions: dict[int, tuple[int, int]] | None) -> bool:
    """Whether the broker announces ListOffsets v9 (Kafka 3.9+)."""
    if not api_versions or LIST_OFFSETS_KEY not in api_versions:
        return False
    return int(api_versions[LIST_OFFSETS_KEY][1]) >= VERSION
