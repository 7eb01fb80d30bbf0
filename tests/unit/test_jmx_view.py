"""pipelines/jmx_view.py: latest sample per broker and the split-brain check per scrape round."""

import pytest

from pipelines.jmx_view import JmxSample, JmxView

pytestmark = pytest.mark.unit


def s(broker, poll_id, active, error=None, at=1000):
    return JmxSample("c1", broker, poll_id, at, error, {} if error else {"active_controller_count": active})


def test_one_controller_is_healthy_two_are_a_split_brain():
    view = JmxView()
    polls, found = view.update([s(1, 1, 1), s(2, 1, 0), s(3, 1, 0)])
    assert [p.scope for p in polls] == ["jmx"] and found == []
    _, found = view.update([s(1, 2, 1, at=2000), s(2, 2, 1, at=2000), s(3, 2, 0, at=2000)])
    (f,) = found
    assert (f.type, f.cause, f.broker, f.details) == ("CONTROLLER_ANOMALY", "multiple_active_controllers", 1,
                                                      {"active_controllers": [1, 2]})


def test_unreachable_exporter_is_no_vote_and_the_latest_sample_wins():
    view = JmxView()
    _, found = view.update([s(1, 1, 1), s(2, 1, 0, error="URLError: refused")])
    assert found == []
    view.update([s(2, 2, 0, at=3000)])
    view.update([s(2, 1, 1, at=500)])  # an older sample arriving late does not replace the newer one
    assert view.snapshot()[("c1", 2)].observed_at_ms == 3000
