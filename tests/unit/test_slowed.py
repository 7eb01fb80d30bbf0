"""pipelines/slowed.py: the partitions whose pages wait on a critically slow broker's."""

from dataclasses import replace

import pytest

from pipelines.detectors.canary import CanarySample
from pipelines.incidents import Incident
from pipelines.slowed import GRACE_MS, TAIL_MS, CriticalSpells, canary_slowed, hurting, slowed

pytestmark = pytest.mark.unit


def _inc(type_, severity, opened, topic=None, partition=None, broker=None, details=None, status="open"):
    return Incident(incident_id=f"{type_}-{topic}-{partition}-{broker}", cluster="c", scope="x", type=type_, severity=severity,
                    topic=topic, partition=partition, broker=broker, cause="x", details=details or {},
                    opened_at_ms=opened, last_seen_at_ms=opened, resolved_at_ms=None, status=status)


def test_only_a_critical_slow_broker_holds_the_partitions_it_names():
    led = _inc("HW_STALL", "critical", 10_000, "t", 0, details={"leader": 2, "holding_back": [3]})
    followed = _inc("HW_STALL", "critical", 10_000, "t", 1, details={"leader": 1, "holding_back": [2]})
    elsewhere = _inc("HW_STALL", "critical", 10_000, "t", 2, details={"leader": 1, "holding_back": [3]})
    long_before = _inc("UNDER_MIN_ISR", "critical", 1_000, "t", 3, details={"leader": 2})
    canary = _inc("PARTITION_UNAVAILABLE", "critical", 12_000, "krm.canary", 1, details={"leader": 2})
    lag = _inc("REPLICA_LAG", "warning", 12_000, "t", 4, details={"leader": 2})
    others = [led, followed, elsewhere, long_before, canary, lag]
    assert slowed([_inc("BROKER_SLOW", "warning", 70_000, broker=2), *others]) == set(), "a warning holds nothing"
    got = slowed([_inc("BROKER_SLOW", "critical", 70_000, broker=2), *others])
    assert got == {("c", "t", 0, 2), ("c", "t", 1, 2), ("c", "krm.canary", 1, 2)}
    resolved = _inc("BROKER_SLOW", "critical", 70_000, broker=2, status="resolved")
    assert slowed([resolved, *others]) == set()


def test_a_spell_that_ended_critical_holds_its_pages_a_while():
    stall = _inc("HW_STALL", "critical", 72_000, "t", 0, details={"leader": 1, "holding_back": [2]})
    ended = _inc("BROKER_SLOW", "critical", 70_000, broker=2, status="resolved")
    ended = replace(ended, resolved_at_ms=90_000)
    assert slowed([stall], [ended], 90_000 + GRACE_MS) == {("c", "t", 0, 2)}, "the tail of the spell waits"
    assert slowed([stall], [ended], 90_001 + GRACE_MS) == set(), "past the grace, the partition pages for itself"
    assert slowed([stall], [ended]) == set(), "without a clock, only open spells hold"
    late = _inc("HW_STALL", "critical", 90_000 + TAIL_MS + 1, "t", 1, details={"leader": 1, "holding_back": [2]})
    assert slowed([late], [ended], 91_000 + TAIL_MS) == set(), "a stall opening after the spell is its own"
    warned = replace(ended, severity="warning")
    assert slowed([stall], [warned], 91_000) == set(), "a spell that ended a warning held nothing before either"
    catching_up = _inc("HW_STALL", "critical", 91_000, "t", 2, details={"leader": 1, "isr": [1, 2, 3], "holding_back": []})
    assert slowed([catching_up], [ended], 92_000) == {("c", "t", 2, 2)}, \
        "the slow broker catching up in its ISR: a stall naming no follower is still its spell's"


def _sample(broker, isr, produced=False, leader=None):
    return CanarySample("c", broker, broker, produced, None, None, 0, broker if leader is None else leader, tuple(isr))


def test_a_canary_write_waiting_on_a_slow_follower_is_held():
    samples = [_sample(1, (1, 2)), _sample(3, (3, 4)), _sample(2, ()), _sample(4, (), leader=2)]
    slow = [_inc("BROKER_SLOW", "critical", 70_000, broker=2)]
    assert canary_slowed(samples, slow) == {("c", 1, 2), ("c", 2, 2), ("c", 4, 2)}, \
        "its ISR (or, unknown, its leader) names the slow broker"
    assert canary_slowed(samples, [_inc("BROKER_SLOW", "warning", 70_000, broker=2)]) == set()
    assert canary_slowed(samples, [_inc("BROKER_SLOW", "critical", 70_000, broker=3)]) == {("c", 3, 3)}


def test_a_stall_blames_the_follower_holding_it_back_not_its_leader():
    """BROKER_SLOW turns critical on the partitions' own pages: a stall blames the ISR follower holding its high
    watermark back; its leader is hurt by it, not hurting."""
    stalled = _inc("HW_STALL", "critical", 10_000, "t", 0, details={"leader": 3, "holding_back": [1]})
    unavailable = _inc("PARTITION_UNAVAILABLE", "critical", 10_000, "t", 1, details={"leader": 4})
    warned = _inc("HW_STALL", "warning", 10_000, "t", 2, details={"leader": 2, "holding_back": [2]})
    assert hurting([stalled, unavailable, warned], "c") == {1, 4}
    assert hurting([stalled], "other") == set()


def test_a_spell_that_turns_a_warning_holds_its_tail_too():
    """Clients no longer hurt, the broker still a little slow: BROKER_SLOW turns a warning rather than resolving,
    and the stalls its critical spell left stay held for the grace, from when it was last critical."""
    spells = CriticalSpells()
    critical = replace(_inc("BROKER_SLOW", "critical", 70_000, broker=2), last_seen_at_ms=80_000)
    assert spells.ended([critical], []) == ()
    warned = replace(critical, severity="warning", last_seen_at_ms=81_000)
    (ended,) = spells.ended([warned], [])
    assert (ended.severity, ended.status, ended.resolved_at_ms) == ("critical", "resolved", 80_000)
    stall = _inc("HW_STALL", "critical", 79_000, "t", 0, details={"leader": 1, "holding_back": [2]})
    assert slowed([warned, stall], [ended], 85_000) == {("c", "t", 0, 2)}
    assert slowed([warned, stall], [ended], 80_001 + GRACE_MS) == set()
    # resolved from a warning: still its last critical moment; forgotten by the book, forgotten here
    gone = replace(warned, status="resolved", resolved_at_ms=90_000)
    assert [e.resolved_at_ms for e in spells.ended([], [gone])] == [80_000]
    assert spells.ended([], []) == () and spells.ended([], [gone]) == ()
    # a warning that never was critical holds nothing
    assert CriticalSpells().ended([warned], []) == ()


def test_a_stall_waiting_on_a_follower_the_metadata_dropped_is_its_spell_s():
    """In KRaft a leader's pending ISR shrink still waits on the dropped follower: the stall of a partition the slow
    broker replicates is its spell's, though the ISR the metadata shows no longer holds it."""
    dropped = _inc("HW_STALL", "critical", 71_000, "t", 5, details={"leader": 4, "isr": [4, 1], "replicas": [4, 1, 2]})
    assert slowed([_inc("BROKER_SLOW", "critical", 70_000, broker=2), dropped]) == {("c", "t", 5, 2)}


def test_a_stall_reopened_in_this_spell_is_its():
    """An incident reopening within the flap window keeps its first opening, minutes before this spell: the stall's
    own start (hw_stalled_since_ms) says it is this spell's; a reopened incident without one is held (its start unknown)."""
    slow = _inc("BROKER_SLOW", "critical", 400_000, broker=2)
    reopened = replace(_inc("HW_STALL", "critical", 10_000, "t", 0, details={
        "leader": 1, "holding_back": [2], "hw_stalled_since_ms": 401_000}), reopen_count=3)
    assert slowed([slow, reopened]) == {("c", "t", 0, 2)}
    old_spell = replace(reopened, details={"leader": 1, "holding_back": [2], "hw_stalled_since_ms": 20_000})
    assert slowed([slow, old_spell]) == set(), "stalled since long before the broker was slow: its own"
    flapped = replace(_inc("UNDER_MIN_ISR", "critical", 10_000, "t", 1, details={"leader": 2}), reopen_count=1)
    assert slowed([slow, flapped]) == {("c", "t", 1, 2)}
