"""The KRaft requests krm declares itself (collectors/kraft_protocol.py) and what the collector makes
of their answers (collectors/kraft.py): wire round trips, ELR per partition, the quorum, errors."""

import io

import pytest

from collectors import kraft
from collectors import kraft_protocol as kp
from collectors.memory import PartitionMemory

pytestmark = pytest.mark.unit


def _partition(index, leader, replicas, isr, elr, lk):
    return (0, index, leader, 3, replicas, isr, elr, lk, [], {})


def test_describe_topic_partitions_answer_round_trips_with_elr_and_a_cursor():
    response = kp.DescribeTopicPartitionsResponse_v0(
        throttle_time_ms=0,
        topics=[(0, "orders", b"\x01" * 16, False,
                 [_partition(0, -1, [2], [], [2], [2]), _partition(1, 3, [3, 1], [3, 1], None, None)], -2**31, {})],
        next_cursor=("orders", 2, {}), tags={})
    decoded = kp.DescribeTopicPartitionsResponse_v0.decode(io.BytesIO(response.encode()))
    assert decoded.next_cursor == ("orders", 2, {})
    overlay = kraft.partition_overlay(decoded.to_object()["topics"])
    assert overlay[("orders", 0)] == {"leader": -1, "leader_epoch": 3, "replicas": [2], "isr": [], "offline_replicas": [],
                                      "elr": [2], "last_known_elr": [2]}
    assert (overlay[("orders", 1)]["elr"], overlay[("orders", 1)]["last_known_elr"]) == ([], [])  # null: no ELR kept


def test_requests_encode_the_cursor_and_the_quorum_partition():
    # (kafka-python binds encode weakly: keep each request in a name while encoding it)
    first_request = kp.describe_topic_partitions_request([], 2000, None)
    assert first_request.encode().endswith(b"\xff\x00")  # null cursor (int8 -1), no tagged fields
    paged_request = kp.describe_topic_partitions_request([], 2000, ("orders", 2))
    paged = paged_request.encode()
    assert paged.endswith(b"\x01\x07orders\x00\x00\x00\x02\x00\x00")  # present, "orders" (compact), 2, no tags x2
    quorum_request = kp.describe_quorum_request()
    assert kp.METADATA_TOPIC.encode() in quorum_request.encode()


def test_pages_are_followed_until_the_cursor_ends():
    pages = [
        kp.DescribeTopicPartitionsResponse_v0(throttle_time_ms=0, topics=[
            (0, "a", b"\x00" * 16, False, [_partition(0, 1, [1], [1], [], [])], 0, {})], next_cursor=("a", 1, {}), tags={}),
        kp.DescribeTopicPartitionsResponse_v0(throttle_time_ms=0, topics=[
            (0, "a", b"\x00" * 16, False, [_partition(1, 2, [2], [2], [], [])], 0, {})], next_cursor=None, tags={}),
    ]
    sent = []

    def send(request):
        sent.append((request.topics, request.cursor))
        return pages[len(sent) - 1]

    assert sorted(kraft.describe_partitions(send, ["a"])) == [("a", 0), ("a", 1)]
    assert sent == [([("a", {})], None), ([("a", {})], ("a", 1, {}))]


def test_only_topics_with_a_leaderless_partition_or_a_short_isr_can_have_an_elr():
    healthy = [{"leader": 1, "isr": [1, 2, 3], "replicas": [1, 2, 3]}, {"leader": 2, "isr": [2], "replicas": [2]}]
    assert not kraft.needs_elr(healthy)
    assert kraft.needs_elr(healthy + [{"leader": 1, "isr": [1, 2], "replicas": [1, 2, 3]}])
    assert kraft.needs_elr([{"leader": -1, "isr": [], "replicas": [2]}])


def _quorum_answer(error_code=0, leader=1000):
    voters = [{"replica_id": 1001, "log_end_offset": 90, "last_fetch_timestamp": 5, "last_caught_up_timestamp": -1},
              {"replica_id": 1000, "log_end_offset": 100, "last_fetch_timestamp": -1, "last_caught_up_timestamp": 9}]
    return {"error_code": 0, "topics": [{"topic_name": "__cluster_metadata", "partitions": [
        {"partition_index": 0, "error_code": error_code, "leader_id": leader, "leader_epoch": 4, "high_watermark": 100,
         "current_voters": voters, "observers": [{}, {}]}]}]}


def test_quorum_state_keeps_voters_in_id_order_and_unknown_times_as_none():
    q = kraft.quorum_state(_quorum_answer())
    assert (q["leader_id"], q["leader_epoch"], q["high_watermark"], q["observers"]) == (1000, 4, 100, 2)
    assert q["voters"] == [{"id": 1000, "log_end_offset": 100, "last_fetch_ms": None, "last_caught_up_ms": 9},
                           {"id": 1001, "log_end_offset": 90, "last_fetch_ms": 5, "last_caught_up_ms": None}]


def test_quorum_errors_mean_no_leader_but_a_refusal_means_nothing():
    assert kraft.quorum_state(_quorum_answer(error_code=6))["leader_id"] == -1
    with pytest.raises(PermissionError):
        kraft.quorum_state({**_quorum_answer(), "error_code": kraft.CLUSTER_AUTHORIZATION_FAILED})


def test_supports_reads_the_brokers_api_versions():
    assert kraft.supports({75: (0, 0), 55: (0, 2)}, kp.DESCRIBE_TOPIC_PARTITIONS_KEY)
    assert not kraft.supports({3: (0, 12)}, kp.DESCRIBE_QUORUM_KEY) and not kraft.supports(None, 55)


def test_memory_carries_the_previous_elr_into_an_election():
    m = PartitionMemory()
    m.annotate("t", {"partition": 0, "leader": -1, "leader_epoch": 5, "isr": [], "elr": [2], "last_known_elr": [2]}, 1000)
    p = m.annotate("t", {"partition": 0, "leader": 2, "leader_epoch": 6, "isr": [2], "elr": [], "last_known_elr": []}, 2000)
    assert (p["previous"]["isr"], p["previous"]["elr"], p["previous"]["last_known_elr"]) == ([], [2], [2])
    m3 = PartitionMemory()  # Kafka 3.x / ZooKeeper: nothing reported, nothing invented
    m3.annotate("t", {"partition": 0, "leader": 1, "leader_epoch": 5, "isr": [1]}, 1000)
    assert "elr" not in m3.annotate("t", {"partition": 0, "leader": 2, "leader_epoch": 6, "isr": [2]}, 2000)["previous"]
