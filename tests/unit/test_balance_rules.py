"""Golden cases for the balance detectors (pipelines/detectors/balance.py), numbered with a reason."""

import pytest

from pipelines.detectors.balance import (
    AssignmentHistory, cluster_replica_imbalance, leader_skew, preferred_leader_imbalance, topic_replica_imbalance)
from pipelines.load import TopicLoad

pytestmark = pytest.mark.unit

# (number, totals {broker: (leaders, replicas, preferred, preferred_led_elsewhere)}, live, percentage,
#  expected brokers, reason)
PREFERRED = [
    (1, {1: (10, 20, 10, 0), 2: (10, 20, 10, 0)}, {1, 2}, 10, [], "every partition led by its preferred replica"),
    (2, {1: (19, 20, 10, 1), 2: (1, 20, 10, 9)}, {1, 2}, 10, [2], "9 of broker 2's 10 led by broker 1: 90 % > 10 %"),
    (3, {1: (11, 20, 10, 0), 2: (9, 20, 10, 1)}, {1, 2}, 10, [], "exactly 10 %: Kafka triggers only above the ratio"),
    (4, {1: (0, 20, 10, 10)}, {2}, 10, [], "broker 1 is down: its partitions are OFFLINE/BROKER_DOWN, not skew"),
]

# (number, totals, live, tolerance, expected brokers, reason)
SKEW = [
    (1, {1: (10, 0, 0, 0), 2: (10, 0, 0, 0), 3: (10, 0, 0, 0)}, {1, 2, 3}, 0.5, [], "even"),
    (2, {1: (20, 0, 0, 0), 2: (5, 0, 0, 0), 3: (5, 0, 0, 0)}, {1, 2, 3}, 0.5, [1],
     "broker 1 leads twice the mean (10): +100 % > 50 %; 5 is exactly -50 %: not beyond"),
    (3, {1: (2, 0, 0, 0), 2: (0, 0, 0, 0), 3: (1, 0, 0, 0)}, {1, 2, 3}, 0.5, [], "3 leaders for 3 brokers: too few"),
    (4, {1: (12, 0, 0, 0), 2: (12, 0, 0, 0)}, {1, 2, 3}, 0.5, [3], "broker 3 (new or restarted) leads nothing"),
]


@pytest.mark.parametrize("case", PREFERRED, ids=[f"preferred-{c[0]}" for c in PREFERRED])
def test_preferred_leader_imbalance(case):
    _n, totals, live, pct, expected, reason = case
    assert [f.broker for f in preferred_leader_imbalance(totals, live, pct)] == expected, reason


@pytest.mark.parametrize("case", SKEW, ids=[f"skew-{c[0]}" for c in SKEW])
def test_leader_skew(case):
    _n, totals, live, tol, expected, reason = case
    assert [f.broker for f in leader_skew(totals, live, tol)] == expected, reason


def _load(topic, replicas_by_broker, partitions):
    return TopicLoad("c", topic, 1, {b: (0, n, 0, 0) for b, n in replicas_by_broker.items()}, partitions)


def test_1_evenly_created_topic_is_balanced():
    h = AssignmentHistory()
    h.observe_brokers("c", {1, 2, 3}, 1_000)
    h.observe_topic("c", "t", 6, 1_000)
    assert topic_replica_imbalance("c", [_load("t", {1: 4, 2: 4, 3: 4}, 6)], {1, 2, 3}, h) == []


def test_2_expansion_leaving_a_broker_out_is_partition_expansion():
    """docs/cases/partition-expansion.md: the new partitions started from a sorted broker list and skipped broker 3."""
    h = AssignmentHistory()
    h.observe_brokers("c", {1, 2, 3}, 1_000)
    h.observe_topic("c", "t", 2, 1_000)
    h.observe_topic("c", "t", 4, 5_000)
    (f,) = topic_replica_imbalance("c", [_load("t", {1: 2, 2: 2}, 4)], {1, 2, 3}, h)
    assert (f.topic, f.cause, f.details["uncovered_brokers"]) == ("t", "partition_expansion", [3])


def test_3_topic_with_fewer_replicas_than_brokers_is_not_imbalanced():
    h = AssignmentHistory()
    h.observe_topic("c", "t", 2, 1_000)
    assert topic_replica_imbalance("c", [_load("t", {1: 1, 2: 1}, 2)], {1, 2, 3}, h) == []


def test_4_only_a_new_broker_short_of_old_topics_is_one_cluster_incident():
    h = AssignmentHistory()
    h.observe_brokers("c", {1, 2, 3}, 1_000)
    h.observe_topic("c", "t", 3, 1_000)
    h.observe_brokers("c", {1, 2, 3, 4}, 9_000)
    live = {1, 2, 3, 4}
    assert topic_replica_imbalance("c", [_load("t", {1: 3, 2: 3, 3: 3}, 3)], live, h) == []
    totals = {1: (0, 3, 0, 0), 2: (0, 3, 0, 0), 3: (0, 3, 0, 0)}
    (f,) = cluster_replica_imbalance("c", totals, live, 0.2, h)
    assert (f.broker, f.cause, f.details["mean_replicas"]) == (4, "broker_expansion", 2.25)


def test_5_uneven_but_not_new_is_uneven_assignment():
    h = AssignmentHistory()
    h.observe_brokers("c", {1, 2, 3}, 1_000)
    totals = {1: (0, 10, 0, 0), 2: (0, 10, 0, 0), 3: (0, 4, 0, 0)}
    (f,) = cluster_replica_imbalance("c", totals, {1, 2, 3}, 0.2, h)
    assert (f.broker, f.cause) == (3, "uneven_assignment")


def test_6_restarted_pipeline_without_history_calls_it_uneven():
    h = AssignmentHistory()
    h.observe_brokers("c", {1, 2, 3, 4}, 1_000)  # broker 4 was already there when the pipeline started
    totals = {1: (0, 3, 0, 0), 2: (0, 3, 0, 0), 3: (0, 3, 0, 0)}
    (f,) = cluster_replica_imbalance("c", totals, {1, 2, 3, 4}, 0.2, h)
    assert (f.broker, f.cause) == (4, "uneven_assignment")
