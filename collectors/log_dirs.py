"""What the brokers say of their log directories, from DescribeLogDirs (API key 35).

- Partition sizes (all topics asked), for `krm plan rebalance` to say how much data a plan copies. A
  partition's size is the largest of its replicas' (a lagging follower holds less than the leader; the
  copy is of the leader's log). A broker that does not answer leaves its partitions out; the caller
  reports sizes as partial.
- Each directory's state (no topic asked: a small answer at any cluster size): failed or not, and from v4
  (Kafka 3.3+, KIP-827) the filesystem's total and usable bytes. The broker answers an offline directory
  with KAFKA_STORAGE_ERROR and an online one with Files.getFileStore's total and usable space
  (`ReplicaManager.describeLogDirs`, core/src/main/scala/kafka/server/ReplicaManager.scala): its own word
  that a directory failed, which Metadata's `offline_replicas` is not (a restarting broker's replicas are
  listed offline for a moment after it registers).

v4 is declared here with kafka-python's protocol types (2.3 defines v0 only), after Kafka's message
definitions (clients/src/main/resources/common/message/DescribeLogDirs{Request,Response}.json): flexible.
"""

from __future__ import annotations

import logging
import time
from dataclasses import dataclass
from typing import Any, Iterable, Sequence

from kafka.protocol.api import Request, Response
from kafka.protocol.types import Boolean, CompactArray, CompactString, Int16, Int32, Int64, Schema, TaggedFields

from collectors.kafka_client import Client, Future
from collectors.metadata import ask
from schemas.typed import Observation

log = logging.getLogger(__name__)

DESCRIBE_LOG_DIRS_KEY = 35
KAFKA_STORAGE_ERROR = 56  # Errors.KAFKA_STORAGE_ERROR: the directory is offline


class DescribeLogDirsResponse_v4(Response):
    API_KEY = DESCRIBE_LOG_DIRS_KEY
    API_VERSION = 4
    FLEXIBLE_VERSION = True
    SCHEMA = Schema(
        ("throttle_time_ms", Int32),
        ("error_code", Int16),
        ("results", CompactArray(Schema(
            ("error_code", Int16),
            ("log_dir", CompactString("utf-8")),
            ("topics", CompactArray(Schema(
                ("name", CompactString("utf-8")),
                ("partitions", CompactArray(Schema(
                    ("partition_index", Int32),
                    ("partition_size", Int64),
                    ("offset_lag", Int64),
                    ("is_future_key", Boolean),
                    ("tags", TaggedFields)))),
                ("tags", TaggedFields)))),
            ("total_bytes", Int64),  # -1: not known
            ("usable_bytes", Int64),
            ("tags", TaggedFields)))),
        ("tags", TaggedFields),
    )


class DescribeLogDirsRequest_v4(Request):
    API_KEY = DESCRIBE_LOG_DIRS_KEY
    API_VERSION = 4
    FLEXIBLE_VERSION = True
    RESPONSE_TYPE = DescribeLogDirsResponse_v4
    SCHEMA = Schema(
        ("topics", CompactArray(Schema(
            ("topic", CompactString("utf-8")),
            ("partitions", CompactArray(Int32)),
            ("tags", TaggedFields)))),
        ("tags", TaggedFields),
    )


@dataclass(frozen=True)
class LogDir:
    """One log directory as its broker reports it."""

    path: str
    error_code: int  # 0; KAFKA_STORAGE_ERROR: the broker took it offline
    total_bytes: int | None = None  # the filesystem's; None: not reported (a broker before 3.3)
    usable_bytes: int | None = None

    @property
    def failed(self) -> bool:
        return self.error_code != 0


def dirs_request(v4: bool) -> object:
    """DescribeLogDirs asking for no topic: the directories alone."""
    if v4:
        return DescribeLogDirsRequest_v4(topics=[], tags={})
    from kafka.protocol.admin import DescribeLogDirsRequest

    return DescribeLogDirsRequest[0](topics=[])


class Refused(Exception):
    """The broker answered DescribeLogDirs with an error of its own (v3+: CLUSTER_AUTHORIZATION_FAILED
    where krm lacks DESCRIBE on the cluster)."""


def read_dirs(answer: Any) -> list[LogDir]:
    """The directories of a v0 or v4 answer (v0 has no sizes)."""
    if isinstance(answer, DescribeLogDirsResponse_v4):
        if answer.error_code:
            raise Refused(f"error code {answer.error_code}")
        return [LogDir(path, code, total if total >= 0 else None, usable if usable >= 0 else None)
                for code, path, _topics, total, usable, _tags in answer.results]
    return [LogDir(path, code) for code, path, _topics in answer.log_dirs]


def announced(api_versions: dict[int, tuple[int, int]] | None) -> bool:
    """Whether the broker that answered announces DescribeLogDirs at all: one that does not closes the
    connection on it, and the poll after pays for a new one."""
    return DESCRIBE_LOG_DIRS_KEY in (api_versions or {})


def supports_v4(api_versions: dict[int, tuple[int, int]] | None) -> bool:
    """Whether the broker that answered announces DescribeLogDirs v4 (its total and usable bytes)."""
    span = (api_versions or {}).get(DESCRIBE_LOG_DIRS_KEY)
    return span is not None and span[1] >= 4


def describe_dirs(client: Client, brokers: Iterable[int], timeout_ms: int, v4: bool) -> dict[int, list[LogDir]]:
    """Each broker's directories, asked of all at once and waited for `timeout_ms` in all; a broker that
    refused, failed or did not answer in time is left out (no word is no evidence)."""
    pending = set(brokers)
    out: dict[int, list[LogDir]] = {}
    if not pending:
        return out
    request = dirs_request(v4)
    deadline = time.monotonic() + timeout_ms / 1000
    sent: dict[int, Future] = {}
    while True:
        for b in list(pending):
            if client.ready(b, metadata_priority=False):
                sent[b] = client.send(b, request, wakeup=False, request_timeout_ms=timeout_ms)
                pending.discard(b)
            elif client.connection_failed(b):
                pending.discard(b)
        remaining = deadline - time.monotonic()
        if remaining <= 0 or (not pending and all(f.is_done for f in sent.values())):
            break
        client.poll(timeout_ms=max(1, min(50, int(remaining * 1000))))
    for b, f in sent.items():
        if f.is_done and not f.failed():
            try:
                out[b] = read_dirs(f.value)
            except Refused:
                pass  # (an ACL: the sampling says so, PendingDirs.harvest)
            except Exception as e:  # noqa: BLE001 - a malformed answer is no evidence either
                log.warning("broker %s: DescribeLogDirs answer not read (%s)", b, e)
    return out


class PendingDirs:
    """The directories' sampling without a wait on the poll's path: sent before the poll's offsets round
    (which pumps the client), read after it; an answer not in yet is read at a later poll, stamped with
    its sending time (what the broker said then)."""

    def __init__(self) -> None:
        self._sent: dict[int, tuple[Future, float]] = {}  # broker -> (future, time.monotonic() when sent)

    def send(self, client: Client, brokers: Iterable[int], v4: bool, timeout_ms: int, now: float) -> None:
        request = dirs_request(v4)
        for b in brokers:
            if b not in self._sent and client.ready(b, metadata_priority=False):
                self._sent[b] = (client.send(b, request, wakeup=False, request_timeout_ms=timeout_ms), now)

    def harvest(self, refused: set[int]) -> dict[int, tuple[list[LogDir], float]]:
        """broker -> (its directories, when asked) for every answer in; `refused` gathers error answers."""
        out: dict[int, tuple[list[LogDir], float]] = {}
        for b, (f, at) in list(self._sent.items()):
            if not f.is_done:
                continue
            del self._sent[b]
            if f.failed():
                continue
            try:
                out[b] = (read_dirs(f.value), at)
            except Refused:
                refused.add(b)
            except Exception as e:  # noqa: BLE001 - a malformed answer is no word at all
                log.warning("broker %s: DescribeLogDirs answer not read (%s)", b, e)
        return out


def offline_on_live(offline: dict[tuple[str, int], list[int]], live: set[int]) -> set[int]:
    """Live brokers Metadata lists with an offline replica: a restart not yet applied, or a failed directory."""
    return {b for replicas in offline.values() for b in replicas if b in live}


def with_failed_dirs(records: Sequence[Observation], failed: list[int]) -> None:
    """Give each topic record that lists an offline replica the brokers that report a failed directory."""
    for rec in records:
        if rec["kind"] == "topic":
            ts = rec["topic_state"]
            if any(p.get("offline_replicas") for p in ts["partitions"]):
                ts["failed_log_dir_brokers"] = list(failed)


def partition_sizes(client: Client, brokers: Iterable[int], timeout_ms: int) -> tuple[dict[tuple[str, int], int], list[int]]:
    """((topic, partition) -> bytes, brokers that did not answer)."""
    from kafka.protocol.admin import DescribeLogDirsRequest

    sizes: dict[tuple[str, int], int] = {}
    silent: list[int] = []
    for b in sorted(brokers):
        try:
            resp = ask(client, b, DescribeLogDirsRequest[0](topics=None), timeout_ms)
        except Exception as e:  # noqa: BLE001 - sizes are advisory: a plan without them is still a plan
            log.warning("broker %s: log dir sizes unavailable (%s)", b, e)
            silent.append(b)
            continue
        for error_code, _dir, topics in resp.log_dirs:
            if error_code:
                continue
            for name, parts in topics:
                for index, size, _lag, is_future in parts:
                    if not is_future:
                        key = (name, index)
                        sizes[key] = max(size, sizes.get(key, 0))
    return sizes, silent
