"""DescribeLogDirs: the v4 message as declared here, and the evidence of a failed log directory that the
collector adds where Metadata lists a live broker's replica offline (a restart's moment is no failed disk)."""

import io

import pytest

from collectors import log_dirs
from collectors.admin import AdminSource
from collectors.offsets import OffsetsRound
from collectors.zookeeper import ZkPartition
from foundation.config import ClusterConfig, CollectorConfig
from tests.unit.test_admin_records import FakeZk

pytestmark = pytest.mark.unit


def v4_answer(*dirs):
    """dirs: (path, error code, total, usable)."""
    return log_dirs.DescribeLogDirsResponse_v4(
        throttle_time_ms=0, error_code=0,
        results=[(code, path, [("t", [(0, 123, 0, False, {})], {})], total, usable, {}) for path, code, total, usable in dirs],
        tags={})


def test_v4_answer_round_trips_through_the_wire_format():
    answer = v4_answer(("/data/a", 0, 1000, 400), ("/data/b", log_dirs.KAFKA_STORAGE_ERROR, -1, -1))
    raw = answer.encode()  # (kafka-python's encode holds its struct weakly: keep the struct referenced)
    back = log_dirs.DescribeLogDirsResponse_v4.decode(io.BytesIO(raw))
    assert log_dirs.read_dirs(back) == [log_dirs.LogDir("/data/a", 0, 1000, 400),
                                        log_dirs.LogDir("/data/b", log_dirs.KAFKA_STORAGE_ERROR, None, None)]
    assert [d.failed for d in log_dirs.read_dirs(back)] == [False, True]
    request = log_dirs.dirs_request(v4=True)
    assert request.API_VERSION == 4 and request.topics == [] and len(request.encode()) > 0


def test_only_a_broker_newer_than_3_3_is_asked_for_sizes_and_none_that_does_not_announce_the_request():
    assert log_dirs.supports_v4({35: (0, 4)}) and not log_dirs.supports_v4({35: (0, 1)})
    assert not log_dirs.supports_v4({}) and not log_dirs.supports_v4(None)
    assert log_dirs.announced({35: (0, 1)}) and not log_dirs.announced({3: (0, 12)})


def test_a_cluster_that_does_not_announce_describe_log_dirs_is_not_asked():
    src, records = polled([2])
    client = Client({2: v4_answer(("/data", 0, 1000, 900))})
    client.get_api_versions = lambda: {3: (0, 12)}
    ask_dirs(src, client, records)
    assert client.asked == [] and topic_state(records)["failed_log_dir_brokers"] == []


class Future:
    def __init__(self, value):
        self.value, self.is_done = value, True

    def failed(self):
        return False


class Client:
    """kafka-python's client as describe_dirs uses it: each broker answers at once, refuses, or never connects."""

    def __init__(self, answers, refusing=(), silent=()):
        self.answers, self.refusing, self.silent, self.asked = answers, set(refusing), set(silent), []

    def ready(self, node, metadata_priority=True):
        return node not in self.refusing and node not in self.silent

    def connection_failed(self, node):
        return node in self.refusing

    def send(self, node, request, wakeup=False, request_timeout_ms=None):
        self.asked.append(node)
        return Future(self.answers[node])

    def poll(self, timeout_ms=None):
        pass

    def get_api_versions(self):
        return {35: (0, 4)}


class Admin:
    def __init__(self, client):
        self._client = client


def polled(offline, zk=None):
    """A poll of a 3-broker cluster, every broker registered, whose partition t-0 (RF 1 on broker 2) has no
    leader and Metadata lists `offline` as its offline replicas."""
    cluster = ClusterConfig(name="c", bootstrap_servers="h:1", zookeeper="zk:2181" if zk else None)
    src = AdminSource(cluster, CollectorConfig(offsets_timeout_ms=200), zk)
    brokers = [{"node_id": b, "host": "h", "port": 9092 + b, "rack": None} for b in (1, 2, 3)]
    part = {"partition": 0, "leader": -1, "leader_epoch": 4, "replicas": [2], "isr": [2], "offline_replicas": offline}
    topics = [{"topic": "t", "error_code": 0, "partitions": [part]}]
    records = src._records({"brokers": brokers, "controller_id": 1, "topics": topics}, topics, 1000, OffsetsRound(), 1)
    return src, records


def ask_dirs(src, client, records):
    """What a poll does after its records: ask the brokers with offline replicas about their directories."""
    src.parts.dirs.ask(client, records, records[0]["cluster_state"]["brokers"], OffsetsRound())


def topic_state(records):
    return next(r for r in records if r["kind"] == "topic")["topic_state"]


def test_a_restarting_broker_that_reports_every_directory_online_has_no_failed_directory():
    src, records = polled([2])
    client = Client({2: v4_answer(("/data", 0, 1000, 900))})
    ask_dirs(src, client, records)
    assert client.asked == [2] and topic_state(records)["failed_log_dir_brokers"] == []


def test_a_broker_that_reports_a_failed_directory_is_named():
    src, records = polled([2])
    client = Client({2: v4_answer(("/data", 0, 1000, 900), ("/data-2", log_dirs.KAFKA_STORAGE_ERROR, -1, -1))})
    ask_dirs(src, client, records)
    assert topic_state(records)["failed_log_dir_brokers"] == [2]


def test_the_zookeeper_mirrors_records_carry_the_last_polls_evidence():
    state = {("t", 0): ZkPartition(leader=-1, leader_epoch=4, isr=(2,), controller_epoch=1, mtime_ms=990, version=5)}
    src, records = polled([2], FakeZk({1, 2, 3}, state, {"t": {0: [2]}}))
    client = Client({2: v4_answer(("/data-2", log_dirs.KAFKA_STORAGE_ERROR, -1, -1))})
    ask_dirs(src, client, records)
    (quick,) = src.mirror.mirror_topics({"t"}, 2, 2000, {1, 2, 3}, None)
    assert quick["topic_state"]["partitions"][0]["offline_replicas"] == [2]
    assert quick["topic_state"]["failed_log_dir_brokers"] == [2]


@pytest.mark.parametrize("client", [Client({}, refusing={2}), Client({}, silent={2})], ids=["refused", "silent"])
def test_no_answer_is_no_evidence(client):
    src, records = polled([2])
    ask_dirs(src, client, records)
    assert topic_state(records)["failed_log_dir_brokers"] == []


def test_a_broker_back_between_two_polls_is_no_failed_directory_in_the_mirrors_records():
    """make demo: the poll saw broker 2 dead (its replica listed offline); ZooKeeper then shows it registered
    again, and the mirror's record, still carrying the poll's offline replica, must not read as a failed disk."""
    state = {("t", 0): ZkPartition(leader=-1, leader_epoch=4, isr=(2,), controller_epoch=1, mtime_ms=990, version=5)}
    zk = FakeZk({1, 3}, state, {"t": {0: [2]}})
    src, records = polled([2], zk)
    client = Client({})
    ask_dirs(src, client, records)
    assert client.asked == [] and topic_state(records)["failed_log_dir_brokers"] == []  # the dead are not asked
    zk._live = {1, 2, 3}
    (quick,) = src.mirror.mirror_topics({"t"}, 2, 2000, {1, 2, 3}, None)
    assert quick["topic_state"]["partitions"][0]["offline_replicas"] == [2]
    assert quick["topic_state"]["failed_log_dir_brokers"] == []


def test_nobody_is_asked_without_an_offline_replica_on_a_live_broker():
    src, records = polled([])
    client = Client({})
    ask_dirs(src, client, records)
    assert client.asked == [] and "failed_log_dir_brokers" not in topic_state(records)


class Pending:
    def __init__(self, value=None, done=True, failed=False):
        self.value, self.is_done, self._failed = value, done, failed

    def failed(self):
        return self._failed


def test_the_sampling_is_read_when_in_never_waited_for():
    class Slow(Client):
        def send(self, node, request, wakeup=False, request_timeout_ms=None):
            self.asked.append(node)
            return {1: Pending(v4_answer(("/d", 0, 100, 40))), 2: Pending(done=False),
                    3: Pending(log_dirs.DescribeLogDirsResponse_v4(throttle_time_ms=0, error_code=31, results=[],
                                                                   tags={}))}[node]

    pending, client = log_dirs.PendingDirs(), Slow({})
    pending.send(client, [1, 2, 3], True, 1000, 5.0)
    refused: set[int] = set()
    got = pending.harvest(refused)
    assert got == {1: ([log_dirs.LogDir("/d", 0, 100, 40)], 5.0)} and refused == {3}
    pending.send(client, [1, 2, 3], True, 1000, 15.0)  # 2 still on its way: not asked twice
    assert client.asked == [1, 2, 3, 1, 3]


@pytest.mark.parametrize("quiet", [Client({}, silent={2}), Client({}, refusing={2})], ids=["silent", "refused"])
def test_a_failed_directory_stays_named_while_its_broker_is_too_busy_to_say_so_again(quiet):
    """A loaded broker answering DescribeLogDirs once with a failed directory, then not at all: its
    partitions stay `log_dir_offline`, not `live_isr_but_no_leader` for a poll (ZooKeeper mode, a whole-suite run)."""
    src, records = polled([2])
    ask_dirs(src, Client({2: v4_answer(("/data-2", log_dirs.KAFKA_STORAGE_ERROR, -1, -1))}), records)
    assert topic_state(records)["failed_log_dir_brokers"] == [2]
    _, again = polled([2])
    ask_dirs(src, quiet, again)
    assert topic_state(again)["failed_log_dir_brokers"] == [2]
    _, healed = polled([2])
    ask_dirs(src, Client({2: v4_answer(("/data-2", 0, 1000, 900))}), healed)
    assert topic_state(healed)["failed_log_dir_brokers"] == []
