"""The ground truth of client harm: acks=all writes to every partition of a topic, timed.

A partition is hurt while its writes fail or take longer than `slow_s`; the lab's fault tests and
benchmarks/impact_oracle.py hold krm's pages against it. One producer per partition, so a stuck
metadata refresh or a dead connection of one partition's client never counts against another
partition; writes go out every `every_s`, each judged on its own acknowledgement (a callback).

A write still unacknowledged `slow_s` after it went out is hurt from then on, whenever its callback
comes: a producer whose connection the network silently dropped keeps its batches until its
delivery timeout (minutes), so counting only the callbacks missed every write of a cut in progress.
"""

from __future__ import annotations

import threading
import time
from typing import Any


class ClientJudge:
    def __init__(self, bootstrap_servers: str, topic: str, partitions: set[int], slow_s: float = 2.0,
                 every_s: float = 0.2, **client_kwargs: Any) -> None:
        from kafka import KafkaProducer

        self.slow_s = slow_s
        self.every_s = every_s
        self.failed: dict[int, list[float]] = {p: [] for p in partitions}  # send times of hurt writes
        self.ok: dict[int, list[float]] = {p: [] for p in partitions}  # send times of quick acknowledgements
        self.acked: dict[int, list[tuple[float, float]]] = {p: [] for p in partitions}  # (sent, acknowledged) of those
        self.pending: dict[int, dict[int, float]] = {p: {} for p in partitions}  # sent, not acknowledged yet
        self._sent = 0
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._producers = {p: KafkaProducer(bootstrap_servers=bootstrap_servers, acks="all", retries=0,
                                            request_timeout_ms=int(slow_s * 1000), max_block_ms=int(slow_s * 1000),
                                            reconnect_backoff_max_ms=500, linger_ms=0, **client_kwargs)
                           for p in sorted(partitions)}
        self._topic = topic
        self._threads = [threading.Thread(target=self._run, args=(p,), daemon=True, name=f"krm-client-judge-{p}")
                         for p in self._producers]
        for t in self._threads:
            t.start()

    def _note(self, p: int, sent: float, ok: bool, seq: int | None = None) -> None:
        done = time.monotonic()
        with self._lock:
            if seq is not None:
                self.pending[p].pop(seq, None)
            quick = ok and done - sent <= self.slow_s
            (self.ok if quick else self.failed)[p].append(sent)
            if quick:
                self.acked[p].append((sent, done))

    def _run(self, p: int) -> None:
        producer = self._producers[p]
        while not self._stop.is_set():
            sent = time.monotonic()
            with self._lock:
                self._sent += 1
                seq = self._sent
                self.pending[p][seq] = sent
            try:
                f = producer.send(self._topic, b"x", partition=p)
                f.add_callback(lambda _m, s=sent, q=seq: self._note(p, s, True, q))
                f.add_errback(lambda _e, s=sent, q=seq: self._note(p, s, False, q))
            except Exception:  # noqa: BLE001 - metadata or buffer timeout: a failed write
                self._note(p, sent, False, seq)
            self._stop.wait(self.every_s)

    def _hurt(self, p: int) -> list[float]:
        """Send times of partition `p`'s hurt writes: failed or slow, and those unacknowledged for longer
        than `slow_s` by now (their callback, if it ever comes, can only say hurt). Under the lock."""
        overdue = time.monotonic() - self.slow_s
        late = [t for t in self.pending.get(p, {}).values() if t < overdue]
        return self.failed[p] + late if late else self.failed[p]

    def hurt_between(self, start: float, end: float, min_run_s: float = 0.0) -> set[int]:
        """Partitions with hurt writes sent within [start, end]; with `min_run_s`, only those whose
        writes were hurt without a quick one between for at least that long."""
        with self._lock:
            out = set()
            for p in self.failed:
                bad = sorted(t for t in self._hurt(p) if start <= t <= end)
                if not bad:
                    continue
                if min_run_s <= 0:
                    out.add(p)
                    continue
                good = sorted(t for t in self.ok[p] if start <= t <= end)
                run_start, g = bad[0], 0
                for t in bad:
                    while g < len(good) and good[g] < t:
                        if good[g] > run_start:
                            run_start = t
                        g += 1
                    if t - run_start >= min_run_s:
                        out.add(p)
                        break
            return out

    def counts_between(self, start: float, end: float) -> dict[int, tuple[int, int]]:
        """partition -> (quick writes, hurt writes) sent within [start, end]: what a verdict rests on."""
        with self._lock:
            return {p: (sum(1 for t in self.ok[p] if start <= t <= end), sum(1 for t in self._hurt(p) if start <= t <= end))
                    for p in self.ok}

    def first_hurt(self, start: float, end: float, partitions: set[int] | None = None) -> float | None:
        """When the first hurt write within [start, end] was sent (to one of `partitions`, if given)."""
        with self._lock:
            return min((t for p in self.failed if partitions is None or p in partitions
                        for t in self._hurt(p) if start <= t <= end), default=None)

    def last_hurt(self, start: float) -> float | None:
        """When the last hurt write after `start` was sent."""
        with self._lock:
            return max((t for p in self.failed for t in self._hurt(p) if t >= start), default=None)

    def recovered_at(self, start: float) -> float | None:
        """When the clients were fine again: for each partition hurt after `start`, the acknowledgement
        of its first quick write sent after its last hurt one; the latest of those. The last hurt
        write's send time (last_hurt) comes up to `slow_s` before it: a write sent just before the
        fault ended is slow. None while a hurt partition has no such acknowledgement yet."""
        with self._lock:
            out: float | None = None
            for p in self.failed:
                hurt = [t for t in self._hurt(p) if t >= start]
                if not hurt:
                    continue
                last = max(hurt)
                acks = [done for sent, done in self.acked[p] if sent > last]
                if not acks:
                    return None
                first = min(acks)
                out = first if out is None else max(out, first)
            return out

    def all_ok_since(self, t: float) -> bool:
        """Every partition has had a quick acknowledgement of a write sent after `t`, and no hurt one."""
        with self._lock:
            return all(any(s >= t for s in self.ok[p]) and not any(s >= t for s in self._hurt(p)) for p in self.ok)

    def stop(self) -> None:
        from kafka.errors import KafkaTimeoutError

        self._stop.set()
        for t in self._threads:
            t.join(timeout=10)
        for producer in self._producers.values():
            try:
                producer.close(timeout=2)
            except KafkaTimeoutError:  # batches sent into a cut never complete: nothing left to wait for
                pass
