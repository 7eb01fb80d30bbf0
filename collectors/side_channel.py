"""The questions a poll sends on connections of their own and harvests after its offsets round:
DescribeQuorum (KRaft) and ListPartitionReassignments.

Why apart: a broker with no active controller to forward DescribeQuorum to holds it, a hung
controller (SIGSTOP) holds ListPartitionReassignments, and a broker serves one connection's requests
in order, so on the poll's own connection either would hold up the offsets requests behind it (the
broker would look unreachable). Each on its own connection, too: the client closes a connection
whose request timed out, failing every request on it, and a ListPartitionReassignments timing out
must not take down a DescribeQuorum whose silence is itself the answer ("no quorum leader" after
QUORUM_PATIENCE_MS, which a shorter request timeout would cut short).
One question of each kind is in flight at a time.
"""

from __future__ import annotations

import logging
import time
from typing import Any, Callable

from collectors import kraft, reassignments
from collectors.kafka_client import Client, Future, NodeId
from collectors.kraft_protocol import describe_quorum_request
from collectors.metadata import MAX_ANSWER_BYTES
from foundation.config import ClusterConfig
from foundation.security import kafka_python_kwargs
from schemas.typed import Quorum

log = logging.getLogger(__name__)


class Notes:
    """A side request's failure is logged once, and so is its recovery; the Metadata view stands."""

    def __init__(self, cluster: str) -> None:
        self.cluster = cluster
        self._failed: set[str] = set()

    def call(self, what: str, call: Callable[[], Any]) -> Any:
        """`call()`, or None when it fails (noted)."""
        try:
            result = call()
        except Exception as e:  # noqa: BLE001 - the Metadata view still stands
            self.note(what, e)
            return None
        self.note(what, None)
        return result

    def note(self, what: str, error: BaseException | None) -> None:
        if error is not None and what not in self._failed:
            log.warning("cluster %s: %s failed (%s: %s); going on without it", self.cluster, what,
                        type(error).__name__, error)
            self._failed.add(what)
        elif error is None and what in self._failed:
            log.warning("cluster %s: %s answered again", self.cluster, what)
            self._failed.discard(what)


class SideChannel:
    """One cluster's two side connections and their questions in flight."""

    def __init__(self, cluster: ClusterConfig, timeout_ms: int, notes: Notes) -> None:
        self.cluster, self.timeout_ms, self.notes = cluster, timeout_ms, notes
        self._clients: dict[str, Client] = {}  # "quorum" / "moves" -> its connection
        self.quorum: Quorum | None = None  # the last DescribeQuorum answer (KRaft)
        self.quorum_denied = False  # DescribeQuorum refused: no DESCRIBE on the cluster
        self._quorum_ask: tuple[Future, NodeId, float] | None = None  # (future, broker, sent at) while unanswered
        self.moves: reassignments.Moves = {}  # the last ListPartitionReassignments answer
        self._moves_ask: tuple[Future, float] | None = None  # (future, sent at) while unanswered

    def connection(self, kind: str, like: Client, node: NodeId) -> Client:
        """The side connection for `kind`, opened like the poll's client `like`, knowing broker `node`."""
        if kind not in self._clients:
            from kafka.client_async import KafkaClient

            # the poll's timeout for the connection itself: kafka-python spends it connecting and in each
            # blocking step of a SASL login (a broker paused mid-login holds the poll's thread that long);
            # the questions' own, longer waits go with each request (ask_quorum, ask_moves)
            qc = KafkaClient(
                bootstrap_servers=like.config["bootstrap_servers"], client_id=f"krm-{kind}-{self.cluster.name}",
                api_version=like.config["api_version"], request_timeout_ms=like.config["request_timeout_ms"],
                reconnect_backoff_max_ms=1000, receive_message_max_bytes=MAX_ANSWER_BYTES,
                **kafka_python_kwargs(self.cluster.security))
            qc.cluster.request_update()
            deadline = time.monotonic() + self.timeout_ms / 1000
            while qc.cluster.broker_metadata(node) is None and time.monotonic() < deadline:
                qc.poll(timeout_ms=50)  # learn the broker ids (it starts with bootstrap addresses only)
            self._clients[kind] = qc
        return self._clients[kind]

    def ask_quorum(self, like: Client, node: NodeId) -> None:
        """Send DescribeQuorum to `node` unless one is in flight (connecting: asked at a later poll)."""
        if self._quorum_ask is not None:
            return
        qc = self.connection("quorum", like, node)
        if qc.ready(node, metadata_priority=False):
            future = qc.send(node, describe_quorum_request(), wakeup=False,
                             request_timeout_ms=kraft.QUORUM_REQUEST_TIMEOUT_MS)
            self._quorum_ask = (future, node, time.monotonic())
        else:
            qc.poll(timeout_ms=0)

    def harvest_quorum(self, answered: set[int]) -> Quorum | None:
        """The quorum for this poll's cluster record: the answer if it came, else the last one while
        the question is younger than QUORUM_PATIENCE_MS; past that, "no leader" — but only if the
        asked broker answered its offsets requests this poll (a dead or paused broker says nothing
        about the controllers: its question is dropped then, and the next poll asks the broker that
        answers Metadata). A broken connection or a refusal judges nothing."""
        if self._quorum_ask is None:
            return self.quorum
        future, node, sent_at = self._quorum_ask
        self._clients["quorum"].poll(timeout_ms=0)
        if not future.is_done:
            waited_ms = (time.monotonic() - sent_at) * 1000
            if waited_ms < kraft.QUORUM_PATIENCE_MS:
                return self.quorum
            if node not in answered:  # else the question would wait on the silent broker for minutes
                self._quorum_ask = None
                self._clients["quorum"].close(node)
                return self.quorum
            return {"leader_id": -1, "voters": [],
                    "error": f"DescribeQuorum unanswered for over {kraft.QUORUM_PATIENCE_MS / 1000:.0f}s by broker "
                             f"{node} (no active controller reachable)"}
        self._quorum_ask = None
        if future.failed():
            self.notes.note("DescribeQuorum", future.exception)
            self.quorum = None
            return None
        try:
            self.quorum = kraft.quorum_state(future.value.to_object())
            self.quorum_denied = False
        except PermissionError:  # a missing ACL: said in the cluster record's `denied`, not as a failure
            self.quorum, self.quorum_denied = None, True
        except Exception as e:  # noqa: BLE001 - the Metadata view still stands
            self.notes.note("DescribeQuorum", e)
            self.quorum = None
        else:
            self.notes.note("DescribeQuorum", None)
        return self.quorum

    def ask_moves(self, like: Client, node: NodeId) -> None:
        """Send ListPartitionReassignments to `node` (the controller in ZooKeeper mode, which alone
        answers it; any broker in KRaft, which forwards it) unless one is in flight."""
        if self._moves_ask is not None:
            return
        qc = self.connection("moves", like, node)
        if qc.ready(node, metadata_priority=False):
            future = qc.send(node, reassignments.request(self.timeout_ms), wakeup=False,
                             request_timeout_ms=2 * self.timeout_ms)
            self._moves_ask = (future, time.monotonic())
        qc.poll(timeout_ms=0)  # on the wire now (or connecting: asked at a later poll)

    def harvest_moves(self) -> None:
        """The answer if it came during the offsets round; else the last one stays (at most one poll
        old) until it comes or fails. A failure is logged once and judges partitions as before."""
        if self._moves_ask is None or "moves" not in self._clients:
            return
        future, _sent = self._moves_ask
        self._clients["moves"].poll(timeout_ms=0)
        if not future.is_done:
            return
        self._moves_ask = None
        if future.failed():
            self.notes.note("ListPartitionReassignments", future.exception)
            self.moves = {}
            return
        moves = self.notes.call("ListPartitionReassignments", lambda: reassignments.parse(future.value.to_object()))
        self.moves = moves or {}

    def close(self) -> None:
        self._quorum_ask = None
        self._moves_ask = None
        for client in self._clients.values():
            try:
                client.close()
            except Exception:  # noqa: BLE001 - closing a broken client must not mask the real error
                pass
        self._clients = {}
