"""A Kafka cluster in memory, evolving in time: what the controller and the replicas do, for feeding
krm's pipeline clusters no laptop can run (issue 7). Arrays, not objects: 200k partitions step in
milliseconds.

What it models, with Kafka's rules:
- placement: topics are created with Kafka's own `assignReplicasToBrokers` (krm/assignment.py) over
  the broker list (random start per topic), expansions with the expansion rule (docs/cases/partition-expansion.md);
- each poll interval every live leader appends `rate x dt` messages; live followers that are not
  stalled fetch up to the leader's LEO; a follower that has not caught up for
  replica.lag.time.max.ms leaves the ISR (`Partition.maybeShrinkIsr`), one that caught up to the HW
  rejoins (`maybeExpandIsr`); the HW is the smallest LEO in the ISR and never moves back;
- a broker death: the controller removes it from every ISR it is in (unless it is the last member)
  and elects for each partition it led the first replica in assignment order that is live and in
  the ISR (`PartitionStateMachine` offline election); with none, the partition has no leader (-1),
  unless unclean election is on for the topic and a live replica exists: that one leads, with its
  own (shorter) log, and the HW follows it down — the truncation the detectors must see;
- leader epochs change with leadership only (KRaft; ZooKeeper mode also bumps on ISR changes).
What it leaves out: ISR changes propagating through metadata with delay, controller failover,
log retention (log start stays 0), throttles, rack-aware placement.
"""

from __future__ import annotations

import random
from dataclasses import dataclass
from typing import Any

import numpy as np

from krm.assignment import assign, expansion_inputs


@dataclass(frozen=True)
class SimSettings:
    brokers: int = 30
    topics: int = 2000
    partitions_per_topic: int = 100
    replication_factor: int = 3
    rf1_topics: int = 0  # additional single-replica topics (docs/cases/rf1-outage-zk-chroot.md's situation)
    min_insync_replicas: int = 2
    write_rate: float = 2.0  # mean messages/s per partition; a quarter of partitions are idle
    replica_lag_time_max_ms: int = 30_000
    seed: int = 1


class SimCluster:
    """State as numpy arrays, one row per partition, one column per replica position."""

    def __init__(self, name: str, s: SimSettings, start_ms: int = 0) -> None:
        """`start_ms`: the clock at creation; the first step() appends only what accrued since."""
        self.name = name
        self.settings = s
        self.rng = random.Random(s.seed)
        self.live = np.ones(s.brokers, dtype=bool)  # index = broker id (ids 0..n-1)
        self.topic_names: list[str] = []
        self.topic_min_isr: list[int] = []
        self.topic_unclean: list[bool] = []
        self.topic_of = np.zeros(0, dtype=np.int32)  # partition row -> topic index
        self.index = np.zeros(0, dtype=np.int32)  # partition number within its topic
        r = max(s.replication_factor, 1)
        self.replicas = np.full((0, r), -1, dtype=np.int32)  # -1 pads RF < max RF
        self.leo = np.zeros((0, r), dtype=np.int64)
        self.isr = np.zeros((0, r), dtype=bool)
        self.caught_up_ms = np.zeros((0, r), dtype=np.int64)
        self.stalled = np.zeros((0, r), dtype=bool)
        self.leader_pos = np.zeros(0, dtype=np.int8)  # column of the leader, -1: no leader
        self.epoch = np.zeros(0, dtype=np.int32)
        self.hw = np.zeros(0, dtype=np.int64)
        self.rate = np.zeros(0, dtype=np.float64)
        self.carry = np.zeros(0, dtype=np.float64)
        self.now_ms = start_ms
        brokers = list(range(s.brokers))
        for t in range(s.topics):
            self.create_topic(f"sim-{t:05d}", s.partitions_per_topic, s.replication_factor, brokers)
        for t in range(s.rf1_topics):
            self.create_topic(f"sim-rf1-{t:05d}", s.partitions_per_topic, 1, brokers)

    # ------------------------------------------------------------------ shape

    @property
    def partitions(self) -> int:
        return len(self.topic_of)

    def brokers(self) -> list[int]:
        return list(range(len(self.live)))

    def create_topic(self, name: str, partitions: int, rf: int, brokers: list[int], unclean: bool = False,
                     min_isr: int | None = None) -> None:
        order = brokers[:]
        self.rng.shuffle(order)  # the controller's unsorted broker list
        a = assign(order, partitions, rf, rng=self.rng)
        self._append(len(self.topic_names), a)
        self.topic_names.append(name)
        self.topic_min_isr.append(self.settings.min_insync_replicas if min_isr is None else min_isr)
        self.topic_unclean.append(unclean)

    def expand_topic(self, name: str, total: int) -> list[int]:
        """Kafka's partition expansion (sorted live brokers, start at partition 0's first replica)."""
        t = self.topic_names.index(name)
        rows = np.flatnonzero(self.topic_of == t)
        p0 = [int(b) for b in self.replicas[rows[0]] if b >= 0]
        live = [b for b in self.brokers() if self.live[b]]
        ordered, start, k = expansion_inputs(live, p0, len(rows))
        self._append(t, assign(ordered, total - len(rows), len(p0), start_index=start, start_partition=k))
        return list(range(k, total))

    def add_brokers(self, n: int) -> list[int]:
        first = len(self.live)
        self.live = np.concatenate([self.live, np.ones(n, dtype=bool)])
        return list(range(first, first + n))

    def _append(self, topic: int, a: dict[int, list[int]]) -> None:
        n, width = len(a), self.replicas.shape[1]
        reps = np.full((n, width), -1, dtype=np.int32)
        for i, (_p, r) in enumerate(sorted(a.items())):
            reps[i, :len(r)] = r
        present = reps >= 0
        rate = np.array([0.0 if self.rng.random() < 0.25 else self.rng.expovariate(1 / self.settings.write_rate)
                         for _ in range(n)])
        self.topic_of = np.concatenate([self.topic_of, np.full(n, topic, dtype=np.int32)])
        self.index = np.concatenate([self.index, np.array(sorted(a), dtype=np.int32)])
        self.replicas = np.vstack([self.replicas, reps])
        self.leo = np.vstack([self.leo, np.zeros((n, width), dtype=np.int64)])
        self.isr = np.vstack([self.isr, present & self.live[np.maximum(reps, 0)]])
        self.caught_up_ms = np.vstack([self.caught_up_ms, np.full((n, width), self.now_ms, dtype=np.int64)])
        self.stalled = np.vstack([self.stalled, np.zeros((n, width), dtype=bool)])
        self.leader_pos = np.concatenate([self.leader_pos, np.zeros(n, dtype=np.int8)])
        self.epoch = np.concatenate([self.epoch, np.zeros(n, dtype=np.int32)])
        self.hw = np.concatenate([self.hw, np.zeros(n, dtype=np.int64)])
        self.rate = np.concatenate([self.rate, rate])
        self.carry = np.concatenate([self.carry, np.zeros(n)])

    def row(self, topic: str, partition: int) -> int:
        t = self.topic_names.index(topic)
        return int(np.flatnonzero((self.topic_of == t) & (self.index == partition))[0])

    # ------------------------------------------------------------------ time

    def step(self, now_ms: int) -> None:
        """Advance to `now_ms`: appends, fetches, ISR shrink/expand, HW."""
        dt = max(0, now_ms - self.now_ms) / 1000
        self.now_ms = now_ms
        has_leader = self.leader_pos >= 0
        rows = np.arange(self.partitions)
        lp = np.maximum(self.leader_pos, 0).astype(np.intp)
        leader_broker = self.replicas[rows, lp]
        leads = has_leader & self.live[np.maximum(leader_broker, 0)]
        grow = self.rate * dt + self.carry
        inc = np.floor(grow)
        self.carry = np.where(leads, grow - inc, self.carry)
        self.leo[rows[leads], lp[leads]] += inc[leads].astype(np.int64)
        leader_leo = self.leo[rows, lp]

        present = self.replicas >= 0
        alive = present & self.live[np.maximum(self.replicas, 0)]
        is_leader_col = np.zeros_like(present)
        is_leader_col[rows, lp] = has_leader
        fetching = alive & ~self.stalled & ~is_leader_col & leads[:, None]
        self.leo = np.where(fetching, np.maximum(self.leo, leader_leo[:, None]), self.leo)
        caught = fetching | (is_leader_col & leads[:, None])
        self.caught_up_ms = np.where(caught, now_ms, self.caught_up_ms)
        # the leader shrinks the ISR of followers that have not caught up for replica.lag.time.max.ms
        lagging = (now_ms - self.caught_up_ms) > self.settings.replica_lag_time_max_ms
        self.isr &= ~(lagging & ~is_leader_col & leads[:, None])
        # ... and takes back followers that reached the HW
        back = fetching & ~self.isr & (self.leo >= self.hw[:, None])
        self.isr |= back
        in_isr_leo = np.where(self.isr, self.leo, np.iinfo(np.int64).max)
        self.hw = np.where(leads, np.maximum(self.hw, np.min(in_isr_leo, axis=1)), self.hw)

    # ------------------------------------------------------------------ faults

    def kill_broker(self, b: int) -> dict[str, list[Any]]:
        """The controller's reaction to a broker's death; returns rows by what happened to them."""
        self.live[b] = False
        out: dict[str, list] = {"offline": [], "unclean": [], "leader_moved": [], "isr_shrunk": []}  # unclean: (row, old HW)
        for row in np.flatnonzero((self.replicas == b).any(axis=1)):
            reps = self.replicas[row]
            pos = int(np.flatnonzero(reps == b)[0])
            led = self.leader_pos[row] == pos
            others_in_isr = [i for i in range(len(reps)) if reps[i] >= 0 and i != pos and self.isr[row, i]
                             and self.live[reps[i]]]
            if not led:
                if self.isr[row, pos] and (others_in_isr or self.leader_pos[row] >= 0):
                    self.isr[row, pos] = False
                    out["isr_shrunk"].append(int(row))
                continue
            if others_in_isr:
                self.isr[row, pos] = False
                self.leader_pos[row] = others_in_isr[0]
                self.epoch[row] += 1
                out["leader_moved"].append(int(row))
                continue
            live_others = [i for i in range(len(reps)) if reps[i] >= 0 and i != pos and self.live[reps[i]]]
            if self.topic_unclean[self.topic_of[row]] and live_others:
                new = live_others[0]  # unclean election: an out-of-sync replica leads with its own log
                self.leader_pos[row] = new
                self.epoch[row] += 1
                self.isr[row] = False
                self.isr[row, new] = True
                old_hw = int(self.hw[row])
                self.hw[row] = self.leo[row, new]  # the HW follows the new leader's log down
                out["unclean"].append((int(row), old_hw))
            else:
                self.leader_pos[row] = -1  # no leader; the ISR keeps the last member (Kafka does)
                out["offline"].append(int(row))
        return out

    def restart_broker(self, b: int) -> None:
        """The broker is back: its replicas fetch again (and rejoin ISRs once caught up); partitions
        it alone held get it back as leader (the controller's election on broker startup)."""
        self.live[b] = True
        for row in np.flatnonzero((self.replicas == b).any(axis=1)):
            pos = int(np.flatnonzero(self.replicas[row] == b)[0])
            if self.leader_pos[row] < 0 and self.isr[row, pos]:
                self.leader_pos[row] = pos
                self.epoch[row] += 1
            if self.leader_pos[row] >= 0 and self.leader_pos[row] != pos:
                lp = int(self.leader_pos[row])
                # a returning follower truncates to the leader's log first (to the HW at most)
                self.leo[row, pos] = min(self.leo[row, pos], self.leo[row, lp])

    def stall_follower(self, row: int, broker: int, stalled: bool = True) -> None:
        pos = int(np.flatnonzero(self.replicas[row] == broker)[0])
        self.stalled[row, pos] = stalled

    # ------------------------------------------------------------------ reading

    def leader_of(self, row: int) -> int:
        lp = int(self.leader_pos[row])
        return int(self.replicas[row, lp]) if lp >= 0 else -1

    def isr_of(self, row: int) -> list[int]:
        return [int(b) for b, m in zip(self.replicas[row], self.isr[row]) if b >= 0 and m]

    def replicas_of(self, row: int) -> list[int]:
        return [int(b) for b in self.replicas[row] if b >= 0]
