"""ISR_FLAPPING (pipelines/detectors/isr_flapping.py): a partition whose ISR shrinks and expands again and again is
one incident naming the follower and counting the shrinks, opened from the incident book's reopened
UNDER_REPLICATED incident, and resolved once that one has stayed resolved past the flap window."""

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


def _poll(book, at, under_replicated, poll_id):
    """One poll of topic t's scope: partition 0 under-replicated (follower 3 out of the ISR) or whole."""
    found = [Finding("c", "topic:t", "UNDER_REPLICATED", "warning", "t", 0, None, None,
                     {"leader": 1, "replicas": [1, 2, 3], "isr": [1, 2], "out_of_sync": [3]}, at, poll_id)]
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
    assert inc.facts.headline() == "its ISR shrank 6 times: broker 3 leaves and rejoins"
    assert opened[0].details["shrinks"] == isr_flapping.FLAPS_MIN, "opened at the third shrink"
    under = [i for i in book.open_incidents() + book.resolved("UNDER_REPLICATED") if i.type == "UNDER_REPLICATED"]
    assert len(under) == 1, "the dips themselves are one reopened incident already"

    # steady: the ISR whole past the flap window, the book forgets the under-replicated incident: resolved
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
