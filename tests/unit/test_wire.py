"""collectors/wire.py reads and writes exactly what kafka-python's generic schemas do (pure logic):
each message is built with kafka-python's own classes and compared field by field."""

import io
import random

import pytest
from kafka.protocol.list_offsets import ListOffsetsRequest, ListOffsetsResponse
from kafka.protocol.metadata import MetadataResponse

from collectors import wire


def _metadata_fields(rng):
    brokers = [(1, "kafka-1.example", 9092, "rack-a"), (2, "127.0.0.1", 19092, None), (30, "h", 1, "")]
    topics = []
    for t in range(5):
        parts = []
        for p in range(rng.randint(0, 7)):
            replicas = rng.sample([1, 2, 30], rng.randint(0, 3))
            isr = replicas[:rng.randint(0, len(replicas))]
            parts.append((rng.choice([0, 9]), p, replicas[0] if replicas else -1, rng.randint(0, 1 << 30), replicas, isr,
                          [r for r in replicas if r not in isr][:1]))
        topics.append((rng.choice([0, 0, 3]), f"topic-{t}-é", t == 4, parts, {31}))
    return brokers, topics


@pytest.mark.parametrize("seed", range(5))
def test_metadata_v8_decodes_as_kafka_python_does(seed):
    rng = random.Random(seed)
    brokers, topics = _metadata_fields(rng)
    message = MetadataResponse[8](throttle_time_ms=7, brokers=brokers, cluster_id=None if seed % 2 else "c-1",
                                  controller_id=rng.choice([-1, 2]), topics=topics, authorized_operations={31})
    data = message.encode()
    theirs = MetadataResponse[8].decode(io.BytesIO(data)).to_object()
    ours = wire.decode_metadata_v8(data)
    mine = ours.to_object()
    assert mine["brokers"] == theirs["brokers"]
    assert (mine["cluster_id"], mine["controller_id"]) == (theirs["cluster_id"], theirs["controller_id"])
    strip = [{k: v for k, v in t.items() if k != "authorized_operations"} for t in theirs["topics"]]
    assert mine["topics"] == strip
    assert ours.brokers == brokers and ours.API_VERSION == 8 and ours.topics == []


@pytest.mark.parametrize("version", [4, 5])
def test_list_offsets_answers_decode_as_kafka_python_does(version):
    rng = random.Random(version)
    topics = [(f"t{i}", [(p, rng.choice([0, 6]), -1, rng.randint(-1, 1 << 40), rng.randint(-1, 9)) for p in range(n)])
              for i, n in enumerate([0, 1, 5, 300])]
    message = ListOffsetsResponse[version](throttle_time_ms=0, topics=topics)
    data = message.encode()  # (kafka-python binds encode weakly: the message must outlive the call)
    assert wire.decode_list_offsets_v4(data).topics == ListOffsetsResponse[version].decode(io.BytesIO(data)).topics
    # the columns the collector reads: partitions, error codes and offsets, topic by topic
    assert wire.decode_list_offsets_v4(data).columns() == [
        (name, tuple(p[0] for p in ps), tuple(p[1] for p in ps), tuple(p[3] for p in ps)) for name, ps in topics]
    if topics[-1][1]:  # a frame cut short says so, whatever count it claims
        with pytest.raises(ValueError, match="truncated"):
            wire.decode_list_offsets_v4(data[:-5])


@pytest.mark.parametrize("version", [4, 5])
@pytest.mark.parametrize("replica_id,timestamp", [(-1, -1), (-1, -2), (-2, -1)])
def test_list_offsets_requests_encode_as_kafka_python_does(version, replica_id, timestamp):
    by_topic = [("a", [0, 1, 2]), ("bé", [7]), ("c" * 300, list(range(1000)))]
    request = ListOffsetsRequest[version](replica_id=replica_id, isolation_level=0,
                                          topics=[(t, [(p, -1, timestamp) for p in ps]) for t, ps in by_topic])
    theirs = request.encode()
    ours = wire.offsets_request(version, replica_id, 0, by_topic, timestamp)
    assert ours.encode() == theirs
    assert (ours.API_KEY, ours.API_VERSION) == (2, version)
    empty = ListOffsetsResponse[version](throttle_time_ms=0, topics=[])
    assert ours.RESPONSE_TYPE.decode(io.BytesIO(empty.encode())).topics == []


class _OneAnswerClient:
    """kafka-python's client as offsets.fetch drives it, every request answered with `answer`."""

    def __init__(self, answer):
        self.answer = answer

    def api_version(self, _request, max_version):
        return max_version

    def ready(self, _broker, metadata_priority=False):
        return True

    def connection_failed(self, _broker):
        return False

    def send(self, broker, request, wakeup=False, request_timeout_ms=0):
        answer = self.answer
        return type("F", (), {"is_done": True, "value": answer, "failed": lambda self: False})()

    def poll(self, timeout_ms=0):
        pass


def test_offsets_answered_with_an_error_or_no_offset_are_left_out_never_guessed():
    from collectors import offsets

    topics = [("clean", [(p, 0, -1, 100 + p, 0) for p in range(3)]),
              ("mixed", [(0, 0, -1, 5, 0), (1, 6, -1, 9, 0), (2, 0, -1, -1, 0)])]  # 6: NOT_LEADER_OR_FOLLOWER
    message = ListOffsetsResponse[4](throttle_time_ms=0, topics=topics)
    data = message.encode()  # (the message must outlive the call, as above)
    client = _OneAnswerClient(wire.decode_list_offsets_v4(data))
    asked = {1: [("clean", 0), ("clean", 1), ("clean", 2), ("mixed", 0), ("mixed", 1), ("mixed", 2)]}
    found = offsets.fetch(client, asked, asked, 1.0)
    assert found.hw == {"clean": {0: 100, 1: 101, 2: 102}, "mixed": {0: 5}}
    assert found.leo == {"clean": {1: {0: 100, 1: 101, 2: 102}}, "mixed": {1: {0: 5}}}
    assert found.answered == {1}
