"""krm check shutdown's rules (krm/shutdown_check.py): golden cases, numbered, with a reason."""

import pytest

from krm.shutdown_check import check, drain_plan, judge

pytestmark = pytest.mark.unit

B = 1  # the broker to stop
# (number, leader, replicas, isr, live, min.insync.replicas, unclean, expected verdict, new leader, reason)
CASES = [
    (1, 1, [1], [1], {1, 2, 3}, 1, False, "becomes_leaderless", None, "docs/cases/rf1-outage-zk-chroot.md: RF 1 on the broker"),
    (2, 1, [1, 2], [1], {1, 2, 3}, 1, False, "becomes_leaderless", None, "only live ISR member, follower out of sync"),
    (3, 1, [1, 2], [1], {1, 2, 3}, 1, True, "unclean_election_data_loss", 2,
     "same with unclean election enabled: 2 leads and what only 1 had is lost"),
    (4, 1, [1, 2, 3], [1, 2], {1, 2, 3}, 2, False, "under_min_isr", 2, "ISR [2] < min ISR 2: acks=all fails"),
    (5, 2, [2, 1, 3], [2, 1, 3], {1, 2, 3}, 2, False, "at_min_isr", 2, "follower leaves: ISR [2, 3] = min ISR 2"),
    (6, 1, [1, 2, 3], [1, 2, 3], {1, 2, 3}, 1, False, "leadership_moves", 2, "first live ISR replica in assignment order"),
    (7, 1, [1, 3, 2], [1, 2, 3], {1, 2, 3}, 1, False, "leadership_moves", 3, "assignment order, not ISR order"),
    (8, 2, [2, 1, 3], [2, 3], {1, 2, 3}, 2, False, "follower_only", 2, "an out-of-sync follower: nothing changes"),
    (9, 1, [1, 2, 3], [1, 2, 3], {1, 3}, 1, False, "at_min_isr", 3, "broker 2 is down: 3 leads alone, at min ISR 1"),
    (10, 2, [2, 3], [2, 3], {1, 2, 3}, 1, False, None, None, "not a replica of this broker: not listed"),
]


@pytest.mark.parametrize("case", CASES, ids=[f"case-{c[0]}" for c in CASES])
def test_golden(case):
    _n, leader, replicas, isr, live, min_isr, unclean, verdict, new_leader, reason = case
    v = judge(B, "t", {"partition": 0, "leader": leader, "replicas": replicas, "isr": isr}, live, min_isr, unclean)
    assert (v.verdict if v else None, v.new_leader if v else None) == (verdict, new_leader), reason


def test_worst_first_and_drain_plan_moves_only_unsafe_replicas_to_the_least_loaded_broker():
    topics = [{"topic": "rf1", "min_insync_replicas": 1, "unclean_leader_election": False,
               "partitions": [{"partition": 0, "leader": 1, "replicas": [1], "isr": [1]}]},
              {"topic": "rf3", "min_insync_replicas": 1, "unclean_leader_election": False,
               "partitions": [{"partition": 0, "leader": 1, "replicas": [1, 2, 3], "isr": [1, 2, 3]},
                              {"partition": 1, "leader": 2, "replicas": [2, 3], "isr": [2, 3]}]}]
    verdicts = check(B, topics, {1, 2, 3})
    assert [(v.topic, v.verdict) for v in verdicts] == [("rf1", "becomes_leaderless"), ("rf3", "leadership_moves")]
    assert drain_plan(B, verdicts, topics, {1, 2, 3}) == {
        "version": 1, "partitions": [{"topic": "rf1", "partition": 0, "replicas": [2]}]}


def test_a_follower_whose_copy_is_on_a_failed_log_dir_cannot_take_over():
    """Kafka elects only online replicas (ControllerContext.isReplicaOnline): broker 2 is up, its copy
    on a failed log directory (Metadata's offline replicas), so stopping 1 leaves nobody to lead."""
    p = {"partition": 0, "leader": 1, "replicas": [1, 2], "isr": [1, 2], "offline_replicas": [2]}
    v = judge(B, "t", p, {1, 2, 3}, 1, False)
    assert (v.verdict, v.new_leader) == ("becomes_leaderless", None)
    v = judge(B, "t", {**p, "offline_replicas": []}, {1, 2, 3}, 1, False)
    assert (v.verdict, v.new_leader) == ("at_min_isr", 2)  # without it, 2 takes over
