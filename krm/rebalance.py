"""`krm plan rebalance`: even out replicas and preferred leaders with the fewest replica moves. Pure.

Why not Kafka's `kafka-reassign-partitions --generate`: it re-runs `assignReplicasToBrokers` for each
topic from a random start (tools/.../reassign/ReassignPartitionsCommand.java, `calculateAssignment`),
so it ignores where replicas already are and moves most of them. Here, per topic:

1. Targets. The topic's replicas (those on live or excluded brokers) divided over the live, not
   excluded brokers: each gets floor or ceil of the mean. The ceil goes first to brokers already
   above the floor (each such choice saves a move), then to brokers with the least replicas
   cluster-wide, so per-topic rounding does not pile up on one broker. A last pass trades ceil/floor
   between topics until cluster-wide totals are within one.
2. Moves. Each replica above target moves to a broker below target that holds no replica of the
   partition and keeps the partition's rack spread (as many distinct racks as before), taking the
   leaving replica's position in the list. Followers move before leaders, small partitions before
   large. Every move is needed, so the count equals the sum of excesses (the lower bound) unless a
   move is blocked, in which case a two-step move through a third broker is tried.
3. Preferred leaders. Without moving data, replicas are reordered so the first replica (Kafka's
   preferred leader) is spread as evenly, per topic and cluster-wide. Leadership follows at the next
   preferred election (auto.leader.rebalance.enable, or `kafka-leader-election --election-type
   PREFERRED`).

Replicas on brokers that are neither live nor excluded are left where they are: a broker that is
down for a restart is not drained by surprise, and nothing is moved onto it.
"""

from __future__ import annotations

from collections import Counter, defaultdict
from dataclasses import dataclass, field
from typing import Iterable, Mapping

from krm.errors import KrmError

TopicPartition = tuple[str, int]


@dataclass
class RebalancePlan:
    before: dict[TopicPartition, list[int]]
    after: dict[TopicPartition, list[int]]
    replica_moves: int  # replicas placed on a broker that did not hold them (data copied)
    lower_bound: int  # sum over topics of replicas above their broker's target
    bytes_moved: int | None  # None when partition sizes are unknown
    leader_changes: int  # partitions whose preferred leader changes
    unresolved: list[str] = field(default_factory=list)

    @property
    def changed(self) -> list[TopicPartition]:
        return sorted(tp for tp in self.after if self.after[tp] != self.before[tp])

    def kafka_json(self) -> dict:
        """The `--reassignment-json-file` of `kafka-reassign-partitions --execute`."""
        return {"version": 1, "partitions": [{"topic": t, "partition": p, "replicas": self.after[(t, p)]}
                                             for t, p in self.changed]}


def broker_counts(assignment: Mapping[TopicPartition, list[int]], brokers: Iterable[int]
                  ) -> dict[int, tuple[int, int]]:
    """broker -> (replicas, preferred leaderships) over `assignment`."""
    replicas = Counter(b for r in assignment.values() for b in r)
    leaders = Counter(r[0] for r in assignment.values() if r)
    return {b: (replicas[b], leaders[b]) for b in sorted(set(brokers) | set(replicas))}


def plan_rebalance(assignment: Mapping[TopicPartition, list[int]], live: Iterable[int], *,
                   exclude: Iterable[int] = (), topics: Iterable[str] | None = None,
                   racks: Mapping[int, str] | None = None,
                   sizes: Mapping[TopicPartition, int] | None = None) -> RebalancePlan:
    """The plan for `assignment` (every topic of the cluster, so cluster-wide totals are right);
    only partitions of `topics` (default: all) change."""
    exclude = set(exclude)
    targets = sorted(set(live) - exclude)
    if not targets:
        raise KrmError("no broker left to move replicas to: every live broker is excluded")
    racks = dict(racks or {})
    before = {tp: list(r) for tp, r in assignment.items()}
    after = {tp: list(r) for tp, r in assignment.items()}
    wanted = None if topics is None else set(topics)
    missing = (wanted or set()) - {t for t, _ in assignment}
    if missing:
        raise KrmError(f"unknown topic(s): {', '.join(sorted(missing))}")
    by_topic: dict[str, list[TopicPartition]] = defaultdict(list)
    for tp in sorted(after):
        if wanted is None or tp[0] in wanted:
            by_topic[tp[0]].append(tp)

    movable = set(targets) | exclude
    load = Counter({b: 0 for b in targets})  # cluster-wide replicas per target broker, as planned
    for r in after.values():
        load.update(b for b in r if b in load)
    want = {t: _targets(after, parts, targets, movable, load) for t, parts in
            sorted(by_topic.items(), key=lambda kv: -len(kv[1]))}
    _even_cluster(want, load, targets)

    unresolved: list[str] = []
    lower_bound = 0
    size_of = (lambda tp: sizes.get(tp, 0)) if sizes else (lambda tp: 0)
    for t, parts in by_topic.items():
        count = Counter(b for tp in parts for b in after[tp] if b in movable)
        lower_bound += sum(max(0, n - want[t].get(b, 0)) for b, n in count.items())
        _move_replicas(after, parts, want[t], count, targets, racks, size_of, unresolved, t)
    _balance_leaders(after, by_topic, targets)

    moves = 0
    moved_bytes = 0
    for tp in after:
        new = set(after[tp]) - set(before[tp])
        moves += len(new)
        moved_bytes += len(new) * size_of(tp)
    leader_changes = sum(1 for tp in after if after[tp][:1] != before[tp][:1])
    return RebalancePlan(before, after, moves, lower_bound, moved_bytes if sizes else None, leader_changes,
                         unresolved)


def _targets(after: Mapping[TopicPartition, list[int]], parts: list[TopicPartition], targets: list[int],
             movable: set[int], load: Counter) -> dict[int, int]:
    """Floor or ceil of the topic's mean per target broker (see the module docstring, step 1).
    Updates `load` to the planned cluster-wide totals."""
    count = Counter(b for tp in parts for b in after[tp] if b in movable)
    rf = max(len(after[tp]) for tp in parts)
    if rf > len(targets):
        raise KrmError(f"topic {parts[0][0]}: replication factor {rf} exceeds the {len(targets)} broker(s) left")
    base, extra = divmod(sum(count.values()), len(targets))
    order = sorted(targets, key=lambda b: (0 if count[b] > base else 1, load[b], b))
    want = {b: base + (1 if i < extra else 0) for i, b in enumerate(order)}
    for b in targets:
        load[b] += want[b] - count[b]
    return want


def _even_cluster(want: dict[str, dict[int, int]], load: Counter, targets: list[int]) -> None:
    """Trade a topic's ceil from the most loaded broker to the least loaded until totals are within one."""
    for _ in range(sum(len(w) for w in want.values())):
        hi = max(targets, key=lambda b: (load[b], b))
        lo = min(targets, key=lambda b: (load[b], b))
        if load[hi] - load[lo] <= 1:
            return
        topic = next((t for t, w in want.items() if w[hi] > w[lo]), None)
        if topic is None:
            return
        want[topic][hi] -= 1
        want[topic][lo] += 1
        load[hi] -= 1
        load[lo] += 1


def _rack_spread(replicas: list[int], racks: Mapping[int, str]) -> int:
    return len({racks.get(b, b) for b in replicas}) if racks else len(replicas)


def _move_replicas(after: dict[TopicPartition, list[int]], parts: list[TopicPartition], want: dict[int, int],
                   count: Counter, targets: list[int], racks: Mapping[int, str], size_of, unresolved: list[str],
                   topic: str) -> None:
    excess = {b: n - want.get(b, 0) for b, n in count.items() if n > want.get(b, 0)}
    deficit = {b: want[b] - count[b] for b in targets if want[b] > count[b]}
    # followers before leaders, small partitions first
    order = sorted(parts, key=lambda tp: (size_of(tp), tp[1]))
    for src in sorted(excess, key=lambda b: (b in targets, b)):
        for pos_first in (False, True):
            for tp in order:
                if excess[src] == 0:
                    break
                r = after[tp]
                if src not in r or (r[0] == src) != pos_first:
                    continue
                dst = _destination(r, src, deficit, racks)
                if dst is not None:
                    r[r.index(src)] = dst
                    excess[src] -= 1
                    deficit[dst] -= 1
        while excess[src] > 0 and _two_step(after, parts, src, want, deficit, racks):
            excess[src] -= 1
        if excess[src] > 0:
            unresolved.append(f"{topic}: broker {src} keeps {excess[src]} replica(s) above target "
                              "(every partition it holds already has a replica on each broker below target)")


def _destination(replicas: list[int], src: int, deficit: dict[int, int], racks: Mapping[int, str]) -> int | None:
    spread = _rack_spread(replicas, racks)
    best = None
    for dst, need in deficit.items():
        if need <= 0 or dst in replicas:
            continue
        trial = [dst if b == src else b for b in replicas]
        gain = _rack_spread(trial, racks)
        if gain < spread:
            continue
        key = (gain, need, -dst)
        if best is None or key > best[0]:
            best = (key, dst)
    return None if best is None else best[1]


def _two_step(after: dict[TopicPartition, list[int]], parts: list[TopicPartition], src: int,
              want: dict[int, int], deficit: dict[int, int], racks: Mapping[int, str]) -> bool:
    """src -> mid in one partition and mid -> dst in another: two moves for one unit of excess."""
    for dst, need in deficit.items():
        if need <= 0:
            continue
        for mid in want:
            if mid in (src, dst):
                continue
            a = next((tp for tp in parts if src in after[tp] and mid not in after[tp]
                      and _destination(after[tp], src, {mid: 1}, racks) == mid), None)
            b = next((tp for tp in parts if tp != a and mid in after[tp] and dst not in after[tp]
                      and _destination(after[tp], mid, {dst: 1}, racks) == dst), None)
            if a and b:
                after[a][after[a].index(src)] = mid
                after[b][after[b].index(mid)] = dst
                deficit[dst] -= 1
                return True
    return False


def _balance_leaders(after: dict[TopicPartition, list[int]], by_topic: dict[str, list[TopicPartition]],
                     targets: list[int]) -> None:
    """Reorder replicas so preferred leaders are within one per broker per topic, ceil going to the
    brokers leading least cluster-wide. Data does not move."""
    tset = set(targets)
    led = Counter({b: 0 for b in targets})
    led.update(r[0] for r in after.values() if r and r[0] in tset)
    for _t, parts in sorted(by_topic.items(), key=lambda kv: -len(kv[1])):
        count = Counter(after[tp][0] for tp in parts if after[tp][0] in tset)
        base, extra = divmod(sum(count.values()), len(targets))
        order = sorted(targets, key=lambda b: (0 if count[b] > base else 1, led[b], b))
        want = {b: base + (1 if i < extra else 0) for i, b in enumerate(order)}
        for tp in parts:
            r = after[tp]
            o = r[0]
            if o not in tset or count[o] <= want[o]:
                continue
            u = next((b for b in r[1:] if b in tset and count[b] < want[b]), None)
            if u is None:
                continue
            i = r.index(u)
            r[0], r[i] = u, o
            count[o] -= 1
            count[u] += 1
            led[o] -= 1
            led[u] += 1
