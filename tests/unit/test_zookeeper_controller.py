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


def test_the_migration_phases_as_zookeeper_shows_them():
    """KIP-866 seen from ZooKeeper: /controller claimed with a KRaft epoch, /migration's offset once
    the metadata is copied, /controller gone for good once finalized; phases numbered as Kafka's
    ZkMigrationState. While a KRaft controller holds the metadata, the mirror is not authoritative."""
    from collectors.zookeeper import MIGRATION, MIGRATION_QUIET_S, POST_MIGRATION, PRE_MIGRATION, ZK

    zk = _mirror([])
    zk._on_controller(b'{"version":2,"brokerid":2,"timestamp":"1","kraftControllerEpoch":-1}', None)
    zk._on_migration(None, None)
    assert zk.migration_phase() == ZK and not zk.kraft_in_charge

    zk._on_controller(b'{"version":2,"brokerid":1000,"timestamp":"2","kraftControllerEpoch":1}', None)
    zk._on_migration(b'{"version":0,"kraft_metadata_offset":-1,"kraft_controller_id":1000}', None)
    assert zk.migration_phase() == PRE_MIGRATION

    zk._on_migration(b'{"version":0,"kraft_metadata_offset":88,"kraft_controller_id":1000}', None)
    assert zk.migration_phase() == MIGRATION and zk.kraft_in_charge
    assert zk.controller() == 1000  # a KRaft controller is a controller, not a missing one
    # finalized: the claim stays on /controller, the mirroring stops (no NoOpRecord reaches /migration)
    assert zk.migration_phase(time.monotonic() + MIGRATION_QUIET_S + 1) == POST_MIGRATION
    zk._on_migration(b'{"version":0,"kraft_metadata_offset":90,"kraft_controller_id":1000}', None)
    assert zk.migration_phase() == MIGRATION

    zk._on_controller(None, None)  # finalized: the controllers closed their ZooKeeper sessions
    now = time.monotonic()
    assert zk.migration_phase(now) == MIGRATION  # or a KRaft fail-over: wait the grace
    assert zk.migration_phase(now + CONTROLLER_ELECTION_GRACE_S + 0.01) == POST_MIGRATION
    zk.stop()


def test_a_rolled_back_migration_is_zookeeper_again():
    from collectors.zookeeper import ZK

    zk = _mirror([])
    zk._on_migration(b'{"version":0,"kraft_metadata_offset":88,"kraft_controller_id":1000}', None)
    zk._on_controller(b'{"version":2,"brokerid":3,"timestamp":"9","kraftControllerEpoch":-1}', None)
    assert zk.migration_phase() == ZK and not zk.kraft_in_charge
    zk.stop()


def test_zookeeper_connect_strings_to_addresses():
    from collectors.zookeeper import _zk_addresses

    assert _zk_addresses("zk-1:2182,zk-2:2182/kafka_cluster_01") == [("zk-1", 2182), ("zk-2", 2182)]
    assert _zk_addresses("[::1]:2281") == [("::1", 2281)]
    assert _zk_addresses("zk-1") == []  # no port: nothing to probe
