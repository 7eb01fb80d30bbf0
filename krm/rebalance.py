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

from foundation.errors import KrmError

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
    for src in sorted(excess, key=lambda b: (b in targets, b)):
        # followers before leaders, small partitions first
        holding = sorted((tp for tp in parts if src in after[tp]),
                         key=lambda tp: (after[tp][0] == src, size_of(tp), tp[1]))
        for tp, dst in _match(after, holding, src, excess[src], deficit, racks).items():
            r = after[tp]
            r[r.index(src)] = dst
            excess[src] -= 1
            deficit[dst] -= 1
        while excess[src] > 0 and _two_step(after, parts, src, want, deficit, racks):
            excess[src] -= 1
        if excess[src] > 0:
            unresolved.append(f"{topic}: broker {src} keeps {excess[src]} replica(s) above target "
                              "(every partition it holds already has a replica on each broker below target)")


def _match(after: Mapping[TopicPartition, list[int]], holding: list[TopicPartition], src: int, wanted: int,
           deficit: Mapping[int, int], racks: Mapping[int, str]) -> dict[TopicPartition, int]:
    """Up to `wanted` partitions of `holding` (in preference order) each given a broker below target
    that may take src's replica, at most deficit[b] per broker."""
    options = {}
    for tp in holding:
        spread = _rack_spread(after[tp], racks)
        options[tp] = [d for d, need in sorted(deficit.items(), key=lambda kv: (-kv[1], kv[0])) if need > 0
                       and d not in after[tp] and _rack_spread([d if b == src else b for b in after[tp]], racks) >= spread]
    return assign_with_capacity(holding, options, deficit, wanted)


def assign_with_capacity(items: list, options: Mapping, capacity: Mapping[int, int], limit: int | None = None) -> dict:
    """item -> one of options[item], at most capacity[b] items per b, as many items as possible (up
    to `limit`), earlier items and earlier options preferred: a bipartite b-matching by augmenting
    paths, so a greedy early choice never blocks a later item that had only one way out."""
    assigned: dict = {}
    taken: dict[int, list] = defaultdict(list)

    def augment(item, seen: set[int]) -> bool:
        for d in options.get(item, ()):
            if d in seen:
                continue
            seen.add(d)
            if len(taken[d]) < capacity.get(d, 0):
                taken[d].append(item)
                assigned[item] = d
                return True
            for other in list(taken[d]):
                if augment(other, seen):
                    taken[d].remove(other)
                    taken[d].append(item)
                    assigned[item] = d
                    return True
        return False

    for item in items:
        if limit is not None and len(assigned) >= limit:
            break
        augment(item, set())
    return assigned


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
    """Reorder replicas so preferred leaders are within one per broker per topic, the ceil going to
    the brokers leading least cluster-wide. Data does not move: the cost is leadership changes only."""
    tset = set(targets)
    in_scope = {tp for parts in by_topic.values() for tp in parts}
    led = Counter({b: 0 for b in targets})  # leaderships settled so far: other topics, then each one done
    led.update(r[0] for tp, r in after.items() if tp not in in_scope and r and r[0] in tset)
    for _t, parts in sorted(by_topic.items(), key=lambda kv: -len(kv[1])):
        count = Counter(after[tp][0] for tp in parts if after[tp][0] in tset)
        base, extra = divmod(sum(count.values()), len(targets))
        # the ceil to the brokers leading least so far; among equals, keep current leaders
        order = sorted(targets, key=lambda b: (led[b], 0 if count[b] > base else 1, b))
        want = {b: base + (1 if i < extra else 0) for i, b in enumerate(order)}
        eligible = [tp for tp in parts if any(x in tset for x in after[tp])]
        options = {tp: ([after[tp][0]] if after[tp][0] in tset else [])
                   + sorted((x for x in after[tp][1:] if x in tset), key=lambda x: (led[x], x)) for tp in eligible}
        chosen = assign_with_capacity(eligible, options, want)
        for tp, u in chosen.items():
            r = after[tp]
            i = r.index(u)
            r[0], r[i] = u, r[0]
        led.update(after[tp][0] for tp in parts if after[tp][0] in tset)
    _even_leaders(after, by_topic, targets, led)


def _even_leaders(after: dict[TopicPartition, list[int]], by_topic: dict[str, list[TopicPartition]],
                  targets: list[int], led: Counter) -> None:
    """Cluster-wide pass: move one preferred leadership from the broker leading most to the one
    leading least, along a chain of swaps (hi -> x -> ... -> lo, each within one partition's replicas)
    that keeps every topic within one of its mean, until brokers are within one."""
    topic_of = {tp: t for t, parts in by_topic.items() for tp in parts}
    per_topic = {t: Counter(after[tp][0] for tp in parts) for t, parts in by_topic.items()}
    leads: dict[int, set[TopicPartition]] = defaultdict(set)
    for tp in topic_of:
        leads[after[tp][0]].add(tp)
    for _ in range(len(topic_of)):
        hi = max(targets, key=lambda b: (led[b], b))
        lo = min(targets, key=lambda b: (led[b], b))
        if led[hi] - led[lo] <= 1:
            return
        path = _leader_chain(after, hi, lo, leads, per_topic, topic_of, set(targets))
        if path is None:
            return
        for tp, y in path:
            x = after[tp][0]
            r = after[tp]
            i = r.index(y)
            r[0], r[i] = y, x
            t = topic_of[tp]
            per_topic[t][x] -= 1
            per_topic[t][y] += 1
            leads[x].discard(tp)
            leads[y].add(tp)
        led[hi] -= 1
        led[lo] += 1


def _leader_chain(after, hi, lo, leads, per_topic, topic_of, tset) -> list[tuple[TopicPartition, int]] | None:
    """Breadth-first: [(partition, new leader), ...] from hi to lo, or None."""
    came: dict[int, tuple[int, TopicPartition] | None] = {hi: None}
    queue = [hi]
    for x in queue:
        for tp in sorted(leads[x]):
            t = topic_of[tp]
            for y in after[tp][1:]:
                if y in came or y not in tset or per_topic[t][x] <= per_topic[t][y]:
                    continue
                came[y] = (x, tp)
                if y == lo:
                    path = []
                    while (step := came[y]) is not None:
                        x_, tp_ = step
                        path.append((tp_, y))
                        y = x_
                    return path[::-1]
                queue.append(y)
    return None
