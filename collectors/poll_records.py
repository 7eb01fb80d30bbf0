"""A poll's records: the cluster record and one topic record per topic, built from the Metadata answer
and the offsets round with what the poller's parts remember (a quiet partition the short way, a topic passed
over while nothing about it moved: collectors/topic_views.py `Frozen`)."""

from __future__ import annotations

import logging
import time
from typing import Any, cast

from collectors import offsets
from collectors.broker_book import broker_list
from collectors.departures import holders
from collectors.poller_parts import PollerParts
from collectors.reachability import refusing
from collectors.records import cluster_record, summarized, topic_record
from collectors.topic_views import Frozen, topic_view
from collectors.wire import MdAnswer, MdBroker, MdTopic
from schemas.observation import STALE_METADATA
from schemas.quiet import is_quiet
from schemas.typed import Observation, Partition, Quorum, TopicObservation

log = logging.getLogger(__name__)

SOURCE = "admin"  # the records' `source`
# a broker registered in ZooKeeper that no Metadata answer named yet: nothing is known of it (and it is falsy)
_UNKNOWN = cast(MdBroker, {})


class PollRecords:
    """The records of a poll that reached the cluster, built from the poller's parts."""

    short_way = True  # PartitionMemory.still_quiet for steady partitions (off: every partition the full way)

    def __init__(self, parts: PollerParts) -> None:
        self.parts = parts

    def build(self, md: MdAnswer, topics: list[MdTopic], observed_at_ms: int, found: offsets.OffsetsRound,
              poll_id: int, quorum: Quorum | None = None, unreachable: set[int] | frozenset[int] = frozenset(),
              capabilities: dict[str, bool] | None = None, elr_known: bool = False) -> list[Observation]:
        """The poll's records from every topic Metadata listed (`topics`): the cluster record counts them
        all; topic records only for this process's share of them (all unless `--topic-share`)."""
        my = self.parts
        book, views, settings, configs = my.brokers, my.views, my.settings, my.configs
        everything, topics = topics, my.mine(topics)
        live = {b["node_id"]: b for b in md["brokers"]}
        book.saw(live)
        zk_live = my.zk.live_brokers() if my.zk is not None else None
        if zk_live is not None:  # registered in ZooKeeper: what the controller acts on
            live = {bid: book.known.get(bid) or _UNKNOWN for bid in zk_live}
        live = self._mixed_liveness(live)
        referenced = views.referenced(everything)
        brokers = broker_list(book.known, live, referenced, found.asked, book.answering(found, unreachable),
                              book.answer_s, book.steady_s)
        controller: int | None = md.get("controller_id")
        if zk_live is not None:
            controller = my.zk.controller()  # type: ignore[union-attr]
        cs = cluster_record(
            my.cluster.name, SOURCE, poll_id, observed_at_ms,
            controller_id=controller if controller is not None and controller >= 0 else None, brokers=brokers,
            topic_count=len(everything), partition_count=sum(len(t["partitions"]) for t in everything),
            replica_lag_time_max_ms=configs.replica_lag_time_max_ms,
            leader_imbalance_per_broker_percentage=configs.leader_imbalance_pct,
            reassignment_in_progress=my.zk.reassigning if zk_live is not None else None,  # type: ignore[union-attr]
            quorum=quorum, denied=self._denied(), capabilities=capabilities or {},
            migration=(my.zk_state.migration_phase(), my.zk_state.migration_phase_since_ms())
            if my.zk_state is not None else None,
        )
        records: list[Observation] = [cs]
        book.last_state = cs["cluster_state"]
        held: set[int] = set()  # departures.holders() of every partition, gathered on the way
        leads: dict[int, int] = {}  # broker -> partitions it leads, for broker_view
        snapshot_ms = max(1, int(settings.assignment_snapshot_s * 1000))
        quiet, window = my.quiet, my.quiet.window_ms(configs.replica_lag_time_max_ms)
        nothing: dict[Any, Any] = {}
        annotate, still_quiet, now = my.memory.annotate, my.memory.still_quiet, time.monotonic()
        elr_known = my.zk is None and elr_known
        side_moves, applied = my.side.moves, my.carried.applied
        published_of, published_at = my.published.epochs, my.published.at
        offline_now: dict[tuple[str, int], list[int]] = {}
        # Topics passed over (Frozen): only where the short way runs and the offsets round knows what moved
        moved, frozen, memory = found.moved, views.frozen, my.memory
        freeze = self.short_way and my.zk is None and settings.leave_out_quiet and moved is not None
        world = (frozenset(live), frozenset(unreachable), window, elr_known, configs.replica_lag_time_max_ms)
        if not freeze or world != views.frozen_world:
            frozen.clear()
        views.frozen_world = world
        moving = {k[0] for k in side_moves} | {k[0] for k in applied} if side_moves or applied else set()
        views.frozen_topics = 0

        def record(name: str, partitions: list[Partition] | tuple[()], min_isr: int | None, unclean: bool | None,
                   remote_storage: bool, assignment: str | None) -> TopicObservation:
            rec = topic_record(
                my.cluster.name, SOURCE, poll_id, observed_at_ms, topic=name, live_brokers=live,
                partitions=partitions, min_insync_replicas=min_isr, unclean_leader_election=unclean,
                replica_lag_time_max_ms=configs.replica_lag_time_max_ms, unreachable_brokers=unreachable,
                remote_storage=remote_storage)
            rec["topic_state"]["assignment"] = assignment
            return rec
        for t in topics:
            min_isr, unclean = configs.of(t["topic"])
            name = t["topic"]
            parts: list[Partition] = []
            part_leos: list[dict[int, int]] = []  # each partition's replica LEOs, in the order of `parts`
            zk_assignment = my.zk.assignment(name) if my.zk is not None else None
            zk_moves = my.zk.moves(name) if my.zk is not None and my.zk.connected else None
            before = views.assignments.get(name) or nothing
            signature: dict[int, list[int]] = {}
            hw_of, start_of = found.hw.get(name, nothing).get, found.log_start.get(name, nothing).get
            refused = found.refused.get(name)
            any_refused = refused is not None or memory.any_refusal
            zk_on = my.zk is not None
            remote_storage = name in configs.tiered
            local_of, remote_of = found.local_start.get(name, nothing).get, found.remote.get(name, nothing).get
            leo_by_broker = found.leo.get(name, nothing)
            # assignment history (pipelines/history.py): on every change, and each topic once per
            # assignment_snapshot_s
            snapshot = views.snapshot_due(name, observed_at_ms, snapshot_ms)
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
                    topic_load, topic_leads, topic_held = views.views[name][0]
                    for b, n in topic_leads.items():
                        leads[b] = leads.get(b, 0) + n
                    held |= topic_held
                    rec = record(name, (), min_isr, unclean, remote_storage, None)
                    records.append(summarized(rec, len(t["partitions"]), topic_load, []))
                    views.frozen_topics += 1
                    continue
                del frozen[name]
            idle_before, quick = memory.idle, 0
            # The short way (PartitionMemory.still_quiet) for a record that may leave quiet partitions out:
            # not where ZooKeeper's view overlays the brokers' (the full way reads both), nor for a record
            # that carries every partition anyway (a snapshot, a tiered topic, an assignment changed: without
            # ZooKeeper's overlay, the replica lists as decoded are the signature compared below)
            short = (self.short_way and my.zk is None and settings.leave_out_quiet and not remote_storage and not snapshot
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
                        if newer is None or (epoch is not None and newer[0] <= epoch):  # (else no_older's case: the full way)
                            elr = p.get("elr")
                            lk_elr = p.get("last_known_elr") if elr is not None else ([] if elr_known else None)
                            if elr is None and elr_known:
                                elr = []
                            if still_quiet(key, leader, epoch, isr, replicas, elr, lk_elr, hw_of(pid), leo_by_broker,
                                           observed_at_ms, window, quiet):
                                if epoch is not None:  # as no_older would
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
                my.overlay_zk(name, part, zk_assignment)
                my.published.no_older(name, part, key, now)
                # the controller's answer first: the mirror's watch on the topic znode can fire after the
                # brokers' metadata already lists the adding replicas (one false under-replicated poll)
                my.carried.carry(name, part, side_moves.get(key) or (zk_moves or nothing).get(pid),
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
            kept = views.views.get(name) if steady == count else None
            if kept is not None and kept[1] == count:
                view = kept[0]
            else:
                view = topic_view(t["partitions"], parts)
                views.views[name] = (view, count)
            topic_load, topic_leads, topic_held = view
            for b, n in topic_leads.items():
                leads[b] = leads.get(b, 0) + n
            held |= topic_held
            changed = views.assignments.get(name) != signature
            views.assignments[name] = signature
            # Those records carry every partition; the others leave the quiet ones out (schemas/quiet.py),
            # whose replica offsets are then never built
            whole = changed or snapshot or remote_storage or not settings.leave_out_quiet
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
                                      [s for p in t["partitions"] if (s := memory.seen((name, p["partition"]))) is not None],
                                      [(name, p["partition"]) for p in t["partitions"]])
        # How each down broker went: judged on the partitions as published (ZooKeeper mode: leader and
        # ISR as the controller wrote them, which the brokers' metadata caches trail; its brokers' live
        # flags come from ZooKeeper too), so one consistent view. The cluster record holds these dicts.
        # `held` covers every partition, so the partitions themselves are never asked for (a split
        # cluster's share 1 speaks for the cluster: the other shares' topics count too).
        share = my.share
        if share is not None and share.speaks_for_cluster and len(topics) < len(everything):
            held |= holders(p for t in everything if not share.holds(t["topic"]) for p in t["partitions"])
        book.departures.annotate(brokers, lambda: (), observed_at_ms, held=held)
        book.view = {b["id"]: (b["live"] and b["id"] not in unreachable, leads.get(b["id"], 0)) for b in brokers}
        polled = {t["topic"] for t in topics}
        views.forget_unpolled(polled)
        # What is remembered of partitions no longer listed goes: looked for when the topics or their sizes
        # changed, and every 64 polls (quick records may have published a partition no poll lists)
        layout = [(t["topic"], len(t["partitions"])) for t in topics]
        if layout != views.layout or poll_id % 64 == 0:
            present = {(t["topic"], md_p["partition"]) for t in topics for md_p in t["partitions"]}
            my.memory.forget_missing(present)
            my.published.forget_missing(present)
        views.layout = layout
        my.dirs.offline = offline_now
        my.published.settle()  # its epochs are in my.published now
        return records

    def _mixed_liveness(self, live: dict[int, MdBroker]) -> dict[int, MdBroker]:
        """A migration's dual writes with brokers still in ZooKeeper mode: the Metadata those brokers
        answer (the KRaft controller's UpdateMetadata) goes on listing a ZooKeeper-mode broker whose
        session expired. ZooKeeper is right about its own brokers; a broker out of it (in KRaft mode
        now, or dead) counts live only while it accepts connections (reachability.refusing)."""
        zk = self.parts.zk_state
        if zk is None or not zk.kraft_in_charge:
            return live
        registered = zk.live_brokers()
        if not registered:  # every broker in KRaft mode: their Metadata leaves fenced brokers out
            return live
        out = {bid: (m["host"], m["port"]) for bid, m in live.items()
               if bid not in registered and m.get("host") and m.get("port")}
        dead = refusing(out) if out else set()
        return {bid: m for bid, m in live.items() if bid not in dead}

    def _denied(self) -> list[str]:
        """The ACLs this poll found missing (logged once per change: collectors/access.py AccessState)."""
        denied = set(self.parts.configs.denied)
        if self.parts.side.quorum_denied:
            denied.add("DESCRIBE on CLUSTER (DescribeQuorum)")
        return self.parts.access.denied(denied)
