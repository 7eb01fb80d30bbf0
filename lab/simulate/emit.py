"""Observation records of a simulated cluster, exactly as the Admin API collector publishes them
(collectors/records.py for the envelope, collectors/memory.py for what consecutive polls reveal)."""

from __future__ import annotations

from typing import Any

import numpy as np

from collectors.memory import PartitionMemory
from collectors.records import cluster_record, leave_out_quiet, topic_record
from collectors.topic_share import TopicShare
from lab.simulate.model import SimCluster
from schemas.quiet import Thresholds
from schemas.typed import Broker, Observation, Partition, ReplicaOffset, TopicObservation


class Emitter:
    """One per simulated cluster: numbers polls and keeps the collector's per-partition memory."""

    def __init__(self, sim: SimCluster, quiet: Thresholds | None = None, share: TopicShare | None = None) -> None:
        self.sim = sim
        self.quiet = quiet or Thresholds()  # the pipeline's thresholds, as the collector reads them
        self.share = share  # `--topic-share I/N`: only these topics' records, as a share's collector publishes
        self.memory = PartitionMemory()
        self.poll_id = 0
        self._counts: dict[int, int] = {}  # topic -> partition count last published (assignment changes)

    def poll(self) -> list[Observation]:
        sim = self.sim
        self.poll_id += 1
        at = sim.now_ms
        live = [b for b in sim.brokers() if sim.live[b]]
        live_set = set(live)
        brokers: list[Broker] = [{"id": b, "host": "sim", "port": 9092 + b, "rack": None, "live": b in live_set,
                    "reachable": b in live_set} for b in sim.brokers()]
        records: list[Observation] = [cluster_record(sim.name, "admin", self.poll_id, at, controller_id=live[0] if live else None,
                                  brokers=brokers, topic_count=len(sim.topic_names), partition_count=sim.partitions,
                                  replica_lag_time_max_ms=sim.settings.replica_lag_time_max_ms,
                                  leader_imbalance_per_broker_percentage=10)]
        rows = np.arange(sim.partitions)
        lp = sim.leader_pos.astype(np.intp)
        leaders = np.where(lp >= 0, sim.replicas[rows, np.maximum(lp, 0)], -1).tolist()
        replicas = sim.replicas.tolist()
        isr = sim.isr.tolist()
        leo = sim.leo.tolist()
        alive = sim.live[np.maximum(sim.replicas, 0)].tolist()
        hw = sim.hw.tolist()
        epoch = sim.epoch.tolist()
        index = sim.index.tolist()
        order = np.argsort(sim.topic_of, kind="stable")
        topic_of = sim.topic_of[order].tolist()
        memory = self.memory
        share = self.share
        held = [True] * len(sim.topic_names) if share is None else [share.holds(n) for n in sim.topic_names]
        parts: list[Partition] = []
        current: Any = topic_of[0] if topic_of else None
        for i, row in zip(topic_of, order.tolist()):
            if i != current:
                if held[current]:
                    records.append(self._topic(current, parts, at, live))
                parts, current = [], i
            if not held[i]:
                continue
            reps = [b for b in replicas[row] if b >= 0]
            leader = leaders[row]
            offsets: list[ReplicaOffset] = [{"broker": b, "log_end_offset": o}
                                            for b, o, a in zip(replicas[row], leo[row], alive[row]) if b >= 0 and a]
            p: Partition = {"partition": index[row], "leader": leader, "leader_epoch": epoch[row], "replicas": reps,
                 "isr": [b for b, m in zip(replicas[row], isr[row]) if b >= 0 and m],
                 "offline_replicas": [b for b, a in zip(replicas[row], alive[row]) if b >= 0 and not a],
                 "high_watermark": hw[row] if leader >= 0 else None, "log_start_offset": 0 if leader >= 0 else None,
                 "replica_offsets": offsets}
            parts.append(memory.annotate(sim.topic_names[i], p, at))
        if current is not None and held[current]:
            records.append(self._topic(current, parts, at, live))
        return records if share is None else share.stamp(records)

    def _topic(self, t: int, parts: list[Partition], at: int, live: list[int]) -> TopicObservation:
        sim = self.sim
        rec = topic_record(sim.name, "admin", self.poll_id, at, topic=sim.topic_names[t], live_brokers=live,
                           partitions=parts, min_insync_replicas=sim.topic_min_isr[t],
                           unclean_leader_election=sim.topic_unclean[t],
                           replica_lag_time_max_ms=sim.settings.replica_lag_time_max_ms)
        changed = self._counts.get(t) != len(parts)
        self._counts[t] = len(parts)
        rec["topic_state"]["assignment"] = "changed" if changed else None
        return rec if changed else leave_out_quiet(rec, self.quiet)
