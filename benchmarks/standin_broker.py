"""A protocol-level stand-in for a Kafka cluster of any size, for the collector's poll benchmark.

A local cluster on this machine holds about ten thousand partitions; the collector must be measured
at 200k. This server speaks the Kafka wire protocol on one port per broker and answers what krm's
collector asks (ApiVersions, Metadata, ListOffsets, DescribeConfigs, ListPartitionReassignments,
DescribeQuorum, DescribeTopicPartitions) for a healthy cluster of the requested size, so the
collector's side — requests built, bytes sent and received, answers decoded, records built — is the
work it does against a real cluster of that size. The answers are encoded with the same protocol
schemas a real broker's are decoded with, at the versions a Kafka 3.9.1 KRaft broker offers
(benchmarks/data/kafka-3.9.1-kraft-broker-api-versions.json, captured from one); the layout follows
Kafka's: 100-partition topics, RF 3, replicas placed round robin from a per-topic start, the first
replica leads, every replica in the ISR, LEO = HW.

What it is not: a broker. By default offsets do not move (an idle cluster), and every answer is
cached by its request's bytes, so after the first poll the stand-in spends its time sending, not
encoding, and the measured time is the collector's. With `--written F` a share F of the topics
(chosen by a hash of the name) is written between any two polls: each full Metadata request (one a
collector poll) starts a new poll, and every replica's LEO and the HW of those topics' partitions
grow by WRITES_PER_POLL in the answers that follow (replication keeps up: a busy, healthy cluster).
Those topics' parts of the ListOffsets answers are encoded anew for each poll, the rest cached.

Run alone: .venv/bin/python benchmarks/standin_broker.py --partitions 200000 [--brokers 60] [--written F]
(prints one JSON line with bootstrap_servers once listening; serves until killed), or from Python
with `StandIn(partitions, brokers)` as a context manager (a child process).
"""

from __future__ import annotations

import argparse
import asyncio
import io
import json
import math
import signal
import struct
import subprocess
import sys
import zlib
from pathlib import Path
from typing import Any


API_VERSIONS_FILE = Path(__file__).with_name("data") / "kafka-3.9.1-kraft-broker-api-versions.json"
TOPIC_PARTITIONS = 100
WRITES_PER_POLL = 7  # messages appended to each partition of a written topic between two polls
_OFFSETS_HEAD = struct.Struct(">ii")  # throttle_time_ms, topic count
_OFFSETS_ENTRY = struct.Struct(">ihqqi")  # partition, error_code, timestamp, offset, leader_epoch (v4+)
CONTROLLER_ID = 3000
UNSUPPORTED_VERSION = 35
NOT_LEADER_OR_FOLLOWER = 6
UNKNOWN_TOPIC_OR_PARTITION = 3
UNKNOWN_OPS = {31}  # INT32_MIN on the wire: authorized operations not asked for
CLUSTER_ID = "krm-stand-in-cluster0"
TOPIC_CONFIGS = {"min.insync.replicas": "2", "unclean.leader.election.enable": "false"}
BROKER_CONFIGS = {"replica.lag.time.max.ms": "30000", "min.insync.replicas": "1",
                  "unclean.leader.election.enable": "false", "leader.imbalance.per.broker.percentage": "10"}


def default_brokers(partitions: int, rf: int = 3) -> int:
    """About 10,000 replicas per broker (a KRaft-era sizing), between 3 and 60 brokers."""
    return max(3, min(60, math.ceil(partitions * rf / 10_000)))


class Layout:
    """The cluster the stand-in pretends to be: which broker holds which replica."""

    def __init__(self, partitions: int, brokers: int, rf: int = 3, written: float = 0.0) -> None:
        self.brokers = list(range(1, brokers + 1))
        self.rf = min(rf, brokers)
        self.topics: dict[str, list[list[int]]] = {}
        n_topics = math.ceil(partitions / TOPIC_PARTITIONS)
        for t in range(n_topics):
            count = min(TOPIC_PARTITIONS, partitions - t * TOPIC_PARTITIONS)
            start = t % brokers
            self.topics[f"standin-{t:05d}"] = [
                [self.brokers[(start + p + k) % brokers] for k in range(self.rf)] for p in range(count)]
        # the topics written between polls (the same in every process)
        self.written = {t for t in self.topics if zlib.crc32(t.encode()) % 10_000 < written * 10_000}

    def offset(self, topic: str, partition: int) -> int:
        return 1_000 + (zlib.crc32(f"{topic}/{partition}".encode()) & 0xFFFF)  # the same in every process


def _classes() -> dict[int, tuple[list[Any], list[Any]]]:
    """api key -> (request classes by version, response classes by version)."""
    import kafka.protocol.admin as admin
    import kafka.protocol.api_versions as api_versions
    import kafka.protocol.list_offsets as list_offsets
    import kafka.protocol.metadata as metadata

    from collectors import kraft_protocol as kp

    return {
        18: (api_versions.ApiVersionsRequest, api_versions.ApiVersionsResponse),
        3: (metadata.MetadataRequest, metadata.MetadataResponse),
        2: (list_offsets.ListOffsetsRequest, list_offsets.ListOffsetsResponse),
        32: (admin.DescribeConfigsRequest, admin.DescribeConfigsResponse),
        46: (admin.ListPartitionReassignmentsRequest, admin.ListPartitionReassignmentsResponse),
        55: ([None, kp.DescribeQuorumRequest_v1], [None, kp.DescribeQuorumResponse_v1]),
        75: ([kp.DescribeTopicPartitionsRequest_v0], [kp.DescribeTopicPartitionsResponse_v0]),
    }


class Answers:
    """Builds each answer from the layout; pure apart from the cache."""

    def __init__(self, layout: Layout, ports: dict[int, int]) -> None:
        self.layout = layout
        self.ports = ports
        self.classes = _classes()
        real = json.loads(API_VERSIONS_FILE.read_text())["api_versions"]
        # the real broker's ranges, capped to what the stand-in can answer (a client never asks more)
        self.versions = {int(k): (lo, min(hi, len(self.classes[int(k)][1]) - 1)) for k, (lo, hi) in real.items()
                         if int(k) in self.classes}
        self.cache: dict[tuple[int, int, int, bytes], bytes] = {}
        self.polls = 0  # full Metadata requests so far: the written topics' offsets grow with it
        self.offset_plans: dict[tuple[int, int, bytes], tuple[bytes, list[Any]]] = {}

    def answer(self, broker: int, api_key: int, version: int, flexible_header: bool, body: bytes) -> bytes | None:
        if api_key == 3 and body[:4] == b"\xff\xff\xff\xff":  # Metadata for every topic (null list): a poll
            self.polls += 1
        if api_key == 2 and version >= 4 and self.layout.written:
            return self._offsets_now(broker, version, body)
        key = (broker, api_key, version, body)
        hit = self.cache.get(key)
        if hit is None:
            hit = self._build(broker, api_key, version, body)
            if hit is not None and api_key != 18:
                self.cache[key] = hit
        return hit

    def _build(self, broker: int, api_key: int, version: int, body: bytes) -> bytes | None:
        requests, responses = self.classes.get(api_key, (None, None))
        if api_key == 18:
            return self._api_versions(version)
        if requests is None or version >= len(responses) or responses[version] is None:
            return None
        message = requests[version].decode(io.BytesIO(body))
        request = _as_dict(message.SCHEMA, [getattr(message, n) for n in message.SCHEMA.names])
        return _encode(getattr(self, f"_api_{api_key}")(broker, version, request, responses[version]))

    def _api_versions(self, version: int) -> bytes:
        from kafka.protocol.api_versions import ApiVersionsResponse

        if version >= len(ApiVersionsResponse):  # Kafka answers v0 with the error; the client retries lower
            return _encode(ApiVersionsResponse[0](error_code=UNSUPPORTED_VERSION, api_versions=[]))
        real = json.loads(API_VERSIONS_FILE.read_text())["api_versions"]
        entries = [(int(k), lo, hi) for k, (lo, hi) in real.items()]
        if version >= 3:
            return _encode(ApiVersionsResponse[version](
                error_code=0, api_versions=[(k, lo, hi, {}) for k, lo, hi in entries], throttle_time_ms=0,
                _tagged_fields={}))
        if version >= 1:
            return _encode(ApiVersionsResponse[version](error_code=0, api_versions=entries, throttle_time_ms=0))
        return _encode(ApiVersionsResponse[0](error_code=0, api_versions=entries))

    def _api_3(self, broker: int, version: int, request: dict[str, Any], cls: Any) -> Any:  # Metadata
        names = request.get("topics")
        wanted = list(self.layout.topics) if names is None else [t["topic"] if isinstance(t, dict) else t
                                                                 for t in names]
        brokers = [(b, "127.0.0.1", port, None) for b, port in self.ports.items()]
        topics = []
        for name in wanted:
            parts = self.layout.topics.get(name)
            if parts is None:
                topics.append((UNKNOWN_TOPIC_OR_PARTITION, name, False, [], UNKNOWN_OPS))
                continue
            topics.append((0, name, False, [(0, p, r[0], 0, r, r, []) for p, r in enumerate(parts)], UNKNOWN_OPS))
        fields = {"throttle_time_ms": 0, "brokers": brokers, "cluster_id": CLUSTER_ID,
                  "controller_id": self.layout.brokers[0], "topics": topics}
        if version < 3:
            fields.pop("throttle_time_ms")
        if version < 2:
            fields.pop("cluster_id")
        if version < 1:
            fields.pop("controller_id")
            fields["brokers"] = [b[:3] for b in brokers]
        if version < 8:
            fields["topics"] = [t[:4] for t in topics]
        else:
            fields["authorized_operations"] = UNKNOWN_OPS
        if version < 7:
            fields["topics"] = [(e, n, i, [(pe, p, ld, r, isr, off) for pe, p, ld, _, r, isr, off in ps])
                                for e, n, i, ps in fields["topics"]]
        names_ = cls.SCHEMA.names
        return cls(**{k: v for k, v in fields.items() if k in names_})

    def _api_2(self, broker: int, version: int, request: dict[str, Any], cls: Any) -> Any:  # ListOffsets
        replica_id = request["replica_id"]
        topics = []
        for t in request["topics"]:
            parts = self.layout.topics.get(t["topic"], [])
            out = []
            for p in t["partitions"]:
                pid, ts = p["partition"], p["timestamp"]
                replicas = parts[pid] if pid < len(parts) else None
                holds = replicas is not None and (broker in replicas if replica_id == -2 else broker == replicas[0])
                offset = (0 if ts == -2 else self.layout.offset(t["topic"], pid)) if holds else -1
                error = 0 if holds else (UNKNOWN_TOPIC_OR_PARTITION if replicas is None else NOT_LEADER_OR_FOLLOWER)
                out.append((pid, error, -1, offset, 0) if version >= 4 else (pid, error, -1, offset))
            topics.append((t["topic"], out))
        return cls(throttle_time_ms=0, topics=topics) if version >= 2 else cls(topics=topics)

    def _offsets_now(self, broker: int, version: int, body: bytes) -> bytes:
        """A ListOffsets answer as of this poll: the idle topics' parts encoded once, the written
        topics' again with their offsets grown (encoded by hand, in the layout the protocol fixes)."""
        key = (broker, version, body)
        plan = self.offset_plans.get(key)
        if plan is None:
            requests = self.classes[2][0]
            message = requests[version].decode(io.BytesIO(body))
            request = _as_dict(message.SCHEMA, [getattr(message, n) for n in message.SCHEMA.names])
            blocks: list[Any] = []
            for t in request["topics"]:
                name = t["topic"]
                answered = self._api_2(broker, version, {"replica_id": request["replica_id"], "topics": [t]},
                                       _rows)[0][1]
                raw = name.encode()
                head = struct.pack(">h", len(raw)) + raw + struct.pack(">i", len(answered))
                # (a log start offset, asked with timestamp -2, does not move with writes)
                moving = name in self.layout.written and any(p["timestamp"] != -2 for p in t["partitions"])
                if moving:
                    blocks.append((head, answered))
                else:
                    blocks.append(head + b"".join(_OFFSETS_ENTRY.pack(*row) for row in answered))
            plan = self.offset_plans[key] = (_OFFSETS_HEAD.pack(0, len(request["topics"])), blocks)
        grown = self.polls * WRITES_PER_POLL
        out = [plan[0]]
        pack = _OFFSETS_ENTRY.pack
        for block in plan[1]:
            if isinstance(block, bytes):
                out.append(block)
            else:
                head, rows = block
                out.append(head + b"".join(pack(pid, error, ts, offset + grown if error == 0 else offset, epoch)
                                           for pid, error, ts, offset, epoch in rows))
        return b"".join(out)

    def _api_32(self, broker: int, version: int, request: dict[str, Any], cls: Any) -> Any:  # DescribeConfigs
        resources = []
        for r in request["resources"]:
            table = TOPIC_CONFIGS if r["resource_type"] == 2 else BROKER_CONFIGS
            names = r.get("config_names")
            chosen = [(k, v) for k, v in table.items() if names is None or k in names]
            entries = [(k, v, False, 5, False, []) if version >= 1 else (k, v, False, True, False) for k, v in chosen]
            resources.append((0, None, r["resource_type"], r["resource_name"], entries))
        return cls(throttle_time_ms=0, resources=resources)

    def _api_46(self, broker: int, version: int, request: dict[str, Any], cls: Any) -> Any:
        return cls(throttle_time_ms=0, error_code=0, error_message=None, topics=[], tags={})

    def _api_55(self, broker: int, version: int, request: dict[str, Any], cls: Any) -> Any:  # DescribeQuorum
        voter = (CONTROLLER_ID, 5_000, -1, -1, {})
        return cls(error_code=0, topics=[("__cluster_metadata", [(0, 0, CONTROLLER_ID, 1, 5_000, [voter], [], {})],
                                          {})], tags={})

    def _api_75(self, broker: int, version: int, request: dict[str, Any], cls: Any) -> Any:
        topics = []
        for t in request["topics"]:
            parts = self.layout.topics.get(t["name"], [])
            topics.append((0, t["name"], bytes(16), False,
                           [(0, p, r[0], 0, r, r, [], [], [], {}) for p, r in enumerate(parts)], -2147483648, {}))
        return cls(throttle_time_ms=0, topics=topics, next_cursor=None, tags={})


def _as_dict(schema: Any, values: Any) -> dict[str, Any]:
    """A decoded message as nested dicts (kafka-python's to_object fails on a null array)."""
    from kafka.protocol.types import Schema

    out = {}
    for name, field, value in zip(schema.names, schema.fields, values):
        inner = getattr(field, "array_of", None)
        if isinstance(inner, Schema) and value is not None:
            value = [_as_dict(inner, v) for v in value]
        out[name] = value
    return out


def _rows(**fields: Any) -> Any:
    """In place of a response class: the answer's topics as built, not encoded."""
    return fields["topics"]


def _encode(message: Any) -> bytes:
    """kafka-python binds `encode` to its instance through a weak reference: keep the instance alive."""
    return bytes(message.encode())


def _read_header(data: bytes, flexible: bool) -> tuple[int, int, int, int]:
    """(api_key, version, correlation_id, body offset) of a request frame."""
    api_key, version, correlation = struct.unpack_from(">hhi", data, 0)
    (n,) = struct.unpack_from(">h", data, 8)
    at = 10 + max(n, 0)
    if flexible:
        count, at = _uvarint(data, at)
        for _ in range(count):
            _, at = _uvarint(data, at)
            size, at = _uvarint(data, at)
            at += size
    return api_key, version, correlation, at


def _uvarint(data: bytes, at: int) -> tuple[int, int]:
    value = shift = 0
    while True:
        b = data[at]
        at += 1
        value |= (b & 0x7F) << shift
        if not b & 0x80:
            return value, at
        shift += 7


async def _serve(answers: Answers, broker: int, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
    classes = answers.classes
    try:
        while True:
            size = struct.unpack(">i", await reader.readexactly(4))[0]
            frame = await reader.readexactly(size)
            api_key, version = struct.unpack_from(">hh", frame, 0)
            requests = classes.get(api_key, (None, None))[0]
            known = requests is not None and version < len(requests) and requests[version] is not None
            flexible = bool(known and requests[version].FLEXIBLE_VERSION)
            _, _, correlation, at = _read_header(frame, flexible)
            body = answers.answer(broker, api_key, version, flexible, frame[at:])
            if body is None:
                print(f"stand-in: broker {broker} cannot answer api {api_key} v{version}; closing", file=sys.stderr)
                break
            response_flexible = api_key != 18 and bool(classes[api_key][1][version].FLEXIBLE_VERSION)
            header = struct.pack(">i", correlation) + (b"\x00" if response_flexible else b"")
            writer.write(struct.pack(">i", len(header) + len(body)) + header + body)
            await writer.drain()
    except (asyncio.IncompleteReadError, ConnectionError):
        pass
    finally:
        writer.close()


async def _main(partitions: int, brokers: int, written: float = 0.0) -> None:
    layout = Layout(partitions, brokers, written=written)
    servers, ports = [], {}
    answers = Answers(layout, ports)
    for b in layout.brokers:
        server = await asyncio.start_server(lambda r, w, b=b: _serve(answers, b, r, w), "127.0.0.1", 0)
        ports[b] = server.sockets[0].getsockname()[1]
        servers.append(server)
    print(json.dumps({"bootstrap_servers": ",".join(f"127.0.0.1:{p}" for p in ports.values()),
                      "brokers": len(ports), "partitions": sum(len(p) for p in layout.topics.values()),
                      "topics": len(layout.topics), "written_topics": len(layout.written)}), flush=True)
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)
    await stop.wait()


class StandIn:
    """The stand-in in a child process (its CPU is not the collector's), as a context manager."""

    def __init__(self, partitions: int, brokers: int | None = None, written: float = 0.0) -> None:
        self.partitions = partitions
        self.brokers = brokers or default_brokers(partitions)
        self.written = written
        self.proc: subprocess.Popen[str] | None = None
        self.bootstrap_servers = ""

    def __enter__(self) -> StandIn:
        self.proc = subprocess.Popen([sys.executable, __file__, "--partitions", str(self.partitions),
                                      "--brokers", str(self.brokers), "--written", str(self.written)],
                                     stdout=subprocess.PIPE, text=True)
        assert self.proc.stdout is not None
        first = self.proc.stdout.readline()
        if not first:
            raise RuntimeError(f"the stand-in broker exited with {self.proc.wait()}")
        self.bootstrap_servers = json.loads(first)["bootstrap_servers"]
        return self

    def __exit__(self, *exc: Any) -> None:
        if self.proc is not None:
            self.proc.terminate()
            try:
                self.proc.wait(10)
            except subprocess.TimeoutExpired:
                self.proc.kill()


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--partitions", type=int, required=True)
    ap.add_argument("--brokers", type=int, default=0, help="default: about 10,000 replicas per broker (3 to 60)")
    ap.add_argument("--written", type=float, default=0.0,
                    help="the share of topics written between any two polls (0: an idle cluster, 1: every topic)")
    args = ap.parse_args()
    if not 0.0 <= args.written <= 1.0:
        ap.error(f"--written must be between 0 and 1, not {args.written}")
    asyncio.run(_main(args.partitions, args.brokers or default_brokers(args.partitions), args.written))
    return 0


if __name__ == "__main__":
    sys.exit(main())
