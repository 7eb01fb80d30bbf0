"""collectors/wire.py reads and writes exactly what kafka-python's generic schemas do (pure logic):
each message is built with kafka-python's own classes and compared field by field."""

import io
import random

import pytest
from kafka.protocol.list_offsets import ListOffsetsRequest, ListOffsetsResponse
from kafka.protocol.metadata import MetadataResponse

from collectors import kraft, wire


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
    assert found.refused == {"mixed": {1: 6}}  # the leader's refusal is kept (a missing offset is not one)


def _healthy(parts):
    return all(e == 0 and leader >= 0 and not offline and len(isr) == len(replicas)
               for e, _p, leader, _epoch, replicas, isr, offline in parts)


@pytest.mark.parametrize("seed", range(6))
def test_metadata_topics_whose_bytes_are_the_last_answers_come_back_undecoded(seed):
    """With a memory, a healthy topic whose bytes are the last answer's gets the same partitions object
    back (the collector's "nothing moved"); every answer still reads exactly as a decode without one."""
    rng = random.Random(seed)
    memory = wire.TopicBlocks()
    topics = {}
    for t in range(8):
        replicas = [1, 2, 30]
        topics[f"t{t}"] = [(0, p, replicas[p % 3], 0, replicas, list(replicas), []) for p in range(rng.randint(1, 5))]
    last: dict = {}
    reused = 0
    for _ in range(40):
        for name in list(topics):
            roll = rng.random()
            parts = topics[name]
            if roll < 0.1:  # an ISR shrinks or grows back, a leader goes, a replica's log dir fails
                i = rng.randrange(len(parts))
                e, p, leader, epoch, replicas, isr, offline = parts[i]
                parts[i] = rng.choice([(e, p, leader, epoch, replicas, isr[:1], offline),
                                       (e, p, -1, epoch + 1, replicas, isr, offline),
                                       (e, p, leader, epoch, replicas, isr, replicas[-1:]),
                                       (e, p, replicas[0], epoch + 1, replicas, list(replicas), [])])
            elif roll < 0.13:
                del topics[name]
        if rng.random() < 0.1:
            topics[f"n{rng.randrange(1000)}"] = [(0, 0, 1, 0, [1], [1], [])]
        encoded = [(0, name, False, parts, {31}) for name, parts in topics.items()]
        message = MetadataResponse[8](throttle_time_ms=0, brokers=[(1, "h", 1, None)], cluster_id="c",
                                      controller_id=1, topics=encoded, authorized_operations={31})
        data = message.encode()
        ours = wire.decode_metadata_v8(data, memory).to_object()
        assert ours == wire.decode_metadata_v8(data).to_object()
        for t in ours["topics"]:
            name, got = t["topic"], t["partitions"]
            same = last.get(name) is got
            was_healthy_and_unchanged = name in last and _healthy(topics[name]) and last[name] == got
            assert same == was_healthy_and_unchanged, name
            reused += same
        last = {t["topic"]: t["partitions"] for t in ours["topics"]}
        assert set(memory.blocks) == {n for n, ps in topics.items() if _healthy(ps)}
        # what it remembers has no ELR to ask for (the collector skips DescribeTopicPartitions for it)
        assert all(memory.healthy(t["topic"], t["partitions"]) == (t["topic"] in memory.blocks) for t in ours["topics"])
        assert not any(kraft.needs_elr(parts) for _, parts in memory.blocks.values())
    assert reused > 40  # the case was met often


def test_the_same_offsets_answer_bytes_give_the_same_object_back():
    request = wire.offsets_request(4, -1, 0, [("a", [0, 1])], -1)
    first = ListOffsetsResponse[4](throttle_time_ms=0, topics=[("a", [(0, 0, -1, 5, 0), (1, 0, -1, 7, 0)])])
    second = ListOffsetsResponse[4](throttle_time_ms=0, topics=[("a", [(0, 0, -1, 5, 0), (1, 0, -1, 8, 0)])])
    a, b = first.encode(), second.encode()
    decode = request.RESPONSE_TYPE.decode
    one = decode(io.BytesIO(a))
    assert decode(io.BytesIO(a)) is one
    other = decode(io.BytesIO(b))
    assert other is not one and other.columns() == [("a", (0, 1), (0, 0), (5, 8))]
    assert decode(io.BytesIO(b)) is other
    try:
        wire.reuse_unchanged = False  # the decode floor's measurement: everything decoded
        assert decode(io.BytesIO(b)) is not other
    finally:
        wire.reuse_unchanged = True
    # another request object (other partitions asked) remembers its own answers
    assert wire.offsets_request(4, -1, 0, [("a", [0, 1])], -1).RESPONSE_TYPE.decode(io.BytesIO(b)) is not other


class _AnswersClient(_OneAnswerClient):
    """Each (broker, request) answered from `answers` (bytes, decoded by the request's own RESPONSE_TYPE
    as kafka-python's parser would); a broker in `silent` leaves its requests unanswered."""

    def __init__(self):
        super().__init__(None)
        self.answers: dict = {}
        self.silent: set = set()

    def send(self, broker, request, wakeup=False, request_timeout_ms=0):
        body = request.encode()
        # replica id -2: the LEO question; timestamp -2 (the last field): the log start one
        kind = "leo" if body[:4] == b"\xff\xff\xff\xfe" else ("log_start" if body.endswith(b"\xff" * 7 + b"\xfe") else "hw")
        data = self.answers[(broker, kind)]
        if broker in self.silent:
            return type("F", (), {"is_done": False, "value": None, "failed": lambda self: False})()
        value = request.RESPONSE_TYPE.decode(io.BytesIO(data))
        return type("F", (), {"is_done": True, "value": value, "failed": lambda self: False})()


def test_an_offsets_round_says_which_topics_moved_and_hands_the_others_on():
    from collectors import offsets

    client = _AnswersClient()
    offsets_of = {("a", 0): 10, ("a", 1): 11, ("b", 0): 20, ("c", 0): 30}
    leader = {("a", 0): 1, ("a", 1): 2, ("b", 0): 1, ("c", 0): 2}

    def answer():
        for b in (1, 2):
            led = [tp for tp, lb in leader.items() if lb == b]
            for kind, value in (("leo", offsets_of), ("hw", offsets_of), ("log_start", dict.fromkeys(offsets_of, 0))):
                by_topic: dict = {}
                for t, p in (led if kind != "leo" else list(offsets_of)):
                    by_topic.setdefault(t, []).append((p, 0, -1, value[(t, p)], 0))
                message = ListOffsetsResponse[4](throttle_time_ms=0, topics=list(by_topic.items()))
                client.answers[(b, kind)] = message.encode()

    replica_of = {b: list(offsets_of) for b in (1, 2)}
    leader_of = {b: [tp for tp, lb in leader.items() if lb == b] for b in (1, 2)}
    made = offsets.Requests()
    answer()
    first = offsets.fetch(client, replica_of, leader_of, 1.0, made)
    assert first.moved is None  # nothing to compare with
    assert first.hw == {"a": {0: 10, 1: 11}, "b": {0: 20}, "c": {0: 30}}
    again = offsets.fetch(client, replica_of, leader_of, 1.0, made)
    assert again.moved == set() and again.seq == first.seq + 1
    assert all(again.leo[t] is first.leo[t] and again.hw[t] is first.hw[t] for t in "abc")
    offsets_of[("a", 1)] = 12  # written on broker 2's partition
    answer()
    third = offsets.fetch(client, replica_of, leader_of, 1.0, made)
    assert third.moved == {"a"}
    assert third.hw["a"] == {0: 10, 1: 12} and third.leo["a"] == {1: {0: 10, 1: 12}, 2: {0: 10, 1: 12}}
    assert third.hw["b"] is first.hw["b"] and third.leo["c"] is first.leo["c"]
    assert first.hw["a"] == {0: 10, 1: 11}  # what was handed on is never written to
    client.silent = {2}  # broker 2 leaves the round unanswered: whatever it said is gone
    fourth = offsets.fetch(client, replica_of, leader_of, 0.05, made)
    assert fourth.moved == {"a", "b", "c"}
    assert fourth.hw == {"a": {0: 10}, "b": {0: 20}} and fourth.leo["c"] == {1: {0: 30}}
    client.silent = set()
    fifth = offsets.fetch(client, replica_of, leader_of, 1.0, made)
    assert fifth.moved == {"a", "b", "c"} and fifth.hw == third.hw
    assert fifth.refused == {}


def test_a_leaders_refusal_is_kept_while_its_answer_stands_and_gone_with_it():
    """The HW question's refusals (offsets.REFUSALS) per topic and partition: kept over rounds whose answer
    did not move (handed on with the other maps), gone once the leader answers with an offset."""
    from collectors import offsets

    client = _AnswersClient()
    error = {("a", 0): 0, ("a", 1): 78, ("b", 0): 29}  # 78: OFFSET_NOT_AVAILABLE; 29: an ACL, not a refusal

    def answer():
        for kind in ("leo", "hw", "log_start"):
            by_topic: dict = {}
            for (t, p), e in error.items():
                e = e if kind == "hw" else 0
                by_topic.setdefault(t, []).append((p, e, -1, -1 if e else 7, 0))
            message = ListOffsetsResponse[4](throttle_time_ms=0, topics=list(by_topic.items()))
            client.answers[(1, kind)] = message.encode()  # (the message must outlive the call)

    asked = {1: list(error)}
    made = offsets.Requests()
    answer()
    first = offsets.fetch(client, asked, asked, 1.0, made)
    assert first.refused == {"a": {1: 78}} and first.hw["a"] == {0: 7}
    again = offsets.fetch(client, asked, asked, 1.0, made)
    assert again.moved == set() and again.refused == {"a": {1: 78}}
    error[("a", 1)] = 6  # NOT_LEADER_OR_FOLLOWER
    answer()
    assert offsets.fetch(client, asked, asked, 1.0, made).refused == {"a": {1: 6}}
    error[("a", 1)] = 0
    answer()
    served = offsets.fetch(client, asked, asked, 1.0, made)
    assert served.refused == {} and served.hw["a"] == {0: 7, 1: 7}


def test_a_round_ends_when_the_broker_it_awaits_has_been_silent_long_enough():
    """The verdict on a silent broker is out the moment its silence reaches unreachable_after_s
    (judged_at): the round stops waiting then, not at its deadline, also when that moment passed
    between two rounds. A broker already called unreachable has no moment (Reachability.judged_at)
    and is waited for until the deadline (it may be back, on a fresh connection)."""
    import time

    from collectors import offsets

    client = _AnswersClient()
    message = ListOffsetsResponse[4](throttle_time_ms=0, topics=[("a", [(0, 0, -1, 5, 0)])])
    data = message.encode()
    for key in ((1, "leo"), (1, "hw"), (1, "log_start"), (2, "leo")):
        client.answers[key] = data
    client.silent = {2}
    replica_of, leader_of = {1: [("a", 0)], 2: [("a", 0)]}, {1: [("a", 0)]}
    t0 = time.monotonic()
    found = offsets.fetch(client, replica_of, leader_of, 30.0, judged_at={2: t0 + 0.2})
    assert time.monotonic() - t0 < 15  # far from the 30 s deadline
    assert found.answered == {1} and found.unanswered == {2}
    t0 = time.monotonic()
    found = offsets.fetch(client, replica_of, leader_of, 30.0, judged_at={2: t0 - 0.1})  # due between rounds
    assert time.monotonic() - t0 < 15 and found.answered == {1} and found.unanswered == {2}
    t0 = time.monotonic()
    found = offsets.fetch(client, replica_of, leader_of, 0.5, judged_at={})  # already called unreachable
    assert time.monotonic() - t0 >= 0.5 and found.unanswered == {2}
    t0 = time.monotonic()
    found = offsets.fetch(client, replica_of, leader_of, 0.5, judged_at={1: t0 + 0.1})  # not the one awaited
    assert time.monotonic() - t0 >= 0.5


@pytest.mark.parametrize("seed", range(6))
def test_an_answer_read_against_the_last_one_reads_as_a_full_decode(seed):
    """Same request, new offsets: read against the last answer (wire.decode_like), it is what a full
    decode reads, the topics it calls changed are exactly those whose entries differ, and the others
    keep the last answer's tuple; another layout (a partition more or less, another topic) is left to
    a full decode."""
    rng = random.Random(seed)
    names = [f"t{i}" for i in range(rng.randint(1, 12))]
    counts = {t: rng.randint(0, 5) for t in names}
    offsets_of = {(t, p): rng.randint(0, 1000) for t in names for p in range(counts[t])}
    memory = wire.SameAnswer()
    last = None
    for _ in range(30):
        for key in offsets_of:
            if rng.random() < 0.1:
                offsets_of[key] += rng.randint(1, 9)
        relayout = rng.random() < 0.1
        if relayout:  # a partition more, or a topic gone
            t = rng.choice(names)
            counts[t] += 1
            offsets_of[(t, counts[t] - 1)] = 0
        topics = [(t, [(p, 0, -1, offsets_of[(t, p)], 0) for p in range(counts[t])]) for t in names]
        message = ListOffsetsResponse[4](throttle_time_ms=rng.choice([0, 5]), topics=topics)
        data = message.encode()
        got = memory.decode(data)
        assert got.topics == wire.decode_list_offsets_v4(data).topics
        if last is not None and got is not last:
            assert (got.base is None) == relayout  # read against the last answer unless the layout moved
            if got.base is not None:
                assert got.base() is last
                differ = [i for i, ((_, a), (_, b)) in enumerate(zip(got.flat, last.flat)) if a != b]
                assert got.changed == differ
                assert all(got.flat[i][1] is last.flat[i][1] for i in range(len(got.flat)) if i not in differ)
        last = got
    assert wire.decode_like(data[:-1], last) is None  # cut short: not the same layout
