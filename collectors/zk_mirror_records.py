"""The ZooKeeper mirror's records: published as soon as a state znode changes (quick records), and what
a poll that reached no broker still knows (ZooKeeper's registrations and the controller's writes)."""

from __future__ import annotations

from typing import Any, Iterable, Mapping

from collectors import log_dirs
from collectors.poller_parts import PollerParts
from collectors.wire import MdPartition
from collectors.records import cluster_record, topic_record
from schemas.typed import Broker, Observation, Partition, TopicObservation


def _later_election(part: MdPartition, epoch: int, replicas: Iterable[int]) -> bool:
    """`part` (a Metadata answer's partition) comes from a later election than `epoch`, for the same
    replicas: a topic deleted and created again starts its epochs from 0 on another assignment."""
    mine = part.get("leader_epoch")
    return mine is not None and mine > epoch and set(part["isr"]) | ({part["leader"]} - {-1}) <= set(replicas)


class ZkMirror:
    """Records from the ZooKeeper mirror alone (ZooKeeper mode), built from the poller's parts."""

    def __init__(self, parts: PollerParts) -> None:
        self.parts = parts

    def quick_records(self, topics: set[str]) -> list[Observation]:
        """Metadata-only records of `topics` straight from the ZooKeeper mirror, published as soon as a
        state znode changes: leader, epoch, ISR (with the znode's mtime) and the assignment, no
        offsets (`has_offsets` false, so they judge and resolve only metadata incidents). A cluster
        record comes first, with ZooKeeper's live brokers and controller (reachability and sizes from
        the last full poll), so /metrics never shows a partition offline for a broker still "up".
        While no broker answers krm's polls, they resolve nothing either (AdminSource's failed polls)."""
        my = self.parts
        zk, share = my.zk, my.share
        if zk is None:
            return []
        live = zk.live_brokers()
        if live is None:
            return []
        if share is not None:
            topics = {t for t in topics if share.holds(t)}
        # arrived: a full poll's Metadata, newer than its records so far
        poll_id, at, arrived = my.published.quick_stamp()
        out: list[Observation] = []
        last = my.brokers.last_state
        if last is not None:
            out.append(cluster_record(
                my.cluster.name, "zookeeper", poll_id, at, controller_id=zk.controller(),
                brokers=self.judged(self.zookeeper_brokers(live), at),
                topic_count=last["topic_count"], partition_count=last["partition_count"],
                replica_lag_time_max_ms=last.get("replica_lag_time_max_ms"),
                leader_imbalance_per_broker_percentage=last.get("leader_imbalance_per_broker_percentage"),
                reassignment_in_progress=zk.reassigning))
        out += self.mirror_topics(topics, poll_id, at, live, arrived, resolves=not my.access.degraded)
        return share.stamp(out) if share is not None else out

    def mirror_topics(self, topics: Iterable[str], poll_id: int, at: int, live: set[int],
                      arrived: Mapping[str, list[MdPartition]] | None, resolves: bool = True) -> list[TopicObservation]:
        """Metadata-only topic records of `topics` from the ZooKeeper mirror (see quick_records)."""
        my = self.parts
        zk = my.zk
        assert zk is not None
        out: list[TopicObservation] = []
        for topic in sorted(topics):
            assignment = zk.assignment(topic)
            if not assignment:
                continue
            parts: list[Partition] = []
            moves = zk.moves(topic)
            before = my.views.assignments.get(topic) or {}
            pending = {p["partition"]: p for p in (arrived or {}).get(topic, [])}
            for pid, replicas in sorted(assignment.items()):
                zs = zk.partition(topic, pid)
                if zs is None:
                    continue
                part: Partition = {"partition": pid, "leader": zs.leader, "leader_epoch": zs.leader_epoch,
                        "replicas": list(replicas), "isr": list(zs.isr), "zk_mtime_ms": zs.mtime_ms}
                if (offline := my.dirs.offline.get((topic, pid))) is not None:
                    part["offline_replicas"] = offline
                newer = pending.get(pid)
                if newer is not None and _later_election(newer, zs.leader_epoch, replicas):
                    part["leader"], part["leader_epoch"], part["isr"] = newer["leader"], newer["leader_epoch"], list(newer["isr"])
                    part.pop("zk_mtime_ms")
                my.published.no_older(topic, part)  # this partition's watch may not have fired yet
                my.carried.carry(topic, part, moves.get(pid), before.get(pid))
                parts.append(my.memory.mark_change(topic, part))
            min_isr, unclean = my.configs.of(topic)
            rec = topic_record(my.cluster.name, "zookeeper", poll_id, at, topic=topic, live_brokers=live,
                               partitions=parts, min_insync_replicas=min_isr, unclean_leader_election=unclean,
                               replica_lag_time_max_ms=my.configs.replica_lag_time_max_ms, has_offsets=False,
                               resolves=resolves)
            # as the last poll found them, with the offline replicas it carries above (a broker dead then and
            # registered now reports no failed directory: its replicas there are a restart's moment)
            log_dirs.with_failed_dirs([rec], my.dirs.failed_brokers or [])
            # A topic no full poll has recorded yet, whole in the mirror (every partition's state written):
            # its first layout goes to the history's assignments table now. A topic created and grown
            # between two full polls would otherwise be recorded first with its grown size, and a restarted
            # pipeline would take its expansion for a topic laid out that way (pipelines/assignment_history.py).
            if topic not in my.views.assignments and len(parts) == len(assignment):
                rec["topic_state"]["assignment"] = "changed"
            out.append(rec)
        return out

    def zookeeper_brokers(self, live: set[int], held: Iterable[int] = ()) -> list[Broker]:
        """Every broker krm knows (the last full poll's, ZooKeeper's registered ones, `held`: replica
        holders), live when registered in ZooKeeper; the rest as the last full poll saw it."""
        last = self.parts.brokers.last_state
        known = {b["id"]: b for b in last["brokers"]} if last is not None else {}
        out: list[Broker] = []
        for bid in sorted(set(known) | live | set(held)):
            b: Broker = (known[bid].copy() if bid in known
                         else {"id": bid, "host": None, "port": None, "rack": None, "live": False, "reachable": None})
            b["live"] = bid in live
            out.append(b)
        return out

    def judged(self, brokers: list[Broker], at_ms: int) -> list[Broker]:
        """ZooKeeper-triggered records: how each down broker went (collectors/departures.py), judged on
        the mirror's leaders and ISRs, the freshest view of the controller's writes; a broker that
        just deregistered is judged here first, not left with the last full poll's verdict."""
        for b in brokers:
            b.pop("departure", None)
            b.pop("controlled_shutdown", None)
            b.pop("down_since_ms", None)
        self.parts.brokers.departures.annotate(brokers, self._partitions, at_ms, full=False)
        return brokers

    def _partitions(self) -> Iterable[dict[str, Any]]:
        zk = self.parts.zk
        assert zk is not None
        for topic in zk.topics():
            for pid, replicas in (zk.assignment(topic) or {}).items():
                zs = zk.partition(topic, pid)
                if zs is not None:
                    yield {"replicas": replicas, "leader": zs.leader, "isr": zs.isr}
