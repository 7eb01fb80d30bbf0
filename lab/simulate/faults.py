"""Scripted faults for the simulator and the incidents each must produce (the ground truth).

A script is a JSON list (or a TOML file of `[[fault]]` tables), each with `at_s` (seconds after the
start) and `kind`:
- `kill_broker` {broker}: the controller's reaction (lab/simulate/model.py). Must produce
  BROKER_DOWN; OFFLINE_PARTITION for every partition left without a leader; UNDER_REPLICATED /
  UNDER_MIN_ISR / AT_MIN_ISR for every partition whose ISR it shrank, by Kafka's own comparisons
  (|ISR| < RF; |ISR| < min(min.insync.replicas, RF); |ISR| == that < RF); UNCLEAN_LEADER_ELECTION,
  and OFFSET_REGRESSION where the elected replica was behind the old HW (the old leader's own log is
  truncated only when it returns: LOG_TRUNCATION then, a `restart_broker` side effect).
- `restart_broker` {broker}: must produce nothing new.
- `stall_follower` {topic, partition, broker?}: the follower stops fetching (until
  `unstall_follower`). On a partition being written to: HW_STALL, then UNDER_REPLICATED when the
  leader drops it after replica.lag.time.max.ms, and REPLICA_LAG for that follower once its lag
  passes the configured thresholds.
- `expand_partitions` {topic, total}: Kafka's expansion rule; REPLICA_IMBALANCE on the topic when
  the result leaves a live broker without a replica although the topic could cover every broker.
- `add_brokers` {count}: REPLICA_IMBALANCE for each new broker (Kafka moves nothing to it).
Truth is computed from the model's state at the fault, with Kafka's rules, never with krm's
detector code. `allowed` lists what a fault may also legitimately cause (a leaderless partition's
preferred leader is elsewhere, a new broker leads nothing, ...): neither expected nor false.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from foundation.errors import KrmError
from lab.simulate.model import SimCluster

Key = tuple[str, str | None, int | None, int | None]  # (type, topic, partition, broker)
KINDS = ("kill_broker", "restart_broker", "stall_follower", "unstall_follower", "expand_partitions", "add_brokers")
PARTITION_SIDE_EFFECTS = ("UNDER_REPLICATED", "UNDER_MIN_ISR", "AT_MIN_ISR", "HW_STALL", "REPLICA_LAG",
                          "OFFSET_REGRESSION", "LOG_TRUNCATION", "UNCLEAN_LEADER_ELECTION", "OFFLINE_PARTITION")


@dataclass
class Fault:
    at_s: float
    kind: str
    params: dict[str, Any]


@dataclass
class Applied:
    fault: Fault
    injected_at_ms: int
    expected: set[Key] = field(default_factory=set)
    allowed: set[Key] = field(default_factory=set)
    allowed_topics: set[str] = field(default_factory=set)  # any topic-level balance incident on these
    allowed_brokers: set[int] = field(default_factory=set)  # any broker-level incident on these

    def to_json(self) -> dict[str, Any]:
        return {"at_s": self.fault.at_s, "kind": self.fault.kind, "params": self.fault.params,
                "injected_at_ms": self.injected_at_ms, "expected": sorted(map(list, self.expected), key=str),
                "allowed": sorted(map(list, self.allowed), key=str), "allowed_topics": sorted(self.allowed_topics),
                "allowed_brokers": sorted(self.allowed_brokers)}


def load_script(path: str) -> list[Fault]:
    text = Path(path).read_text()
    try:
        if path.endswith(".toml"):
            import tomllib

            items = tomllib.loads(text).get("fault", [])
        else:
            items = json.loads(text)
    except ValueError as e:
        raise KrmError(f"fault script {path}: {e}") from None
    faults = []
    for i, item in enumerate(items):
        if not isinstance(item, dict) or item.get("kind") not in KINDS or not isinstance(item.get("at_s"), (int, float)):
            raise KrmError(f"fault script {path}: entry {i} needs at_s (seconds) and kind, one of {', '.join(KINDS)}")
        faults.append(Fault(float(item["at_s"]), item["kind"], {k: v for k, v in item.items() if k not in ("at_s", "kind")}))
    return sorted(faults, key=lambda f: f.at_s)


def apply(sim: SimCluster, fault: Fault) -> Applied:
    """Inject `fault` now (sim.now_ms) and return what it must produce."""
    out = Applied(fault, sim.now_ms)
    p = fault.params
    if fault.kind == "kill_broker":
        b = _broker(sim, p["broker"])
        p["broker"] = b
        result = sim.kill_broker(b)
        out.expected.add(("BROKER_DOWN", None, None, b))
        out.allowed_brokers.update(sim.brokers())  # leadership moved: skew / preferred imbalance anywhere
        touched = np.flatnonzero((sim.replicas == b).any(axis=1))
        for row in touched.tolist():
            t, part = sim.topic_names[sim.topic_of[row]], int(sim.index[row])
            out.allowed.update((k, t, part, None) for k in PARTITION_SIDE_EFFECTS)
            out.allowed.update(("REPLICA_LAG", t, part, r) for r in sim.replicas_of(row))
            out.allowed_topics.add(t)
        for row in result["offline"]:
            out.expected.add(("OFFLINE_PARTITION", *_tp(sim, row), None))
        for row in result["leader_moved"] + result["isr_shrunk"]:
            out.expected.update(_isr_truth(sim, row))
        for row, old_hw in result["unclean"]:
            t, part = _tp(sim, row)
            out.expected.add(("UNCLEAN_LEADER_ELECTION", t, part, None))
            if sim.hw[row] < old_hw:  # committed data above the new leader's log is gone: the HW went back
                out.expected.add(("OFFSET_REGRESSION", t, part, None))
    elif fault.kind == "restart_broker":
        b = _broker(sim, p["broker"])
        p["broker"] = b
        sim.restart_broker(b)
        out.allowed_brokers.add(b)
        for row in np.flatnonzero((sim.replicas == b).any(axis=1)).tolist():
            t, part = _tp(sim, row)
            out.allowed.update((k, t, part, None) for k in PARTITION_SIDE_EFFECTS)
            out.allowed.update(("REPLICA_LAG", t, part, r) for r in sim.replicas_of(row))
    elif fault.kind in ("stall_follower", "unstall_follower"):
        row = sim.row(p["topic"], int(p["partition"]))
        leader = sim.leader_of(row)
        follower = int(p.get("broker", next((r for r in sim.replicas_of(row) if r != leader), -1)))
        if follower < 0 or follower == leader:
            raise KrmError(f"stall_follower: {p['topic']}/{p['partition']} has no follower to stall")
        p["broker"] = follower
        sim.stall_follower(row, follower, fault.kind == "stall_follower")
        if fault.kind == "stall_follower":
            sim.rate[row] = max(sim.rate[row], 5.0)  # a partition being written to: its HW must stall
        t, part = _tp(sim, row)
        out.allowed.update((k, t, part, None) for k in PARTITION_SIDE_EFFECTS)
        out.allowed.add(("REPLICA_LAG", t, part, follower))
        if fault.kind == "stall_follower" and sim.rate[row] > 0:
            out.expected.update({("HW_STALL", t, part, None), ("UNDER_REPLICATED", t, part, None),
                                 ("REPLICA_LAG", t, part, follower)})
    elif fault.kind == "expand_partitions":
        topic = p["topic"]
        new = sim.expand_topic(topic, int(p["total"]))
        out.allowed_topics.add(topic)
        t_idx = sim.topic_names.index(topic)
        rows = np.flatnonzero(sim.topic_of == t_idx)
        holders = {int(b) for b in sim.replicas[rows].ravel() if b >= 0}
        live = [b for b in sim.brokers() if sim.live[b]]
        if int((sim.replicas[rows] >= 0).sum()) >= len(live) and set(live) - holders:
            out.expected.add(("REPLICA_IMBALANCE", topic, None, None))
        out.allowed.update((k, topic, part, None) for part in new for k in PARTITION_SIDE_EFFECTS)
    elif fault.kind == "add_brokers":
        for b in sim.add_brokers(int(p.get("count", 1))):
            out.expected.add(("REPLICA_IMBALANCE", None, None, b))
            out.allowed_brokers.add(b)
    return out


def _broker(sim: SimCluster, spec: Any) -> int:
    """A broker id, or "leader:TOPIC/PARTITION" for that partition's current leader."""
    if isinstance(spec, str) and spec.startswith("leader:"):
        topic, _, part = spec[len("leader:"):].rpartition("/")
        leader = sim.leader_of(sim.row(topic, int(part)))
        if leader < 0:
            raise KrmError(f"{spec}: that partition has no leader")
        return leader
    return int(spec)


def _tp(sim: SimCluster, row: int) -> tuple[str, int]:
    return sim.topic_names[sim.topic_of[row]], int(sim.index[row])


def _isr_truth(sim: SimCluster, row: int) -> set[Key]:
    """Kafka's comparisons (Partition.isUnderReplicated / isUnderMinIsr / isAtMinIsr, with
    min(min.insync.replicas, RF) as the broker applies it)."""
    t, part = _tp(sim, row)
    rf = len(sim.replicas_of(row))
    n = len(sim.isr_of(row))
    eff = min(sim.topic_min_isr[sim.topic_of[row]], rf)
    out: set[Key] = set()
    if sim.leader_of(row) < 0:
        return out
    if n < rf:
        out.add(("UNDER_REPLICATED", t, part, None))
    if n < eff:
        out.add(("UNDER_MIN_ISR", t, part, None))
    elif n == eff and n < rf:
        out.add(("AT_MIN_ISR", t, part, None))
    return out
