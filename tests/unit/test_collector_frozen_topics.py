"""Topics passed over (collectors/admin.py Frozen) change nothing a record says: two sources fed the same
random polls through the real decoders (Metadata v8 and ListOffsets v4 bytes, collectors/wire.py and
offsets.py), one passing over topics whose answers are the last poll's bytes and one building every
partition the full way, publish equal records and remember equal state, poll after poll."""

import random
import time

import pytest
from kafka.protocol.list_offsets import ListOffsetsResponse
from kafka.protocol.metadata import MetadataResponse

from collectors import offsets, wire
from collectors.admin import AdminSource
from foundation.config import ClusterConfig, CollectorConfig
from schemas.quiet import Thresholds

pytestmark = pytest.mark.unit

BROKERS = (1, 2, 3, 4)
SPARE = 5  # a broker holding no replica (just added): its coming and going changes only what records say of it
TOPICS = tuple(f"t{i}" for i in range(8))


class Cluster:
    """Mostly idle topics; now and then one is written (followers copying all or some of it, the HW
    following or held), has an election or an ISR change; brokers now and then gone or silent."""

    def __init__(self, rng: random.Random) -> None:
        self.rng = rng
        self.parts: dict[tuple[str, int], dict] = {}
        for t in TOPICS:
            for pid in range(rng.randint(1, 4)):
                replicas = rng.sample(BROKERS, rng.choice((1, 2, 3, 3)))
                self.parts[(t, pid)] = {"leader": replicas[0], "epoch": 0, "replicas": replicas,
                                        "isr": list(replicas), "leo": dict.fromkeys(replicas, 100), "hw": 100}

    def step(self) -> None:
        rng = self.rng
        active = {t for t in TOPICS if rng.random() < 0.15}
        for (t, _), p in self.parts.items():
            if t not in active:
                continue
            leader, replicas = p["leader"], p["replicas"]
            roll = rng.random()
            if roll < 0.1:  # an election, or the last one healed
                p["leader"] = rng.choice(replicas + [-1]) if leader >= 0 else replicas[0]
                p["epoch"] += 1
            elif roll < 0.2:  # the ISR shrinks or grows back
                p["isr"] = list(replicas) if len(p["isr"]) < len(replicas) else [r for r in replicas if r == leader]
            if leader >= 0:
                p["leo"][leader] += rng.choice((0, 1, 5, 40))
                for b in replicas:
                    if b != leader:
                        p["leo"][b] = max(p["leo"][b], p["leo"][leader] - rng.choice((0, 0, 0, 0, 1, 30)))
            if rng.random() < 0.8:  # the HW follows the ISR, else held for a poll
                p["hw"] = min(p["leo"][b] for b in p["isr"]) if p["isr"] else p["hw"]
            p["hw"] = min(p["hw"], p["leo"][leader]) if leader >= 0 else p["hw"]

    def metadata(self, live: set[int]) -> bytes:
        by_topic: dict[str, list] = {}
        for (t, pid), p in sorted(self.parts.items()):
            by_topic.setdefault(t, []).append(
                (0, pid, p["leader"], p["epoch"], p["replicas"], p["isr"], [r for r in p["replicas"] if r not in live]))
        message = MetadataResponse[8](throttle_time_ms=0, brokers=[(b, "h", 9092 + b, None) for b in sorted(live)],
                                      cluster_id="c", controller_id=1, authorized_operations={31},
                                      topics=[(0, t, False, ps, {31}) for t, ps in by_topic.items()])
        return message.encode()

    def offsets(self, live: set[int]) -> dict[tuple[int, str], bytes]:
        answers: dict[tuple[int, str], dict[str, list]] = {}
        for (t, pid), p in sorted(self.parts.items()):
            for b in p["replicas"]:
                if b in live:
                    answers.setdefault((b, "leo"), {}).setdefault(t, []).append((pid, 0, -1, p["leo"][b], 0))
            if p["leader"] in live:
                answers.setdefault((p["leader"], "hw"), {}).setdefault(t, []).append((pid, 0, -1, p["hw"], 0))
                answers.setdefault((p["leader"], "log_start"), {}).setdefault(t, []).append((pid, 0, -1, 0, 0))
        out = {}
        for key, by_topic in answers.items():
            message = ListOffsetsResponse[4](throttle_time_ms=0, topics=list(by_topic.items()))
            out[key] = message.encode()  # (kafka-python binds encode weakly: the message must outlive the call)
        return out


def source(pass_over: bool) -> AdminSource:
    src = AdminSource(ClusterConfig(name="c", bootstrap_servers="h:1"),
                      CollectorConfig(assignment_snapshot_s=45, history_keyframe_s=30, history_lag_floor_s=1.0),
                      quiet=Thresholds(lag_messages=60, lag_seconds=2.0, hw_stall_window_ms=6_000))
    src.records.short_way = pass_over  # the full source builds every partition (and so never passes a topic over)
    src._elr_known = True
    return src


def remembered(src: AdminSource) -> dict:
    return {k: {f: getattr(s, f) for f in s.__slots__} for k, s in src.parts.memory._seen.items()}


def refreshed(src: AdminSource, since: float) -> set:
    return {k for k, at in src.parts.published.at.items() if at >= since}


@pytest.mark.parametrize("seed", range(12))
def test_passing_over_unchanged_topics_publishes_and_remembers_what_the_full_way_does(seed):
    rng = random.Random(seed)
    cluster = Cluster(rng)
    fast, full = source(True), source(False)
    blocks, made = wire.TopicBlocks(), offsets.Requests()
    decoders: dict = {}  # (broker, kind) -> its request's memory of the last answer (as a request reused)
    passed = 0
    at = 1_000_000
    for poll_id in range(1, 200):
        cluster.step()
        live = set(BROKERS + (SPARE,)) - ({rng.choice(BROKERS + (SPARE, SPARE))} if rng.random() < 0.05 else set())
        silent = {rng.choice(BROKERS + (SPARE, SPARE))} if rng.random() < 0.05 else set()
        md = wire.decode_metadata_v8(cluster.metadata(live), blocks).to_object()
        topics = md["topics"]
        answers = {key: decoders.setdefault(key, wire.SameAnswer()).decode(data)
                   for key, data in cluster.offsets(live).items() if key[0] not in silent}
        found = offsets.OffsetsRound(asked=set(live), answered=live - silent)
        offsets._gather(found, answers, made)
        if rng.random() < 0.03:
            continue  # a poll that failed after its offsets round (no records from it)
        unreachable = silent if rng.random() < 0.5 else set()
        if rng.random() < 0.03:  # DescribeTopicPartitions failed (ELR not known) or answers again
            fast._elr_known = full._elr_known = not fast._elr_known
        at += rng.choice((500, 1000, 2000, 2500))
        t0 = time.monotonic()
        mine = fast._records(md, topics, at, found, poll_id, unreachable=unreachable)
        t1 = time.monotonic()
        theirs = full._records(md, topics, at, found, poll_id, unreachable=unreachable)
        assert mine == theirs, f"poll {poll_id}"
        assert remembered(fast) == remembered(full), f"poll {poll_id}"
        assert fast.parts.published.epochs == full.parts.published.epochs
        assert refreshed(fast, t0) == refreshed(full, t1), f"poll {poll_id}"
        assert fast.parts.brokers.departures._held_at == full.parts.brokers.departures._held_at
        assert fast.broker_view == full.broker_view
        passed += fast.frozen_topics
    assert passed > 20, passed  # topics were passed over often: the comparison above covered it
