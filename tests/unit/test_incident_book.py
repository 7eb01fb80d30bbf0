"""Incident lifecycle cases: open, update, resolve, replay after restart, flapping."""

import pytest

from pipelines.incidents import Finding, IncidentBook, ScopePoll, incident_id

pytestmark = pytest.mark.unit

T = "OFFLINE_PARTITION"


def poll(pid, t, scope="topic:a"):
    return ScopePoll("c1", scope, pid, t)


def bad(pid, t, partition=0, cause="single_replica_on_dead_broker", scope="topic:a"):
    return Finding("c1", scope, T, "critical", "a", partition, None, cause, {"must_return": [1]}, t, pid)


def test_1_opens_on_first_unhealthy_poll():
    book = IncidentBook(60_000)
    changed = book.apply([poll(1, 1000)], [bad(1, 1000)])
    assert [(i.status, i.opened_at_ms) for i in changed] == [("open", 1000)]
    assert changed[0].incident_id == incident_id(("c1", T, "a", 0, None), 1000)


def test_2_stays_open_and_updates_last_seen():
    book = IncidentBook(60_000)
    book.apply([poll(1, 1000)], [bad(1, 1000)])
    changed = book.apply([poll(2, 2000)], [bad(2, 2000, cause="all_isr_replicas_dead")])
    assert [(i.status, i.last_seen_at_ms, i.cause) for i in changed] == [("open", 2000, "all_isr_replicas_dead")]
    assert len(book.open_incidents()) == 1


def test_3_resolves_when_scope_polled_healthy():
    book = IncidentBook(60_000)
    book.apply([poll(1, 1000)], [bad(1, 1000)])
    changed = book.apply([poll(2, 2000)], [])
    assert [(i.status, i.resolved_at_ms) for i in changed] == [("resolved", 2000)]
    assert book.open_incidents() == []


def test_4_poll_of_another_scope_does_not_resolve():
    book = IncidentBook(60_000)
    book.apply([poll(1, 1000)], [bad(1, 1000)])
    assert book.apply([poll(2, 2000, scope="topic:b")], []) == []
    assert len(book.open_incidents()) == 1


def test_4b_findings_without_a_poll_marker_open_but_resolve_nothing():
    """A failed poll carries no marker (it saw too little to call anything healthy), yet ZooKeeper's
    registrations may still say a broker is down: that opens, the scope's other incidents stay."""
    book = IncidentBook(60_000)
    book.apply([poll(1, 1000)], [bad(1, 1000, partition=0)])
    changed = book.apply([], [bad(2, 2000, partition=1)])
    assert [(i.partition, i.status) for i in changed] == [(1, "open")]
    assert sorted(i.partition for i in book.open_incidents()) == [0, 1]
    # the order of what apply returns is a set's: compare sorted
    assert sorted((i.partition, i.status) for i in book.apply([poll(3, 3000)], [])) == [(0, "resolved"), (1, "resolved")]


def test_5_open_and_resolve_within_one_batch_in_time_order():
    book = IncidentBook(60_000)
    changed = book.apply([poll(2, 2000), poll(1, 1000)], [bad(1, 1000)])
    assert [(i.status, i.opened_at_ms, i.resolved_at_ms) for i in changed] == [("resolved", 1000, 2000)]


def test_6_replayed_batch_after_restart_changes_nothing_new():
    first = IncidentBook(60_000)
    opened = first.apply([poll(1, 1000), poll(2, 2000)], [bad(1, 1000), bad(2, 2000)])
    # restart: the book is rebuilt from the stored incidents, then the same batch is replayed
    again = IncidentBook.from_incidents(60_000, opened)
    replayed = again.apply([poll(1, 1000), poll(2, 2000)], [bad(1, 1000), bad(2, 2000)])
    assert replayed == []
    assert [i.incident_id for i in again.open_incidents()] == [opened[0].incident_id]


def test_7_replay_of_a_batch_that_resolved_does_not_reopen():
    book = IncidentBook(60_000)
    book.apply([poll(1, 1000)], [bad(1, 1000)])
    stored = book.apply([poll(2, 2000), poll(3, 3000)], [bad(2, 2000)])  # seen at 2000, resolved at 3000
    restarted = IncidentBook.from_incidents(60_000, stored)
    assert restarted.apply([poll(2, 2000), poll(3, 3000)], [bad(2, 2000)]) == []
    assert restarted.open_incidents() == []


def test_8_reopen_within_flap_window_is_the_same_incident():
    book = IncidentBook(60_000)
    first = book.apply([poll(1, 1000)], [bad(1, 1000)])[0]
    book.apply([poll(2, 2000)], [])
    reopened = book.apply([poll(3, 30_000)], [bad(3, 30_000)])
    assert [(i.incident_id, i.status, i.reopen_count) for i in reopened] == [(first.incident_id, "open", 1)]


def test_9_reopen_after_flap_window_is_a_new_incident():
    book = IncidentBook(10_000)
    first = book.apply([poll(1, 1000)], [bad(1, 1000)])[0]
    book.apply([poll(2, 2000)], [])
    later = book.apply([poll(3, 50_000)], [bad(3, 50_000)])
    assert len(later) == 1 and later[0].incident_id != first.incident_id and later[0].opened_at_ms == 50_000


def test_10_partitions_are_separate_incidents():
    book = IncidentBook(60_000)
    changed = book.apply([poll(1, 1000)], [bad(1, 1000, partition=0), bad(1, 1000, partition=1)])
    assert sorted(i.partition for i in changed) == [0, 1]
    changed = book.apply([poll(2, 2000)], [bad(2, 2000, partition=1)])
    assert sorted((i.partition, i.status) for i in changed) == [(0, "resolved"), (1, "open")]


def test_11_resolved_incidents_are_forgotten_after_the_flap_window():
    book = IncidentBook(1_000)
    book.apply([poll(1, 1000)], [bad(1, 1000)])
    book.apply([poll(2, 2000)], [])
    book.apply([poll(3, 10_000, scope="topic:b")], [])
    assert book._by_key == {}


def test_events_stay_open_for_their_hold_time_then_resolve():
    """An unclean election is seen by one poll only; it must not resolve at the next one."""
    book = IncidentBook(60_000, hold_ms={"UNCLEAN_LEADER_ELECTION": 10_000})
    event = Finding("c1", "topic:a", "UNCLEAN_LEADER_ELECTION", "critical", "a", 0, None, None, {}, 1000, 1)
    assert [i.status for i in book.apply([poll(1, 1000)], [event])] == ["open"]
    assert book.apply([poll(2, 3000)], []) == []  # within the hold: still open, nothing changed
    changed = book.apply([poll(3, 11_000)], [])
    assert [(i.status, i.resolved_at_ms) for i in changed] == [("resolved", 11_000)]


def test_unchanged_open_incident_is_written_once_per_touch_interval():
    """An outage seen poll after poll: /metrics (open_incidents) follows every poll, the incidents
    table only every touch interval, or at once when the cause or severity changes."""
    book = IncidentBook(60_000, touch_ms=30_000)
    assert len(book.apply([poll(1, 1000)], [bad(1, 1000)])) == 1  # opened: written
    assert book.apply([poll(2, 11_000)], [bad(2, 11_000)]) == []
    assert book.apply([poll(3, 21_000)], [bad(3, 21_000)]) == []
    assert book.open_incidents()[0].last_seen_at_ms == 21_000  # memory is current
    touched = book.apply([poll(4, 31_000)], [bad(4, 31_000)])
    assert [(i.status, i.last_seen_at_ms) for i in touched] == [("open", 31_000)]
    assert book.apply([poll(5, 41_000)], [bad(5, 41_000)]) == []
    recaused = book.apply([poll(6, 42_000)], [bad(6, 42_000, cause="all_isr_replicas_dead")])
    assert [(i.cause, i.last_seen_at_ms) for i in recaused] == [("all_isr_replicas_dead", 42_000)]
    resolved = book.apply([poll(7, 43_000)], [])
    assert [(i.status, i.resolved_at_ms) for i in resolved] == [("resolved", 43_000)]


def test_restart_from_a_stale_last_seen_keeps_the_same_incident():
    """What a crash between touches leaves in the table: last_seen_at up to touch_ms old. Polls
    replayed after it are sightings of the same open incident, not a new one."""
    book = IncidentBook(60_000, touch_ms=30_000)
    stored = book.apply([poll(1, 1000)], [bad(1, 1000)])
    book.apply([poll(2, 11_000)], [bad(2, 11_000)])
    again = IncidentBook.from_incidents(60_000, stored, touch_ms=30_000)
    assert again.apply([poll(2, 11_000)], [bad(2, 11_000)]) == []
    assert [(i.incident_id, i.status) for i in again.open_incidents()] == [(stored[0].incident_id, "open")]


def test_a_new_state_in_the_details_is_written_at_once_a_new_measurement_waits():
    """A second follower leaving the ISR changes what the incident says (written now); the lag
    growing is a measurement (written with the next touch)."""
    book = IncidentBook(60_000, touch_ms=30_000)

    def urp(pid, t, out, lag):
        return Finding("c1", "topic:a", "UNDER_REPLICATED", "warning", "a", 0, None, None,
                       {"isr": [1], "out_of_sync": out, "lag_messages": lag}, t, pid)

    book.apply([poll(1, 1000)], [urp(1, 1000, [2], 10)])
    assert book.apply([poll(2, 2000)], [urp(2, 2000, [2], 500)]) == []
    changed = book.apply([poll(3, 3000)], [urp(3, 3000, [2, 3], 900)])
    assert [i.details["out_of_sync"] for i in changed] == [[2, 3]]


def test_incident_keeps_its_root_cause_and_the_causes_it_went_through():
    """An RF-1 partition: the broker died (single replica), came back, and for one poll was
    registered without being elected yet (live ISR, no leader): the page was about the first."""
    book = IncidentBook(60_000)
    (opened,) = book.apply([poll(1, 1000)], [bad(1, 1000)])
    assert (opened.details["root_cause"], opened.details["cause_history"]) == (
        "single_replica_on_dead_broker", ["single_replica_on_dead_broker"])
    book.apply([poll(2, 2000)], [bad(2, 2000)])
    (moved,) = book.apply([poll(3, 3000)], [bad(3, 3000, cause="live_isr_but_no_leader")])
    assert moved.cause == "live_isr_but_no_leader"
    assert moved.details["root_cause"] == "single_replica_on_dead_broker"
    assert moved.details["cause_history"] == ["single_replica_on_dead_broker", "live_isr_but_no_leader"]
    assert moved.details["must_return"] == [1], "the finding's own details are kept"
    (resolved,) = book.apply([poll(4, 4000)], [])
    assert resolved.details["root_cause"] == "single_replica_on_dead_broker"
