"""A poll's records: the cluster record and one topic record per topic, built from the Metadata answer
and the offsets round with what the poller remembers (a quiet partition the short way, a topic passed
over while nothing about it moved: `Frozen`)."""

from __future__ import annotations

import logging
import time
import zlib
from typing import Any

from collectors import access, offsets
from collectors.departures import holders
from collectors.poller_state import Frozen, PollerState
from collectors.reachability import refusing
from collectors.records import cluster_record, summarized, topic_record
from schemas.observation import STALE_METADATA
from schemas.quiet import is_quiet, load_of
from schemas.typed import Broker, Observation, Partition, Quorum, TopicObservation

log = logging.getLogger(__name__)


def topic_view(listed: list[dict[str, Any]], built: list[Partition]
               ) -> tuple[list[list[int]], dict[int, int], set[int]]:
    """A topic's broker_load (schemas/quiet.py), partitions led per broker and departures.holders(), from
    every partition as published: those `built` by the full way (ZooKeeper's overlay, _no_older) in
    place of their `listed` (decoded) form."""
    rebuilt: dict[int, Any] = {part["partition"]: part for part in built}
    pairs: list[tuple[int, list[int]]] = []
    leads: dict[int, int] = {}
    held: set[int] = set()
    for p in listed:
        p = rebuilt.get(p["partition"], p)
        leader, replicas = p["leader"], p["replicas"]
        pairs.append((leader, replicas))
        leads[leader] = leads.get(leader, 0) + 1
        if len(replicas) > 1:
            if leader >= 0:
                held.add(leader)
            held.update(p["isr"])
    return load_of(pairs), leads, held


class PollRecords(PollerState):
    """The records of a poll that reached the cluster."""

    def _records(self, md: dict[str, Any], topics: list[dict[str, Any]], observed_at_ms: int,
                 found: offsets.OffsetsRound, poll_id: int, quorum: Quorum | None = None,
                 unreachable: set[int] | frozenset[int] = frozenset()) -> list[Observation]:
        """The poll's records from every topic Metadata listed (`topics`): the cluster record counts them
        all; topic records only for this process's share of them (all unless `--topic-share`)."""
        everything, topics = topics, self._mine(topics)
        live = {b["node_id"]: b for b in md["brokers"]}
        for bid, b in live.items():
            self._known_brokers[bid] = b
        self._live_last = live
        self._live_last_ids = set(live)
        zk_live = self.zk.live_brokers() if self.zk is not None else None
        if zk_live is not None:  # registered in ZooKeeper: what the controller acts on
            live = {bid: self._known_brokers.get(bid, {}) for bid in zk_live}
        live = self._mixed_liveness(live)
        referenced = self._referenced(everything)
        # a broker that left the offsets round unanswered but answered the answer-time prober within
        # unreachable_after_s answers, late: reachable (BROKER_SLOW's), not BROKER_DOWN's
        now_s, after_s = time.monotonic(), self.settings.unreachable_after_s
        answers = found.answered | {b for b, t in self._contact.items() if now_s - t < after_s and b not in unreachable}
        brokers: list[Broker] = [
            {"id": bid, "host": b.get("host") if b else None, "port": b.get("port") if b else None,
             "rack": b.get("rack") if b else None, "live": bid in live,
             "reachable": (bid in answers) if bid in found.asked else None}
            for bid in sorted(set(self._known_brokers) | referenced)
            for b in [live.get(bid) or self._known_brokers.get(bid)]
        ]
        for broker in brokers:  # how late each answers the probes now (BROKER_SLOW reads it)
            if (answer_s := self._answer_s.get(broker["id"])) is not None:
                broker["answer_ms"] = round(answer_s * 1000, 1)
        controller = md.get("controller_id")
        if zk_live is not None:
            controller = self.zk.controller()  # type: ignore[union-attr]
        cs = cluster_record(
            self.cluster.name, self.source, poll_id, observed_at_ms,
            controller_id=controller if controller is not None and controller >= 0 else None, brokers=brokers,
            topic_count=len(everything), partition_count=sum(len(t["partitions"]) for t in everything),
            replica_lag_time_max_ms=self._configs.replica_lag_time_max_ms,
            leader_imbalance_per_broker_percentage=self._configs.leader_imbalance_pct,
            reassignment_in_progress=self.zk.reassigning if zk_live is not None else None,  # type: ignore[union-attr]
            quorum=quorum, denied=self._denied(), capabilities=self._capabilities,
            migration=(self._zk_state.migration_phase(), self._zk_state.migration_phase_since_ms())
            if self._zk_state is not None else None,
        )
        records: list[Observation] = [cs]
        self._last_cluster_state = cs["cluster_state"]
        held: set[int] = set()  # departures.holders() of every partition, gathered on the way
        leads: dict[int, int] = {}  # broker -> partitions it leads, for broker_view
        snapshot_ms = max(1, int(self.settings.assignment_snapshot_s * 1000))
        quiet, window = self.quiet, self.quiet.window_ms(self._configs.replica_lag_time_max_ms)
        nothing: dict[Any, Any] = {}
        annotate, still_quiet, now = self._memory.annotate, self._memory.still_quiet, time.monotonic()
        elr_known = self.zk is None and self._elr_known
        side_moves, applied, published_of, published_at = self._side.moves, self._applied, self._published, self._published_at
        offline_now: dict[tuple[str, int], list[int]] = {}
        # Topics passed over (Frozen): only where the short way runs and the offsets round knows what moved
        moved, frozen, memory = found.moved, self._frozen, self._memory
        freeze = self.short_way and self.zk is None and self.settings.leave_out_quiet and moved is not None
        world = (frozenset(live), frozenset(unreachable), window, elr_known, self._configs.replica_lag_time_max_ms)
        if not freeze or world != self._frozen_world:
            frozen.clear()
        self._frozen_world = world
        moving = {k[0] for k in side_moves} | {k[0] for k in applied} if side_moves or applied else set()
        self.frozen_topics = 0

        def record(name: str, partitions: Any, min_isr: int | None, unclean: bool | None, remote_storage: bool,
                   assignment: str | None) -> TopicObservation:
            rec = topic_record(
                self.cluster.name, self.source, poll_id, observed_at_ms, topic=name, live_brokers=live,
                partitions=partitions, min_insync_replicas=min_isr, unclean_leader_election=unclean,
                replica_lag_time_max_ms=self._configs.replica_lag_time_max_ms, unreachable_brokers=unreachable,
                remote_storage=remote_storage)
            rec["topic_state"]["assignment"] = assignment
            return rec
        for t in topics:
            min_isr, unclean = self._configs.of(t["topic"])
            name = t["topic"]
            parts: list[Partition] = []
            part_leos: list[dict[int, int]] = []  # each partition's replica LEOs, in the order of `parts`
            zk_assignment = self.zk.assignment(name) if self.zk is not None else None
            zk_moves = self.zk.moves(name) if self.zk is not None and self.zk.connected else None
            before = self._assignments.get(name) or nothing
            signature: dict[int, list[int]] = {}
            hw_of, start_of = found.hw.get(name, nothing).get, found.log_start.get(name, nothing).get
            refused = found.refused.get(name)
            any_refused = refused is not None or memory.any_refusal
            zk_on = self.zk is not None
            remote_storage = name in self._configs.tiered
            local_of, remote_of = found.local_start.get(name, nothing).get, found.remote.get(name, nothing).get
            leo_by_broker = found.leo.get(name, nothing)
            # assignment history (pipelines/history.py): on every change, and each topic once per
            # assignment_snapshot_s, at an offset of its own (not every topic in one poll)
            slot = (observed_at_ms + zlib.crc32(name.encode())) // snapshot_ms
            snapshot = self._snapshot_slot.get(name, slot) != slot
            self._snapshot_slot[name] = slot
            fz = frozen.get(name) if freeze else None
            if fz is not None:
                if (fz.parts is t["partitions"] and name not in moved and fz.seq == found.seq - 1  # type: ignore[operator]
                        and fz.start_ms <= observed_at_ms < fz.end_ms and not snapshot and name not in moving
                        and fz.config == (min_isr, unclean, remote_storage)):
                    fz.seq = found.seq
                    for seen in fz.seen:  # what still_quiet stamps on an idle partition
                        seen.at_ms = observed_at_ms
                    for key in fz.keys:
                        published_at[key] = now
                    topic_load, topic_leads, topic_held = self._topic_view[name][0]
                    for b, n in topic_leads.items():
                        leads[b] = leads.get(b, 0) + n
                    held |= topic_held
                    rec = record(name, (), min_isr, unclean, remote_storage, None)
                    records.append(summarized(rec, len(t["partitions"]), topic_load, []))
                    self.frozen_topics += 1
                    continue
                del frozen[name]
            idle_before, quick = memory.idle, 0
            # The short way (PartitionMemory.still_quiet) for a record that may leave quiet partitions out:
            # not where ZooKeeper's view overlays the brokers' (the full way reads both), nor for a record
            # that carries every partition anyway (a snapshot, a tiered topic, an assignment changed: without
            # ZooKeeper's overlay, the replica lists as decoded are the signature compared below)
            short = (self.short_way and self.zk is None and self.settings.leave_out_quiet and not remote_storage and not snapshot
                     and len(before) == len(t["partitions"])
                     and all(before.get(p["partition"]) == p["replicas"] for p in t["partitions"]))
            steady = 0  # partitions that took the short way, or the full way with leader, ISR and replicas as then
            for p in t["partitions"]:
                pid = p["partition"]
                key = (name, pid)
                replicas = p["replicas"]
                if short:
                    leader, isr = p["leader"], p["isr"]
                    # (an ISR member judged unreachable may stall the HW: HW_STALL's short window, the full way)
                    if (leader >= 0 and leader in live and len(isr) == len(replicas)
                            and (not unreachable or (leader not in unreachable and unreachable.isdisjoint(isr)))
                            and not p.get("offline_replicas") and key not in side_moves and key not in applied):
                        epoch = p.get("leader_epoch")
                        newer = published_of.get(key) if epoch is not None else None
                        if newer is None or newer[0] <= epoch:  # (else _no_older's case: the full way)
                            elr = p.get("elr")
                            lk_elr = p.get("last_known_elr") if elr is not None else ([] if elr_known else None)
                            if elr is None and elr_known:
                                elr = []
                            if still_quiet(key, leader, epoch, isr, replicas, elr, lk_elr, hw_of(pid), leo_by_broker,
                                           observed_at_ms, window, quiet):
                                if epoch is not None:  # as _no_older would
                                    if newer is None or newer[0] != epoch or newer[1] != leader or newer[2] != isr:
                                        published_of[key] = (epoch, leader, isr)
                                    published_at[key] = now
                                steady += 1
                                quick += 1
                                continue
                # the decoded lists are this poll's own and no one changes a list in place: not copied
                part: Partition = {"partition": pid, "leader": p["leader"], "leader_epoch": p.get("leader_epoch"),
                        "replicas": replicas, "isr": p["isr"], "offline_replicas": p.get("offline_replicas") or []}
                if part["offline_replicas"]:
                    offline_now[key] = part["offline_replicas"]
                if "elr" in p:
                    part["elr"], part["last_known_elr"] = p["elr"], p["last_known_elr"]
                elif elr_known:
                    part["elr"], part["last_known_elr"] = [], []
                self._overlay_zk(name, part, zk_assignment)
                self._no_older(name, part, key, now)
                # the controller's answer first: the mirror's watch on the topic znode can fire after the
                # brokers' metadata already lists the adding replicas (one false under-replicated poll)
                self._carry_move(name, part, side_moves.get(key) or (zk_moves or nothing).get(pid),
                                 before.get(pid), key)
                part["high_watermark"] = hw_of(pid)
                # the brokers' metadata (what clients read) names another leader than the controller elected:
                # clients are sent to the old one until the controller's UpdateMetadata reaches the brokers
                stale = zk_on and p["leader"] != part["leader"] and part["leader"] >= 0
                if any_refused or stale:  # PARTITION_UNAVAILABLE leader_not_serving reads it
                    code = refused.get(pid) if refused is not None else None
                    error = (STALE_METADATA if stale else offsets.REFUSALS.get(code)
                             if code is not None and part["high_watermark"] is None else None)
                    since = memory.refusal_since(key, error, observed_at_ms)
                    if error is not None:
                        part["leader_error"], part["leader_error_since_ms"] = error, since
                part["log_start_offset"] = start_of(pid)
                if remote_storage:
                    part["local_log_start_offset"], part["highest_remote_offset"] = local_of(pid), remote_of(pid)
                leos: dict[int, int] = {}
                for r in replicas:
                    of_r = leo_by_broker.get(r)
                    if of_r is not None and (o := of_r.get(pid)) is not None:
                        leos[r] = o
                parts.append(annotate(name, part, observed_at_ms, leos))
                if "changed" not in part:  # (a keyframe, offsets moved, ...): as the last poll for the view below
                    steady += 1
                part_leos.append(leos)
                if not short:
                    signature[pid] = part["replicas"]
            if short:  # every replica list as the last poll's (checked above; the full way changes none here)
                signature = before
            # what the topic adds to broker_load, broker_view and departures' holders: the last poll's
            # when every partition has the leader, ISR and replica list it had then (the short way, or
            # the full way without `changed`: annotate compares them with the last poll's)
            count = len(t["partitions"])
            kept = self._topic_view.get(name) if steady == count else None
            if kept is not None and kept[1] == count:
                view = kept[0]
            else:
                view = topic_view(t["partitions"], parts)
                self._topic_view[name] = (view, count)
            topic_load, topic_leads, topic_held = view
            for b, n in topic_leads.items():
                leads[b] = leads.get(b, 0) + n
            held |= topic_held
            changed = self._assignments.get(name) != signature
            self._assignments[name] = signature
            # Those records carry every partition; the others leave the quiet ones out (schemas/quiet.py),
            # whose replica offsets are then never built
            whole = changed or snapshot or remote_storage or not self.settings.leave_out_quiet
            loud: list[Partition] = parts if whole else []
            for part, leos in zip(parts, part_leos):
                if whole or not is_quiet(part, leos, live, unreachable, observed_at_ms, window, quiet):
                    part["replica_offsets"] = [{"broker": r, "log_end_offset": o} for r, o in leos.items()]
                    if not whole:
                        loud.append(part)
            rec = record(name, loud, min_isr, unclean, remote_storage,
                         "changed" if changed else ("snapshot" if snapshot else None))
            if not whole:
                summarized(rec, len(t["partitions"]), topic_load, loud)
            records.append(rec)
            if freeze and not whole and quick == count and memory.idle - idle_before == count:
                frozen[name] = Frozen(t["partitions"], (min_isr, unclean, remote_storage),
                                      memory.keyframe_interval(name, observed_at_ms), found.seq,
                                      [memory.seen((name, p["partition"])) for p in t["partitions"]],
                                      [(name, p["partition"]) for p in t["partitions"]])
        # How each down broker went: judged on the partitions as published (ZooKeeper mode: leader and
        # ISR as the controller wrote them, which the brokers' metadata caches trail; its brokers' live
        # flags come from ZooKeeper too), so one consistent view. The cluster record holds these dicts.
        # `held` covers every partition, so the partitions themselves are never asked for (a split
        # cluster's share 1 speaks for the cluster: the other shares' topics count too).
        if self._share is not None and self._share.speaks_for_cluster and len(topics) < len(everything):
            share = self._share
            held |= holders(p for t in everything if not share.holds(t["topic"]) for p in t["partitions"])
        self._departures.annotate(brokers, lambda: (), observed_at_ms, held=held)
        self.broker_view = {b["id"]: (b["live"] and b["id"] not in unreachable, leads.get(b["id"], 0)) for b in brokers}
        polled = {t["topic"] for t in topics}
        for topic in [name for name in self._assignments if name not in polled]:
            del self._assignments[topic]
            self._snapshot_slot.pop(topic, None)
            self._topic_view.pop(topic, None)
            frozen.pop(topic, None)
        # What is remembered of partitions no longer listed goes: looked for when the topics or their sizes
        # changed, and every 64 polls (quick records may have published a partition no poll lists)
        layout = [(t["topic"], len(t["partitions"])) for t in topics]
        if layout != self._layout or poll_id % 64 == 0:
            present = {(t["topic"], p["partition"]) for t in topics for p in t["partitions"]}
            self._memory.forget_missing(present)
            for gone in [k for k in self._published if k not in present]:
                del self._published[gone]
                self._published_at.pop(gone, None)
        self._layout = layout
        self._offline_replicas = offline_now
        with self._poll_lock:
            self._arrived = None  # its epochs are in _published now
        return records

    def _referenced(self, topics: list[dict[str, Any]]) -> set[int]:
        """Every broker a replica list names, each topic's set kept while its partitions are the same
        object (collectors/wire.py hands an unchanged topic's back)."""
        out: set[int] = set()
        kept = {}
        for t in topics:
            name, parts = t["topic"], t["partitions"]
            known = self._replica_sets.get(name)
            if known is None or known[0] is not parts:
                known = (parts, {r for p in parts for r in p["replicas"]})
            kept[name] = known
            out |= known[1]
        self._replica_sets = kept
        return out

    def _mixed_liveness(self, live: dict[int, dict[str, Any]]) -> dict[int, dict[str, Any]]:
        """A migration's dual writes with brokers still in ZooKeeper mode: the Metadata those brokers
        answer (the KRaft controller's UpdateMetadata) goes on listing a ZooKeeper-mode broker whose
        session expired. ZooKeeper is right about its own brokers; a broker out of it (in KRaft mode
        now, or dead) counts live only while it accepts connections (reachability.refusing)."""
        zk = self._zk_state
        if zk is None or not zk.kraft_in_charge:
            return live
        registered = zk.live_brokers()
        if not registered:  # every broker in KRaft mode: their Metadata leaves fenced brokers out
            return live
        out = {bid: (m["host"], m["port"]) for bid, m in live.items()
               if bid not in registered and m.get("host") and m.get("port")}
        dead = refusing(out) if out else set()
        return {bid: m for bid, m in live.items() if bid not in dead}

    def _unreachable(self, found: offsets.OffsetsRound) -> set[int]:
        """Registered brokers clients cannot use now (collectors/reachability.py)."""
        return self._reach.unreachable(found, self._known_brokers, self._contact)

    def _tiered_plan(self, topics: list[dict[str, Any]], live: set[int]) -> dict[int, list[offsets.TopicPartition]]:
        """Leader -> its partitions of tiered topics, when the brokers can say (collectors/tiered.py)."""
        if not self._configs.tiered or not self._capabilities.get("tiered_offsets"):
            return {}
        out: dict[int, list[offsets.TopicPartition]] = {}
        for t in topics:
            if t["topic"] in self._configs.tiered:
                for p in t["partitions"]:
                    if p["leader"] in live:
                        out.setdefault(p["leader"], []).append((t["topic"], p["partition"]))
        return out

    def _denied(self) -> list[str]:
        """The ACLs this poll found missing; a change is logged once, in one line."""
        denied = set(self._configs.denied)
        if self._side.quorum_denied:
            denied.add("DESCRIBE on CLUSTER (DescribeQuorum)")
        if frozenset(denied) != self._denied_logged:
            problem = access.denials(self.cluster.name, self.cluster.security, denied)
            if problem is not None:
                log.warning("%s", problem.message)
            else:
                log.warning("cluster %s: the ACLs krm missed are granted now", self.cluster.name)
            self._denied_logged = frozenset(denied)
        return sorted(denied)
