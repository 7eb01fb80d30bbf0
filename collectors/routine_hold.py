"""Routine records wait to go out together. At rest a canary round (every `canary_interval_s`) and a JMX
scrape round (every `jmx_interval_s`) each used to start an alert micro-batch of their own, and a batch
costs the driver far more than its few rows: the canary and the JMX series together multiplied the cost at
rest of watching a quiet cluster (benchmarks/BENCHMARKS.md). A round in which nothing is late, failed or
counted (`canary_routine`, `JmxRoutine`) is held and published with the next record that is not routine,
or once the oldest held one has waited `routine_publish_s`. Anything else goes at once, and takes what is
held with it, so a detector never reads a newer round before an older one; and for `routine_publish_s` after
it nothing of that cluster waits (`RoutineHold`).

What "nothing" means stays below every floor BROKER_SLOW judges from (pipelines/detectors/slow.py): no
write or own Produce time of SLOW_MIN_S, no scrape slower than that, and no broker of the cluster answering
krm's probes MILD_MIN_S late. A milder spell needs no canary or JMX round: the poll says it, from many
answers at once (collectors/answer_times.py `steady_s`), and goes out while it lasts (collectors/unchanged.py)."""

from __future__ import annotations

import math
import threading
import time
from typing import Any, Callable, Mapping, Sequence

from schemas.latency import MILD_MIN_S, SLOW_MIN_S

ROUTINE_MS = SLOW_MIN_S * 1000  # below every latency floor a detector compares
# the broker's own word on its partitions and the controller: any of these above zero is news
JMX_ZERO = ("under_replicated_partitions", "under_min_isr_partitions", "offline_replicas", "offline_partitions")
JMX_COUNTERS = ("isr_shrinks_total", "isr_expands_total", "unclean_leader_elections_total")


def canary_routine(record: Mapping[str, Any]) -> bool:
    """A canary round whose every write was acknowledged and read back, each under ROUTINE_MS."""
    state = record.get("canary_state") or {}
    if state.get("waiting"):
        return False
    for p in state.get("partitions") or ():
        if not p.get("produced") or p.get("error") or p.get("consumed") is False:
            return False
        if (p.get("produce_ms") or 0.0) >= ROUTINE_MS or (p.get("e2e_ms") or 0.0) >= ROUTINE_MS:
            return False
    return True


class JmxRoutine:
    """Whether a JMX scrape round is routine: every broker answered under ROUTINE_MS, says nothing of its own
    partitions is short or offline, no Produce time of its own reaches ROUTINE_MS, at most one claims the
    controller, and no ISR or unclean-election counter moved since the round before (whose counters it keeps)."""

    def __init__(self) -> None:
        self._counters: dict[tuple[str, int], tuple[float | None, ...]] = {}

    def __call__(self, records: Sequence[Mapping[str, Any]]) -> bool:
        routine, controllers = True, 0.0
        for r in records:
            state = r.get("broker_metrics_state") or {}
            gauges = {g["name"]: g["value"] for g in state.get("gauges") or ()}
            counters = tuple(gauges.get(k) for k in JMX_COUNTERS)
            key = (r.get("cluster", ""), state.get("broker", -1))
            if self._counters.get(key, counters) != counters:
                routine = False
            self._counters[key] = counters
            controllers += gauges.get("active_controller_count", 0.0)
            own = gauges.get("produce_queue_p50_ms", 0.0) + gauges.get("produce_local_p50_ms", 0.0)
            if (state.get("error") or (state.get("scrape_ms") or 0.0) >= ROUTINE_MS or own >= ROUTINE_MS
                    or gauges.get("produce_local_p99_ms", 0.0) >= ROUTINE_MS
                    or any(gauges.get(k, 0.0) > 0 for k in JMX_ZERO)):
                routine = False
        return routine and controllers <= 1


class RoutineHold:
    """Holds routine records for `publish`; `hold_s` 0 holds nothing. Thread-safe: the canary and JMX loops of
    every cluster offer to one hold, so at rest all of them go out in one micro-batch.

    A record that is not routine is news of its cluster, and for `hold_s` after it none of that cluster's records
    wait: a detector that wants a second look (BROKER_SLOW wants two rounds in a row of most evidence,
    pipelines/slow_view.py) gets it at the rounds' own cadence, and the first quiet round after a spell goes at
    once to end what the spell opened."""

    def __init__(self, publish: Callable[[list[Any]], int], hold_s: float,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self._publish, self.hold_s, self._clock = publish, hold_s, clock
        self._lock = threading.Lock()
        self._held: list[Any] = []
        self._since: float | None = None  # when the oldest held record was offered
        self._news: dict[str, float] = {}  # cluster -> when a record of it that was not routine was last offered
        self.held_total = 0  # records that waited (counted once each)

    def offer(self, records: Sequence[Any], routine: bool) -> int:
        """Publish `records` now with what is held, or hold them; returns how many went out."""
        now = self._clock()
        clusters = {r["cluster"] for r in records}
        with self._lock:
            if not routine:
                self._news.update((c, now) for c in clusters)
            elif any(now - self._news.get(c, -math.inf) < self.hold_s for c in clusters):
                routine = False
            if routine and self.hold_s > 0 and (self._since is None or now - self._since < self.hold_s):
                if records:
                    self._since = now if self._since is None else self._since
                    self._held.extend(records)
                    self.held_total += len(records)
                return 0
            out, self._held, self._since = [*self._held, *records], [], None
            # published under the lock: a record offered meanwhile cannot overtake the held ones
            return self._publish(out) if out else 0

    def flush(self) -> int:
        """Publish whatever is held (a stop)."""
        return self.offer([], routine=False)


def answers_prompt(answer_s: Mapping[int, float]) -> bool:
    """Every broker of the cluster answers krm's probes under MILD_MIN_S (none known: prompt)."""
    return all(s < MILD_MIN_S for s in answer_s.values())
