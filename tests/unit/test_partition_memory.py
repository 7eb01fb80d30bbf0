"""collectors/memory.py and collectors/offsets.plan: what consecutive polls reveal, without a broker."""

import pytest

from collectors.memory import PartitionMemory
from collectors.offsets import Plans, Requests, plan

pytestmark = pytest.mark.unit


def part(leader=1, epoch=0, isr=(1, 2, 3), hw=100, leos=None, replicas=(1, 2, 3)):
    leos = leos if leos is not None else {b: hw for b in replicas}
    return {"partition": 0, "leader": leader, "leader_epoch": epoch, "replicas": list(replicas), "isr": list(isr),
            "high_watermark": hw, "replica_offsets": [{"broker": b, "log_end_offset": o} for b, o in leos.items()]}


def test_first_poll_carries_nothing_derived():
    p = PartitionMemory().annotate("t", part(), 1_000)
    assert p["hw_stalled_since_ms"] is None and "write_rate" not in p and "previous" not in p


def test_write_rate_is_leader_leo_delta_per_second():
    m = PartitionMemory()
    m.annotate("t", part(hw=100), 1_000)
    p = m.annotate("t", part(hw=300), 3_000)
    assert p["write_rate"] == 100.0


def test_idle_partition_is_not_stalled_and_stall_clock_starts_when_leo_passes_hw():
    m = PartitionMemory()
    assert m.annotate("t", part(hw=100), 1_000)["hw_stalled_since_ms"] is None  # LEO == HW: idle
    assert m.annotate("t", part(hw=100, leos={1: 150, 2: 150, 3: 100}), 2_000)["hw_stalled_since_ms"] == 2_000
    assert m.annotate("t", part(hw=100, leos={1: 190, 2: 190, 3: 100}), 4_000)["hw_stalled_since_ms"] == 2_000
    # the HW moves: a new clock (if still behind), not a continued stall
    assert m.annotate("t", part(hw=120, leos={1: 190, 2: 190, 3: 120}), 6_000)["hw_stalled_since_ms"] == 6_000
    assert m.annotate("t", part(hw=190), 8_000)["hw_stalled_since_ms"] is None


def test_previous_only_when_epoch_changes_or_offsets_go_back():
    m = PartitionMemory()
    m.annotate("t", part(hw=100), 1_000)
    assert "previous" not in m.annotate("t", part(hw=110), 2_000)
    p = m.annotate("t", part(leader=2, epoch=1, isr=(2,), hw=90, leos={2: 90}), 3_000)
    assert p["previous"]["leader"] == 1 and p["previous"]["isr"] == [1, 2, 3] and p["previous"]["high_watermark"] == 110


def test_dead_replica_keeps_its_last_known_leo_so_its_truncation_shows_on_return():
    m = PartitionMemory()
    m.annotate("t", part(hw=100, leos={1: 100, 2: 100, 3: 100}), 1_000)
    m.annotate("t", part(leader=2, epoch=1, isr=(2, 3), hw=100, leos={2: 100, 3: 100}), 2_000)  # 1 is dead
    p = m.annotate("t", part(leader=2, epoch=1, isr=(2, 3), hw=100, leos={1: 80, 2: 100, 3: 100}), 3_000)
    assert {"broker": 1, "log_end_offset": 100} in p["previous"]["replica_offsets"]


def test_forget_missing_drops_deleted_partitions():
    m = PartitionMemory()
    m.annotate("t", part(hw=100), 1_000)
    m.forget_missing(set())
    assert "write_rate" not in m.annotate("t", part(hw=200), 2_000)


@pytest.mark.parametrize("seed", range(8))
def test_a_plan_kept_topic_by_topic_is_the_plan(seed):
    """Plans keeps a topic's part while its partitions are the same object and the live brokers the
    same; whatever changes, its plan equals `plan` over every partition, list for list."""
    import random

    rng = random.Random(seed)
    topics = {f"t{i}": [{"partition": p, "leader": 1, "replicas": [1, 2, 3]} for p in range(3)] for i in range(6)}
    plans, live = Plans(), {1, 2, 3, 4}
    for _ in range(60):
        for name in list(topics):
            if rng.random() < 0.15:  # a new partitions object: an election, a move, a topic grown
                topics[name] = [{"partition": p, "leader": rng.choice([-1, 1, 2, 3, 4]),
                                 "replicas": rng.sample([1, 2, 3, 4], 3)} for p in range(rng.randint(1, 4))]
            elif rng.random() < 0.03:
                del topics[name]
        if rng.random() < 0.1:
            topics[f"n{rng.randrange(100)}"] = [{"partition": 0, "leader": 2, "replicas": [2]}]
        if rng.random() < 0.1:
            live = set(rng.sample([1, 2, 3, 4], rng.randint(1, 4)))
        listed = [{"topic": t, "partitions": ps} for t, ps in topics.items()]
        expected = plan(((t["topic"], p["partition"], p["leader"], p["replicas"]) for t in listed
                         for p in t["partitions"]), live)
        assert plans.plan(listed, live) == expected


def test_plan_asks_live_replicas_for_leos_and_live_leaders_for_hws():
    replica_of, leader_of = plan([("t", 0, 1, [1, 2, 3]), ("t", 1, -1, [3]), ("u", 0, 2, [2, 3])], live={1, 2})
    assert replica_of == {1: [("t", 0)], 2: [("t", 0), ("u", 0)]}
    assert leader_of == {1: [("t", 0)], 2: [("u", 0)]}


def test_a_request_is_encoded_again_only_when_its_partitions_change():
    made = Requests()
    first = made.get(1, "leo", 5, [("t", 0), ("t", 1)])
    assert made.get(1, "leo", 5, [("t", 0), ("t", 1)]) is first  # an equal list, not the same one
    assert made.get(1, "hw", 5, [("t", 0), ("t", 1)]) is not first  # another kind: another request
    moved = made.get(1, "leo", 5, [("t", 0)])
    assert moved is not first and moved.encode() != first.encode()
    made.forget_others({2})
    assert made.get(1, "leo", 5, [("t", 0)]) is not moved


def test_peak_hw_survives_a_regression():
    m = PartitionMemory()
    m.annotate("t", part(hw=150), 1_000)
    m.annotate("t", part(leader=2, epoch=1, isr=(2,), hw=50, leos={2: 50}), 2_000)
    p = m.annotate("t", part(leader=2, epoch=1, isr=(2,), hw=50, leos={1: 50, 2: 50}), 3_000)
    assert p["previous"]["high_watermark"] == 50 and p["previous"]["max_high_watermark"] == 150


def test_an_election_is_carried_until_the_new_leader_answers():
    """docs/cases/restart-order-truncation.md: 2 (out of the ISR) elected; its first poll has no HW yet
    (a new leader returns none until its HW is established), so the next poll, with its offsets,
    carries the same pre-election `previous`: the unclean election is judged with proof (HW 150 -> 50)."""
    m = PartitionMemory()
    m.annotate("t", part(leader=1, epoch=3, isr=(1,), hw=150, leos={1: 150, 2: 50}, replicas=(1, 2)), 1_000)
    first = m.annotate("t", part(leader=2, epoch=4, isr=(2,), hw=None, leos={}, replicas=(1, 2)), 2_000)
    assert (first["previous"]["leader"], first["previous"]["isr"]) == (1, [1])
    second = m.annotate("t", part(leader=2, epoch=4, isr=(2,), hw=50, leos={2: 50}, replicas=(1, 2)), 3_000)
    assert (second["previous"]["leader"], second["previous"]["isr"], second["previous"]["high_watermark"]) == (1, [1], 150)
    third = m.annotate("t", part(leader=2, epoch=4, isr=(2,), hw=60, leos={2: 60}, replicas=(1, 2)), 4_000)
    assert "previous" not in third  # judged once with offsets; then the new leader is the reference


def test_reassignment_progress_is_when_an_adding_replica_last_copied():
    m = PartitionMemory()

    def moving(leos):
        p = part(replicas=(1, 2, 3, 4), isr=(1, 2), hw=1000, leos={1: 1000, 2: 1000, **leos})
        p["adding_replicas"] = [3, 4]
        return p
    assert m.annotate("t", moving({3: 0, 4: 0}), 1_000)["reassignment_progress_ms"] == 1_000
    assert m.annotate("t", moving({3: 200, 4: 0}), 2_000)["reassignment_progress_ms"] == 2_000
    assert m.annotate("t", moving({3: 200, 4: 0}), 3_000)["reassignment_progress_ms"] == 2_000  # nothing copied
    assert m.annotate("t", moving({}), 4_000)["reassignment_progress_ms"] == 2_000  # no answer: no news
    assert m.annotate("t", moving({3: 200, 4: 10}), 5_000)["reassignment_progress_ms"] == 5_000
    assert "reassignment_progress_ms" not in m.annotate("t", part(), 6_000)  # done


def test_changed_and_keyframe_marks_for_the_history_tables():
    """Polls every 2 s, keyframes every 10 s: a first sight and every state change are `changed`, one
    poll in each 10 s of the partition's own intervals otherwise `keyframe`, every other poll neither
    (docs/history.md)."""
    m = PartitionMemory(keyframe_s=10)

    def marks(p):
        return ("changed" if p.get("changed") else "") + ("keyframe" if p.get("keyframe") else "")

    times = range(0, 42, 2)
    got = [marks(m.annotate("t", part(hw=100 + t), 1_000_000 + t * 1000)) for t in times]
    assert got[0] == "changed" and set(got[1:]) == {"", "keyframe"}
    at = [t for t, g in zip(times, got) if g == "keyframe"]
    assert len(at) == 4 and all(b - a == 10 for a, b in zip(at, at[1:])), at  # one per interval, 10 s apart
    assert "changed" in marks(m.annotate("t", part(isr=(1, 2), hw=120), 1_044_000))  # the ISR shrank
    assert "changed" not in marks(m.annotate("t", part(isr=(1, 2), hw=121), 1_046_000))
    assert "changed" in marks(m.annotate("t", part(isr=(1, 2), hw=122, replicas=(1, 2, 3, 4)), 1_048_000))  # a move
    assert "changed" in marks(m.annotate("t", part(leader=2, epoch=1, isr=(2,), hw=123, replicas=(1, 2, 3, 4)),
                                         1_050_000))  # a new leader
    # a ZooKeeper watch's record between polls: marked when it differs from the last poll, not remembered
    assert m.mark_change("t", part(leader=3, epoch=2, isr=(3,), replicas=(1, 2, 3, 4))).get("changed") is True
    assert "changed" not in m.mark_change("t", part(leader=2, epoch=1, isr=(2,), replicas=(1, 2, 3, 4)))
    assert "changed" in marks(m.annotate("t", part(leader=3, epoch=2, isr=(3,), hw=124, replicas=(1, 2, 3, 4)),
                                         1_052_000))


def test_keyframes_are_spread_over_the_polls():
    """Each partition keeps its own keyframe intervals: a poll carries a share of them, not a whole
    cluster's at once (a burst the alert path would pay for in one batch)."""
    m = PartitionMemory(keyframe_s=10)
    per_poll = []
    for t in range(0, 22, 2):
        ps = [m.annotate(f"t{i % 50}", {**part(hw=100), "partition": i}, 1_000_000 + t * 1000) for i in range(1000)]
        per_poll.append(sum(1 for p in ps if p.get("keyframe")))
    assert sum(per_poll[1:6]) == 1000  # every partition once in its first 10 s
    assert max(per_poll[1:]) < 400, per_poll  # ~200 a poll (1000 / 5 polls an interval)


def test_lagging_followers_are_marked_and_their_set_changing_is_a_change():
    m = PartitionMemory(keyframe_s=300, lag_floor_s=1.0)
    m.annotate("t", part(hw=100, leos={1: 100, 2: 100, 3: 100}), 1_000)
    # 100 msg/s; follower 3 is 50 behind (0.5 s): normal replication
    p = m.annotate("t", part(hw=250, leos={1: 300, 2: 300, 3: 250}), 3_000)
    assert "lagging" not in p and not p.get("changed")
    # 500 behind at 100 msg/s (5 s), still in the ISR: lagging, and that is a change
    p = m.annotate("t", part(hw=300, leos={1: 500, 2: 500, 3: 0}), 5_000)
    assert p["lagging"] == [3] and p["changed"] is True
    p = m.annotate("t", part(isr=(1, 2), hw=700, leos={1: 700, 2: 700, 3: 10}), 7_000)
    assert p["lagging"] == [3] and p["changed"] is True  # out of the ISR now: the ISR changed
    p = m.annotate("t", part(isr=(1, 2), hw=900, leos={1: 900, 2: 900, 3: 20}), 9_000)
    assert p["lagging"] == [3] and not p.get("changed")  # still lagging: a replica_lag row, no change
    p = m.annotate("t", part(hw=1100, leos={1: 1100, 2: 1100, 3: 1100}), 11_000)
    assert "lagging" not in p and p["changed"] is True  # caught up and back
    # nobody writes: any message behind is lag
    p = m.annotate("t", part(hw=1100, leos={1: 1100, 2: 1100, 3: 1099}), 13_000)
    assert p["lagging"] == [3]
