"""The ground truth of client harm (lab/client_judge.py): runs of hurt writes, without a producer."""

import threading

import pytest

from lab.client_judge import ClientJudge

pytestmark = pytest.mark.unit


def judge(failed, ok):
    j = ClientJudge.__new__(ClientJudge)  # the bookkeeping alone: no producer, no thread
    j._lock = threading.Lock()
    j.failed, j.ok = failed, ok
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


def test_counts_between_say_what_a_verdict_rests_on():
    j = judge({0: [1.0, 5.0], 1: []}, {0: [2.0], 1: [0.5, 3.0]})
    assert j.counts_between(0.9, 4.0) == {0: (1, 1), 1: (1, 0)}
