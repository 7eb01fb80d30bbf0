"""How a down broker went down (collectors/departures.py): a controlled shutdown hands everything over first."""

import pytest

from collectors.departures import SETTLE_MS, Departures, holders

pytestmark = pytest.mark.unit

# partitions: (leader, isr, replicas)
HEALTHY = [{"leader": 1, "isr": [1, 2, 3], "replicas": [1, 2, 3]}, {"leader": 2, "isr": [2, 3, 1], "replicas": [2, 3, 1]},
           {"leader": 3, "isr": [3], "replicas": [3]}]
HANDED_OVER = [{"leader": 1, "isr": [1, 2], "replicas": [1, 2, 3]}, {"leader": 2, "isr": [2, 1], "replicas": [2, 3, 1]},
               {"leader": 3, "isr": [3], "replicas": [3]}]  # broker 3 out of every ISR; still leads its RF-1 partition


def test_holders_leave_single_replica_partitions_aside():
    assert holders(HEALTHY) == {1, 2, 3}
    assert holders(HANDED_OVER) == {1, 2}


@pytest.mark.parametrize("partitions, controlled, reason", [
    (HANDED_OVER, True, "leaderships and ISR places moved before it went: a controlled shutdown"),
    (HEALTHY, False, "went silent still in every ISR: a crash or a hang"),
])
def test_first_sight_decides(partitions, controlled, reason):
    d = Departures()
    up = [{"id": 3, "live": True, "reachable": True}]
    d.annotate(up, lambda: HEALTHY, 1_000)
    assert "controlled_shutdown" not in up[0]
    gone = [{"id": 3, "live": True, "reachable": False}]
    d.annotate(gone, lambda: partitions, 2_000)
    assert (gone[0]["controlled_shutdown"], gone[0]["down_since_ms"]) == (controlled, 2_000), reason
    # deregistered later: the controller has moved everything by then, the first sight still decides
    later = [{"id": 3, "live": False, "reachable": None}]
    d.annotate(later, lambda: HANDED_OVER, 20_000)
    assert (later[0]["controlled_shutdown"], later[0]["down_since_ms"]) == (controlled, 2_000), reason


def test_a_return_forgets_the_last_stop():
    d = Departures()
    d.annotate([{"id": 3, "live": False}], lambda: HEALTHY, 1_000)
    d.annotate([{"id": 3, "live": True, "reachable": True}], lambda: HEALTHY, 2_000)
    again = [{"id": 3, "live": False}]
    d.annotate(again, lambda: HANDED_OVER, 3_000)
    assert (again[0]["controlled_shutdown"], again[0]["down_since_ms"]) == (True, 3_000)


def test_partitions_are_read_only_when_a_broker_is_newly_down():
    d = Departures()

    def boom():
        raise AssertionError("read")
    d.annotate([{"id": 1, "live": True, "reachable": True}], boom, 1_000)


def test_first_seen_deregistered_while_the_view_still_holds_it_is_judged_again_at_the_next_looks():
    # a clean stop under load: its registration went before the views caught up with the controller
    d = Departures()
    gone = [{"id": 3, "live": False, "reachable": None}]
    d.annotate(gone, lambda: HEALTHY, 2_000)
    assert (gone[0]["controlled_shutdown"], gone[0]["down_since_ms"]) == (True, 2_000), "a stop until shown otherwise"
    caught_up = [{"id": 3, "live": False, "reachable": None}]
    d.annotate(caught_up, lambda: HANDED_OVER, 3_000)
    assert (caught_up[0]["controlled_shutdown"], caught_up[0]["down_since_ms"]) == (True, 2_000)

    def boom():
        raise AssertionError("a final judgement reads no partitions")
    final = [{"id": 3, "live": False}]
    d.annotate(final, boom, 4_000)
    assert final[0]["controlled_shutdown"] is True
    # the same first sight, and the looks for SETTLE_MS still show it holding: the controller moved nothing
    d = Departures()
    d.annotate([{"id": 3, "live": False}], lambda: HEALTHY, 2_000)
    still = [{"id": 3, "live": False}]
    d.annotate(still, lambda: HEALTHY, 3_000)
    assert still[0]["controlled_shutdown"] is True, "deregistered, not yet judged: a warning, never a page"
    d.annotate(still, lambda: HEALTHY, 2_000 + SETTLE_MS)
    assert (still[0]["controlled_shutdown"], still[0]["down_since_ms"]) == (False, 2_000)


def test_ports_closed_before_the_view_caught_up_is_a_controlled_shutdown():
    """CI: a clean rolling restart paged for a broker first seen registered but refusing connections
    (its ports close before its ZooKeeper session goes) while the mirror still showed the leaderships
    the controller had just moved; then deregistered, the mirror still behind."""
    d = Departures()
    refusing = [{"id": 3, "live": True, "reachable": False}]
    d.annotate(refusing, lambda: HEALTHY, 10_000)
    assert refusing[0]["controlled_shutdown"] is False, "registered and silent: unreachable (a warning) meanwhile"
    deregistered = [{"id": 3, "live": False}]
    d.annotate(deregistered, lambda: HEALTHY, 10_400)
    assert deregistered[0]["controlled_shutdown"] is True, "deregistered while still judged: stopped, not a crash page"
    caught_up = [{"id": 3, "live": False}]
    d.annotate(caught_up, lambda: HANDED_OVER, 11_000)
    assert (caught_up[0]["controlled_shutdown"], caught_up[0]["down_since_ms"]) == (True, 10_000)
    d.annotate(caught_up, lambda: HEALTHY, 30_000)  # final: a later view changes nothing
    assert caught_up[0]["controlled_shutdown"] is True


def test_a_crash_holds_everything_until_its_session_expires():
    d = Departures()
    for at in (10_000, 11_000, 12_000):
        killed = [{"id": 3, "live": True, "reachable": False}]
        d.annotate(killed, lambda: HEALTHY, at)
        assert killed[0]["controlled_shutdown"] is False
    d.annotate(killed, lambda: HEALTHY, 10_000 + SETTLE_MS)
    # the session expired, the controller moved its leaderships: still a crash (not_registered, critical)
    expired = [{"id": 3, "live": False}]
    d.annotate(expired, lambda: HANDED_OVER, 17_000)
    assert (expired[0]["controlled_shutdown"], expired[0]["down_since_ms"]) == (False, 10_000)


def test_a_late_look_decides_on_the_looks_before_it():
    # polls far apart (a long interval, a poll waiting on offsets): the next look falls after the
    # session expired, when the controller has moved a crash's load too; the looks before it decide
    d = Departures()
    d.annotate([{"id": 3, "live": True, "reachable": False}], lambda: HEALTHY, 10_000)
    late = [{"id": 3, "live": False}]
    d.annotate(late, lambda: HANDED_OVER, 25_000)
    assert late[0]["controlled_shutdown"] is False
