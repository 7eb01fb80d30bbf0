"""collectors/reassignments.annotate: the ListPartitionReassignments answer and the Metadata answer
trail each other; a move is applied only where the replica list agrees with it (pure logic)."""

from collectors.reassignments import annotate


def part(replicas, isr):
    return {"partition": 0, "replicas": list(replicas), "isr": list(isr)}


def test_a_move_is_applied_where_the_replica_list_shows_it():
    p = part([2, 1, 4, 3], [2, 1])
    assert annotate(p, ((4, 3), (2, 1))) == ((4, 3), (2, 1))
    assert p["adding_replicas"] == [4, 3] and p["removing_replicas"] == [2, 1]


def test_a_move_the_metadata_does_not_show_yet_is_left_out():
    p = part([2, 1], [2, 1])
    assert annotate(p, ((4, 3), (2, 1))) is None
    assert "adding_replicas" not in p


def test_an_answer_saying_done_before_the_metadata_does_keeps_the_last_move():
    # the CI case: the answer came after Kafka finished the move, the Metadata answer before it
    p = part([2, 1, 4, 3], [2, 1, 4])
    assert annotate(p, None, last=((4, 3), (2, 1))) == ((4, 3), (2, 1))
    assert p["adding_replicas"] == [4, 3]


def test_a_finished_move_is_not_carried():
    p = part([4, 3], [4, 3])
    assert annotate(p, None, last=((4, 3), (2, 1))) is None
    assert "adding_replicas" not in p and "removing_replicas" not in p


def test_a_cancelled_move_is_not_carried():
    p = part([2, 1], [2, 1])
    assert annotate(p, None, last=((4, 3), (2, 1))) is None


def test_an_added_replica_already_in_the_isr_may_be_done_and_is_not_carried():
    # replication factor 2 -> 3: no removing replicas; once the new one is in the ISR the list cannot
    # tell a finished move from its last moment, and neither is under-replicated
    assert annotate(part([1, 2, 3], [1, 2, 3]), None, last=((3,), ())) is None
    p = part([1, 2, 3], [1, 2])
    assert annotate(p, None, last=((3,), ())) == ((3,), ())


def test_a_move_the_reassignments_answer_does_not_list_yet_is_read_from_the_replica_list():
    # the CI case: Kafka lists the target first, then the original replicas; the answer listing the
    # move came after the offsets round, and the empty adding replicas read as 12,000 messages behind
    p = part([4, 3, 1, 2], [2, 1])
    assert annotate(p, None, before=[1, 2]) == ((4, 3), (1, 2))
    assert p["adding_replicas"] == [4, 3] and p["removing_replicas"] == [1, 2]
    p = part([3, 4, 5, 1, 2], [1, 2, 3])  # origin 1,2,3 -> target 3,4,5
    assert annotate(p, None, before=[1, 2, 3]) == ((4, 5), (1, 2))
    p = part([1, 2, 3], [1, 2])  # replication factor 2 -> 3
    assert annotate(p, None, before=[1, 2]) == ((3,), ())


def test_a_replica_list_that_is_no_move_infers_nothing():
    assert annotate(part([1, 2], [1, 2]), None, before=[1, 2]) is None  # unchanged
    assert annotate(part([4, 3], [4, 3]), None, before=[4, 3, 1, 2]) is None  # a move's end
    assert annotate(part([1, 2, 3], [1, 2, 3]), None, before=[1, 2]) is None  # grown and already in sync
    assert annotate(part([3, 1], [3, 1]), None, before=[1, 2]) is None  # another list (topic created again)
    assert annotate(part([1, 2, 4], [1, 2]), None, before=None) is None  # nothing to compare with

def test_the_controllers_answer_wins_over_the_inference():
    p = part([4, 3, 1, 2], [2, 1])
    assert annotate(p, ((3,), (2,)), before=[1, 2]) == ((3,), (2,))
    assert p["adding_replicas"] == [3] and p["removing_replicas"] == [2]
