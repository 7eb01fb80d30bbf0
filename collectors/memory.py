"""What a collector remembers of the previous poll, so each observation can say how it moved. Pure.

The pipeline stays stateless per partition (bounded state, Spark expressions only) because each
partition observation carries what only consecutive polls reveal:
- `write_rate`: messages per second appended to the leader since the previous poll, for the time
  lag estimate of REPLICA_LAG;
- `hw_stalled_since_ms`: since when the leader's high watermark has not moved while its log end
  offset is ahead of it (an idle partition, LEO == HW, is not stalled), for HW_STALL;
- `previous`: the previous poll's leader, epoch, ISR, HW and replica LEOs, present only when the
  leader epoch changed or an offset went backwards, for UNCLEAN_LEADER_ELECTION, OFFSET_REGRESSION
  and LOG_TRUNCATION. Records grow only when something happened.
A restarted collector starts with an empty memory: the first poll carries none of the three.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class Seen:
    at_ms: int
    leader: int
    leader_epoch: int | None
    isr: tuple[int, ...]
    hw: int | None  # last known leader HW
    leos: tuple[tuple[int, int], ...]  # (broker, last known LEO)
    hw_since_ms: int | None  # set while HW == hw and leader LEO > hw
    hw_peak: int | None  # the highest HW seen: what was committed, even after a regression


class PartitionMemory:
    def __init__(self) -> None:
        self._seen: dict[tuple[str, int], Seen] = {}

    def annotate(self, topic: str, p: dict[str, Any], at_ms: int) -> dict[str, Any]:
        """Add write_rate / hw_stalled_since_ms / previous to partition dict `p` (in place) and
        remember it. `p` carries leader, leader_epoch, isr, high_watermark, replica_offsets."""
        key = (topic, p["partition"])
        prev = self._seen.get(key)
        hw = p.get("high_watermark")
        leos = tuple((r["broker"], r["log_end_offset"]) for r in p.get("replica_offsets") or [])
        leader_leo = dict(leos).get(p["leader"])
        since = None
        if hw is not None and leader_leo is not None and leader_leo > hw:
            # the clock starts at the first poll that saw this HW behind the LEO, not when it was set:
            # an idle partition's HW legitimately stays put
            same_hw = prev is not None and prev.hw == hw and prev.leader_epoch == p.get("leader_epoch")
            since = prev.hw_since_ms if same_hw and prev is not None and prev.hw_since_ms is not None else at_ms
        p["hw_stalled_since_ms"] = since
        if prev is not None:
            prev_leader_leo = dict(prev.leos).get(prev.leader)
            dt_ms = at_ms - prev.at_ms
            if (leader_leo is not None and prev_leader_leo is not None and prev.leader == p["leader"]
                    and dt_ms > 0 and leader_leo >= prev_leader_leo):
                p["write_rate"] = round((leader_leo - prev_leader_leo) * 1000.0 / dt_ms, 3)
            if _moved(prev, p, hw, leos):
                p["previous"] = {"leader": prev.leader, "leader_epoch": prev.leader_epoch, "isr": list(prev.isr),
                                 "high_watermark": prev.hw, "max_high_watermark": prev.hw_peak,
                                 "replica_offsets": [{"broker": b, "log_end_offset": o} for b, o in prev.leos]}
        # Remember the last known offsets of replicas that did not answer this time (a dead broker):
        # its truncation shows when it comes back, and a regression of a leaderless HW when it returns.
        known_hw = hw if hw is not None or prev is None else prev.hw
        known_leos = tuple(sorted({**dict(prev.leos if prev else ()), **dict(leos)}.items()))
        peak = max((h for h in (hw, prev.hw_peak if prev else None) if h is not None), default=None)
        self._seen[key] = Seen(at_ms, p["leader"], p.get("leader_epoch"), tuple(p["isr"]), known_hw, known_leos, since,
                               peak)
        return p

    def forget_missing(self, present: set[tuple[str, int]]) -> None:
        """Drop partitions of deleted topics, so memory follows the cluster's size."""
        for key in [k for k in self._seen if k not in present]:
            del self._seen[key]


def _moved(prev: Seen, p: dict[str, Any], hw: int | None, leos: tuple[tuple[int, int], ...]) -> bool:
    if prev.leader_epoch is not None and p.get("leader_epoch") is not None and prev.leader_epoch != p["leader_epoch"]:
        return True
    if prev.leader != p["leader"]:
        return True
    if hw is not None and prev.hw is not None and hw < prev.hw:
        return True
    before = dict(prev.leos)
    return any(b in before and o < before[b] for b, o in leos)
