"""The ZooKeeper mirror's controller: an ordinary fail-over (deleted, re-created moments later) is not
"no active controller"; a /controller that stays away is."""

import time

import pytest

from collectors.zookeeper import CONTROLLER_ELECTION_GRACE_S, ZkState
from foundation.config import ClusterConfig

pytestmark = pytest.mark.unit


def _mirror(polls):
    return ZkState(ClusterConfig(name="c", bootstrap_servers="127.0.0.1:9092", zookeeper="127.0.0.1:2181"),
                   lambda: polls.append(1))


def test_a_deleted_controller_is_reported_missing_only_after_the_election_grace():
    polls = []
    zk = _mirror(polls)
    zk._on_controller(b'{"version":1,"brokerid":2,"timestamp":"1"}', None)  # the first read: no news
    assert zk.controller() == 2 and not zk.events

    zk._on_controller(None, None)  # broker 2's session expired: its ephemeral znode is gone
    now = time.monotonic()
    assert zk.controller(now) == 2  # an election is in progress; the brokers still name 2 as well
    assert zk.controller(now + CONTROLLER_ELECTION_GRACE_S + 0.01) is None
    assert any(abs(t.interval - (CONTROLLER_ELECTION_GRACE_S + 0.05)) < 1e-9 for t in zk._timers)  # asks again

    zk._on_controller(b'{"version":1,"brokerid":3,"timestamp":"2"}', None)  # broker 3 won
    assert zk.controller(now + 60) == 3
    zk.stop()


def test_a_cluster_that_starts_without_controller_reports_none_at_once():
    zk = _mirror([])
    zk._on_controller(None, None)
    assert zk.controller() is None
    zk.stop()
