"""The two big answers of a poll, encoded and decoded by hand: Metadata (v8) and ListOffsets (v4/v5).

At a few hundred thousand partitions these two messages are most of a poll's bytes, and kafka-python's
generic schema walk spends tens of microseconds per partition on them (a type dispatch per field,
then a conversion to dicts). Their layouts are fixed (clients/src/main/resources/common/message/
MetadataResponse.json and ListOffsets{Request,Response}.json in Apache Kafka), so here they are read
with precompiled `struct` formats and written in one pass: the same values, in the shapes the
collector already used (`to_object()` dicts for Metadata, tuples for ListOffsets). Other versions go
through kafka-python as before.

The classes plug into kafka-python's client unchanged: a request names its RESPONSE_TYPE, and the
client's parser hands the frame to that type's `decode`.

Most of a steady cluster's answers are the last poll's, byte for byte (idle partitions, a healthy
assignment). So a request can carry a memory of its last answer: ListOffsets requests, reused poll
after poll while they ask the same partitions (collectors/offsets.py `Requests`), hand back the same
decoded object when the bytes are the same (`SameAnswer`); Metadata hands back each healthy topic's
partitions from the last answer when that topic's block of bytes is the same (`TopicBlocks`). The
same object back is what tells the collector that nothing moved (collectors/admin.py): an unchanged
topic costs a comparison of bytes, not a decode and a walk over its partitions.
"""

from __future__ import annotations

import struct
import weakref
from typing import Any, Callable, Iterable, NotRequired, TypedDict

from kafka.protocol.list_offsets import ListOffsetsRequest, ListOffsetsResponse
from kafka.protocol.metadata import MetadataRequest, MetadataResponse

_I = struct.Struct(">i")
_H = struct.Struct(">h")
_PARTITION_HEAD = struct.Struct(">hiiii")  # error_code, partition, leader, leader_epoch, replica count
_TOPIC_HEAD_AFTER_NAME = struct.Struct(">bi")  # is_internal, partition count
_OFFSETS_PARTITION = struct.Struct(">ihqqi")  # partition, error_code, timestamp, offset, leader_epoch
_INTS: dict[int, struct.Struct] = {}

# Off: every answer decoded in full and nothing remembered (the decode floor's measurement in
# benchmarks/collector_poll.py, and tests holding both ways equal).
reuse_unchanged = True


def _ints(n: int) -> struct.Struct:
    s = _INTS.get(n)
    if s is None:
        s = _INTS[n] = struct.Struct(f">{n}i")
    return s


def _string(data: bytes, at: int) -> tuple[str | None, int]:
    (n,) = _H.unpack_from(data, at)
    at += 2
    if n < 0:
        return None, at
    return data[at:at + n].decode(), at + n


def _int_array(data: bytes, at: int) -> tuple[list[int], int]:
    (n,) = _I.unpack_from(data, at)
    at += 4
    if n <= 0:
        return [], at
    return list(_ints(n).unpack_from(data, at)), at + 4 * n


class MdBroker(TypedDict):
    """A Metadata answer's broker."""
    node_id: int
    host: str
    port: int
    rack: str | None


class MdPartition(TypedDict):
    """A Metadata answer's partition, as decoded (ELR added by collectors/kraft.py where asked)."""
    error_code: int
    partition: int
    leader: int
    leader_epoch: NotRequired[int]  # (Metadata v7+)
    replicas: list[int]
    isr: list[int]
    offline_replicas: NotRequired[list[int]]  # (Metadata v5+)
    elr: NotRequired[list[int] | None]
    last_known_elr: NotRequired[list[int] | None]


class MdTopic(TypedDict):
    """A Metadata answer's topic."""
    error_code: int
    topic: str
    is_internal: bool
    partitions: list[MdPartition]


class MdAnswer(TypedDict):
    """A Metadata answer, decoded here (v8) or by kafka-python (to_object(), older versions)."""
    brokers: list[MdBroker]
    cluster_id: str | None
    controller_id: int
    topics: list[MdTopic]


class MetadataAnswer:
    """A decoded Metadata v8 answer: what kafka-python's response offers, read by hand."""

    API_KEY = 3
    API_VERSION = 8

    def __init__(self, brokers: list[tuple[int, str, int, str | None]], cluster_id: str | None, controller_id: int,
                 topics: list[MdTopic]) -> None:
        self.brokers = brokers
        self.cluster_id = cluster_id
        self.controller_id = controller_id
        self._topics = topics
        # kafka-python's ClusterMetadata.update_metadata reads `topics` as tuples to index partitions
        # for producers and consumers; the collector's client needs the brokers only
        self.topics: list[Any] = []

    def to_object(self) -> MdAnswer:
        return {"brokers": [{"node_id": n, "host": h, "port": p, "rack": r} for n, h, p, r in self.brokers],
                "cluster_id": self.cluster_id, "controller_id": self.controller_id, "topics": self._topics}


class TopicBlocks:
    """The last Metadata answer's healthy topics (every partition led, its whole replica set in the
    ISR, nothing offline, no error): each topic's bytes and decoded partitions. Only those, because
    only those are never written to afterwards (collectors/kraft.py overlays ELR on the others, in
    place). One per cluster, kept by its collector."""

    def __init__(self) -> None:
        self.blocks: dict[str, tuple[bytes, list[MdPartition]]] = {}

    def healthy(self, topic: str, parts: list[MdPartition]) -> bool:
        """`parts` are the last answer's for `topic`, remembered: every partition led, full ISR."""
        known = self.blocks.get(topic)
        return known is not None and known[1] is parts


def decode_metadata_v8(data: bytes, memory: TopicBlocks | None = None) -> MetadataAnswer:
    """`memory`: a topic whose bytes are the last answer's gets the same partitions list back (the
    same object, which the caller may test with `is`), undecoded; the memory then holds this answer's."""
    at = 4  # throttle_time_ms
    (n,) = _I.unpack_from(data, at)
    at += 4
    brokers = []
    for _ in range(n):
        (node,) = _I.unpack_from(data, at)
        host, at = _string(data, at + 4)
        (port,) = _I.unpack_from(data, at)
        rack, at = _string(data, at + 4)
        brokers.append((node, host or "", port, rack))
    cluster_id, at = _string(data, at)
    (controller,) = _I.unpack_from(data, at)
    at += 4
    (n_topics,) = _I.unpack_from(data, at)
    at += 4
    topics: list[MdTopic] = []
    head, ints, int_array = _PARTITION_HEAD.unpack_from, _ints, _int_array
    known = memory.blocks if memory is not None else None
    kept: dict[str, tuple[bytes, list[MdPartition]]] = {}
    for _ in range(max(n_topics, 0)):
        start = at
        (error,) = _H.unpack_from(data, at)
        name, at = _string(data, at + 2)
        internal, n_parts = _TOPIC_HEAD_AFTER_NAME.unpack_from(data, at)
        if (known is not None and name is not None and (last := known.get(name)) is not None
                and data.startswith(last[0], start)):
            # the same bytes decode to the same values and end where they ended then
            at = start + len(last[0])
            kept[name] = last
            topics.append({"error_code": error, "topic": name, "is_internal": bool(internal), "partitions": last[1]})
            continue
        at += 5
        parts: list[MdPartition] = []
        healthy = error == 0
        for _ in range(n_parts if n_parts > 0 else 0):
            p_error, pid, leader, epoch, nr = head(data, at)
            at += 18
            if nr > 0:
                replicas = list(ints(nr).unpack_from(data, at))
                at += 4 * nr
            else:
                replicas = []
            isr, at = int_array(data, at)
            offline, at = int_array(data, at)
            if healthy and (p_error or leader < 0 or offline or len(isr) != nr):
                healthy = False
            parts.append({"error_code": p_error, "partition": pid, "leader": leader, "leader_epoch": epoch,
                          "replicas": replicas, "isr": isr, "offline_replicas": offline})
        at += 4  # topic_authorized_operations
        if known is not None and healthy and name is not None:
            kept[name] = (data[start:at], parts)
        topics.append({"error_code": error, "topic": name or "", "is_internal": bool(internal), "partitions": parts})
    if memory is not None:
        memory.blocks = kept
    return MetadataAnswer(brokers, cluster_id, controller, topics)


class _MetadataResponseV8(MetadataResponse[8]):
    @classmethod
    def decode(cls, data: Any) -> MetadataAnswer:
        return decode_metadata_v8(data.read())


class MetadataRequestV8(MetadataRequest[8]):
    """Metadata v8 for every topic (or none), its answer decoded by decode_metadata_v8 (with
    `remembering(memory)`, against the last answer's healthy topics)."""

    RESPONSE_TYPE = _MetadataResponseV8

    def remembering(self, memory: TopicBlocks) -> MetadataRequestV8:
        self.RESPONSE_TYPE = _Decoding(_MetadataResponseV8, lambda raw: decode_metadata_v8(  # type: ignore[assignment]
            raw, memory if reuse_unchanged else None))
        return self


class _Decoding:
    """A RESPONSE_TYPE of one request object: kafka-python's parser reads the header with the
    protocol class, logs its name, and hands the body to `decode`."""

    def __init__(self, base: Any, decode: Callable[[bytes], Any]) -> None:
        self._base = base
        self.__name__ = base.__name__
        self._decode = decode

    def parse_header(self, read_buffer: Any) -> Any:
        return self._base.parse_header(read_buffer)

    def decode(self, data: Any) -> Any:
        return self._decode(data.read())


class SameAnswer:
    """One request's last answer: the same bytes again give the same decoded object back (the
    caller tells "nothing moved" by identity); other bytes in the same layout are read against it
    (decode_like: only the topics whose bytes differ are unpacked, and the answer says which), any
    other answer is decoded afresh."""

    def __init__(self) -> None:
        self._last: OffsetsAnswer | None = None  # (its bytes in `raw`)

    def decode(self, raw: bytes) -> OffsetsAnswer:
        if not reuse_unchanged:
            self._last = None
            return decode_list_offsets_v4(raw)
        last = self._last
        if last is not None:
            if last.raw == raw:
                return last
            answer = decode_like(raw, last)  # most topics as then: only the others unpacked
            if answer is not None:
                self._last = answer
                return answer
        self._last = answer = decode_list_offsets_v4(raw, [])
        return answer


class OffsetsAnswer:
    """A decoded ListOffsets v4/v5 answer: `topics` as [(topic, [(partition, error_code, timestamp,
    offset, leader_epoch), ...]), ...], as kafka-python's response carries them. Decoded here, each
    topic's partitions are one flat tuple of those five fields after another (`flat`): `columns()` cuts
    it into partitions, errors and offsets without a tuple per partition (collectors/offsets.py)."""

    def __init__(self, topics: list[tuple[str, list[tuple[int, int, int, int, int]]]] | None = None,
                 flat: list[tuple[str, tuple[int, ...]]] | None = None) -> None:
        self._topics = topics
        self.flat = flat
        # its bytes, and where each topic sits in them (SameAnswer): (header position, entries position,
        # end), in the order of `flat`
        self.raw: bytes | None = None
        self.layout: list[tuple[int, int, int]] | None = None
        # read against an earlier answer of the same layout (SameAnswer): that answer, and the indexes
        # in `flat` of the topics whose entries differ from its; every other topic's flat tuple is its
        self.base: weakref.ref[OffsetsAnswer] | None = None
        self.changed: list[int] = []

    @property
    def topics(self) -> list[tuple[str, list[tuple[int, int, int, int, int]]]]:
        if self._topics is None:
            self._topics = [(name, list(zip(f[0::5], f[1::5], f[2::5], f[3::5], f[4::5])))
                            for name, f in self.flat or ()]
        return self._topics

    def columns(self) -> list[tuple[str, tuple[int, ...], tuple[int, ...], tuple[int, ...]]]:
        """[(topic, partitions, error codes, offsets)], in the answer's order."""
        if self.flat is None:
            return [(name, tuple(p[0] for p in ps), tuple(p[1] for p in ps), tuple(p[3] for p in ps))
                    for name, ps in self.topics]
        return [(name, f[0::5], f[1::5], f[3::5]) for name, f in self.flat]


_ENTRIES: dict[int, struct.Struct] = {}


def _entries(n: int) -> struct.Struct:
    """n ListOffsets partitions in one format: one unpack, one flat tuple (no tuple per partition)."""
    s = _ENTRIES.get(n)
    if s is None:
        s = struct.Struct(">" + "ihqqi" * n)
        if len(_ENTRIES) < 4096:  # a broker's share of a topic: a few hundred sizes in practice
            _ENTRIES[n] = s
    return s


def decode_list_offsets_v4(data: bytes, layout: list[tuple[int, int, int]] | None = None) -> OffsetsAnswer:
    """`layout` (filled in when given): where each topic sits (OffsetsAnswer.layout)."""
    at = 4  # throttle_time_ms
    (n,) = _I.unpack_from(data, at)
    at += 4
    flat = []
    size = _OFFSETS_PARTITION.size
    for _ in range(max(n, 0)):
        head = at
        name, at = _string(data, at)
        (n_parts,) = _I.unpack_from(data, at)
        at += 4
        n_parts = max(n_parts, 0)
        if at + size * n_parts > len(data):  # a count the frame cannot hold: never build a format that large
            raise ValueError(f"ListOffsets answer truncated: topic {name!r} says {n_parts} partitions, "
                             f"{len(data) - at} bytes left")
        flat.append((name or "", _entries(n_parts).unpack_from(data, at)))
        if layout is not None:
            layout.append((head, at, at + size * n_parts))
        at += size * n_parts
    answer = OffsetsAnswer(flat=flat)
    if layout is not None:
        answer.raw, answer.layout = data, layout
    return answer


def decode_like(data: bytes, base: OffsetsAnswer) -> OffsetsAnswer | None:
    """`data` read against `base`, an answer to the same request: when every topic's header (name,
    partition count) sits where it sat then, the layout is the same (the entries have a fixed size),
    and only the topics whose entries' bytes differ are unpacked; the others keep `base`'s flat tuple
    (the same object). None when the layout differs (decode it in full)."""
    old, layout, before = base.flat, base.layout, base.raw
    if old is None or layout is None or before is None or len(data) != len(before) or data[4:8] != before[4:8]:
        return None
    flat, changed = list(old), []
    size = _OFFSETS_PARTITION.size
    for i, (head, at, end) in enumerate(layout):
        if data.startswith(before[head:end], head):  # the topic as then, header and entries
            continue
        if not data.startswith(before[head:at], head):  # another topic or partition count: another layout
            return None
        flat[i] = (flat[i][0], _entries((end - at) // size).unpack_from(data, at))
        changed.append(i)
    answer = OffsetsAnswer(flat=flat)
    answer.raw, answer.layout, answer.base, answer.changed = data, layout, weakref.ref(base), changed
    return answer


def _offsets_response(version: int) -> Any:
    class _Response(ListOffsetsResponse[version]):
        @classmethod
        def decode(cls, data: Any) -> OffsetsAnswer:
            return decode_list_offsets_v4(data.read())

    return _Response


_OFFSETS_RESPONSES = {4: _offsets_response(4), 5: _offsets_response(5)}


class ListOffsetsRequestV4(ListOffsetsRequest[4]):
    """ListOffsets v4/v5 encoded in one pass: partition, current_leader_epoch -1 (no epoch check),
    timestamp, for every partition asked. Built with `offsets_request`."""

    def __init__(self, version: int, body: bytes) -> None:  # noqa: D107 - no Struct fields: the body is ready
        self.API_VERSION = version
        self.RESPONSE_TYPE = _Decoding(_OFFSETS_RESPONSES[version], SameAnswer().decode)  # this request's last answer
        self._body = body

    def encode(self) -> bytes:
        return self._body

    def __repr__(self) -> str:
        return f"ListOffsetsRequest_v{self.API_VERSION}({len(self._body)} bytes)"


_OFFSETS_ENTRY = struct.Struct(">iiq")


def offsets_request(version: int, replica_id: int, isolation_level: int,
                    by_topic: Iterable[tuple[str, list[int]]], timestamp: int) -> ListOffsetsRequestV4:
    """The request for `by_topic` ((topic, partitions), ...) at `version` 4 or 5."""
    out = [struct.pack(">ib", replica_id, isolation_level)]
    topics = list(by_topic)
    out.append(_I.pack(len(topics)))
    pack = _OFFSETS_ENTRY.pack
    for topic, partitions in topics:
        name = topic.encode()
        out.append(_H.pack(len(name)) + name + _I.pack(len(partitions)))
        out.append(b"".join([pack(p, -1, timestamp) for p in partitions]))
    return ListOffsetsRequestV4(version, b"".join(out))
