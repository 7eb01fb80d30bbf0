"""The ground truth of client harm (lab/client_judge.py): runs of hurt writes, without a producer."""

import threading
import time

import pytest

from lab.client_judge import ClientJudge

pytestmark = pytest.mark.unit


def judge(failed, ok, pending=None, slow_s=2.0, acked=None):
    j = ClientJudge.__new__(ClientJudge)  # the bookkeeping alone: no producer, no thread
    j._lock = threading.Lock()
    j.failed, j.ok, j.slow_s = failed, ok, slow_s
    j.acked = acked if acked is not None else {p: [] for p in failed}
    j.pending = pending if pending is not None else {p: {} for p in failed}
    return j


def test_hurt_means_a_run_of_hurt_writes_long_enough():
    every = [round(0.2 * i, 1) for i in range(100)]  # a write every 200 ms for 20 s
    run_4s = judge({0: [t for t in every if 5 <= t <= 9]}, {0: [t for t in every if not 5 <= t <= 9]})
    assert run_4s.hurt_between(0, 20, min_run_s=3.0) == {0}
    flicker = judge({0: [t for t in every if 5 <= t <= 9 and round(t * 5) % 5]},  # a quick write every second
                    {0: [t for t in every if not (5 <= t <= 9 and round(t * 5) % 5)]})
    assert flicker.hurt_between(0, 20, min_run_s=3.0) == set(), "never 3 s without an acknowledged write"
    assert flicker.hurt_between(0, 20) == {0}, "without a minimum run, any hurt write counts"
    assert run_4s.hurt_between(10, 20, min_run_s=3.0) == set(), "outside the window"


def test_all_ok_since_needs_a_quick_write_and_no_hurt_one():
    j = judge({0: [1.0], 1: []}, {0: [2.0], 1: [0.5]})
    assert not j.all_ok_since(1.5), "partition 1 has no quick write since"
    j.ok[1].append(2.5)
    assert j.all_ok_since(1.5)
    assert not j.all_ok_since(0.9), "partition 0 had a hurt write since"
    assert j.last_hurt(0.0) == 1.0


def test_recovery_is_the_first_quick_acknowledgement_after_the_last_hurt_write():
    """A pause that ends at t=10: writes sent before 8 are acknowledged at 10.1 (slow, hurt), those
    sent from 8 on at 10.1 too (quick). The clients recovered at 10.1, not at the last hurt send (7.8)."""
    sends = [round(0.2 * i, 1) for i in range(75)]  # 0 .. 14.8 s
    hurt = [t for t in sends if 5.0 <= t < 8.0]
    acked = [(t, 10.1 if 8.0 <= t < 10.1 else t + 0.01) for t in sends if not 5.0 <= t < 8.0]
    j = judge({0: hurt, 1: []}, {0: [s for s, _ in acked], 1: sends}, acked={0: acked, 1: [(t, t + 0.01) for t in sends]})
    assert j.last_hurt(0.0) == 7.8
    assert j.recovered_at(0.0) == 10.1
    assert j.recovered_at(9.0) is None, "nothing hurt since: no recovery to speak of"
    still = judge({0: [5.0]}, {0: [1.0]}, acked={0: [(1.0, 1.1)]})
    assert still.recovered_at(0.0) is None, "no quick write after the hurt one yet"


def test_counts_between_say_what_a_verdict_rests_on():
    j = judge({0: [1.0, 5.0], 1: []}, {0: [2.0], 1: [0.5, 3.0]})
    assert j.counts_between(0.9, 4.0) == {0: (1, 1), 1: (1, 0)}


def test_a_write_unacknowledged_past_slow_s_is_hurt_before_its_callback():
    """A silently dropped connection keeps the producer's batches for minutes: the writes of a cut in
    progress have no callback yet, and must count as hurt once older than slow_s."""
    now = time.monotonic()
    stuck = {i: now - 6.0 + 0.3 * i for i in range(20)}  # sent over the last 6 s, none acknowledged
    j = judge({0: []}, {0: [now - 10.0]}, pending={0: stuck})
    assert j.hurt_between(now - 7, now, min_run_s=3.0) == {0}
    assert j.counts_between(now - 7, now)[0][1] == 14, "only those older than slow_s (sent 6.0 ... 2.1 s ago)"
    assert not j.all_ok_since(now - 7)
    first = stuck[0]
    j._note(0, first, True, 0)  # a late acknowledgement: still hurt, no longer pending
    assert 0 not in j.pending[0] and j.failed[0] == [first]
