"""What each live broker answers now, gathered for the slow-broker rule (pipelines/detectors/slow.py) at each
canary, JMX or poll round of a cluster: the canary's newest writes per leader, the newest JMX scrape and how late
each broker answers the collector's probes. Kept on the driver, bounded by brokers."""

from __future__ import annotations

import logging
import math
from dataclasses import replace
from functools import partial
from typing import Callable, Collection, Iterable, Mapping

from pipelines import latency
from pipelines.detectors import slow
from pipelines.detectors.brokers import UNREACHABLE
from pipelines.detectors.canary import CanarySample
from pipelines.incidents import Finding, Incident, ScopePoll
from pipelines.jmx_view import JmxSample
from schemas.latency import SLOW_MIN_S, Usual, moved

log = logging.getLogger(__name__)

FRESH_MS = 30_000  # a canary round or a JMX scrape older than this says nothing of the broker now
WARMUP_MS = 60_000  # a broker back from a stop is not judged this long: its JVM compiles, its logs load


def came_back(broker_down: Iterable[Incident]) -> dict[tuple[str, int], int]:
    """(cluster, broker) -> when it came back from a stop: its resolved BROKER_DOWN incidents that went through a
    cause other than `unreachable` (it left the cluster: stopped, crashed, fenced). One that stayed registered and
    only answered too late for a while (a starved JVM) did not restart: it has nothing to warm up."""
    return {(i.cluster, i.broker): i.resolved_at_ms for i in broker_down
            if i.broker is not None and i.resolved_at_ms is not None and set(i.cause_history) - {UNREACHABLE}}


def waited_on(s: CanarySample, answer_ms: Mapping[int, float]) -> CanarySample:
    """The sample as the write of the broker it waited on: an acks=all write waits on its leader and every ISR member,
    so one led by a healthy broker and held by a slow follower is that follower's. Its leader, unless an ISR member
    answers krm markedly later (SLOW_MIN_S and slow.PEER_FACTOR times the leader's answer): then the latest."""
    leader = latency.led_by(s)[1]
    floor_ms = max(SLOW_MIN_S * 1000, slow.PEER_FACTOR * answer_ms.get(leader, math.inf))
    late = [b for b in s.isr if b != leader and answer_ms.get(b, 0.0) >= floor_ms]
    return replace(s, leader=max(late, key=lambda b: answer_ms[b])) if late else s


class SlowView:
    def __init__(self, objectives: Mapping[str, float] | None = None, default_objective_s: float = 2.0) -> None:
        self.objectives = dict(objectives or {})  # cluster -> its latency_objective_s
        self.default_objective_s = default_objective_s
        self._rounds: dict[str, tuple[int, int]] = {}  # cluster -> (the last round judged, its time)
        self._seen: dict[str, set[int]] = {}  # cluster -> the brokers its last round judged slow
        self._past: dict[tuple[str, int], Usual] = {}  # (cluster, broker) -> its usual answer time

    def _own_past(self, name: str, answered_at: int, answer_ms: Mapping[int, float]) -> dict[int, float]:
        """Each broker's usual answer time (schemas/latency.py `moved`), before this poll's answers move it: a lasting
        change becomes its new usual within the hour."""
        past = {}
        for b, ms in answer_ms.items():
            held = self._past.get((name, b))
            if held is not None:
                past[b] = held[0]
            self._past[(name, b)] = moved(held, ms, answered_at / 1000)
        return past

    def judge(self, clusters: Iterable[str], live: Mapping[str, Iterable[int]], jmx: Mapping[tuple[str, int], JmxSample],
              canary: Mapping[tuple[str, int], CanarySample], back_at: Mapping[tuple[str, int], int] | None = None,
              answers: Mapping[str, tuple[int, Mapping[int, float]]] | None = None,
              hurting: Callable[[str], Collection[int]] | None = None,
              waiting: Mapping[tuple[str, int], CanarySample] | None = None,
              steady: Mapping[str, Mapping[int, float]] | None = None) -> tuple[list[ScopePoll], list[Finding]]:
        """One round of each of `clusters` (those a canary, JMX or cluster record of this batch came from).
        `back_at`: (cluster, broker) -> when it came back from a stop (`came_back`): a restart's
        warm-up, as every rolling restart has, is not a slow broker. `answers`: cluster -> (when its poll said
        so, broker -> how late it answers the collector's probes, in ms). `hurting`: cluster -> the brokers its
        open critical partition pages name (pipelines/slowed.py), asked only where a broker is slow. `waiting`:
        (cluster, partition) -> a canary write not answered yet (canary.still_waiting): how long clients wait
        already, before the round ends. `steady`: cluster -> broker -> how late it answered over the last few
        seconds, said by the same poll as `answers` (a milder spell is read from it)."""
        polls, found = [], []
        for name in sorted(set(clusters)):
            brokers = set(live.get(name, ()))
            came_back = {b: t for (c, b), t in (back_at or {}).items() if c == name}
            mine_jmx = {b: s for (c, b), s in jmx.items() if c == name and b in brokers}
            mine_canary = [s for s in canary.values() if s.cluster == name]
            mine_waiting = [s for s in (waiting or {}).values() if s.cluster == name]
            answered_at, answer_ms = (answers or {}).get(name, (None, {}))
            at = max([s.observed_at_ms for s in mine_jmx.values()] + [s.observed_at_ms for s in mine_canary + mine_waiting]
                     + ([answered_at] if answered_at is not None else []), default=None)
            if at is None or not brokers:
                continue
            steady_ms = (steady or {}).get(name, {})
            if answered_at is None or at - answered_at > FRESH_MS:
                answer_ms, steady_ms = {}, {}
            # each write counted against the broker it waited on (the leader unless a follower answers far later)
            fresh_canary = [waited_on(s, answer_ms) for s in mine_canary if at - s.observed_at_ms <= FRESH_MS]
            client = {b: s for (c, b), s in latency.client_latencies(fresh_canary).items() if c == name}
            failed = {b for c, b in latency.failed_leaders(fresh_canary) if c == name}
            waits = {b: w for (c, b), w in latency.waiting_leaders(
                waited_on(s, answer_ms) for s in mine_waiting if at - s.observed_at_ms <= FRESH_MS).items() if c == name}
            # its usual, of what a milder spell is read from (slow.Evidence.mild_ms)
            past = {} if answered_at is None else self._own_past(name, answered_at, {**answer_ms, **steady_ms})
            evidence = {}
            for b in brokers:
                j = mine_jmx.get(b)
                if j is None or at - j.observed_at_ms > FRESH_MS:
                    evidence[b] = slow.Evidence(client.get(b), answer_ms=answer_ms.get(b), client_failed=b in failed,
                                                answer_past_ms=past.get(b), client_waiting_s=waits.get(b),
                                                answer_steady_ms=steady_ms.get(b))
                else:
                    evidence[b] = slow.Evidence(client.get(b), j.error, j.gauges if j.error is None else None,
                                                j.scrape_ms if j.error is None else None, answer_ms.get(b), b in failed,
                                                past.get(b), waits.get(b),
                                                None if answered_at is None else answered_at - j.observed_at_ms,
                                                steady_ms.get(b))
            last_id, last_at = self._rounds.get(name, (0, 0))
            round_id, at = last_id + 1, max(at, last_at)  # rounds in order, whichever record came first
            self._rounds[name] = (round_id, at)
            polls.append(ScopePoll(name, slow.SCOPE, round_id, at))
            objective = self.objectives.get(name, self.default_objective_s)
            judged = slow.judge(evidence, objective, None if hurting is None else partial(hurting, name))
            if judged and log.isEnabledFor(logging.DEBUG):
                phases = ("produce_queue_p50_ms", "produce_local_p50_ms", "produce_local_p99_ms", "produce_remote_p50_ms")
                log.debug("cluster %s round %d: slow %s; evidence %s", name, round_id,
                          [(f.broker, f.cause, f.severity, f.settled, f.details.get("answer_ms")) for f in judged],
                          {b: (e.client_s, e.client_waiting_s, e.answer_ms, e.scrape_ms,
                               [(e.gauges or {}).get(k) for k in phases])
                           for b, e in sorted(evidence.items())})
            # a broker is slow when two rounds in a row say so (one late answer on a loaded host is not a slow
            # broker), or when how late it answers krm says so: a median of several answers already (`settled`)
            before, self._seen[name] = self._seen.get(name, set()), {f.broker for f in judged}
            found += [Finding(name, slow.SCOPE, slow.TYPE, f.severity, None, None, f.broker, f.cause, f.details, at,
                              round_id) for f in judged
                      if (f.broker in before or f.settled) and at - came_back.get(f.broker, at - WARMUP_MS) >= WARMUP_MS]
        return polls, found
