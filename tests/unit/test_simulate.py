"""The cluster simulator (lab/simulate): Kafka's rules in the model, the collector's record shape,
and the ground truth of each fault."""

import numpy as np
import pytest

from krm.assignment import assign, expansion_inputs
from lab.simulate.emit import Emitter
from lab.simulate.faults import Fault, apply
from lab.simulate.model import SimCluster, SimSettings
from schemas.observation import check

pytestmark = pytest.mark.unit


def small(**kw):
    return SimCluster("sim", SimSettings(**{"brokers": 5, "topics": 4, "partitions_per_topic": 10, "seed": 3, **kw}))


def test_created_topics_follow_kafkas_placement():
    sim = small(rf1_topics=1)
    rows = np.flatnonzero(sim.topic_of == 0)
    reps = [sim.replicas_of(r) for r in rows]
    assert all(len(set(r)) == 3 for r in reps)
    counts = np.bincount(np.concatenate(reps), minlength=5)
    assert counts.max() - counts.min() <= 1  # assignReplicasToBrokers spreads a topic evenly
    assert all(sim.leader_of(r) == sim.replicas_of(r)[0] for r in rows)  # preferred leaders lead


def test_writes_fetches_and_the_high_watermark():
    sim = small(write_rate=10.0)
    sim.step(10_000)
    busy = int(np.flatnonzero(sim.rate > 0)[0])
    lp = sim.leader_pos[busy]
    assert sim.leo[busy, lp] > 0 and (sim.leo[busy] == sim.leo[busy, lp]).all() and sim.hw[busy] == sim.leo[busy, lp]


def test_a_stalled_follower_holds_the_hw_until_it_leaves_the_isr():
    sim = small(write_rate=10.0, replica_lag_time_max_ms=30_000)
    sim.step(10_000)
    row = int(np.flatnonzero(sim.rate > 0)[0])
    follower = sim.replicas_of(row)[1]
    sim.stall_follower(row, follower)
    hw = sim.hw[row]
    sim.step(20_000)
    sim.step(35_000)
    assert sim.hw[row] == hw and follower in sim.isr_of(row)  # within replica.lag.time.max.ms: HW stalls
    sim.step(41_000)
    assert follower not in sim.isr_of(row) and sim.hw[row] > hw  # dropped: the HW moves again
    sim.stall_follower(row, follower, False)
    sim.step(51_000)
    assert follower in sim.isr_of(row)  # caught up to the HW: back in the ISR


def test_broker_death_elects_the_first_live_isr_replica_or_none():
    sim = small(rf1_topics=1)
    sim.step(10_000)
    b = 2
    before = {r: (sim.replicas_of(r), sim.leader_of(r), sim.isr_of(r)) for r in range(sim.partitions)}
    result = sim.kill_broker(b)
    for r, (reps, leader, isr) in before.items():
        if b not in reps:
            assert sim.leader_of(r) == leader
        elif len(reps) == 1:
            assert r in result["offline"] and sim.leader_of(r) == -1 and sim.isr_of(r) == [b]
        elif leader == b:
            assert sim.leader_of(r) == next(x for x in reps if x != b and x in isr) and b not in sim.isr_of(r)
            assert sim.epoch[r] == 1
        else:
            assert sim.leader_of(r) == leader and b not in sim.isr_of(r) and sim.epoch[r] == 0
    sim.restart_broker(b)
    assert all(sim.leader_of(r) == b for r in result["offline"])


def test_unclean_election_truncates_below_the_old_high_watermark():
    sim = small()
    sim.create_topic("u", 1, 2, sim.brokers(), unclean=True, min_isr=1)
    row = sim.partitions - 1
    sim.rate[row] = 50.0
    sim.step(10_000)
    leader, follower = sim.replicas_of(row)
    sim.stall_follower(row, follower)
    sim.step(50_000)
    assert sim.isr_of(row) == [leader]
    old_hw = sim.hw[row]
    sim2 = SimCluster("sim", sim.settings)  # the same fault through apply(): the truth it gives
    sim2.create_topic("u", 1, 2, sim2.brokers(), unclean=True, min_isr=1)
    sim2.rate[row] = 50.0
    sim2.step(10_000)
    sim2.stall_follower(row, follower)
    sim2.step(50_000)
    result = sim.kill_broker(leader)
    assert result["unclean"] == [(row, old_hw)] and sim.leader_of(row) == follower and sim.hw[row] < old_hw
    truth = apply(sim2, Fault(60, "kill_broker", {"broker": leader})).expected
    assert {("UNCLEAN_LEADER_ELECTION", "u", 0, None), ("OFFSET_REGRESSION", "u", 0, None)} <= truth


def test_expansion_uses_kafkas_rule():
    sim = small()
    rows = np.flatnonzero(sim.topic_of == 1)
    p0 = sim.replicas_of(int(rows[0]))
    new = sim.expand_topic("sim-00001", 14)
    ordered, start, k = expansion_inputs(list(range(5)), p0, 10)
    want = assign(ordered, 4, 3, start_index=start, start_partition=k)
    assert new == [10, 11, 12, 13]
    assert {p: sim.replicas_of(sim.row("sim-00001", p)) for p in new} == want


def test_records_are_the_collectors_and_carry_what_consecutive_polls_reveal():
    sim = small(write_rate=10.0)
    em = Emitter(sim)
    sim.step(10_000)
    first = em.poll()
    sim.step(20_000)
    sim.kill_broker(0)
    second = em.poll()
    for r in first + second:
        check(r)
    assert [r["kind"] for r in second[:2]] == ["cluster", "topic"] and len(second) == 1 + 4
    parts = [p for r in second[1:] for p in r["topic_state"]["partitions"]]
    assert any("write_rate" in p and p["write_rate"] > 0 for p in parts)
    moved = [p for p in parts if p["leader_epoch"] == 1]
    assert moved and all(p["previous"]["leader"] == 0 for p in moved)
    broker0 = next(b for b in second[0]["cluster_state"]["brokers"] if b["id"] == 0)
    assert broker0["live"] is False


def test_kill_truth_is_kafkas_comparisons():
    sim = small(rf1_topics=1, min_insync_replicas=2)
    sim.step(10_000)
    applied = apply(sim, Fault(5, "kill_broker", {"broker": 1}))
    exp = applied.expected
    assert ("BROKER_DOWN", None, None, 1) in exp
    for r in range(sim.partitions):
        reps = sim.replicas_of(r)
        if 1 not in reps:
            continue
        t, p = sim.topic_names[sim.topic_of[r]], int(sim.index[r])
        if len(reps) == 1:
            assert ("OFFLINE_PARTITION", t, p, None) in exp
        else:
            assert ("UNDER_REPLICATED", t, p, None) in exp  # RF 3 -> ISR 2
            assert ("AT_MIN_ISR", t, p, None) in exp and ("UNDER_MIN_ISR", t, p, None) not in exp


def test_broker_and_partition_expansion_truth():
    sim = small()
    assert apply(sim, Fault(1, "add_brokers", {"count": 2})).expected == {
        ("REPLICA_IMBALANCE", None, None, 5), ("REPLICA_IMBALANCE", None, None, 6)}
    sim2 = SimCluster("sim", SimSettings(brokers=5, topics=0, seed=1))
    sim2.create_topic("t5", 3, 1, [0, 1, 4, 2, 3])
    applied = apply(sim2, Fault(1, "expand_partitions", {"topic": "t5", "total": 5}))
    holders = {sim2.replicas_of(r)[0] for r in range(sim2.partitions)}
    assert (("REPLICA_IMBALANCE", "t5", None, None) in applied.expected) == (len(holders) < 5)


def test_prebuilt_polls_restamped_equal_polls_built_at_publication_time():
    """`krm simulate --prebuild` builds polls early and moves their timestamps: that must be exactly
    what the simulator would have built at the later time, stalls and faults included."""
    import io

    from collectors.publisher import Publisher
    from foundation.config import ObservationsConfig
    from lab.simulate.run import build_cluster, next_poll, restamp

    encode = Publisher(ObservationsConfig(bootstrap_servers="unused:9092"), validate=False).encode
    early, late, shift = 1_700_000_000_000, 1_700_000_000_000 + 3_600_123, 3_600_123
    script = [Fault(20, "stall_follower", {"topic": "sim-00001", "partition": 0}),
              Fault(40, "kill_broker", {"broker": "leader:sim-unclean/0"})]
    runs = []
    for start in (early, late):
        sim = build_cluster("sim", SimSettings(brokers=5, topics=4, partitions_per_topic=10, seed=3), start,
                            unclean_topic=True, expand_topic=False)
        emitter, pending, polls = Emitter(sim), [Fault(f.at_s, f.kind, dict(f.params)) for f in script], []
        for k in range(10):
            records, applied = next_poll(sim, emitter, pending, start + k * 10_000, k * 10, io.StringIO())
            polls.append([v for _, v in encode(records)])
        runs.append(polls)
    stalled = [v for poll in runs[0] for v in poll if b'"hw_stalled_since_ms":1' in v]
    assert stalled, "no record carried a stall time: the test would not cover that stamp"
    assert [[restamp(v, shift) for v in poll] for poll in runs[0]] == runs[1]


def test_shares_of_one_simulated_cluster_publish_every_topic_once_and_say_which_share_they_are():
    from collectors.topic_share import TopicShare

    whole = {r["topic_state"]["topic"] for r in Emitter(small()).poll() if r["kind"] == "topic"}
    seen: list[str] = []
    for i in (1, 2):
        records = Emitter(small(), share=TopicShare(i, 2)).poll()
        (head,) = [r for r in records if r["kind"] == "cluster"]
        assert head["cluster_state"]["topic_share"] == {"index": i, "count": 2}
        seen += [r["topic_state"]["topic"] for r in records if r["kind"] == "topic"]
    assert sorted(seen) == sorted(whole) and len(whole) == 4


def test_a_simulated_fleet_publishes_each_cluster_and_a_hung_one_as_a_collector_sees_it():
    import io

    from lab.simulate.run import Member, fleet_names, fleet_poll

    names = fleet_names("sim", 3)
    assert names == ["sim-001", "sim-002", "sim-003"] and fleet_names("sim", 1) == ["sim"]
    members = [Member(SimCluster(n, SimSettings(brokers=5, topics=2, partitions_per_topic=10, seed=3 + k)), None)
               for k, n in enumerate(names)]
    for m in members:
        m.emitter = Emitter(m.sim)
    members[1].hangs_at_s = 20.0
    by_poll = []
    for k in range(4):
        records, _ = fleet_poll(members, [], 1_700_000_000_000 + k * 10_000, k * 10.0, io.StringIO())
        for r in records:
            check(r)  # what a collector publishes
        by_poll.append(records)
    clusters = [{r["cluster"] for r in poll if r["kind"] == "topic"} for poll in by_poll]
    assert clusters[:2] == [set(names)] * 2, "every cluster's topics, before the hang"
    assert clusters[2:] == [{"sim-001", "sim-003"}] * 2, "the hung cluster publishes no topic record"
    hung = [r for poll in by_poll[2:] for r in poll if r["cluster"] == "sim-002"]
    assert [r["kind"] for r in hung] == ["cluster", "cluster"]
    assert all(r["cluster_state"]["error_reason"] == "unreachable" and r["cluster_state"]["error"] for r in hung)
    assert [r["poll_id"] for r in hung] == [3, 4], "its poll ids go on, as its collector's do"
    # each cluster its own seed: not the same layout under three names
    layouts = {m.sim.name: m.sim.replicas.tolist() for m in members}
    assert layouts["sim-001"] != layouts["sim-003"]
