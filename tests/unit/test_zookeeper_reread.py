"""A poll that finds a broker down re-reads that broker's leaderships from ZooKeeper itself: a clean
stop's leaderships were moved before its ports closed, and the mirror's watches may trail those writes."""

import json
from types import SimpleNamespace

import pytest

from collectors.zookeeper import ZkState
from foundation.config import ClusterConfig

pytestmark = pytest.mark.unit

STATE = "/brokers/topics/{}/partitions/{}/state"


class Answer:
    def __init__(self, value=None, error=None):
        self.value, self.error = value, error

    def get(self, timeout=None):
        if self.error is not None:
            raise self.error
        return self.value


class FakeZk:
    """ZooKeeper's current state znodes; records which paths were read."""

    connected = True

    def __init__(self, znodes):
        self.znodes = znodes  # path -> (leader, epoch, isr, version) or an exception to raise
        self.read = []

    def sync_async(self, path):
        return Answer(path)

    def get_async(self, path):
        self.read.append(path)
        z = self.znodes[path]
        if isinstance(z, Exception):
            return Answer(error=z)
        return Answer((_data(*z[:3]), _stat(z[3])))


def _data(leader, epoch, isr):
    return json.dumps({"controller_epoch": 1, "leader": leader, "leader_epoch": epoch, "isr": isr,
                       "version": 1}).encode()


def _stat(version, mtime=1000):
    return SimpleNamespace(mtime=mtime + version, version=version)


def _mirror(fake):
    zk = ZkState(ClusterConfig(name="c", bootstrap_servers="127.0.0.1:9092", zookeeper="127.0.0.1:2181"),
                 lambda: None)
    for (t, p), (leader, epoch, isr, version) in {("t", 0): (1, 5, [1, 2, 3], 7), ("t", 1): (2, 3, [2, 3, 1], 4),
                                                  ("u", 0): (1, 9, [1, 3], 2)}.items():
        zk._state_watch(t, p)(_data(leader, epoch, isr), _stat(version))
    zk._zk = fake
    return zk


def test_a_clean_stops_moved_leaderships_replace_the_trailing_mirror():
    fake = FakeZk({STATE.format("t", 0): (2, 6, [2, 3], 8), STATE.format("u", 0): (3, 10, [3], 3)})
    zk = _mirror(fake)

    assert zk.reread_led_by({1}) == 2

    assert sorted(fake.read) == [STATE.format("t", 0), STATE.format("u", 0)]  # only broker 1's
    assert (zk.partition("t", 0).leader, zk.partition("t", 0).leader_epoch, zk.partition("t", 0).isr) == (2, 6, (2, 3))
    assert zk.partition("u", 0).leader == 3
    assert zk.partition("t", 1).leader == 2 and zk.partition("t", 1).version == 4

    # the watch's own read of the older write arrives afterwards: it does not bring broker 1 back
    zk._state_watch("t", 0)(_data(1, 5, [1, 2, 3]), _stat(7))
    assert zk.partition("t", 0).leader == 2
    # the watch's read of the same write, or a later one, is taken as ever
    zk._state_watch("t", 0)(_data(2, 6, [2, 3, 1]), _stat(9))
    assert zk.partition("t", 0).isr == (2, 3, 1)


def test_a_crashed_brokers_leaderships_read_back_unchanged():
    fake = FakeZk({STATE.format("t", 0): (1, 5, [1, 2, 3], 7), STATE.format("u", 0): (1, 9, [1, 3], 2)})
    zk = _mirror(fake)

    assert zk.reread_led_by({1}) == 0
    assert zk.partition("t", 0).leader == 1 and zk.partition("u", 0).leader == 1


def test_a_read_that_fails_leaves_the_mirror_as_it_was():
    fake = FakeZk({STATE.format("t", 0): TimeoutError("no answer"), STATE.format("u", 0): (3, 10, [3], 3)})
    zk = _mirror(fake)

    assert zk.reread_led_by({1}, timeout_s=0.1) == 1
    assert zk.partition("t", 0).leader == 1  # its watch will say when it changes
    assert zk.partition("u", 0).leader == 3


def test_nothing_is_read_for_brokers_that_lead_nothing_or_without_a_session():
    fake = FakeZk({})
    zk = _mirror(fake)
    assert zk.reread_led_by({4}) == 0 and zk.reread_led_by(set()) == 0
    assert fake.read == []
    fake.connected = False
    assert zk.reread_led_by({1}) == 0 and fake.read == []


def test_a_recreated_topics_first_state_replaces_the_deleted_ones():
    zk = _mirror(FakeZk({}))
    zk._state_watch("t", 0)(_data(3, 0, [3]), _stat(0, mtime=5000))  # version 0, later in ZooKeeper's clock
    assert zk.partition("t", 0).leader == 3
