"""The canary's verdict: a partition of the canary topic that did not take an acks=all write within
the round's timeout is unavailable to producers, whatever the metadata says (Xinfra Monitor's
produce availability). Judged on the driver for each canary record (one per round and cluster). A round's early
record (its writes still waiting past the latency objective) is no verdict: it says only how long they wait
(for BROKER_SLOW's clients hurt, pipelines/slow_view.py).

Finding: PARTITION_UNAVAILABLE (critical), cause `canary_failed`, topic/partition the canary's,
`broker` the partition's preferred leader, details: the leader seen, the ISR the write waited on, the error. It resolves with the
next round that writes to the partition; it feeds krm_partition_unavailable like the other causes.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Iterable, Mapping

from pipelines.detectors.availability import CANARY_FAILED as CAUSE
from pipelines.detectors.availability import RULE, TYPE

SEVERITY = RULE.severity_of(CAUSE)
SCOPE = "canary"  # one poll marker per canary record resolves the round's partitions


@dataclass(frozen=True)
class CanaryFinding:
    partition: int
    broker: int
    details: dict[str, Any]


@dataclass(frozen=True)
class CanarySample:
    """The last round's result for one broker's canary partition (for /metrics)."""

    cluster: str
    broker: int
    partition: int
    produced: bool
    produce_ms: float | None
    e2e_ms: float | None
    observed_at_ms: int
    leader: int | None = None  # the partition's leader the round wrote to (None: unknown)
    isr: tuple[int, ...] = ()  # the in-sync replicas the write waited on, as the producer knew them (empty: unknown)
    # from a round's early record (canary_state.waiting): the write is not answered yet and has waited this long
    waiting_ms: float | None = None


def judge(state: dict[str, Any]) -> list[CanaryFinding]:
    """Pure: the canary record's partitions that did not take the write."""
    return [CanaryFinding(p["partition"], p["broker"], {"leader": p.get("leader"), "error": p.get("error"),
                                                        "produce_ms": p.get("produce_ms"), "isr": p.get("isr")})
            for p in state["partitions"] if not p["produced"]]


def samples(cluster: str, state: dict[str, Any], observed_at_ms: int) -> list[CanarySample]:
    return [CanarySample(cluster, p["broker"], p["partition"], bool(p["produced"]), p.get("produce_ms"),
                         p.get("e2e_ms"), observed_at_ms, p.get("leader"), tuple(p.get("isr") or ()),
                         p.get("waiting_ms") if state.get("waiting") else None)
            for p in state["partitions"]]


def still_waiting(held: Mapping[tuple[str, int], CanarySample],
                  new: Iterable[CanarySample]) -> dict[tuple[str, int], CanarySample]:
    """(cluster, partition) -> the early word of a write not answered yet: `held` with `new`'s early samples, less
    those a later round's own record answered (acknowledged, or failed at the round's timeout)."""
    out = dict(held)
    for s in new:
        key = (s.cluster, s.partition)
        if s.waiting_ms is not None:
            out[key] = s
        elif key in out and s.observed_at_ms >= out[key].observed_at_ms:
            del out[key]
    return out


__all__ = ["CAUSE", "SCOPE", "SEVERITY", "TYPE", "CanaryFinding", "CanarySample", "judge", "samples", "still_waiting"]
