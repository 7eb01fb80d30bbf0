"""Replica moves: `krm plan rebalance` against Kafka's `kafka-reassign-partitions --generate`, on the
same imbalanced assignments, and the planner's time as the assignment grows.

`--generate` re-runs AdminUtils.assignReplicasToBrokers per topic from a random start
(ReassignPartitionsCommand.calculateAssignment); krm/assignment.py reproduces that function exactly
(checked against Kafka's own code in tests/integration/test_assignment_vs_kafka.py), so its moves are
counted here over --seeds random starts (mean, min-max). A move is one replica placed on a broker
that did not hold it: one copy of the partition's data.

Usage: .venv/bin/python benchmarks/rebalance_plan.py [--seeds 20] [--sizes 1000,10000,50000]
"""

from __future__ import annotations

import argparse
import random
import statistics
import time
from collections import Counter


from krm.assignment import assign, expansion_inputs
from krm.rebalance import plan_rebalance


def topics(n_topics, partitions, rf, brokers, rng, racks=None):
    out = {}
    for t in range(n_topics):
        order = brokers[:]
        rng.shuffle(order)  # the controller's unsorted broker list
        for p, r in assign(order if not racks else brokers, partitions, rf, racks=racks, rng=rng).items():
            out[(f"t{t}", p)] = r
    return out


def expanded(n_topics, created, total, rf, brokers, rng):
    out = {}
    for t in range(n_topics):
        order = brokers[:]
        rng.shuffle(order)
        a = assign(order, created, rf, rng=rng)
        o, s, k = expansion_inputs(brokers, a[0], created)
        a.update(assign(o, total - created, rf, start_index=s, start_partition=k))
        out.update({(f"t{t}", p): r for p, r in a.items()})
    return out


def scenarios(rng):
    b6, b9 = list(range(6)), list(range(9))
    racks9 = {b: "abc"[b % 3] for b in b9}
    return [
        ("docs/cases/partition-expansion.md: 1 topic 3->5 partitions RF1, 5 brokers",
         expanded(1, 3, 5, 1, [0, 1, 2, 3, 4], rng), [0, 1, 2, 3, 4], [], None),
        ("partition expansion: 40 topics 6->10 partitions RF2, 5 brokers", expanded(40, 6, 10, 2, [0, 1, 2, 3, 4], rng),
         [0, 1, 2, 3, 4], [], None),
        ("broker expansion: 50 topics x 24 partitions RF3, 6 -> 9 brokers", topics(50, 24, 3, b6, rng), b9, [], None),
        ("drain broker 2: 30 topics x 12 partitions RF3, 6 brokers", topics(30, 12, 3, b6, rng), b6, [2], None),
        ("racks: 30 topics x 12 RF3 on 6 brokers/3 racks -> 9 brokers", topics(30, 12, 3, b6, rng,
                                                                        {b: racks9[b] for b in b6}), b9, [], racks9),
    ]


def generate_moves(a, brokers, exclude, racks, rng):
    targets = [b for b in brokers if b not in exclude]
    by_topic = {}
    for (t, p), r in a.items():
        by_topic.setdefault(t, {})[p] = r
    moves = 0
    after = {}
    for t, parts in by_topic.items():
        new = assign(targets, len(parts), len(parts[0]), racks={b: racks[b] for b in targets} if racks else None, rng=rng)
        for p, r in new.items():
            moves += len(set(r) - set(parts[p]))
            after[(t, p)] = r
    return moves, spread(after, targets), spread(after, targets, leaders=True)


def spread(a, targets, leaders=False):
    """max - min replicas (or preferred leaders) per broker, cluster-wide."""
    c = Counter(r[0] for r in a.values()) if leaders else Counter(b for r in a.values() for b in r)
    return max(c[b] for b in targets) - min(c[b] for b in targets)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--seeds", type=int, default=20)
    ap.add_argument("--sizes", default="1000,10000,50000", help="partition counts for the timing table")
    args = ap.parse_args()
    rng = random.Random(7)
    print("| assignment | replicas | krm moves (minimum) | krm spread: replicas / leaders | "
          "--generate moves mean (min-max) | --generate worst spread: replicas / leaders |")
    print("|---|---|---|---|---|---|")
    for name, a, brokers, exclude, racks in scenarios(rng):
        plan = plan_rebalance(a, brokers, exclude=exclude, racks=racks)
        gen = [generate_moves(a, brokers, exclude, racks, random.Random(s)) for s in range(args.seeds)]
        moves = [g[0] for g in gen]
        targets = [b for b in brokers if b not in exclude]
        print(f"| {name} | {sum(len(r) for r in a.values())} | {plan.replica_moves} ({plan.lower_bound}) | "
              f"{spread(plan.after, targets)} / {spread(plan.after, targets, True)} | "
              f"{statistics.mean(moves):.0f} ({min(moves)}-{max(moves)}) | "
              f"{max(g[1] for g in gen)} / {max(g[2] for g in gen)} |")
    print()
    print("| partitions | replicas | brokers | planner time | moves |")
    print("|---|---|---|---|---|")
    for n in (int(x) for x in args.sizes.split(",")):
        a = topics(n // 50, 50, 3, list(range(12)), rng)
        t0 = time.perf_counter()
        plan = plan_rebalance(a, list(range(15)))
        dt = time.perf_counter() - t0
        print(f"| {n} | {3 * n} | 12 -> 15 | {dt:.2f} s | {plan.replica_moves} |")


if __name__ == "__main__":
    main()
