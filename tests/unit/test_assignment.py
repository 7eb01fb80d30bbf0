"""krm.assignment against the worked example of docs/cases/partition-expansion.md and Kafka's documented examples (pure)."""

import random

import pytest

from krm.assignment import AssignmentError, assign, expansion_inputs, rack_alternated

pytestmark = pytest.mark.unit


def test_expansion_case_worked_example_exactly():
    # The article behind docs/cases/partition-expansion.md: brokers [0,1,4,2,3] (unsorted, as at creation), 10 partitions, RF 3,
    # random startIndex 2 and nextReplicaShift 4; the shift becomes 5 at partition 5.
    got = assign([0, 1, 4, 2, 3], 10, 3, start_index=2, replica_shift=4)
    assert got == {
        0: [4, 2, 3], 1: [2, 3, 0], 2: [3, 0, 1], 3: [0, 1, 4], 4: [1, 4, 2],
        5: [4, 3, 0], 6: [2, 0, 1], 7: [3, 1, 4], 8: [0, 4, 2], 9: [1, 2, 3],
    }


def test_expansion_case_expansion_piles_up_new_partitions():
    # docs/cases/partition-expansion.md: 3 partitions x RF 1 created on [0,1,4,2,3] from index 0 -> brokers 0, 1, 4.
    created = assign([0, 1, 4, 2, 3], 3, 1, start_index=0)
    assert created == {0: [0], 1: [1], 2: [4]}
    # Expanding to 5 sorts the list: [0,1,2,3,4], start index = index of broker 0 = 0, from p3.
    order, start, first = expansion_inputs([0, 1, 4, 2, 3], created[0], len(created))
    assert (order, start, first) == ([0, 1, 2, 3, 4], 0, 3)
    added = assign(order, 2, 1, start_index=start, start_partition=first)
    assert added == {3: [3], 4: [4]}
    leaders = [r[0] for r in {**created, **added}.values()]
    assert leaders.count(4) == 2 and 2 not in leaders, "broker 4 got two partitions, broker 2 none"


def test_kafka_javadoc_unaware_example():
    # AdminUtils javadoc: 5 brokers, 10 partitions, RF 3, start 0: p0 on 0 (1st), 1 (2nd), 2 (3rd)...
    got = assign([0, 1, 2, 3, 4], 10, 3, start_index=0)
    assert got[0] == [0, 1, 2] and got[4] == [4, 0, 1] and got[5] == [0, 2, 3] and got[9] == [4, 1, 2]


def test_kafka_javadoc_rack_alternated_list_and_assignment():
    racks = {0: "rack1", 1: "rack3", 2: "rack3", 3: "rack2", 4: "rack2", 5: "rack1"}
    assert rack_alternated(racks) == [0, 3, 1, 5, 4, 2]
    got = assign(list(racks), 7, 3, start_index=0, racks=racks)
    assert [got[p] for p in range(6)] == [[0, 3, 1], [3, 1, 5], [1, 5, 4], [5, 4, 2], [4, 2, 0], [2, 0, 3]]
    assert got[6] == [0, 4, 2]


def test_expansion_start_index_when_first_replica_left():
    order, start, _ = expansion_inputs([0, 2, 3], [1, 2], 4)
    assert start == 1, "Kafka takes the first broker id >= the departed broker 1: broker 2"


@pytest.mark.parametrize("kwargs,message", [
    (dict(brokers=[0, 1], partitions=0, replication_factor=1), "Number of partitions must be larger than 0."),
    (dict(brokers=[0, 1], partitions=1, replication_factor=3), "larger than available brokers: 2"),
    (dict(brokers=[0, 1], partitions=1, replication_factor=1, racks={0: "a"}), "Not all brokers have rack"),
])
def test_invalid_inputs_fail_like_kafka(kwargs, message):
    with pytest.raises(AssignmentError, match=message):
        assign(**kwargs)


def test_random_start_is_reproducible_with_a_seeded_rng():
    a = assign([0, 1, 2], 6, 2, rng=random.Random(7))
    b = assign([0, 1, 2], 6, 2, rng=random.Random(7))
    assert a == b
