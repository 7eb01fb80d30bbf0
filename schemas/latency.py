"""What the collectors and the pipeline share about a broker answering late."""

import math
import statistics
from typing import Mapping

# Below this nothing is slow, whatever its peers answer (pipelines/detectors/slow.py). A poll in which a
# broker answers the collector's probes this late always goes out (collectors/unchanged.py): the pipeline
# judges it; one in which every broker answers sooner is compared without the round trips, which move at
# every poll.
SLOW_MIN_S = 0.2
# A milder spell of late answers starts here (pipelines/detectors/slow.py); a canary or JMX round while a broker
# answers this late always goes out at once (collectors/routine_hold.py).
MILD_MIN_S = 0.02
# ... and at this many times its peers' median
MILD_FACTOR = 5.0
# ... and at this many times its own usual: a geometric moving average of its answer times over about USUAL_TAU_S, so a
# spell of late answers barely moves it and a broker always a little slower than its peers is not said; answers
# quicker than it move it over USUAL_DOWN_TAU_S, so a usual first taken while the broker was slow (a JVM warming up
# after a start, a spell) is not kept for the hour
PAST_FACTOR = 2.0
USUAL_TAU_S = 30 * 60.0
USUAL_DOWN_TAU_S = 2 * 60.0
FLOOR_MS = 0.05  # an answer time is never taken as shorter than this (the logarithm of 0)

Usual = tuple[float, float]  # a broker's usual answer time in ms, and when (seconds, any clock) it was last moved


def mildly_above(ms: float, peers_median_ms: float) -> bool:
    """An answer time (ms) at least MILD_MIN_S and MILD_FACTOR times its peers' median (ms): a milder spell's floor."""
    return ms >= max(MILD_MIN_S * 1000, MILD_FACTOR * peers_median_ms)


def moved(usual: Usual | None, ms: float, at_s: float) -> Usual:
    """`usual` moved by one answer time (ms) taken at `at_s`: the first one starts it; one no later than the last
    leaves it."""
    ms = max(ms, FLOOR_MS)
    if usual is None:
        return ms, at_s
    avg, last = usual
    if at_s <= last:
        return usual
    weight = 1 - math.exp(-(at_s - last) / (USUAL_TAU_S if ms > avg else USUAL_DOWN_TAU_S))
    return math.exp(math.log(avg) + weight * (math.log(ms) - math.log(avg))), at_s


def mild_spell(ms: float, peers_median_ms: float, usual_ms: float | None) -> bool:
    """A milder spell of late answers (ms): `mildly_above` its peers' median and PAST_FACTOR times its own usual
    (unknown: none said). The collector's poll check and BROKER_SLOW (pipelines/detectors/slow.py) both ask it."""
    return usual_ms is not None and mildly_above(ms, peers_median_ms) and ms >= PAST_FACTOR * usual_ms


def mildly_late(steady_ms: Mapping[int, float], usual_ms: Mapping[int, float]) -> set[int]:
    """The brokers whose steady answer time (collectors/answer_times.py `steady_s`, in ms) is a `mild_spell` against
    their peers' and their usual: a poll that says so goes out (collectors/unchanged.py), so the pipeline judges each
    while the spell lasts; a broker always that much slower than its peers keeps its polls home, as the pipeline would
    not say it."""
    out = set()
    for b, ms in steady_ms.items():
        peers = [p for q, p in steady_ms.items() if q != b]
        if peers and mild_spell(ms, statistics.median(peers), usual_ms.get(b)):
            out.add(b)
    return out
