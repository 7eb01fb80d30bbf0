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

from typing import Any


class Seen:
    """One partition at the last poll. A plain class with slots: one per partition, built every poll."""

    __slots__ = ("at_ms", "leader", "leader_epoch", "isr", "hw", "leos", "hw_since_ms", "hw_peak", "elr", "last_known_elr",
                 "replicas", "adding")

    def __init__(self, at_ms: int, leader: int, leader_epoch: int | None, isr: list[int], hw: int | None,
                 leos: dict[int, int], hw_since_ms: int | None, hw_peak: int | None,
                 elr: list[int] | None = None, last_known_elr: list[int] | None = None,
                 replicas: list[int] | None = None, adding: list[int] | None = None) -> None:
        self.at_ms = at_ms
        self.leader = leader
        self.leader_epoch = leader_epoch
        self.isr = isr
        self.hw = hw  # last known leader HW
        self.leos = leos  # broker -> last known LEO
        self.hw_since_ms = hw_since_ms  # set while HW == hw and leader LEO > hw
        self.hw_peak = hw_peak  # the highest HW seen: what was committed, even after a regression
        self.elr = elr  # KRaft ELR and last known ELR (None: not reported)
        self.last_known_elr = last_known_elr
        self.replicas = replicas  # the replica set, and the replicas a reassignment was adding
        self.adding = adding


class PartitionMemory:
    def __init__(self) -> None:
        self._seen: dict[tuple[str, int], Seen] = {}

    def annotate(self, topic: str, p: dict[str, Any], at_ms: int) -> dict[str, Any]:
        """Add write_rate / hw_stalled_since_ms / previous to partition dict `p` (in place) and
        remember it. `p` carries leader, leader_epoch, isr, high_watermark, replica_offsets.
        On the collector's hot path (every partition, every poll): plain dicts, no copies."""
        key = (topic, p["partition"])
        prev = self._seen.get(key)
        hw = p.get("high_watermark")
        leader = p["leader"]
        epoch = p.get("leader_epoch")
        leos = {r["broker"]: r["log_end_offset"] for r in p.get("replica_offsets") or ()}
        leader_leo = leos.get(leader)
        since = None
        if hw is not None and leader_leo is not None and leader_leo > hw:
            # the clock starts at the first poll that saw this HW behind the LEO, not when it was set:
            # an idle partition's HW legitimately stays put
            same_hw = prev is not None and prev.hw == hw and prev.leader_epoch == epoch
            since = prev.hw_since_ms if same_hw and prev.hw_since_ms is not None else at_ms  # type: ignore[union-attr]
        p["hw_stalled_since_ms"] = since
        elr, lk_elr = p.get("elr"), p.get("last_known_elr")
        replicas, adding = p.get("replicas"), p.get("adding_replicas")
        if prev is None:
            self._seen[key] = Seen(at_ms, leader, epoch, p["isr"], hw, leos, since, hw, elr, lk_elr, replicas, adding)
            return p
        prev_leos = prev.leos
        prev_leader_leo = prev_leos.get(prev.leader)
        dt_ms = at_ms - prev.at_ms
        if (leader_leo is not None and prev_leader_leo is not None and prev.leader == leader
                and dt_ms > 0 and leader_leo >= prev_leader_leo):
            p["write_rate"] = round((leader_leo - prev_leader_leo) * 1000.0 / dt_ms, 3)
        moved = ((prev.leader_epoch is not None and epoch is not None and prev.leader_epoch != epoch)
                 or prev.leader != leader
                 or (hw is not None and prev.hw is not None and hw < prev.hw)
                 or any(o < prev_leos[b] for b, o in leos.items() if b in prev_leos))
        if moved:
            p["previous"] = {"leader": prev.leader, "leader_epoch": prev.leader_epoch, "isr": list(prev.isr),
                             "high_watermark": prev.hw, "max_high_watermark": prev.hw_peak,
                             "replica_offsets": [{"broker": b, "log_end_offset": o} for b, o in sorted(prev_leos.items())]}
            if prev.elr is not None:
                p["previous"]["elr"] = list(prev.elr)
                p["previous"]["last_known_elr"] = list(prev.last_known_elr or ())
            if prev.replicas is not None:
                p["previous"]["replicas"] = list(prev.replicas)
            if prev.adding:
                p["previous"]["adding_replicas"] = list(prev.adding)
        # Remember the last known offsets of replicas that did not answer this time (a dead broker):
        # its truncation shows when it comes back, and a regression of a leaderless HW when it returns.
        known_hw = hw if hw is not None else prev.hw
        known_leos = leos if prev_leos.keys() <= leos.keys() else {**prev_leos, **leos}
        peak = prev.hw_peak if hw is None else (hw if prev.hw_peak is None or hw > prev.hw_peak else prev.hw_peak)
        self._seen[key] = Seen(at_ms, leader, epoch, p["isr"], known_hw, known_leos, since, peak, elr, lk_elr,
                               replicas, adding)
        return p

    def forget_missing(self, present: set[tuple[str, int]]) -> None:
        """Drop partitions of deleted topics, so memory follows the cluster's size."""
        for key in [k for k in self._seen if k not in present]:
            del self._seen[key]
