"""foundation/cadence.py: every multiple of a cluster's poll interval, decided once."""

import pytest

from foundation.cadence import Cadence, read_back_s, ready_window_s, reload_every_s

pytestmark = pytest.mark.unit


@pytest.mark.parametrize("poll_s, resend_s, stale, stuck, hold, reload, reason", [
    (1.0, 60.0, 6.0, 10.0, 61.0, 2.0, "a 1 s poll: stale and stuck at their floors; a page reloads every 2 s"),
    (5.0, 60.0, 15.0, 25.0, 65.0, 5.0, "a 5 s poll: stale after three polls, stuck after five, a page once a poll"),
    (0.5, 0.0, 6.0, 10.0, 0.5, 2.0, "every poll published: a steady poll holds one poll"),
])
def test_a_cluster_s_cadence(poll_s, resend_s, stale, stuck, hold, reload, reason):
    c = Cadence(poll_s, resend_s)
    assert (c.stale_after_s, c.stuck_after_s, c.steady_hold_s, reload_every_s(c.stale_after_s)) == (
        stale, stuck, hold, reload), reason


def test_the_pipeline_s_windows():
    assert ready_window_s(1.0, 60.0) == 120.0 and ready_window_s(10.0, 0.0) == 50.0 and ready_window_s(1.0, 0) == 30.0
    assert read_back_s(2.0, 60.0) == 62.0 and read_back_s(2.0, 0.0) is None


def test_a_cadence_refuses_nonsense():
    with pytest.raises(ValueError, match="poll_interval_s > 0"):
        Cadence(0.0)


def test_the_shares_of_a_split_cluster_poll_on_the_wall_clock_s_slots():
    from foundation.cadence import next_slot

    assert next_slot(1_000.0, 10.0) == 1_000.0, "on a slot: now"
    assert next_slot(1_000.1, 10.0) == 1_010.0
    assert next_slot(1_009.99, 2.5) == 1_010.0
    # two processes started 7.3 s apart poll at the same moments
    first, second = next_slot(1_001.0, 10.0), next_slot(1_008.3, 10.0)
    assert first == second == 1_010.0
    with pytest.raises(ValueError):
        next_slot(1.0, 0.0)
