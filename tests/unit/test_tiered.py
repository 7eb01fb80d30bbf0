"""Tiered storage: the ListOffsets v9 questions on the wire, remote copy lag, and its series."""

import io
import struct

import pytest
from prometheus_client import CollectorRegistry

from collectors import tiered
from pipelines import tiered_view
from pipelines.alert_path import split_rows
from pipelines.metrics import KrmCollector
from pipelines.state import PipelineState
from pipelines.tiered_view import TieredPartition, TieredTopic

pytestmark = pytest.mark.unit


def _uvarint(n):
    out = b""
    while True:
        b = n & 0x7F
        n >>= 7
        if n:
            out += bytes([b | 0x80])
        else:
            return out + bytes([b])


def _compact(s):
    return _uvarint(len(s) + 1) + s.encode()


def test_the_v9_request_carries_the_sentinel_for_each_partition():
    request = tiered.request("remote", [("orders", 0), ("orders", 3)])  # (kafka-python's encode holds it weakly)
    body = request.encode()
    expected = (struct.pack(">ib", -1, 0) + _uvarint(2) + _compact("orders") + _uvarint(3)
                + struct.pack(">iiq", 0, -1, -5) + b"\x00" + struct.pack(">iiq", 3, -1, -5) + b"\x00"
                + b"\x00" + b"\x00")
    assert body == expected
    local = tiered.request("local_start", [("orders", 0)])
    assert struct.pack(">q", -4) in local.encode()
    assert tiered.ListOffsetsRequestV9.API_VERSION == 9 and tiered.ListOffsetsRequestV9.FLEXIBLE_VERSION


def test_the_v9_answer_reads_as_the_v5_answers_do():
    data = (struct.pack(">i", 0) + _uvarint(2) + _compact("orders") + _uvarint(3)
            + struct.pack(">ihqqi", 0, 0, -1, 3071, 4) + b"\x00"
            + struct.pack(">ihqqi", 1, 0, -1, -1, -1) + b"\x00" + b"\x00" + b"\x00")
    answer = tiered.ListOffsetsResponseV9.decode(io.BytesIO(data))
    assert answer.topics == [("orders", [(0, 0, -1, 3071, 4), (1, 0, -1, -1, -1)])]


def test_only_brokers_that_announce_v9_are_asked():
    assert tiered.supported({2: (0, 11)})
    assert tiered.supported({2: (0, 9)})
    assert not tiered.supported({2: (0, 8)})  # Kafka 3.8: -4 but not -5
    assert not tiered.supported({})
    assert not tiered.supported(None)


@pytest.mark.parametrize("hw, log_start, remote, lag", [
    (4000, 0, 3071, 928),  # the active segment (3072..3999) is not copied until rolled
    (4000, 0, -1, 4000),  # nothing copied yet: everything from the log start
    (4000, 1500, -1, 2500),  # retention moved the log start: what is left
    (4000, 0, 3999, 0),
    (None, 0, 3071, None),  # the leader did not answer
    (4000, 0, None, None),
])
def test_remote_copy_lag(hw, log_start, remote, lag):
    assert TieredPartition(0, hw, log_start, 2048, remote).remote_copy_lag == lag


def _topic(topic, at, cluster="c1"):
    return TieredTopic(cluster, topic, at, (TieredPartition(0, 10, 0, 5, 4),))


def test_the_newest_view_wins_and_a_topic_gone_from_the_polls_leaves():
    known = {("c1", "a"): _topic("a", 1_000), ("c1", "gone"): _topic("gone", 1_000)}
    fresh = [_topic("a", 40_000), _topic("a", 39_000)]
    out = tiered_view.newest(known, fresh, {"c1": 10_000})
    assert out == {("c1", "a"): _topic("a", 40_000)}
    # a cluster whose poll failed forgets nothing
    assert tiered_view.newest(known, [], {}) == known


class _Row(tuple):
    __fields__ = ["cluster", "poll_id", "observed_at_ms", "row_type", "scope", "type", "severity", "topic",
                  "partition", "broker", "cause", "details"]


def test_the_tiered_alert_row_reaches_the_driver_and_the_series():
    row = _Row(("c1", 7, 5_000, "tiered", "tiered", None, None, "orders", None, None, None,
                "[[0,4000,0,2048,3071],[1,4000,0,null,null]]"))
    tiered_topics = []
    polls, found, clusters, counts, jmx = split_rows([row], [], tiered_topics)
    assert (polls, found, clusters, counts, jmx) == ([], [], {}, [], [])
    (t,) = tiered_topics
    assert t.partitions[1] == TieredPartition(1, 4000, 0, None, None)
    state = PipelineState()
    state.update(tiered={("c1", "orders"): t})
    reg = CollectorRegistry(auto_describe=False)
    reg.register(KrmCollector(state, clock=lambda: 10.0))
    p0 = {"cluster": "c1", "topic": "orders", "partition": "0"}
    assert reg.get_sample_value("krm_partition_local_log_start_offset", p0) == 2048
    assert reg.get_sample_value("krm_partition_highest_remote_offset", p0) == 3071
    assert reg.get_sample_value("krm_partition_remote_copy_lag_messages", p0) == 928
    p1 = {**p0, "partition": "1"}  # its leader did not say: no made-up value
    assert reg.get_sample_value("krm_partition_remote_copy_lag_messages", p1) is None


class _Answer:
    is_done = True

    def __init__(self, **value):
        self.value = type("V", (), value)()

    def failed(self):
        return False


class _Client:
    """kafka-python's client as offsets.fetch drives it. Every connection carries the versions
    kafka-python inferred at bootstrap (v5 here), whatever the broker runs; asked ApiVersions
    itself, broker 1 announces ListOffsets v11 and broker 2 (an older release, mid rolling
    upgrade) v5."""

    def __init__(self):
        self.releases = {1: 11, 2: 5}
        self._conns = {b: type("C", (), {"_sock": object(), "_api_versions": {2: (0, 5)}})() for b in (1, 2)}
        self.sent = []

    def api_version(self, _request, max_version):
        return max_version

    def ready(self, _broker, metadata_priority=False):
        return True

    def connection_failed(self, _broker):
        return False

    def send(self, broker, request, wakeup=False, request_timeout_ms=0):
        from kafka.protocol.api_versions import ApiVersionsRequest

        if isinstance(request, ApiVersionsRequest[0]):
            self.sent.append((broker, "versions"))
            return _Answer(error_code=0, api_versions=[(2, 0, self.releases[broker]), (3, 0, 12)])
        tiered_question = isinstance(request, tiered.ListOffsetsRequestV9)
        self.sent.append((broker, "tiered" if tiered_question else "core"))
        return _Answer(topics=[("t", [(0, 0, -1, 7 if tiered_question else 100, 0)])])

    def poll(self, timeout_ms=0):
        pass


def test_a_broker_that_cannot_answer_v9_is_not_asked_and_stays_reachable():
    from collectors import offsets

    client, made = _Client(), offsets.Requests()
    both = {1: [("t", 0)], 2: [("t", 0)]}
    found = offsets.fetch(client, {}, both, 1.0, made, tiered_of=both)
    assert sorted(set(client.sent)) == [(1, "core"), (1, "tiered"), (1, "versions"), (2, "core"), (2, "versions")]
    assert found.answered == {1, 2}
    assert found.remote == {"t": {0: 7}} and found.local_start == {"t": {0: 7}}

    # the next poll on the same connections asks no versions again; broker 2 restarted into the new
    # release (a new socket) is asked again, and then the tiered questions too
    client.sent.clear()
    client.releases[2] = 11
    client._conns[2]._sock = object()
    offsets.fetch(client, {}, both, 1.0, made, tiered_of=both)
    assert (1, "versions") not in client.sent and (2, "versions") in client.sent
    assert sorted(b for b, kind in client.sent if kind == "tiered") == [1, 1, 2, 2]
