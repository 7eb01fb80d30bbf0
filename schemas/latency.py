"""What the collectors and the pipeline share about a broker answering late."""

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


def mildly_above(ms: float, peers_median_ms: float) -> bool:
    """An answer time (ms) at least MILD_MIN_S and MILD_FACTOR times its peers' median (ms): a milder spell's floor."""
    return ms >= max(MILD_MIN_S * 1000, MILD_FACTOR * peers_median_ms)


def mildly_late(steady_ms: Mapping[int, float]) -> set[int]:
    """The brokers whose steady answer time (collectors/answer_times.py `steady_s`, in ms) is at least MILD_MIN_S and
    MILD_FACTOR times their peers' median: a poll that says so goes out (collectors/unchanged.py), so the pipeline
    judges each while the spell lasts. The pipeline also wants it twice its own usual, which it alone keeps."""
    out = set()
    for b, ms in steady_ms.items():
        peers = [p for q, p in steady_ms.items() if q != b]
        if peers and mildly_above(ms, statistics.median(peers)):
            out.add(b)
    return out
