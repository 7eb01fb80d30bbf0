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
