"""Which registered brokers clients cannot use now, from what the offsets round could not reach.

A refused TCP connection is definitive: the process is gone (Kafka's controller notices only when
the broker's session expires). A silent broker is not, at first: a GC pause or a SIGSTOP accepts
connections and answers again a second or two later; only silence lasting `unreachable_after_s`
counts. Except at start-up: a broker registers in ZooKeeper (KafkaServer.startup) or is unfenced
(BrokerServer.startup) before `socketServer.enableRequestProcessing` opens its ports, and the
controller may make it a leader in between; its refusals count only once it has been live for
`unreachable_after_s` (the fault loops' cluster-down: sub-second critical PARTITION_UNAVAILABLE
pages at every restart of the cluster).

Silence counts from the first request a broker left unanswered, or from its last contact where krm
asked it often enough to know. A poll asks every broker once per interval, so a broker cut just after
a poll would be silent for up to one interval before anything noticed; `Probes` asks each live broker
a tiny question every `reach_probe_s` between polls, and a broker that answered the probe before is
silent since that probe reached it: its last contact, as Kafka's controller counts a broker's session
from the last heartbeat it received (metadata/src/main/java/org/apache/kafka/controller/
BrokerHeartbeatTracker.java), never more than one probe interval before the probe it left unanswered.
A probe's silence is only a hint: the poll's offsets round confirms it (`Reachability.unreachable`),
so a slow probe answer never makes a broker unreachable.
"""

from __future__ import annotations

import errno
import logging
import select
import socket
import time
from typing import Any, Mapping

from collectors.kafka_client import Client, Future
from collectors.offsets import OffsetsRound
from collectors.wire import MdBroker

log = logging.getLogger(__name__)


def refusing(addresses: dict[int, tuple[str, int]], timeout_s: float = 0.2) -> set[int]:
    """Which of these brokers refuse TCP connections: nothing listens, the process is gone. A paused
    process still accepts (the kernel completes the handshake) and an unreachable host times out:
    neither is definitive. All probed at once, so the poll waits `timeout_s` at most."""
    pending: dict[Any, int] = {}
    refused: set[int] = set()
    for b, (host, port) in addresses.items():
        s = socket.socket(socket.AF_INET6 if ":" in host else socket.AF_INET, socket.SOCK_STREAM)
        s.setblocking(False)
        rc = s.connect_ex((host, port))
        if rc in (0, errno.EINPROGRESS, errno.EWOULDBLOCK):
            pending[s] = b
        else:
            if rc == errno.ECONNREFUSED:
                refused.add(b)
            s.close()
    deadline = time.monotonic() + timeout_s
    try:
        while pending and (left := deadline - time.monotonic()) > 0:
            _, done, _ = select.select([], list(pending), [], left)
            for s in done:
                if s.getsockopt(socket.SOL_SOCKET, socket.SO_ERROR) == errno.ECONNREFUSED:
                    refused.add(pending[s])
                s.close()
                del pending[s]
    finally:
        for s in pending:
            s.close()
    return refused


class Probes:
    """Between polls, a brokers-only Metadata request (a few hundred bytes at any cluster size) to each
    live broker that has none outstanding. `silent()`: broker -> since when it has been silent (its last
    contact, or the first request it has not answered, or when its connection began to be dialled), for
    Reachability.note_silent.

    Runs on the poll's own thread and client (kafka-python's client is not shared across threads
    here). A probe waits up to `timeout_ms` for its answer; the client fails it then and closes
    the connection, as it does a poll's request.
    """

    def __init__(self, timeout_ms: int, every_s: float = 0.0) -> None:
        self.timeout_ms = timeout_ms
        self.every_s = every_s  # the probes' cadence: how much earlier than its first unanswered probe a silence may begin
        self._out: dict[int, tuple[Future, float]] = {}  # broker -> the probe's future and when it went out, not yet seen done
        self._since: dict[int, float] = {}  # broker -> first unanswered probe (time.monotonic())
        self._contact: dict[int, float] = {}  # broker -> when the newest probe it answered went out
        self._checks: dict[int, float] = {}  # broker -> a check of the loop's own it left unanswered (note_unanswered)
        self.sent = 0

    def tick(self, client: Client, brokers: set[int], request: object) -> set[int]:
        """Collect answers; send a probe to each of `brokers` without one outstanding. Returns the
        brokers whose probe was answered since the last tick."""
        answered = self._collect(client, brokers)
        now = time.monotonic()
        for b in brokers:
            if b in self._out:
                continue
            if client.ready(b, metadata_priority=False):
                self._out[b] = (client.send(b, request, wakeup=False, request_timeout_ms=self.timeout_ms), now)
                self.sent += 1
                self._since.setdefault(b, now)
            elif client.connection_failed(b):  # refused: no silence (the refusal probe judges it)
                self._since.pop(b, None)
            else:  # still dialling (a dropped SYN): nothing has answered since
                self._since.setdefault(b, now)
        client.poll(timeout_ms=0)  # the requests onto the wire
        return answered

    def note_unanswered(self, broker: int, sent_at: float, error: Exception) -> None:
        """A request of the poll loop's own between probes (KRaft's live-broker check) that `broker` left
        unanswered: silent since `sent_at` (its last contact, if more recent) as if a probe had been. The
        check blocks the loop for its timeout, and a probe cannot go out meanwhile. Only a timeout is
        silence here: a refused connection is judged by the poll's refusal probe."""
        from kafka.errors import KafkaTimeoutError, RequestTimedOutError

        if isinstance(error, (KafkaTimeoutError, RequestTimedOutError)):
            self._checks.setdefault(broker, sent_at)  # apart: a probe sent before it may still be answered

    def silent(self, client: Client, older_than_s: float) -> dict[int, float]:
        """broker -> since when it has been silent, for those whose first unanswered probe went out at
        least `older_than_s` ago: since its last contact (the newest probe it answered reached it as it
        went out, a round trip of the LAN later), or one probe interval before that first unanswered
        probe where the last contact is older (the poll's own requests came in between)."""
        self._collect(client, None)
        now = time.monotonic()
        first = {**self._checks, **{b: min(t, self._checks.get(b, t)) for b, t in self._since.items()}}
        silent = {b: max(self._contact.get(b, t), t - self.every_s) for b, t in first.items() if now - t >= older_than_s}
        if silent and log.isEnabledFor(logging.DEBUG):
            log.debug("probes: silent %s", {b: f"{now - t:.2f}s" for b, t in silent.items()})
        return silent

    def _collect(self, client: Client, brokers: set[int] | None) -> set[int]:
        if self._out:
            client.poll(timeout_ms=0)  # answers already in the sockets
        answered = set()
        for b, (future, sent_at) in list(self._out.items()):
            if future.is_done:
                del self._out[b]
                # an answer, even an error: the broker is there; a timeout or a dropped connection is not
                if future.succeeded() or not _silence(future.exception):
                    self._since.pop(b, None)
                    self._contact[b] = sent_at
                    if self._checks.get(b, sent_at) <= sent_at:  # asked after the unanswered check: it is back
                        self._checks.pop(b, None)
                    answered.add(b)
        if brokers is not None:  # brokers no longer live are no longer probed
            for held in (self._since, self._out, self._contact, self._checks):
                for b in [b for b in held if b not in brokers]:
                    del held[b]
        return answered


def _silence(error: Any) -> bool:
    """A failed probe that says nothing came back: a timeout, or a connection closed under it (by the
    client's own timeout, or by the poll's redial of a silent broker: kafka-python fails the requests
    in flight with Cancelled then)."""
    from kafka.errors import Cancelled, KafkaConnectionError, KafkaTimeoutError, RequestTimedOutError

    return isinstance(error, (Cancelled, KafkaConnectionError, KafkaTimeoutError, RequestTimedOutError))


class Reachability:
    """What consecutive polls say about each broker: since when it is live, since when it is silent."""

    def __init__(self, unreachable_after_s: float) -> None:
        self.after_s = unreachable_after_s
        self._silent_since: dict[int, float] = {}  # broker -> first request it left unanswered (timeouts)
        self._noted: set[int] = set()  # silent at this poll's Metadata request (note_silent)
        self._live_since: dict[int, float] | None = None  # broker -> when krm saw it become live
        self._declared: set[int] = set()  # what the last verdict called unreachable

    def note_live(self, live: set[int]) -> None:
        """Remember when each broker became live (registered in ZooKeeper, unfenced in KRaft) as krm
        saw it. The brokers of krm's first view are taken as long live: krm did not see them start."""
        now = time.monotonic()
        if self._live_since is None:
            self._live_since = dict.fromkeys(live, float("-inf"))
            return
        for b in [b for b in self._live_since if b not in live]:
            del self._live_since[b]
        for b in live:
            self._live_since.setdefault(b, now)

    def note_silent(self, since: dict[int, float]) -> None:
        """Brokers that left a request unanswered (the poll's Metadata request, a probe between polls)
        since these times (time.monotonic()): their silence counts from then, if the offsets round
        confirms it."""
        for b, t in since.items():
            self._silent_since.setdefault(b, t)
        self._noted = set(since)

    @property
    def declared(self) -> set[int]:
        """The brokers the last verdict called unreachable."""
        return self._declared

    def judged_at(self) -> dict[int, float]:
        """broker -> when (time.monotonic()) its silence so far reaches `after_s`, for brokers the last
        poll did not already call unreachable: the offsets round need not wait past that moment for
        them (collectors/offsets.py fetch), even when it passed before the round began (between two
        rounds: the verdict would otherwise wait a whole round). One already called unreachable is
        waited for as any broker is: it may answer again on a fresh connection."""
        return {b: t + self.after_s for b, t in self._silent_since.items() if b not in self._declared}

    def unreachable(self, found: OffsetsRound, known: Mapping[int, MdBroker],
                    contact: dict[int, float] | None = None) -> set[int]:
        """Registered brokers clients cannot use now, among those that did not answer this poll's
        offsets requests (`known`: each broker's host and port, as Metadata last named them; `contact`:
        broker -> when it was last heard from, collectors/answer_times.py). A broker heard from since its
        silence began is not silent since then: it answers, late (a JVM starved of CPU), and its silence
        counts from that contact (BROKER_SLOW names it: pipelines/detectors/slow.py)."""
        now = time.monotonic()
        silent = found.asked - found.answered
        asked_at = found.sent_at if found.sent_at is not None else now
        contact = contact or {}
        # A broker silent for `after_s` already is unreachable whatever a probe would say (refused: its
        # process is gone; a start-up's grace covers a broker that never went silent): the verdict
        # does not wait the probe's timeout for it.
        judged = {b for b in silent
                  if now - max(self._silent_since.get(b, asked_at), contact.get(b, float("-inf"))) >= self.after_s}
        addresses = {b: (m["host"], m["port"]) for b in silent - judged
                     if (m := known.get(b)) and m.get("host") and m.get("port")}
        refused = refusing(addresses) if addresses else set()
        for b in silent:
            if b in refused:
                self._silent_since.pop(b, None)
            else:  # silent since the first request it left unanswered went out, not since the wait ended
                self._silent_since.setdefault(b, asked_at)
        for b, t in contact.items():  # heard from since: silent from then at most
            if t > self._silent_since.get(b, t):
                self._silent_since[b] = t
        noted, self._noted = self._noted, set()
        for b in [b for b in self._silent_since if b in found.answered or (b not in found.asked and b not in noted)]:
            del self._silent_since[b]
        since = self._live_since or {}
        started = {b for b in refused if now - since.get(b, float("-inf")) >= self.after_s}
        self._declared = started | {b for b, t in self._silent_since.items() if now - t >= self.after_s}
        return self._declared
