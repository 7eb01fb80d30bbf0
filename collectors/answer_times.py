"""How late each broker answers, measured apart from the poll.

A broker starved of CPU answers, seconds late; a paused one answers nothing. The poll cannot tell them apart:
its own requests give up after their timeout, and kafka-python then closes the connection, failing every
request in flight on it. So a small prober of its own thread and client asks each live broker a brokers-only
Metadata request (a few hundred bytes at any cluster size) every `every_s`, one at a time (a broker serves a
connection's requests in order), waiting long for each answer (`timeout_ms`: a late answer is the measure, and a
request given up closes the connection under the next). What it says:
- `answer_s`: the median of the round trips of the broker's last `RECENT` answers of the last `WINDOW_S` and of
  the request in flight (as long as it has waited so far): how late it answers the smallest question a client
  asks (published as the cluster record's brokers' `answer_ms`; BROKER_SLOW compares it with its peers'). A
  short stall delays one answer of the few, a starved JVM all of them, and its first late answer, with the
  next one waiting as long, already says so; a paused broker's last answers were quick, and the one request
  waiting is outvoted, until it has waited `STALLED_MIN_S` and `STALLED_FACTOR` times them: then nothing is
  said (its last answers, one of them late by chance, are not how it answers now);
- `steady_s`: a high quantile of its answers of the last few seconds, many of them (published as `answer_steady_ms`):
  a milder spell, one a JVM held to a CPU quota has, delays only some answers, by tens of milliseconds;
- `contact`: when the broker was last heard from (its newest answer came back): a broker that answers is not
  silent (collectors/reachability.py Reachability.unreachable), however late. A paused one was last heard
  just before it stopped.
- `on_late(broker)`: called once when a broker's answer (or its request in flight) first takes `SLOW_MIN_S` or
  longer, and again only after it answered sooner: the canary runs its next round now (collectors/daemon.py), so a
  broker starved between two rounds is measured by a client's write within a second instead of up to a canary
  interval later; `late_now()`: those brokers now, whose partitions the canary writes a train to (collectors/canary.py).
"""

from __future__ import annotations

import logging
import math
import statistics
import threading
import time
from collections import deque
from typing import Any, Callable

from collectors.kafka_client import Future
from foundation.config import ClusterConfig
from foundation.security import kafka_python_kwargs
from schemas.latency import SLOW_MIN_S

log = logging.getLogger(__name__)

RECENT = 2  # a broker's answer time: the median round trip of its last this many answers and the one waiting ...
WINDOW_S = 30.0  # ... of those at most this old
# its steady answer time: the STEADY_QUANTILE of its answers' round trips of the last STEADY_S, when at least
# STEADY_MIN (a quarter of what a prober every 0.25 s gets: a broker answering 100 ms late still gives that many). A
# quantile this high because a JVM held to a CPU quota (a cgroup's cfs quota, a throttled container) answers most
# probes at once and only those that arrive after it spent its period's quota late, by the rest of the period: its
# median keeps its peers' pace while a tenth or more of its answers wait (benchmarks/BENCHMARKS.md)
STEADY_S = 8.0
STEADY_MIN = 8
STEADY_QUANTILE = 0.9
# a request in flight this long, and this many times the median, says the broker stopped answering (paused, or cut
# off): its last answers, whatever they took, say nothing of how late it answers now, so no answer time is said. A
# starved broker's answers all take seconds, the one waiting as long as the others.
STALLED_MIN_S = 1.0
STALLED_FACTOR = 10.0
KEPT = 128  # answers kept per broker (STEADY_S of them at a prober every 0.0625 s)


class RoundTrips:
    """Per broker, its last KEPT answers, (when the request went out, when the answer came back), and when the
    request waiting now went out. Pure."""

    def __init__(self) -> None:
        self._took: dict[int, deque[tuple[float, float]]] = {}
        self._waiting: dict[int, float] = {}

    def sent(self, broker: int, at: float) -> None:
        self._waiting[broker] = at

    def answered(self, broker: int, sent_at: float, done_at: float) -> None:
        self._took.setdefault(broker, deque(maxlen=KEPT)).append((sent_at, done_at))
        if self._waiting.get(broker) == sent_at:
            del self._waiting[broker]

    def given_up(self, broker: int, sent_at: float) -> None:
        """The request went unanswered (timed out, its connection closed): nothing waits now."""
        if self._waiting.get(broker) == sent_at:
            del self._waiting[broker]

    def forget(self, keep: set[int]) -> None:
        for held in (self._took, self._waiting):
            for b in [b for b in held if b not in keep]:
                del held[b]

    def contact(self) -> dict[int, float]:
        """broker -> when it was last heard from."""
        return {b: took[-1][1] for b, took in self._took.items() if took}

    def late(self, now: float) -> set[int]:
        """The brokers whose request in flight has waited SLOW_MIN_S so far, or whose newest answer took that long."""
        out = {b for b, sent in self._waiting.items() if now - sent >= SLOW_MIN_S}
        return out | {b for b, took in self._took.items() if took and took[-1][1] - took[-1][0] >= SLOW_MIN_S}

    def answer_s(self, now: float) -> dict[int, float]:
        """broker -> the median of its last RECENT answers' round trips of the last WINDOW_S and the wait so far of
        its request in flight, the lower of the middle two where they are even: a quick answer outvotes a wait
        (none: no answer in the window)."""
        out = {}
        for b, took in self._took.items():
            recent = [done - sent for sent, done in list(took)[-RECENT:] if now - done <= WINDOW_S]
            if recent:
                waiting = self._waiting.get(b)
                wait = None if waiting is None else now - waiting
                median = statistics.median_low(recent + ([wait] if wait is not None else []))
                if wait is not None and wait >= STALLED_MIN_S and wait >= STALLED_FACTOR * median:
                    continue  # its answers stopped: the median of its last ones is not how late it answers now
                out[b] = median
        return out

    def steady_s(self, now: float) -> dict[int, float]:
        """broker -> the STEADY_QUANTILE (nearest rank) of its answers' round trips of the last STEADY_S and the wait
        so far of its request in flight, where it answered STEADY_MIN times in that window and none of these stalled
        (else not said). A stall, STALLED_MIN_S and STALLED_FACTOR times their median, is a broker that stopped
        answering (paused) in the window, and the answers just after it its backlog: neither is its pace."""
        out = {}
        for b, took in self._took.items():
            recent = [done - sent for sent, done in took if now - done <= STEADY_S]
            if len(recent) >= STEADY_MIN:
                waiting = self._waiting.get(b)
                trips = recent + ([now - waiting] if waiting is not None else [])
                if max(trips) < max(STALLED_MIN_S, STALLED_FACTOR * statistics.median(trips)):
                    out[b] = quantile(trips, STEADY_QUANTILE)
        return out


def quantile(values: list[float], q: float) -> float:
    """The nearest-rank `q` quantile of `values` (not empty): the smallest value at least a fraction q of them reach."""
    ranked = sorted(values)
    return ranked[max(0, math.ceil(q * len(ranked)) - 1)]


class AnswerTimes:
    """The prober: `start` once, `answers` from the poll's thread, `close` at the end."""

    def __init__(self, cluster: ClusterConfig, every_s: float, timeout_ms: int) -> None:
        self.cluster, self.every_s, self.timeout_ms = cluster, every_s, timeout_ms
        self._trips = RoundTrips()
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self.on_late: Callable[[int], object] | None = None  # set before `start`; called on the prober's thread
        self._late: set[int] = set()  # the brokers `on_late` was called for, until they answer sooner

    def start(self) -> AnswerTimes:
        if self._thread is None and self.every_s > 0:
            self._thread = threading.Thread(target=self._run, name=f"krm-answer-times-{self.cluster.name}", daemon=True)
            self._thread.start()
        return self

    def answers(self) -> tuple[dict[int, float], dict[int, float], dict[int, float]]:
        """(contact, answer_s, steady_s), see the module's docstring; time.monotonic() and seconds."""
        with self._lock:
            now = time.monotonic()
            return self._trips.contact(), self._trips.answer_s(now), self._trips.steady_s(now)

    def late_now(self) -> frozenset[int]:
        """The brokers whose answer (or request in flight) took SLOW_MIN_S or longer at the prober's last look."""
        return frozenset(self._late)

    def close(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=5)
            self._thread = None

    def _run(self) -> None:
        from kafka.client_async import KafkaClient

        from collectors.metadata import brokers_request

        client = None
        out: dict[int, tuple[Future, float]] = {}  # broker -> its request in flight, and when it went out
        next_at: dict[int, float] = {}
        while not self._stop.is_set():
            try:
                if client is None:
                    client = KafkaClient(bootstrap_servers=self.cluster.bootstrap_servers.split(","),
                                         client_id=f"krm-answer-times-{self.cluster.name}",
                                         request_timeout_ms=self.timeout_ms, reconnect_backoff_max_ms=1000,
                                         metadata_max_age_ms=30_000, **kafka_python_kwargs(self.cluster.security))
                brokers = {n.nodeId for n in client.cluster.brokers() if isinstance(n.nodeId, int)}
                now = time.monotonic()
                for b in brokers - set(out):
                    if now >= next_at.get(b, 0.0) and client.ready(b, metadata_priority=False):
                        future = client.send(b, brokers_request(client), wakeup=False, request_timeout_ms=self.timeout_ms)
                        future.add_callback(self._done, b, now)
                        future.add_errback(self._failed, b, now)
                        out[b], next_at[b] = (future, now), now + self.every_s
                        with self._lock:
                            self._trips.sent(b, now)
                client.poll(timeout_ms=max(10, int(self.every_s * 500)))
                for b in [b for b, (f, _) in out.items() if f.is_done or b not in brokers]:
                    del out[b]
                with self._lock:
                    self._trips.forget(brokers)
                    late = self._trips.late(time.monotonic())
                newly, self._late = late - self._late, late
                for b in sorted(newly):
                    if self.on_late is not None:
                        self.on_late(b)
            except Exception as e:  # noqa: BLE001 - the prober keeps going; the poll judges without it meanwhile
                log.debug("cluster %s: answer times: %r", self.cluster.name, e)
                with self._lock:
                    for b, (_, sent_at) in out.items():
                        self._trips.given_up(b, sent_at)
                if client is not None:
                    client.close()
                client, out = None, {}
                self._stop.wait(1.0)
        if client is not None:
            client.close()

    def _done(self, broker: int, sent_at: float, _answer: Any) -> None:
        with self._lock:
            self._trips.answered(broker, sent_at, time.monotonic())

    def _failed(self, broker: int, sent_at: float, _error: Any) -> None:
        with self._lock:
            self._trips.given_up(broker, sent_at)
