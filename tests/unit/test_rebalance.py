"""krm plan rebalance (krm/rebalance.py): evenness, minimal moves, drains, racks, on fixed and random
assignments."""

import random
from collections import Counter

import pytest

from krm.assignment import assign, expansion_inputs
from foundation.errors import KrmError
from krm.rebalance import plan_rebalance


def _topic(name, a):
    return {(name, p): r for p, r in a.items()}


def _per_topic_counts(after, brokers, topic):
    c = Counter(b for (t, _), r in after.items() if t == topic for b in r)
    return [c[b] for b in brokers]


def test_expansion_case_expansion_is_undone_with_two_moves():
    created = assign([0, 1, 4, 2, 3], 3, 1, start_index=2)  # {0: [4], 1: [2], 2: [3]}
    ordered, start, k = expansion_inputs([0, 1, 2, 3, 4], created[0], 3)
    t5 = {**created, **assign(ordered, 2, 1, start_index=start, start_partition=k)}  # 3: [2], 4: [3]
    plan = plan_rebalance(_topic("t5", t5), [0, 1, 2, 3, 4])
    assert plan.replica_moves == plan.lower_bound == 2
    assert _per_topic_counts(plan.after, [0, 1, 2, 3, 4], "t5") == [1, 1, 1, 1, 1]


def test_broker_expansion_moves_exactly_the_excess_and_evens_leaders():
    a = {}
    for i, name in enumerate(["a", "b", "c", "d"]):
        a.update(_topic(name, assign([0, 1, 2], 12, 3, start_index=i % 3)))
    plan = plan_rebalance(a, [0, 1, 2, 3])  # broker 3 just joined and holds nothing
    assert plan.replica_moves == plan.lower_bound == 4 * 9  # 36 replicas per topic -> 9 on each of 4 brokers
    for name in "abcd":
        assert _per_topic_counts(plan.after, [0, 1, 2, 3], name) == [9, 9, 9, 9]
        leaders = Counter(r[0] for (t, _), r in plan.after.items() if t == name)
        assert sorted(leaders.values()) == [3, 3, 3, 3]
    assert not plan.unresolved


def test_balanced_cluster_needs_nothing():
    a = _topic("x", assign([0, 1, 2, 3], 8, 2, start_index=1))
    plan = plan_rebalance(a, [0, 1, 2, 3])
    assert plan.changed == [] and plan.replica_moves == 0 and plan.kafka_json()["partitions"] == []


def test_exclude_drains_a_broker_and_keeps_replica_positions():
    a = _topic("x", assign([0, 1, 2, 3], 8, 2, start_index=0))
    plan = plan_rebalance(a, [0, 1, 2, 3], exclude=[2])
    assert all(2 not in r for r in plan.after.values())
    assert plan.replica_moves == sum(1 for r in a.values() if 2 in r)
    assert max(_per_topic_counts(plan.after, [0, 1, 3], "x")) - min(_per_topic_counts(plan.after, [0, 1, 3], "x")) <= 1


def test_only_the_named_topics_change():
    a = {**_topic("x", {0: [0], 1: [0], 2: [0]}), **_topic("y", {0: [0], 1: [0], 2: [0]})}
    plan = plan_rebalance(a, [0, 1, 2], topics=["y"])
    assert all(plan.after[tp] == a[tp] for tp in a if tp[0] == "x")
    assert _per_topic_counts(plan.after, [0, 1, 2], "y") == [1, 1, 1]
    with pytest.raises(KrmError, match="unknown topic"):
        plan_rebalance(a, [0, 1, 2], topics=["nope"])


def test_racks_never_lose_spread():
    racks = {0: "a", 1: "a", 2: "b", 3: "b", 4: "c", 5: "c"}
    a = _topic("x", assign([0, 1, 2, 3], 12, 2, start_index=0, racks={0: "a", 1: "a", 2: "b", 3: "b"}))
    plan = plan_rebalance(a, range(6), racks=racks)
    for tp, r in plan.after.items():
        assert len({racks[b] for b in r}) >= len({racks[b] for b in a[tp]})
    assert max(_per_topic_counts(plan.after, range(6), "x")) - min(_per_topic_counts(plan.after, range(6), "x")) <= 1


def test_sizes_give_bytes_moved_and_small_partitions_move_first():
    a = _topic("x", {0: [0], 1: [0], 2: [0], 3: [1]})
    plan = plan_rebalance(a, [0, 1], sizes={("x", 0): 900, ("x", 1): 10, ("x", 2): 500, ("x", 3): 1})
    assert plan.replica_moves == 1 and plan.bytes_moved == 10 and plan.after[("x", 1)] == [1]


def test_no_broker_left_and_rf_too_large_are_clear_errors():
    a = _topic("x", {0: [0, 1]})
    with pytest.raises(KrmError, match="every live broker is excluded"):
        plan_rebalance(a, [0, 1], exclude=[0, 1])
    with pytest.raises(KrmError, match="replication factor 2 exceeds"):
        plan_rebalance(a, [0, 1], exclude=[1])


def test_replicas_on_a_down_broker_stay_put():
    a = _topic("x", {0: [0, 5], 1: [1, 5], 2: [0, 1]})  # broker 5 is registered in the plan but down
    plan = plan_rebalance(a, [0, 1, 2])
    assert all(5 in plan.after[tp] for tp in a if 5 in a[tp])
    assert all(5 not in plan.after[tp] for tp in a if 5 not in a[tp])


@pytest.mark.parametrize("seed", range(40))
def test_random_clusters_end_even_with_the_minimum_moves(seed):
    rng = random.Random(seed)
    old = list(range(rng.randint(2, 6)))
    new = old + list(range(len(old), len(old) + rng.randint(0, 3)))
    a = {}
    for t in range(rng.randint(1, 6)):
        rf = rng.randint(1, len(old))
        a.update(_topic(f"t{t}", assign(old, rng.randint(1, 30), rf, rng=rng)))
    exclude = [rng.choice(new)] if len(new) > max(len(r) for r in a.values()) and rng.random() < 0.3 else []
    plan = plan_rebalance(a, new, exclude=exclude)
    targets = [b for b in new if b not in exclude]
    for tp, r in plan.after.items():
        assert len(r) == len(a[tp]) and len(set(r)) == len(r)
        assert not set(r) & set(exclude)
    assert plan.replica_moves >= plan.lower_bound
    if not plan.unresolved:
        assert plan.replica_moves == plan.lower_bound
        for t in {t for t, _ in a}:
            c = _per_topic_counts(plan.after, targets, t)
            assert max(c) - min(c) <= 1, (t, c)
        total = Counter(b for r in plan.after.values() for b in r)
        assert max(total[b] for b in targets) - min(total[b] for b in targets) <= 1
        for t in {t for t, _ in a}:  # preferred leaders even per topic too
            led = Counter(r[0] for (tt, _), r in plan.after.items() if tt == t)
            assert max(led[b] for b in targets) - min(led[b] for b in targets) <= 1, (t, led)
        if all(len(r) > 1 for r in a.values()):  # an RF-1 partition's leader is its replica: no reordering
            led = Counter(r[0] for r in plan.after.values())
            assert max(led[b] for b in targets) - min(led[b] for b in targets) <= 1, led
