"""ISR_FLAPPING (pipelines/detectors/isr_flapping.py): a partition whose ISR loses the same follower again and again
is one incident naming it and counting its departures; a rolling restart, one follower after another, is not."""

import pytest

from pipelines.alert_path import AlertPath
from pipelines.detectors import isr_flapping
from pipelines.incidents import Finding, IncidentBook, ScopePoll
from pipelines.state import ClusterView, PipelineState

pytestmark = pytest.mark.unit

FLAP_WINDOW_MS = 300_000


class _Store:
    def upsert(self, changed):
        pass


def _view(at):
    return {"c": ClusterView(brokers=((1, True), (2, True), (3, True)), controller_id=1, error=None, newest_observed_ms=at)}


def _poll(book, at, under_replicated, poll_id, follower=3):
    """One poll of topic t's scope: partition 0 under-replicated (`follower` out of the ISR) or whole."""
    isr = [b for b in (1, 2, 3) if b != follower]
    found = [Finding("c", "topic:t", "UNDER_REPLICATED", "warning", "t", 0, None, None,
                     {"leader": isr[0], "replicas": [1, 2, 3], "isr": isr, "out_of_sync": [follower]}, at, poll_id)]
    return book.apply([ScopePoll("c", "topic:t", poll_id, at)], found if under_replicated else [])


def test_three_shrinks_within_the_flap_window_are_one_flapping_incident():
    book = IncidentBook(flap_window_ms=FLAP_WINDOW_MS)
    path = AlertPath(PipelineState(), book, _Store())  # type: ignore[arg-type]
    opened = []
    for n, at in enumerate(range(10_000, 130_000, 10_000), start=1):  # in and out of the ISR every 10 s
        changed = _poll(book, at, n % 2 == 1, n)
        changed += book.apply(*path._flapping(changed, _view(at)))
        opened += [i for i in changed if i.type == isr_flapping.TYPE and i.status == "open"]
    flapping = [i for i in book.open_incidents() if i.type == isr_flapping.TYPE]
    assert len(flapping) == 1, "one incident, not one per dip"
    (inc,) = flapping
    assert (inc.topic, inc.partition, inc.broker, inc.severity) == ("t", 0, 3, "warning")
    assert inc.facts.shrinks == 6 and list(inc.facts.followers) == [3], inc.details
    assert inc.facts.headline() == "broker 3 left its ISR 6 times and rejoined"
    assert opened[0].details["shrinks"] == isr_flapping.FLAPS_MIN, "opened at the third shrink"
    under = [i for i in book.open_incidents() + book.resolved("UNDER_REPLICATED") if i.type == "UNDER_REPLICATED"]
    assert len(under) == 1, "the dips themselves are one reopened incident already"

    # steady: the ISR whole until its shrinks are older than the flap window: resolved
    for n, at in enumerate((200_000, 430_000, 440_000), start=100):
        changed = _poll(book, at, False, n)
        book.apply(*path._flapping(changed, _view(at)))
    assert [i for i in book.open_incidents() if i.type == isr_flapping.TYPE] == []


def test_two_shrinks_are_not_flapping():
    book = IncidentBook(flap_window_ms=FLAP_WINDOW_MS)
    path = AlertPath(PipelineState(), book, _Store())  # type: ignore[arg-type]
    for n, at in enumerate((10_000, 20_000, 30_000, 40_000), start=1):
        changed = _poll(book, at, n % 2 == 1, n)
        book.apply(*path._flapping(changed, _view(at)))
    assert [i for i in book.open_incidents() if i.type == isr_flapping.TYPE] == []


def test_a_rolling_restart_takes_each_follower_out_once_and_is_not_flapping():
    """Brokers 3, 2, 1 restarted a minute apart: partition 0's ISR shrinks three times within the flap window (the
    book reopens one UNDER_REPLICATED incident), but each time by another follower."""
    book = IncidentBook(flap_window_ms=FLAP_WINDOW_MS)
    path = AlertPath(PipelineState(), book, _Store())  # type: ignore[arg-type]
    n = 0
    for start, follower in ((10_000, 3), (70_000, 2), (130_000, 1)):
        for at, down in ((start, True), (start + 20_000, False)):
            n += 1
            changed = _poll(book, at, down, n, follower)
            book.apply(*path._flapping(changed, _view(at)))
    (under,) = [i for i in book.resolved("UNDER_REPLICATED")]
    assert under.reopen_count == 2, "three dips within the window: the same incident reopened"
    assert [i for i in book.open_incidents() if i.type == isr_flapping.TYPE] == []
