"""The collector's short way for steady partitions (PartitionMemory.still_quiet) changes nothing a record
says: two sources fed the same random polls, one taking the short way and one building every partition
the full way, publish equal records and remember equal state, poll after poll."""

import random

import pytest

from collectors.admin import AdminSource
from collectors.departures import holders
from collectors.offsets import OffsetsRound
from foundation.config import ClusterConfig, CollectorConfig
from schemas.quiet import Thresholds, load_of

pytestmark = pytest.mark.unit

BROKERS = (1, 2, 3, 4)
FOLLOWER = 5  # a broker that only ever follows: departures must count it a holder by the ISR alone


class Cluster:
    """A small cluster that moves at random: writes, followers falling behind and catching up, elections,
    ISR changes, offsets going back, brokers leaving, answers missing, now and then a reassignment."""

    def __init__(self, rng: random.Random, kraft_elr: bool) -> None:
        self.rng = rng
        self.kraft_elr = kraft_elr
        self.parts: dict[tuple[str, int], dict] = {}
        for t in ("a", "b", "c"):
            self.create(t, 5)

    def create(self, t: str, count: int) -> None:
        rng = self.rng
        for pid in range(count):
            rf = rng.choice((1, 2, 3, 3, 3))
            replicas = rng.sample(BROKERS, rf)
            if rf > 1 and rng.random() < 0.3:
                replicas[-1] = FOLLOWER
            self.parts[(t, pid)] = {"leader": replicas[0], "epoch": 0, "replicas": replicas, "isr": list(replicas),
                                    "leo": {b: 100 for b in replicas}, "hw": 100, "elr": [], "lk_elr": [],
                                    "stall": 0}

    def step(self) -> None:
        rng = self.rng
        if rng.random() < 0.02:  # topic c deleted, or created again with another size
            if any(t == "c" for t, _ in self.parts):
                self.parts = {k: v for k, v in self.parts.items() if k[0] != "c"}
            else:
                self.create("c", rng.randint(1, 6))
        for p in self.parts.values():
            leader, replicas = p["leader"], p["replicas"]
            roll = rng.random()
            if roll < 0.03:  # an election
                p["leader"] = rng.choice([r for r in replicas if r != FOLLOWER] + [-1])
                p["epoch"] += 1
            elif roll < 0.06:  # the ISR shrinks or grows back
                shrunk = [r for r in replicas if r == leader or rng.random() < 0.5]
                p["isr"] = list(replicas) if len(p["isr"]) < len(replicas) else shrunk
            elif roll < 0.075:  # a reassignment's middle or end
                p["replicas"] = replicas = rng.sample(BROKERS, len(replicas))
                p["isr"] = list(replicas)
                p["leo"] = {b: p["leo"].get(b, p["hw"]) for b in replicas}
            elif roll < 0.09 and self.kraft_elr:
                p["elr"] = rng.sample(replicas, rng.randint(0, len(replicas)))
                p["lk_elr"] = rng.sample(replicas, rng.randint(0, 1))
            if leader >= 0 and leader in p["leo"]:
                written = rng.choice((0, 0, 0, 1, 5, 40, 200))
                p["leo"][leader] += written
                for b in replicas:
                    if b != leader:  # a follower copies all, some or none of it
                        p["leo"][b] = max(p["leo"].get(b, 0), p["leo"][leader] - rng.choice((0, 0, 0, 1, 3, 59, 60)))
            if rng.random() < 0.02:  # a log truncated
                b = rng.choice(replicas)
                p["leo"][b] = max(0, p["leo"].get(b, 0) - rng.randint(1, 20))
            if p["stall"] == 0 and rng.random() < 0.03:
                p["stall"] = rng.randint(2, 14)  # the HW held still for that many polls, around the window
            if p["stall"] > 0:
                p["stall"] -= 1
            elif rng.random() < 0.9:  # the HW follows the ISR (else held still for a poll)
                in_isr = [p["leo"].get(b, 0) for b in p["isr"] if b in p["leo"]]
                p["hw"] = min(in_isr) if in_isr else p["hw"]

    def poll(self) -> tuple[dict, list, OffsetsRound, set[int]]:
        rng = self.rng
        live = set(BROKERS + (FOLLOWER,)) - ({rng.choice(BROKERS + (FOLLOWER,))} if rng.random() < 0.05 else set())
        silent = {rng.choice(BROKERS)} if rng.random() < 0.05 else set()  # answered no offsets request
        brokers = [{"node_id": b, "host": "h", "port": 9092 + b, "rack": None} for b in sorted(live)]
        topics: dict[str, list] = {}
        found = OffsetsRound()
        found.asked = set(live)
        found.answered = live - silent
        for (t, pid), p in self.parts.items():
            part = {"partition": pid, "leader": p["leader"], "leader_epoch": p["epoch"], "replicas": list(p["replicas"]),
                    "isr": list(p["isr"]), "offline_replicas": [r for r in p["replicas"] if r not in live]}
            if rng.random() < 0.01:  # a live broker's log directory failed
                part["offline_replicas"].append(rng.choice(p["replicas"]))
            if self.kraft_elr and rng.random() < 0.9:
                part["elr"], part["last_known_elr"] = list(p["elr"]), list(p["lk_elr"])
            topics.setdefault(t, []).append(part)
            if p["leader"] in found.answered and rng.random() < 0.97:
                found.hw.setdefault(t, {})[pid] = p["hw"]
                found.log_start.setdefault(t, {})[pid] = 0
            for b, o in p["leo"].items():
                if b in found.answered and rng.random() < 0.97:
                    found.leo.setdefault(t, {}).setdefault(b, {})[pid] = o
        listed = [{"topic": t, "error_code": 0, "partitions": ps} for t, ps in topics.items()]
        md = {"brokers": brokers, "controller_id": 1, "topics": listed}
        # unreachable: judged over several polls (collectors/reachability.py), so not only this poll's silent
        held_back = {rng.choice(BROKERS)} if rng.random() < 0.05 else set()
        return md, listed, found, (silent if rng.random() < 0.5 else set()) | held_back


def source(short: bool, seed: int) -> AdminSource:
    """Every other seed with REPLICA_LAG's seconds below the history's lag floor: each bound decides somewhere."""
    floor_s, lag_s = (1.0, 2.0) if seed % 2 else (3.0, 1.0)
    src = AdminSource(ClusterConfig(name="c", bootstrap_servers="h:1"),
                      CollectorConfig(assignment_snapshot_s=40, history_keyframe_s=15, history_lag_floor_s=floor_s),
                      quiet=Thresholds(lag_messages=60, lag_seconds=lag_s, hw_stall_window_ms=6_000))
    src.records.short_way = short
    src._elr_known = True
    return src


def remembered(src: AdminSource) -> dict:
    memory = src.parts.memory
    return {k: {f: getattr(s, f) for f in s.__slots__} for k, s in memory._seen.items()}


@pytest.mark.parametrize("seed", range(24))
def test_the_short_way_publishes_and_remembers_what_the_full_way_does(seed):
    rng = random.Random(seed)
    cluster = Cluster(rng, kraft_elr=seed % 2 == 0)
    fast, full = source(True, seed), source(False, seed)
    taken = []
    still_quiet = fast.parts.memory.still_quiet

    def counting(*a, **k):
        taken.append(still_quiet(*a, **k))
        return taken[-1]

    fast.parts.memory.still_quiet = counting  # type: ignore[method-assign]
    at = 1_000_000
    for poll_id in range(1, 120):
        cluster.step()
        md, topics, found, unreachable = cluster.poll()
        at += rng.choice((500, 1000, 1000, 2000, 2500))
        mine = fast._records(md, topics, at, found, poll_id, unreachable=unreachable)
        theirs = full._records(md, topics, at, found, poll_id, unreachable=unreachable)
        assert mine == theirs, f"poll {poll_id}"
        for rec in mine:  # and both right: every partition counted, as Metadata answered
            if rec["kind"] == "topic" and "broker_load" in rec["topic_state"]:
                listed = next(t["partitions"] for t in topics if t["topic"] == rec["topic_state"]["topic"])
                assert rec["topic_state"]["broker_load"] == load_of((p["leader"], p["replicas"]) for p in listed)
        assert remembered(fast) == remembered(full), f"poll {poll_id}"
        assert set(fast.parts.memory._seen) == {(t["topic"], p["partition"]) for t in topics for p in t["partitions"]}
        assert fast.parts.brokers.departures._held_at == full.parts.brokers.departures._held_at
        # and right: every broker leading or in the ISR of a replicated partition, and up, was seen holding now
        up = {b["id"] for b in mine[0]["cluster_state"]["brokers"] if b["live"] and b.get("reachable") is not False}
        listed = [p for t in topics for p in t["partitions"]]
        assert {b for b, at_ms in fast.parts.brokers.departures._held_at.items() if at_ms == at} == holders(listed) & up
        assert fast.parts.published.epochs.keys() == full.parts.published.epochs.keys()
        assert fast.parts.published.epochs == full.parts.published.epochs
        assert fast.parts.published.at.keys() == fast.parts.published.epochs.keys()
    # the short way was both taken and refused often: the comparison above covered both
    assert taken.count(True) > 50 and taken.count(False) > 300, (taken.count(True), taken.count(False))
