"""`krm check shutdown --broker ID`: what stopping one broker would do to each of its partitions. Pure.

For every partition with a replica on the broker, judged from one fresh observation (leader, ISR,
replicas, live brokers, min.insync.replicas, unclean.leader.election.enable), with Kafka's rules:
- the new leader is the first replica in assignment order that is alive, in the ISR and not the
  stopping broker (`ControlledShutdownLeaderElection` / `OfflinePartitionLeaderElection`,
  core/src/main/scala/kafka/controller/PartitionStateMachine.scala), or on Kafka 4 a live ELR member
  when the ISR is left empty: the OFFLINE_PARTITION rule's election (pipelines/detectors/offline.py);
- without one, the partition has no leader (unclean election disabled) or elects an out-of-sync
  live replica and loses what only the stopping broker had (enabled);
- the ISR left behind is compared with min(min.insync.replicas, RF) (`Partition.effectiveMinIsr`).

Verdicts, worst first: `becomes_leaderless` (RF 1 — docs/cases/rf1-outage-zk-chroot.md — or the broker is the only live ISR
member), `unclean_election_data_loss`, `under_min_isr` (acks=all producers fail), `at_min_isr` (one
more loss stops acks=all), `leadership_moves` (to whom), `follower_only` (loses a follower copy).
Unsafe: the first three. For comparison, Strimzi's roller (KafkaAvailability / rolling.Availability)
judges each replica of the broker by |ISR| - min.insync.replicas only, and in the version with the
replica-count guard skips partitions with no more replicas than min.insync.replicas: an RF-1 topic
with the default min ISR 1 (docs/cases/rf1-outage-zk-chroot.md) counts as safe to restart there, and where leadership goes is
not its question. Redpanda's rolling restart gates on the cluster health overview
(`rpk cluster health`; cluster/health_monitor_backend.cc: healthy = no node down, no leaderless and
no under-replicated partition, a controller) and then puts the broker in maintenance mode, which
moves leadership only for RF > 1: a healthy cluster with RF-1 partitions passes the gate and those
partitions go offline (its docs ask operators to raise RF first), and min.insync.replicas = RF
passes too although acks=all producers fail the moment any broker stops. Both are verdicts here.
The drain plan moves each replica that would take its partition offline to the live broker
holding the fewest replicas, in kafka-reassign-partitions' JSON format.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass
from typing import Any, Mapping, Sequence

from pipelines.detectors import isr as isr_rule
from pipelines.detectors import offline
from pipelines.detectors.isr import effective_min_isr

LEADERLESS = "becomes_leaderless"
UNCLEAN = "unclean_election_data_loss"
UNDER_MIN_ISR = "under_min_isr"
AT_MIN_ISR = "at_min_isr"
LEADER_MOVES = "leadership_moves"
FOLLOWER = "follower_only"
UNSAFE = (LEADERLESS, UNCLEAN, UNDER_MIN_ISR)
ORDER = (LEADERLESS, UNCLEAN, UNDER_MIN_ISR, AT_MIN_ISR, LEADER_MOVES, FOLLOWER)


@dataclass(frozen=True)
class Verdict:
    topic: str
    partition: int
    verdict: str
    leader: int
    new_leader: int | None
    replicas: tuple[int, ...]
    isr: tuple[int, ...]
    isr_after: tuple[int, ...]
    effective_min_isr: int
    reason: str


def judge(broker: int, topic: str, p: dict[str, Any], live: set[int], min_isr: int | None,
          unclean: bool | None) -> Verdict | None:
    """The partition after the broker stops, judged by the pipeline's own rules: who leads is
    `offline.classify_offline` over the state left behind (the stopping broker out of the ISR and
    not alive), the ISR left behind is `isr.classify_isr`'s."""
    replicas, isr, leader = tuple(p["replicas"]), tuple(p["isr"]), p["leader"]
    if broker not in replicas:
        return None
    live_after = live - {broker}
    isr_after = tuple(r for r in isr if r != broker and r in live_after)
    eff = effective_min_isr(min_isr, replicas)
    elr_after = [r for r in p.get("elr") or () if r != broker]
    election = offline.classify_offline(leader, replicas, isr_after, live_after, elr_after, p.get("last_known_elr"),
                                        p.get("offline_replicas"))
    new_leader = leader if election is None else (election.live_isr[0] if election.live_isr else None)

    def verdict(kind: str, to: int | None, reason: str) -> Verdict:
        return Verdict(topic, p["partition"], kind, leader, to, replicas, isr, isr_after, eff, reason)

    if new_leader is None:
        others = [r for r in replicas if r in live_after]
        if len(replicas) == 1:
            return verdict(LEADERLESS, None, "replication factor 1: its only replica is on this broker")
        if unclean and others:
            return verdict(UNCLEAN, others[0], f"no other live ISR member; unclean election would make {others[0]} "
                                               "leader and lose what only this broker has")
        return verdict(LEADERLESS, None, "this broker is the only live in-sync replica"
                       + ("" if others else " and no other replica is alive"))
    if broker not in isr and leader != broker:
        return verdict(FOLLOWER, leader, "an out-of-sync follower: stopping it changes neither the ISR nor the leader")
    after = isr_rule.classify_isr(replicas, isr_after, min_isr, p.get("adding_replicas"), p.get("removing_replicas"))
    if isr_rule.UNDER_MIN_ISR in after.types:
        return verdict(UNDER_MIN_ISR, new_leader,
                       f"ISR would be {list(isr_after)}, below min ISR {eff}: acks=all producers fail")
    if isr_rule.AT_MIN_ISR in after.types:
        return verdict(AT_MIN_ISR, new_leader,
                       f"ISR would be {list(isr_after)}, at min ISR {eff}: one more loss stops acks=all")
    if leader == broker:
        return verdict(LEADER_MOVES, new_leader, f"leadership moves to {new_leader}")
    return verdict(FOLLOWER, leader, "loses a follower copy only")


def check(broker: int, topics: Sequence[Mapping[str, Any]], live: set[int]) -> list[Verdict]:
    """`topics`: topic_state dicts of one poll (collectors/records.py)."""
    out = []
    for t in topics:
        for p in t["partitions"]:
            v = judge(broker, t["topic"], p, live, t.get("min_insync_replicas"), t.get("unclean_leader_election"))
            if v is not None:
                out.append(v)
    return sorted(out, key=lambda v: (ORDER.index(v.verdict), v.topic, v.partition))


def drain_plan(broker: int, verdicts: list[Verdict], topics: list[dict[str, Any]], live: set[int]) -> dict[str, Any]:
    """Move the replica on `broker` of every unsafe partition to the live broker with the fewest
    replicas (not already a replica), as `kafka-reassign-partitions --execute` reads it."""
    load: Counter[int] = Counter({b: 0 for b in live if b != broker})
    for t in topics:
        for p in t["partitions"]:
            load.update(r for r in p["replicas"] if r in load)
    moves = []
    for v in verdicts:
        if v.verdict not in UNSAFE:
            continue
        candidates = sorted((n, b) for b, n in load.items() if b not in v.replicas)
        if not candidates:
            continue
        target = candidates[0][1]
        load[target] += 1
        moves.append({"topic": v.topic, "partition": v.partition,
                      "replicas": [target if r == broker else r for r in v.replicas]})
    return {"version": 1, "partitions": moves}
