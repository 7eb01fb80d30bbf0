"""How a down broker went down (collectors/departures.py): a controlled shutdown hands everything over
first; a crash holds it; with nothing to hand over, krm says it does not know."""

import pytest

from collectors.departures import DRAIN_WINDOW_MS, SETTLE_MS, Departures, holders

pytestmark = pytest.mark.unit

# partitions: (leader, isr, replicas)
HEALTHY = [{"leader": 1, "isr": [1, 2, 3], "replicas": [1, 2, 3]}, {"leader": 2, "isr": [2, 3, 1], "replicas": [2, 3, 1]},
           {"leader": 3, "isr": [3], "replicas": [3]}]
HANDED_OVER = [{"leader": 1, "isr": [1, 2], "replicas": [1, 2, 3]}, {"leader": 2, "isr": [2, 1], "replicas": [2, 3, 1]},
               {"leader": 3, "isr": [3], "replicas": [3]}]  # broker 3 out of every ISR; still leads its RF-1 partition
UP = [{"id": b, "live": True, "reachable": True} for b in (1, 2, 3)]


def seen_up(d, at=1_000, partitions=HEALTHY):
    d.annotate([dict(b) for b in UP], lambda: partitions, at)


def verdict(b):
    return b["departure"], b["controlled_shutdown"], b["down_since_ms"]


def test_holders_leave_single_replica_partitions_aside():
    assert holders(HEALTHY) == {1, 2, 3}
    assert holders(HANDED_OVER) == {1, 2}


@pytest.mark.parametrize("partitions, expected, reason", [
    (HANDED_OVER, ("controlled", True), "leaderships and ISR places moved before it went: a controlled shutdown"),
    (HEALTHY, ("crash", False), "went silent still in every ISR: a crash or a hang"),
])
def test_first_sight_decides(partitions, expected, reason):
    d = Departures()
    seen_up(d)
    up = [{"id": 3, "live": True, "reachable": True}]
    d.annotate(up, lambda: HEALTHY, 1_500)
    assert "departure" not in up[0]
    for at in (2_000, 2_000 + SETTLE_MS):  # a crash: held at every look for SETTLE_MS
        gone = [{"id": 3, "live": True, "reachable": False}]
        d.annotate(gone, lambda: partitions, at)
    assert verdict(gone[0]) == (*expected, 2_000), reason
    # deregistered later: the controller has moved everything by then, the first sight still decides
    later = [{"id": 3, "live": False, "reachable": None}]
    d.annotate(later, lambda: HANDED_OVER, 20_000)
    assert verdict(later[0]) == (*expected, 2_000), reason


def test_nothing_to_hand_over_is_unknown_never_a_clean_stop():
    d = Departures()
    seen_up(d, partitions=HANDED_OVER)  # broker 3 leads only its single-replica partition
    gone = [{"id": 3, "live": False}]
    d.annotate(gone, lambda: HANDED_OVER, 2_000)
    assert verdict(gone[0]) == ("unknown", None, 2_000)
    # never seen up (krm started after it went) and holding nothing: unknown too
    d = Departures()
    gone = [{"id": 3, "live": False}]
    d.annotate(gone, lambda: HANDED_OVER, 2_000)
    assert verdict(gone[0]) == ("unknown", None, 2_000)


def test_held_long_before_is_no_evidence():
    d = Departures()
    seen_up(d, at=1_000)
    for at in range(2_000, 2_000 + DRAIN_WINDOW_MS + 2_000, 60_000):  # drained by a reassignment, then idle
        d.annotate([dict(b) for b in UP], lambda: HANDED_OVER, at)
    gone = [{"id": 3, "live": False}]
    d.annotate(gone, lambda: HANDED_OVER, 3_000 + DRAIN_WINDOW_MS + 60_000)
    assert gone[0]["departure"] == "unknown"


def test_a_return_forgets_the_last_stop():
    d = Departures()
    seen_up(d)
    d.annotate([{"id": 3, "live": False}], lambda: HEALTHY, 2_000)
    d.annotate([{"id": 3, "live": False}], lambda: HEALTHY, 2_000 + SETTLE_MS)
    d.annotate([{"id": 3, "live": True, "reachable": True}], lambda: HEALTHY, 9_000)
    again = [{"id": 3, "live": False}]
    d.annotate(again, lambda: HANDED_OVER, 10_000)
    assert verdict(again[0]) == ("controlled", True, 10_000)


def test_partitions_are_read_only_when_needed():
    """A poll that brings the holders (`held`) or is not a full one reads no partitions, and says nothing of a
    broker that is up."""
    d = Departures()
    reads = []

    def partitions():
        reads.append(1)
        return HEALTHY
    for kwargs in ({"held": {1}}, {"full": False}):
        up = [{"id": 1, "live": True, "reachable": True}]
        d.annotate(up, partitions, 1_000, **kwargs)
        assert up == [{"id": 1, "live": True, "reachable": True}], kwargs
    assert reads == []
    d.annotate([{"id": 1, "live": True, "reachable": True}], partitions, 2_000)  # a full poll without holders reads
    assert reads == [1]


def test_first_seen_deregistered_while_the_view_still_holds_it_is_judged_again_at_the_next_looks():
    # a clean stop under load: its registration went before the views caught up with the controller
    d = Departures()
    seen_up(d)
    gone = [{"id": 3, "live": False, "reachable": None}]
    d.annotate(gone, lambda: HEALTHY, 2_000)
    assert verdict(gone[0]) == ("unknown", None, 2_000), "not judged yet: unknown, a warning, never a page"
    caught_up = [{"id": 3, "live": False, "reachable": None}]
    d.annotate(caught_up, lambda: HANDED_OVER, 3_000)
    assert verdict(caught_up[0]) == ("controlled", True, 2_000)

    def boom():
        raise AssertionError("a final judgement reads no partitions")
    final = [{"id": 3, "live": False}]
    d.annotate(final, boom, 4_000, held=set())
    assert final[0]["departure"] == "controlled"
    # the same first sight, and the looks for SETTLE_MS still show it holding: the controller moved nothing
    d = Departures()
    seen_up(d)
    d.annotate([{"id": 3, "live": False}], lambda: HEALTHY, 2_000)
    still = [{"id": 3, "live": False}]
    d.annotate(still, lambda: HEALTHY, 3_000)
    assert still[0]["departure"] == "unknown"
    d.annotate(still, lambda: HEALTHY, 2_000 + SETTLE_MS)
    assert verdict(still[0]) == ("crash", False, 2_000)


def test_ports_closed_before_the_view_caught_up_is_a_controlled_shutdown():
    """CI: a clean rolling restart paged for a broker first seen registered but refusing connections
    (its ports close before its ZooKeeper session goes) while the mirror still showed the leaderships
    the controller had just moved; then deregistered, the mirror still behind."""
    d = Departures()
    seen_up(d, at=9_000)
    refusing = [{"id": 3, "live": True, "reachable": False}]
    d.annotate(refusing, lambda: HEALTHY, 10_000)
    assert refusing[0]["departure"] == "unknown", "registered and silent: unreachable (a warning) meanwhile"
    deregistered = [{"id": 3, "live": False}]
    d.annotate(deregistered, lambda: HEALTHY, 10_400)
    assert deregistered[0]["departure"] == "unknown", "deregistered while still judged: never a crash page"
    caught_up = [{"id": 3, "live": False}]
    d.annotate(caught_up, lambda: HANDED_OVER, 11_000)
    assert verdict(caught_up[0]) == ("controlled", True, 10_000)
    d.annotate(caught_up, lambda: HEALTHY, 30_000)  # final: a later view changes nothing
    assert caught_up[0]["departure"] == "controlled"


def test_a_crash_stays_a_crash_through_the_controllers_reaction_and_the_restart():
    """`make demo`: broker 3 SIGKILLed; its session expires and the controller moves its load; it is
    restarted, registers (a ZooKeeper-triggered record: no reachability) and opens its ports a moment
    later. Judged a crash once, it reads as one until it serves again."""
    d = Departures()
    seen_up(d)
    for at in (10_000, 11_000, 12_000, 10_000 + SETTLE_MS):
        killed = [{"id": 3, "live": True, "reachable": False}]
        d.annotate(killed, lambda: HEALTHY, at)
    assert verdict(killed[0]) == ("crash", False, 10_000)
    expired = [{"id": 3, "live": False}]  # the session expired, the controller moved its leaderships
    d.annotate(expired, lambda: HANDED_OVER, 28_000)
    assert verdict(expired[0]) == ("crash", False, 10_000)
    registered = [{"id": 3, "live": True, "reachable": None}]  # the ZooKeeper watch: registered again
    d.annotate(registered, lambda: HANDED_OVER, 40_000, full=False)
    assert "departure" not in registered[0]
    # a full poll whose views disagree: not asked (the caches dropped it), registered (the mirror)
    d.annotate([{"id": 3, "live": True, "reachable": None}], lambda: HANDED_OVER, 40_500)
    starting = [{"id": 3, "live": True, "reachable": False}]  # the next poll: its ports not open yet
    d.annotate(starting, lambda: HANDED_OVER, 41_000)
    assert verdict(starting[0]) == ("crash", False, 10_000)
    d.annotate([{"id": 3, "live": True, "reachable": True}], lambda: HANDED_OVER, 43_000)  # serving: over
    d.annotate([{"id": 3, "live": True, "reachable": True}], lambda: HEALTHY, 44_000)
    stopped = [{"id": 3, "live": False}]
    d.annotate(stopped, lambda: HANDED_OVER, 50_000)
    assert verdict(stopped[0]) == ("controlled", True, 50_000), "its next departure is judged afresh"


def test_a_late_look_decides_on_the_looks_before_it():
    # polls far apart (a long interval, a poll waiting on offsets): the next look falls after the
    # session expired, when the controller has moved a crash's load too; the looks before it decide
    d = Departures()
    seen_up(d)
    d.annotate([{"id": 3, "live": True, "reachable": False}], lambda: HEALTHY, 10_000)
    late = [{"id": 3, "live": False}]
    d.annotate(late, lambda: HANDED_OVER, 25_000)
    assert late[0]["departure"] == "crash"
