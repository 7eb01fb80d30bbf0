"""collectors/spool.py: in order, nothing removed before it is acknowledged, the oldest dropped
(and counted) when full."""

import pytest

from collectors.spool import Spool

pytestmark = pytest.mark.unit


def items(*names):
    return [(b"k", n.encode()) for n in names]


def test_records_leave_in_order_and_only_when_popped():
    s = Spool(max_bytes=1000)
    s.put(items("a", "b", "c"))
    head = s.peek(2, timeout_s=0)
    assert [v for _, v in head] == [b"a", b"b"]
    assert s.depth == 3  # a failed send keeps them
    s.pop(head)
    assert [v for _, v in s.peek(10, timeout_s=0)] == [b"c"]


def test_full_spool_drops_the_oldest_and_counts_them():
    s = Spool(max_bytes=6)  # three records of 2 bytes
    assert s.put(items("a", "b", "c")) == 0
    assert s.put(items("d", "e")) == 2
    assert [v for _, v in s.peek(10, timeout_s=0)] == [b"c", b"d", b"e"] and s.dropped == 2


def test_pop_after_an_overflow_removes_nothing_twice():
    s = Spool(max_bytes=4)
    s.put(items("a", "b"))
    head = s.peek(2, timeout_s=0)  # being sent
    s.put(items("c"))  # overflow drops a while it is in flight
    s.pop(head)  # a is gone already; b was acknowledged
    assert [v for _, v in s.peek(10, timeout_s=0)] == [b"c"]
