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
- `leader_error_since_ms` (with the caller's `leader_error`, absent when none): since when the
  elected leader has not served the partition (collectors/poll_records.py says why), for
  PARTITION_UNAVAILABLE;
- `lagging` (absent when none): the followers that lag — out of the ISR, or at least
  `history_lag_floor_s` behind the leader at the write rate (behind at all when the rate is
  unknown or 0): the history path keeps their replica_lag rows at every poll;
- `changed` (true, else absent): the leader, epoch, replicas, ISR or lagging followers differ from
  the previous poll, or there is none; `keyframe` (true, else absent): the first poll of the
  topic's `history_keyframe_s` interval (each topic's intervals start at an offset of its own, so a
  poll carries a share of the keyframes, not all of them at once; one offset per topic, so a topic
  whose partitions do not move has nothing to publish between its keyframes). The history path
  writes a partition's row only on those (docs/history.md), with no state of its own.
A restarted collector starts with an empty memory: the first poll carries none of the three and
marks every partition `changed`.
"""

from __future__ import annotations

import zlib

from schemas.quiet import STOPPED_FETCHER_WINDOW_MS, Thresholds
from schemas.typed import Partition, Previous


class Seen:
    """One partition at the last poll. A plain class with slots: one per partition, built every poll."""

    __slots__ = ("at_ms", "leader", "leader_epoch", "isr", "hw", "leos", "hw_since_ms", "hw_peak", "elr", "last_known_elr",
                 "replicas", "adding", "lagging", "phase")

    def __init__(self, at_ms: int, leader: int, leader_epoch: int | None, isr: list[int], hw: int | None,
                 leos: dict[int, int], hw_since_ms: int | None, hw_peak: int | None,
                 elr: list[int] | None = None, last_known_elr: list[int] | None = None,
                 replicas: list[int] | None = None, adding: list[int] | None = None,
                 lagging: list[int] | None = None, phase: int = 0) -> None:
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
        self.lagging = lagging  # the followers that lagged (the history's rule, module docstring)
        self.phase = phase  # ms added to the clock before cutting it into keyframe intervals


def _went_back(leos: dict[int, int], before: dict[int, int]) -> bool:
    """Some replica's log end offset is below what it was (a plain loop: every partition, every poll)."""
    for b, o in leos.items():
        was = before.get(b)
        if was is not None and o < was:
            return True
    return False


_NONE: list[int] = []  # no follower lags (shared, never changed)


def lagging(leader: int, isr: list[int], leos: dict[int, int],
            leader_leo: int | None, rate: float | None, floor_s: float) -> list[int]:
    """The followers that answered and lag: out of the ISR, or `floor_s` behind at `rate` messages/s
    (behind at all when the rate is unknown or 0). Sorted. `annotate` decides the usual case (every
    replica in the ISR, the slowest within the floor) inline, before calling this."""
    out = []
    for b, o in leos.items():
        if b == leader:
            continue
        if b not in isr:
            out.append(b)
        elif leader_leo is not None and leader_leo > o and (not rate or (leader_leo - o) / rate >= floor_s):
            out.append(b)
    return sorted(out)


class PartitionMemory:
    def __init__(self, keyframe_s: float = 300.0, lag_floor_s: float = 1.0) -> None:
        self._keyframe_ms = max(1, int(keyframe_s * 1000))
        self._floor_s = lag_floor_s
        self._seen: dict[tuple[str, int], Seen] = {}
        # still_quiet's partitions that were also idle: every replica at the leader's LEO, the HW there
        # too (no lag, no stall clock), so the same answers at a later poll would be judged the same
        self.idle = 0
        # partitions being moved: (adding replicas, their highest LEOs seen, when one last grew)
        self._moves: dict[tuple[str, int], tuple[tuple[int, ...], dict[int, int], int]] = {}
        # partitions whose elected leader does not serve them: since when (refusal_since)
        self._refused: dict[tuple[str, int], int] = {}

    def refusal_since(self, key: tuple[str, int], error: str | None, at_ms: int) -> int | None:
        """`leader_error_since_ms`: since when the partition's elected leader has not served it, counted from
        the first poll of an unbroken run of polls that saw it so, whatever the reason at each (a stale
        metadata that turns into OFFSET_NOT_AVAILABLE is one outage to its clients); None (and forgotten)
        when it was served. The caller may skip the call while `any_refusal` is False and nothing refuses."""
        if error is None:
            self._refused.pop(key, None)
            return None
        return self._refused.setdefault(key, at_ms)

    @property
    def any_refusal(self) -> bool:
        return bool(self._refused)

    def _progress(self, key: tuple[str, int], p: Partition, leos: dict[int, int], at_ms: int) -> None:
        """`reassignment_progress_ms`: when the adding replicas last copied anything (a log end offset
        of one of them grew), so a reassignment that stopped moving shows (PARTITION_REASSIGNING
        `stalled`). A poll they did not answer is no news."""
        adding = tuple(p.get("adding_replicas") or ())
        if not adding:
            self._moves.pop(key, None)
            return
        now = {b: leos[b] for b in adding if b in leos}
        before = self._moves.get(key)
        if before is None or before[0] != adding:
            self._moves[key] = (adding, now, at_ms)
        else:
            _, seen, since = before
            if any(o > seen.get(b, -1) for b, o in now.items()):
                self._moves[key] = (adding, {**seen, **now}, at_ms)
        p["reassignment_progress_ms"] = self._moves[key][2]

    def annotate(self, topic: str, p: Partition, at_ms: int, leos: dict[int, int] | None = None) -> Partition:
        """Add write_rate / hw_stalled_since_ms / previous to partition dict `p` (in place) and
        remember it. `p` carries leader, leader_epoch, isr, high_watermark, replica_offsets;
        `leos`, when the caller has it, is replica_offsets as broker -> LEO (not copied: kept).
        On the collector's hot path (every partition, every poll): plain dicts, no copies."""
        key = (topic, p["partition"])
        prev = self._seen.get(key)
        hw = p.get("high_watermark")
        leader = p["leader"]
        epoch = p.get("leader_epoch")
        if leos is None:
            leos = {r["broker"]: r["log_end_offset"] for r in p.get("replica_offsets") or ()}
        leader_leo = leos.get(leader)
        if p.get("adding_replicas") or key in self._moves:  # a move: rare, so no call otherwise
            self._progress(key, p, leos, at_ms)
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
            behind = lagging(leader, p["isr"], leos, leader_leo, None, self._floor_s)
            if behind:
                p["lagging"] = behind
            p["changed"] = True
            self._seen[key] = Seen(at_ms, leader, epoch, p["isr"], hw, leos, since, hw, elr, lk_elr, replicas, adding,
                                   behind, self._phase(topic))
            return p
        prev_leos = prev.leos
        prev_leader_leo = prev_leos.get(prev.leader)
        dt_ms = at_ms - prev.at_ms
        if (leader_leo is not None and prev_leader_leo is not None and prev.leader == leader
                and dt_ms > 0 and leader_leo >= prev_leader_leo):
            p["write_rate"] = round((leader_leo - prev_leader_leo) * 1000.0 / dt_ms, 3)
            # a follower whose log stood still since the last poll while the leader had more for it then
            # fetched nothing for a whole poll interval (a fetch returns at once when there is data)
            stalled = [b for b in replicas or () if b != leader and (o := leos.get(b)) is not None
                       and o == prev_leos.get(b) and o < prev_leader_leo]
            if stalled:
                p["stalled_followers"] = stalled
        isr, rate = p["isr"], p.get("write_rate")
        # lagging()'s usual case inline (every replica in the ISR, the slowest within the floor): no call
        slowest = leader_leo - min(leos.values()) if leader_leo is not None and leos else None
        if (slowest is not None and replicas is not None and len(isr) == len(replicas)
                and (slowest <= 0 or (rate and slowest / rate < self._floor_s))):
            behind = _NONE
        else:
            behind = lagging(leader, isr, leos, leader_leo, rate, self._floor_s)
            if behind:
                p["lagging"] = behind
        if (prev.leader != leader or prev.leader_epoch != epoch or prev.isr != isr or prev.replicas != replicas
                or prev.lagging != behind):
            p["changed"] = True
        elif (at_ms + prev.phase) // self._keyframe_ms != (prev.at_ms + prev.phase) // self._keyframe_ms:
            p["keyframe"] = True
        moved = ((prev.leader_epoch is not None and epoch is not None and prev.leader_epoch != epoch)
                 or prev.leader != leader
                 or (hw is not None and prev.hw is not None and hw < prev.hw)
                 or _went_back(leos, prev_leos))
        if moved:
            was: Previous = {"leader": prev.leader, "leader_epoch": prev.leader_epoch, "isr": list(prev.isr),
                             "high_watermark": prev.hw, "max_high_watermark": prev.hw_peak,
                             "replica_offsets": [{"broker": b, "log_end_offset": o} for b, o in sorted(prev_leos.items())]}
            if prev.elr is not None:
                was["elr"] = list(prev.elr)
                was["last_known_elr"] = list(prev.last_known_elr or ())
            if prev.replicas is not None:
                was["replicas"] = list(prev.replicas)
            if prev.adding:
                was["adding_replicas"] = list(prev.adding)
            p["previous"] = was
        elected = leader >= 0 and (prev.leader != leader or (prev.leader_epoch is not None and epoch is not None
                                                              and prev.leader_epoch != epoch))
        if elected and hw is None:
            # A new leader that has not answered yet (it returns no offsets until its HW is
            # established): keep the state before the election, so the next poll, which reads its
            # offsets, carries the same `previous` and an unclean election is judged with them.
            prev.at_ms = at_ms
            return p
        # Remember the last known offsets of replicas that did not answer this time (a dead broker):
        # its truncation shows when it comes back, and a regression of a leaderless HW when it returns.
        known_hw = hw if hw is not None else prev.hw
        known_leos = leos if prev_leos.keys() <= leos.keys() else {**prev_leos, **leos}
        peak = prev.hw_peak if hw is None else (hw if prev.hw_peak is None or hw > prev.hw_peak else prev.hw_peak)
        # updated in place (`previous` above was copied out): no new object per partition per poll
        prev.at_ms, prev.leader, prev.leader_epoch, prev.isr = at_ms, leader, epoch, p["isr"]
        prev.hw, prev.leos = known_hw, known_leos
        prev.hw_since_ms, prev.hw_peak, prev.elr, prev.last_known_elr = since, peak, elr, lk_elr
        prev.replicas, prev.adding, prev.lagging = replicas, adding, behind
        return p

    def still_quiet(self, key: tuple[str, int], leader: int, epoch: int | None, isr: list[int], replicas: list[int],
                    elr: list[int] | None, last_known_elr: list[int] | None, hw: int | None,
                    leo_by_broker: dict[int, dict[int, int]], at_ms: int, window_ms: int, t: Thresholds) -> bool:
        """The steady partition's short way: True when partition `key`, led by a live and reachable broker
        with the whole replica set in the ISR (the caller's checks), has the leader, epoch, ISR, replicas
        and ELR of the last poll, every replica answered (`leo_by_broker`: broker -> partition -> LEO, the
        topic's), no offset went back, and it is quiet (schemas/quiet.py) and no keyframe. It is then
        remembered exactly as `annotate` would have remembered it, and the caller builds nothing for it
        (a v4 record leaves it out). False: nothing was touched, the caller takes the full way.
        tests/unit/test_collector_fast_path.py holds the two ways equal, record for record."""
        prev = self._seen.get(key)
        if (prev is None or hw is None or prev.leader != leader or prev.leader_epoch != epoch or prev.isr != isr
                or prev.replicas != replicas or prev.lagging or prev.adding or prev.elr != elr
                or prev.last_known_elr != last_known_elr or key in self._moves
                or (self._refused and key in self._refused)):  # (the full way forgets a refusal ended)
            return False
        prev_leos, prev_hw, pid = prev.leos, prev.hw, key[1]
        if len(prev_leos) != len(replicas) or (prev_hw is not None and hw < prev_hw):
            return False
        now = []  # the replicas' LEOs, in replica order
        was_leader = prev_leos.get(leader, -1)
        for b in replicas:
            of_b = leo_by_broker.get(b)
            if of_b is None:
                return False
            o = of_b.get(pid)
            was = prev_leos.get(b)
            if o is None or was is None or o < was:
                return False  # a replica unanswered or new (the full way), or went back (`previous` is published)
            if o == was and o < was_leader:
                return False  # a follower that fetched nothing since the last poll (annotate's stalled_followers)
            now.append(o)
        if not now or leader not in replicas:
            return False
        leader_leo, lowest = now[replicas.index(leader)], min(now)
        phase, k = prev.phase, self._keyframe_ms
        if (at_ms + phase) // k != (prev.at_ms + phase) // k:
            return False  # a keyframe: published
        behind = leader_leo - lowest
        if behind > 0:  # a follower behind: quiet only within the lag floor and REPLICA_LAG's thresholds
            prev_leader_leo = prev_leos[leader]
            dt_ms = at_ms - prev.at_ms
            if behind >= t.lag_messages or dt_ms <= 0:
                return False
            rate = round((leader_leo - prev_leader_leo) * 1000.0 / dt_ms, 3)  # annotate's write_rate
            if not rate or behind / rate >= self._floor_s or behind / rate >= t.lag_seconds:
                return False
        since = None
        if leader_leo > hw:  # the HW behind the LEO: annotate's stall clock
            since = prev.hw_since_ms if prev_hw == hw and prev.hw_since_ms is not None else at_ms
            if at_ms - since >= window_ms or at_ms - since >= STOPPED_FETCHER_WINDOW_MS:
                return False  # (every replica answered: a stall HW_STALL judges as a stopped fetcher)
        prev_leos.update(zip(replicas, now))  # the same replicas as remembered: updated in place (no dict a poll)
        prev.at_ms, prev.hw, prev.hw_since_ms = at_ms, hw, since
        if prev.hw_peak is None or hw > prev.hw_peak:
            prev.hw_peak = hw
        if behind == 0 and since is None:
            self.idle += 1
        return True

    def _phase(self, topic: str) -> int:
        return zlib.crc32(topic.encode()) % self._keyframe_ms

    def keyframe_interval(self, topic: str, at_ms: int) -> tuple[int, int]:
        """[start, end) in ms of the topic's keyframe interval holding `at_ms`: a partition of it
        remembered at `at_ms` is at its keyframe at its first poll outside it."""
        phase, k = self._phase(topic), self._keyframe_ms
        start = (at_ms + phase) // k * k - phase
        return start, start + k

    def seen(self, key: tuple[str, int]) -> Seen | None:
        return self._seen.get(key)

    def mark_change(self, topic: str, p: Partition) -> Partition:
        """Mark `changed` on a partition of a metadata-only record (ZooKeeper's mirror, published the
        moment a watch fires, between polls) whose state differs from the last poll, without
        remembering it: the next poll is compared with that poll still, and is marked too."""
        prev = self._seen.get((topic, p["partition"]))
        if (prev is None or prev.leader != p["leader"] or prev.leader_epoch != p.get("leader_epoch")
                or prev.isr != p["isr"] or prev.replicas != p.get("replicas")):
            p["changed"] = True
        return p

    def forget_missing(self, present: set[tuple[str, int]]) -> None:
        """Drop partitions of deleted topics, so memory follows the cluster's size."""
        for key in [k for k in self._seen if k not in present]:
            del self._seen[key]
        for key in [k for k in self._moves if k not in present]:
            del self._moves[key]
        for key in [k for k in self._refused if k not in present]:
            del self._refused[key]
