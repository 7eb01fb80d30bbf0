"""Admin API source: one Metadata request per poll (all topics), then every replica's LEO and every
leader's HW (collectors/offsets.py, two requests per broker), topic configs on a slower cadence.

Works for ZooKeeper-mode and KRaft clusters alike: the Metadata response holds the live brokers
(those registered and, in KRaft, unfenced), the active controller, and for every partition its
leader (-1 when there is none), leader epoch, replicas in assignment order, ISR and offline replicas.
On KRaft brokers that offer them, DescribeTopicPartitions adds each partition's ELR and last known
ELR, and DescribeQuorum the controller quorum's state (collectors/kraft.py).
"""

from __future__ import annotations

import logging
import math
import threading
import time
import zlib
from typing import Any, Iterable

from collectors import (access, capabilities, gc_pause, kraft, log_dirs, metadata, offsets, reassignments, tiered,
                        topic_share, wire)
from collectors.departures import Departures, holders
from collectors.disk_watch import DiskWatch
from collectors.kraft_protocol import DESCRIBE_QUORUM_KEY, DESCRIBE_TOPIC_PARTITIONS_KEY
from collectors.memory import PartitionMemory
from collectors.metadata import ask
from collectors.reachability import Probes, Reachability, refusing
from collectors.records import cluster_record, summarized, topic_record
from collectors.side_channel import Notes, SideChannel
from collectors.topic_configs import TopicConfigs
from collectors.zookeeper import ZkState
from foundation.backoff import Retry
from foundation.config import ClusterConfig, CollectorConfig
from schemas.quiet import Thresholds, is_quiet, load_of

log = logging.getLogger(__name__)

NO_OLDER_WINDOW_S = 30.0  # far beyond a metadata propagation between the controller and the brokers
PROBE_SILENT_S = 0.05  # a probe unanswered this long counts as a hint of silence (a healthy broker answers in ms)


def topic_view(listed: list[dict[str, Any]], built: list[dict[str, Any]]
               ) -> tuple[list[list[int]], dict[int, int], set[int]]:
    """A topic's broker_load (schemas/quiet.py), partitions led per broker and departures.holders(), from
    every partition as published: those `built` by the full way (ZooKeeper's overlay, _no_older) in
    place of their `listed` (decoded) form."""
    rebuilt = {part["partition"]: part for part in built}
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


def _later_election(part: dict[str, Any], epoch: int, replicas: Any) -> bool:
    """`part` (a Metadata answer's partition) comes from a later election than `epoch`, for the same
    replicas: a topic deleted and created again starts its epochs from 0 on another assignment."""
    mine = part.get("leader_epoch")
    return mine is not None and mine > epoch and set(part["isr"]) | ({part["leader"]} - {-1}) <= set(replicas)


class Frozen:
    """A topic whose every partition was steady and idle at the poll that built it (no replica behind
    the leader, the HW at the leader's LEO): while the brokers' answers about it stay the same bytes
    (the same objects back from collectors/wire.py and offsets.py), the world around it the same and its
    keyframe interval not over, the next poll would judge every partition as that one did. Such a
    poll only re-stamps what `still_quiet` would have re-stamped (`seen`, `keys`) and publishes the
    same summary: nothing per partition is read, compared or built."""

    __slots__ = ("parts", "config", "start_ms", "end_ms", "seq", "seen", "keys")

    def __init__(self, parts: list[dict[str, Any]], config: tuple[Any, ...], interval: tuple[int, int], seq: int,
                 seen: list[Any], keys: list[tuple[str, int]]) -> None:
        self.parts = parts  # Metadata's decoded partitions (the same object while the bytes are the same)
        self.config = config  # min ISR, unclean election, remote storage: what the record says of the topic
        self.start_ms, self.end_ms = interval  # the keyframe interval it was built in
        self.seq = seq  # the offsets round it was last judged at (OffsetsRound.seq)
        self.seen, self.keys = seen, keys  # its partitions' memory (collectors/memory.py Seen) and keys


class AdminSource:
    """Polls one cluster. Construct validates nothing and opens nothing; the first poll connects."""

    source = "admin"
    short_way = True  # PartitionMemory.still_quiet for steady partitions (off: every partition the full way)

    def __init__(self, cluster: ClusterConfig, settings: CollectorConfig, zk: ZkState | None = None,
                 quiet: Thresholds | None = None) -> None:
        self.cluster = cluster
        self.settings = settings
        # the pipeline's thresholds: which partitions a topic record may leave out (schemas/quiet.py)
        self.quiet = quiet or Thresholds()
        self._zk_state = zk  # ZooKeeper mode: leader, epoch, ISR and live brokers come from the controller's writes
        self._admin: Any = None
        self._poll_id = 0
        self._poll_lock = threading.Lock()
        self._known_brokers: dict[int, dict[str, Any]] = {}  # every broker seen live since start
        self._configs = TopicConfigs(cluster.name, settings.config_refresh_s, settings.request_timeout_ms)
        # (topic, partition) -> (leader_epoch, leader, isr) last published: never go back (_no_older)
        self._published: dict[tuple[str, int], tuple[int, int, list[int]]] = {}
        # ... and when (time.monotonic()): apart, so a steady partition's poll stores the poll's one float
        # and allocates nothing (200k new tuples a poll were 200k objects a poll for the cyclic collector)
        self._published_at: dict[tuple[str, int], float] = {}
        # this poll's Metadata answer from its arrival until its records register their epochs (_records):
        # quick records stamped meanwhile must not publish an older state (see _metadata_arrived)
        self._arrived: dict[str, list[dict[str, Any]]] | None = None
        self._degraded = False
        self._last_node: Any = None
        self._live_last: dict[int, dict[str, Any]] = {}  # brokers alive at the last successful poll
        self._live_last_ids: set[int] | None = None  # their ids, for brokers_changed
        self._memory = PartitionMemory(settings.history_keyframe_s, settings.history_lag_floor_s)
        self._offset_requests = offsets.Requests()  # the previous poll's ListOffsets requests, reused when unchanged
        self._plans = offsets.Plans()  # each topic's part of the offsets plan, kept while unchanged
        self._replica_sets: dict[str, tuple[Any, set[int]]] = {}  # topic -> (partitions, every replica named)
        self._topic_blocks = wire.TopicBlocks()  # the last Metadata answer's healthy topics, reused when unchanged
        self._frozen: dict[str, Frozen] = {}  # topics the next poll may pass over (Frozen)
        self._frozen_world: tuple[Any, ...] | None = None  # what the frozen topics were judged against
        self.frozen_topics = 0  # how many topics the last poll passed over (benchmarks, tests)
        self._last_cluster_state: dict[str, Any] | None = None  # for the ZooKeeper-triggered cluster record
        # topic -> partition -> replicas as last published (a new dict per topic per poll, never changed after)
        self._assignments: dict[str, dict[int, list[int]]] = {}
        self._snapshot_slot: dict[str, int] = {}  # topic -> its assignment_snapshot_s interval last recorded
        # topic -> (broker_load, leaders per broker, holders) as the last poll had them (topic_view), and
        # how many partitions it had then
        self._topic_view: dict[str, tuple[tuple[list[list[int]], dict[int, int], set[int]], int]] = {}
        self._layout: list[tuple[str, int]] = []  # (topic, partition count) as the last poll listed them
        # (topic, partition) -> Metadata's offline replicas at the last poll, where any: the ZooKeeper
        # mirror's records carry them (ZooKeeper holds no log-dir state), so a partition whose copies sit
        # on a failed log directory reads so in every record, not only in the polls'
        self._offline_replicas: dict[tuple[str, int], list[int]] = {}
        # the live brokers that reported a failed log directory when the last poll asked (None: not asked,
        # no live broker's replica was offline); the mirror's records carry it with the offline replicas
        self._failed_dir_brokers: list[int] | None = None
        self._dirs_refused = False  # the last sampling of the directories met an error answer (an ACL)
        self._disks = DiskWatch(settings.log_dir_poll_s, settings.log_dir_window_s, settings.log_dir_horizon_s)
        self._dir_requests = log_dirs.PendingDirs()
        self._notes = Notes(cluster.name)  # side requests' failures, logged once
        self._side = SideChannel(cluster, settings.request_timeout_ms, self._notes)  # DescribeQuorum, moves
        self._reach = Reachability(settings.unreachable_after_s)
        # between polls, each live broker asked a tiny question (probe()); a probe waits as long as a
        # silence takes to count, so it never closes a connection a poll would still wait on
        self._probes = Probes(max(settings.request_timeout_ms, int(settings.unreachable_after_s * 1000)),
                              settings.reach_probe_s)
        self._problem: access.AccessProblem | None = None  # why the last poll failed (logged once per change)
        self._access = Retry(access.ACCESS_BACKOFF)  # polls refused for credentials, TLS or protocol, in a row
        self._denied_logged: frozenset[str] = frozenset()
        self.last_offsets: offsets.OffsetsRound | None = None  # for benchmarks and logs
        self._elr_known = False  # this poll asked DescribeTopicPartitions (KRaft 3.7+): ELR known, empty unless said
        self._applied: reassignments.Moves = {}  # the moves the last records carried (reassignments.annotate)
        self._departures = Departures()  # how each down broker went down (controlled shutdown or not)
        self._capabilities: dict[str, bool] = {}  # what the brokers let krm ask (collectors/capabilities.py)
        # broker -> (reachable, partitions it leads) as the last poll saw it: the collector's own /metrics
        # (collectors/stats.py) says it even while the observations path is down
        self.broker_view: dict[int, tuple[bool, int]] = {}
        # `krm collect --topic-share I/N`: only these topics' offsets and records (collectors/topic_share.py)
        self._share = topic_share.parse(settings.topic_share) if settings.topic_share else None

    @property
    def zk(self) -> ZkState | None:
        """The ZooKeeper mirror while ZooKeeper holds the metadata. None once a KRaft controller does
        (a migration's dual writes, then for good): KRaft brokers never register in ZooKeeper, so
        the cluster is read as a KRaft cluster is, through the Admin API."""
        zk = self._zk_state
        return zk if zk is not None and not zk.kraft_in_charge else None

    def poll(self) -> list[dict[str, Any]]:
        """One poll: a `cluster` record, then one `topic` record per topic. Never raises for an
        unreachable cluster: the failure is itself the observation (a cluster record with `error`)."""
        if self._zk_state is not None:
            self._zk_state.note_phase()
        with gc_pause.paused():
            records = self._poll()
        return self._share.stamp(records) if self._share is not None else records

    def _mine(self, topics: list[dict[str, Any]]) -> list[dict[str, Any]]:
        """The topics this process polls: its share's (`--topic-share`), else all."""
        share = self._share
        return topics if share is None else [t for t in topics if share.holds(t["topic"])]

    def _poll(self) -> list[dict[str, Any]]:
        with self._poll_lock:  # quick_records (another thread) numbers its records from the same sequence
            self._poll_id += 1
            poll_id = self._poll_id
        if self._problem is not None and not self._access.due():
            return self._failed_poll(poll_id)  # refused credentials: wait before the broker is asked again
        try:
            try:
                admin = self._client()
                md = self._metadata(admin)
            except Exception:  # noqa: BLE001 - the client's view is stale: start over once, asking
                self._close()      # first the brokers that were alive at the last poll but did not just fail
                failed = self._last_node
                admin = self._client(avoid=failed)
                md = self._metadata(admin)
            topics = [t for t in md["topics"] if t["error_code"] == 0]
            observed_at_ms = self._metadata_arrived(topics)
        except Exception as e:  # noqa: BLE001 - any client failure becomes an observation
            self._close()
            self._failed(access.explain(e, self.cluster.name, self.cluster.bootstrap_servers, self.cluster.security,
                                        timeout_s=self.settings.request_timeout_ms / 1000))
            return self._failed_poll(poll_id)
        if self._degraded:
            log.warning("cluster %s reachable again", self.cluster.name)
            self._degraded = False
            self._problem = None
            self._access.succeeded()
        self._capabilities = capabilities.of(admin._client.get_api_versions(), kraft=self.zk is None)
        if self._disks.poll_s > 0:  # the directories' sizes (DescribeLogDirs v4): an ACL refusal says no too
            self._capabilities["log_dir_sizes"] = (log_dirs.supports_v4(admin._client.get_api_versions())
                                                   and not self._dirs_refused)
        if self._configs.tiered:  # only said where it matters: a cluster with tiered topics
            self._capabilities["tiered_offsets"] = tiered.supported(admin._client.get_api_versions())
        mine = self._mine(topics)  # the topics this process asks about and publishes (all unless split)
        if self._configs.may_ask(self.zk is None or self.zk.connected):
            self._configs.refresh_or_back_off(admin._client, self._last_node, [t["topic"] for t in mine],
                                              [b["node_id"] for b in md["brokers"]])
        if self.zk is None:
            self._kraft_view(admin, mine)
        # to the controller in ZooKeeper mode (a broker answers NOT_CONTROLLER otherwise), else to the
        # broker that answered the Metadata request (KRaft brokers forward it)
        controller = md.get("controller_id")
        zk_controller = self.zk is not None and controller is not None and controller >= 0
        if self._capabilities.get("reassignments", True):  # a broker before 2.4 cannot answer it
            self._side.ask_moves(admin._client, controller if zk_controller else self._last_node)  # type: ignore[arg-type]
        live = {b["node_id"] for b in md["brokers"]}
        zk_live = self.zk.live_brokers() if self.zk is not None else None
        if zk_live is not None:
            live &= zk_live  # a broker whose registration vanished is not asked (it cannot answer)
        self._note_live(zk_live if zk_live is not None else live)
        if log_dirs.announced(admin._client.get_api_versions()) and self._disks.due(time.monotonic()):
            # answered during the offsets round, read after it
            self._dir_requests.send(admin._client, live, log_dirs.supports_v4(admin._client.get_api_versions()),
                                    self.settings.request_timeout_ms, time.monotonic())
        replica_of, leader_of = self._plans.plan(mine, live)
        tiered_of = self._tiered_plan(mine, live)
        try:
            found = offsets.fetch(admin._client, replica_of, leader_of, self.settings.offsets_timeout_ms / 1000,
                                  self._offset_requests, tiered_of, self._reach.judged_at())
        except Exception as e:  # noqa: BLE001 - metadata without offsets is still worth publishing
            log.warning("cluster %s: offsets not fetched (%s)", self.cluster.name, e)
            found = offsets.OffsetsRound()
        self.last_offsets = found
        unreachable = self._unreachable(found)
        if log.isEnabledFor(logging.DEBUG):
            log.debug("cluster %s poll %d: metadata from broker %s, offsets asked %s answered %s, unreachable %s",
                      self.cluster.name, poll_id, self._last_node, sorted(found.asked), sorted(found.answered),
                      sorted(unreachable))
        quorum = self._side.harvest_quorum(found.answered | {self._last_node}) if self.zk is None else None
        self._side.harvest_moves()
        records = self._records(md, topics, observed_at_ms, found, poll_id, quorum, unreachable)
        self._sample_dirs(records)
        self._ask_dirs(admin, records, found)
        return records

    def _sample_dirs(self, records: list[dict[str, Any]]) -> None:
        """The directories' answers in since the last poll (sent every `log_dir_poll_s` before the offsets
        round: collectors/disk_watch.py); the cluster record's brokers carry the last word of each, and a
        down broker whose disks were full when it went says so."""
        brokers = records[0]["cluster_state"]["brokers"]
        refused: set[int] = set()
        answers = self._dir_requests.harvest(refused)
        if answers or refused:
            if refused and not self._dirs_refused:
                log.warning("cluster %s: brokers %s refuse DescribeLogDirs (krm needs DESCRIBE on the cluster): no "
                            "disk series or fill forecast for them", self.cluster.name, sorted(refused))
            self._dirs_refused = bool(refused)
        self._disks.note(answers, {b["id"] for b in brokers if b["live"]},
                         {b["id"] for b in brokers if b["live"] and b.get("reachable") is not False}, time.monotonic())
        for b in brokers:
            if (dirs := self._disks.dirs(b["id"])) is not None:
                b["log_dirs"] = dirs
            if (not b["live"] or b.get("reachable") is False) and (full := self._disks.went_full(b["id"])):
                b["disk_full"], b["log_dirs"] = True, full  # its departure's likely cause (collectors/disk_watch.py)

    def _ask_dirs(self, admin: Any, records: list[dict[str, Any]], found: offsets.OffsetsRound) -> None:
        """Where Metadata lists a live broker's replica offline, ask that broker whether a log directory
        failed (collectors/log_dirs.py): the topic records then say which brokers report one, and the
        offline rule names a failed directory on that evidence only, never on a restart's moment."""
        if not self._offline_replicas:
            self._failed_dir_brokers = None
            return
        live = {b["id"] for b in records[0]["cluster_state"]["brokers"] if b["live"]}
        suspects = log_dirs.offline_on_live(self._offline_replicas, live)
        silent = found.asked - found.answered  # just waited for in the offsets round: not asked again
        versions = admin._client.get_api_versions()
        ask = suspects - silent if log_dirs.announced(versions) else set()
        reports = log_dirs.describe_dirs(admin._client, ask, self.settings.offsets_timeout_ms,
                                         log_dirs.supports_v4(versions)) if ask else {}
        said = {b for b, dirs in reports.items() if any(d.failed for d in dirs)}
        for b in sorted(suspects - set(reports)):
            log.debug("cluster %s: broker %s lists offline replicas and did not say why", self.cluster.name, b)
        # a suspect not asked or not answering this time (a loaded broker) keeps its last word: its failed
        # directory does not turn into "a leader not elected yet" for one poll
        failed = sorted(said | (suspects - set(reports)) & set(self._failed_dir_brokers or ()))
        # (a broker dead at this poll has no failed directory on record: if the mirror finds it registered
        # again before the next poll, its replicas still listed offline are a restart's, not a disk's)
        self._failed_dir_brokers = failed
        log_dirs.with_failed_dirs(records, failed)

    def _metadata_arrived(self, topics: list[dict[str, Any]]) -> int:
        """Stamp the poll with the Metadata answer's arrival and hold the answer for quick records
        until this poll's records are built (after the offsets round, which takes a while). A quick
        record stamped in between would otherwise republish the mirror's older state after this
        poll's newer one (an OFFLINE_PARTITION reopened for 1 ms at a broker's return: the fault loops).
        Stamp and hand-over under the lock quick_records stamps under, so the two are ordered."""
        by_topic = None
        if self.zk is not None:  # quick records exist only with the ZooKeeper mirror
            by_topic = {t["topic"]: t["partitions"] for t in topics}
        with self._poll_lock:
            self._arrived = by_topic
            return int(time.time() * 1000)

    def _failed(self, problem: access.AccessProblem) -> None:
        """Log the cause once per change; after a refusal (credentials, TLS, protocol) wait before
        connecting again, longer each time (access.ACCESS_BACKOFF): no login storm on the brokers."""
        if self._problem is None or problem.message != self._problem.message:
            log.warning("%s", problem.message)
        self._problem = problem
        self._degraded = True
        if problem.reason in access.ACCESS_REASONS:
            self._access.failed()
        else:
            self._access.succeeded()

    def _failed_poll(self, poll_id: int) -> list[dict[str, Any]]:
        """What a poll that reached no broker still knows. ZooKeeper mode: the mirror's view of every
        topic with ZooKeeper's live brokers. With the whole cluster down no controller is left to
        write `leader: -1`, so the state znodes keep naming dead leaders: offline by Kafka's own
        definition (leader not alive, MetadataCache / kafka-topics --unavailable-partitions), which
        only these records can show (the fault loops' cluster-down: no OFFLINE_PARTITION for the
        minutes every broker was down).

        These records open incidents and resolve none (`resolves` false): a registration alone does
        not make a partition available. As a cluster restarts, a leader's broker registers before
        the new controller, which has not seen it yet, writes `leader: -1` and then elects it a
        moment later: resolved by the registration, each partition raised a second incident for
        that moment (the fault loops' cluster-down). Its outage's incident now stays open until a
        poll reaches a broker again (quick records meanwhile resolve nothing either)."""
        live = self.zk.live_brokers() if self.zk is not None else None
        self.broker_view = {b: (False, n) for b, (_, n) in self.broker_view.items()}  # none answered this poll
        # Without ZooKeeper nobody said who is live: the next poll that reaches a broker sees every
        # broker come back (the whole cluster may have restarted meanwhile).
        self._note_live(live if live is not None else set())
        if live is None:  # KRaft, or krm's own ZooKeeper session is down too
            return [self._failure_record(poll_id)]
        topics = self.zk.topics()  # type: ignore[union-attr]
        # Who is registered is known without a broker: BROKER_DOWN opens during a whole-cluster
        # outage, so a restart resolves it broker by broker instead of raising it for the brokers
        # not yet back (the fault loops' cluster-down). Reachability is unknown: nobody answered.
        held = {r for t in topics for rs in (self.zk.assignment(t) or {}).values() for r in rs}  # type: ignore[union-attr]
        brokers = [{**b, "reachable": None} for b in self._zookeeper_brokers(live, held)]
        # judged on ZooKeeper's state as the quick records are: the last broker of a whole-cluster stop
        # could hand nothing over, and only these records look at it once the polls fail
        self._judged(brokers, int(time.time() * 1000))
        failure = self._failure_record(poll_id, brokers)
        mine = topics if self._share is None else [t for t in topics if self._share.holds(t)]
        return [failure, *self._mirror_topics(mine, poll_id, failure["observed_at_ms"], live, None, resolves=False)]

    def _failure_record(self, poll_id: int, brokers: list[dict[str, Any]] | None = None) -> dict[str, Any]:
        problem = self._problem
        assert problem is not None
        return cluster_record(self.cluster.name, self.source, poll_id, int(time.time() * 1000), controller_id=None,
                              brokers=brokers or [], topic_count=0, partition_count=0, error=problem.message,
                              error_reason=problem.reason)

    def _zookeeper_brokers(self, live: set[int], held: Iterable[int] = ()) -> list[dict[str, Any]]:
        """Every broker krm knows (the last full poll's, ZooKeeper's registered ones, `held`: replica
        holders), live when registered in ZooKeeper; the rest as the last full poll saw it."""
        last = self._last_cluster_state
        known = {b["id"]: b for b in last["brokers"]} if last is not None else {}
        return [{**known.get(bid, {"id": bid, "host": None, "port": None, "rack": None, "reachable": None}),
                 "live": bid in live} for bid in sorted(set(known) | live | set(held))]

    def _judged(self, brokers: list[dict[str, Any]], at_ms: int) -> list[dict[str, Any]]:
        """ZooKeeper-triggered records: how each down broker went (collectors/departures.py), judged on
        the mirror's leaders and ISRs, the freshest view of the controller's writes; a broker that
        just deregistered is judged here first, not left with the last full poll's verdict."""
        for b in brokers:
            for key in ("departure", "controlled_shutdown", "down_since_ms"):
                b.pop(key, None)
        self._departures.annotate(brokers, self._mirror_partitions, at_ms, full=False)
        return brokers

    def _mirror_partitions(self) -> Iterable[dict[str, Any]]:
        zk = self.zk
        assert zk is not None
        for topic in zk.topics():
            for pid, replicas in (zk.assignment(topic) or {}).items():
                zs = zk.partition(topic, pid)
                if zs is not None:
                    yield {"replicas": replicas, "leader": zs.leader, "isr": zs.isr}

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

    def brokers_changed(self) -> bool:
        """The fast path where there are no ZooKeeper watches (KRaft): a Metadata request for no
        topic (the live brokers only: a few hundred bytes at any cluster size) to the broker that
        answered the last poll. True when its live brokers differ from that poll's:
        a broker fenced, unfenced or registered, which the controller writes in the same batch as
        the leader and ISR changes it causes (ReplicationControlManager.handleBrokerFenced), so the
        caller polls at once instead of at the next interval. A failure also says "poll now"."""
        if self._admin is None or self._live_last_ids is None:
            return False
        client, node, sent_at = self._admin._client, self._last_node, time.monotonic()
        try:
            live = metadata.live_brokers(client, node, min(self.settings.request_timeout_ms, 500))
        except Exception as e:  # noqa: BLE001 - the broker that answered last does not: a full poll finds out
            log.debug("cluster %s: live-broker check to broker %s failed after %.2fs: %r", self.cluster.name, node,
                      time.monotonic() - sent_at, e)
            self._probes.note_unanswered(node, sent_at, e)  # timed out: its silence counts from this request
            return True
        return live != self._live_last_ids

    def probe(self) -> bool:
        """Between polls: a brokers-only Metadata request to each broker live at the last poll that has
        none outstanding (collectors/reachability.py Probes). A broker nobody can reach any more is then
        silent from its last contact, not from the next poll's request: its partitions are named that
        much sooner. Nothing is judged here; the next poll's offsets round confirms.
        True when a broker the last poll called unreachable answered: poll now, its partitions are
        cleared without waiting for the next interval."""
        admin, live = self._admin, self._live_last_ids
        if admin is None or not live:
            return False
        try:
            back = self._probes.tick(admin._client, live, metadata.brokers_request(admin._client))
        except Exception as e:  # noqa: BLE001 - the next poll finds out what is wrong
            log.debug("cluster %s: reachability probe not sent: %s", self.cluster.name, e)
            return False
        return not back.isdisjoint(self._reach.declared)

    def close(self) -> None:
        self._close()

    # ------------------------------------------------------------------ internals

    def _records(self, md: dict[str, Any], topics: list[dict[str, Any]], observed_at_ms: int,
                 found: offsets.OffsetsRound, poll_id: int, quorum: dict[str, Any] | None = None,
                 unreachable: set[int] | frozenset[int] = frozenset()) -> list[dict[str, Any]]:
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
        brokers: list[dict[str, Any]] = [
            {"id": bid, "host": b.get("host") if b else None, "port": b.get("port") if b else None,
             "rack": b.get("rack") if b else None, "live": bid in live,
             "reachable": (bid in found.answered) if bid in found.asked else None}
            for bid in sorted(set(self._known_brokers) | referenced)
            for b in [live.get(bid) or self._known_brokers.get(bid)]
        ]
        controller = md.get("controller_id")
        if zk_live is not None:
            controller = self.zk.controller()  # type: ignore[union-attr]
        records = [cluster_record(
            self.cluster.name, self.source, poll_id, observed_at_ms,
            controller_id=controller if controller is not None and controller >= 0 else None, brokers=brokers,
            topic_count=len(everything), partition_count=sum(len(t["partitions"]) for t in everything),
            replica_lag_time_max_ms=self._configs.replica_lag_time_max_ms,
            leader_imbalance_per_broker_percentage=self._configs.leader_imbalance_pct,
            reassignment_in_progress=self.zk.reassigning if zk_live is not None else None,  # type: ignore[union-attr]
            quorum=quorum, denied=self._denied(), capabilities=self._capabilities,
            migration=(self._zk_state.migration_phase(), self._zk_state.migration_phase_since_ms())
            if self._zk_state is not None else None,
        )]
        self._last_cluster_state = records[0]["cluster_state"]
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
                   assignment: str | None) -> dict[str, Any]:
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
            parts = []
            part_leos: list[dict[int, int]] = []  # each partition's replica LEOs, in the order of `parts`
            zk_assignment = self.zk.assignment(name) if self.zk is not None else None
            zk_moves = self.zk.moves(name) if self.zk is not None and self.zk.connected else None
            before = self._assignments.get(name) or nothing
            signature: dict[int, list[int]] = {}
            hw_of, start_of = found.hw.get(name, nothing).get, found.log_start.get(name, nothing).get
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
                part = {"partition": pid, "leader": p["leader"], "leader_epoch": p.get("leader_epoch"),
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
                part["log_start_offset"] = start_of(pid)
                if remote_storage:
                    part["local_log_start_offset"], part["highest_remote_offset"] = local_of(pid), remote_of(pid)
                leos = {}
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
            loud = parts if whole else []
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

    def _note_live(self, live: set[int]) -> None:
        self._reach.note_live(live)

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
        return self._reach.unreachable(found, self._known_brokers)

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

    def _kraft_view(self, admin: Any, topics: list[dict[str, Any]]) -> None:
        """ELR per partition (overlaid on `topics`, in place) and the DescribeQuorum question, to the
        broker that answered the Metadata request. A failure keeps the Metadata view and is logged
        once: ELR absent means "not known", and the detectors then judge by the ISR alone."""
        client = admin._client
        versions = client.get_api_versions()
        timeout = self.settings.request_timeout_ms

        def send(request: Any) -> Any:
            return ask(client, self._last_node, request, timeout)

        self._elr_known = False
        if kraft.supports(versions, DESCRIBE_TOPIC_PARTITIONS_KEY):
            blocks = self._topic_blocks  # (a topic it remembers is healthy: no ELR to ask for)
            wanted = [t["topic"] for t in topics
                      if not blocks.healthy(t["topic"], t["partitions"]) and kraft.needs_elr(t["partitions"])]
            overlay = (self._notes.call("DescribeTopicPartitions", lambda: kraft.describe_partitions(send, wanted))
                       if wanted else {})
            if overlay is not None:
                # every other topic has neither ELR nor last known ELR (needs_elr): _records says so
                self._elr_known = True
                kraft.apply_elr(topics, overlay, set(wanted))
        if kraft.supports(versions, DESCRIBE_QUORUM_KEY):
            self._side.ask_quorum(client, self._last_node)

    def _carry_move(self, topic: str, part: dict[str, Any], move: Any, before: Any,
                    key: tuple[str, int] | None = None) -> None:
        """`before`: the partition's replicas as the last full poll published them; `key`: (topic, partition)."""
        key = key or (topic, part["partition"])
        applied = reassignments.annotate(part, move, self._applied.get(key), before)
        if applied:
            self._applied[key] = applied
        else:
            self._applied.pop(key, None)

    def _no_older(self, topic: str, part: dict[str, Any], key: tuple[str, int] | None = None,
                  now: float | None = None) -> None:
        """A record never goes back in leader epoch. The two views krm reads trail each other by a
        few ms: at a broker's return the brokers' metadata named the new leader while the mirror's
        watch for that partition had not fired yet, and a quick record for another partition's
        change, stamped later, republished the old state (an OFFLINE_PARTITION reopened for 2 ms).
        Leader epochs only grow (the controller bumps one at every election), so a part older
        than what was already published takes the published leader and ISR."""
        epoch = part.get("leader_epoch")
        if epoch is None:
            return
        key = key or (topic, part["partition"])
        newer = self._published.get(key)
        now = now if now is not None else time.monotonic()
        # Only for the lag between the views (ms to a metadata propagation), and only with the leader and
        # ISR among the replicas: a topic deleted and created again starts its epochs from 0.
        if (newer is not None and newer[0] > epoch and now - self._published_at.get(key, -math.inf) < NO_OLDER_WINDOW_S
                and set(newer[2]) | ({newer[1]} - {-1}) <= set(part["replicas"])):
            part.update(leader_epoch=newer[0], leader=newer[1], isr=list(newer[2]))
            part.pop("zk_mtime_ms", None)
        else:
            self._published[key] = (epoch, part["leader"], part["isr"])  # (never changed in place)
            self._published_at[key] = now

    def _overlay_zk(self, topic: str, part: dict[str, Any], zk_assignment: dict[int, tuple[int, ...]] | None) -> None:
        """Leader, epoch and ISR as the controller wrote them to ZooKeeper, which the brokers'
        metadata caches (and so the Admin API) trail by up to a metadata propagation."""
        if self.zk is None:
            return
        zs = self.zk.partition(topic, part["partition"])
        epoch = part.get("leader_epoch")
        if zs is not None and zs.leader_epoch >= (epoch if epoch is not None else -1):
            part.update(leader=zs.leader, leader_epoch=zs.leader_epoch, isr=list(zs.isr), zk_mtime_ms=zs.mtime_ms)
            replicas = (zk_assignment or {}).get(part["partition"])
            if replicas:  # the controller's own assignment beside its leader and ISR: one consistent view
                part["replicas"] = list(replicas)  # (the Admin API's can trail a reassignment's writes)

    def quick_records(self, topics: set[str]) -> list[dict[str, Any]]:
        """Metadata-only records of `topics` straight from the ZooKeeper mirror, published as soon as a
        state znode changes: leader, epoch, ISR (with the znode's mtime) and the assignment, no
        offsets (`has_offsets` false, so they judge and resolve only metadata incidents). A cluster
        record comes first, with ZooKeeper's live brokers and controller (reachability and sizes from
        the last full poll), so /metrics never shows a partition offline for a broker still "up".
        While no broker answers krm's polls, they resolve nothing either (see `_failed_poll`)."""
        if self.zk is None:
            return []
        live = self.zk.live_brokers()
        if live is None:
            return []
        if self._share is not None:
            topics = {t for t in topics if self._share.holds(t)}
        with self._poll_lock:
            self._poll_id += 1
            poll_id = self._poll_id
            at = int(time.time() * 1000)
            arrived = self._arrived  # a full poll's Metadata, newer than its records so far
        out = []
        last = self._last_cluster_state
        if last is not None:
            out.append(cluster_record(
                self.cluster.name, "zookeeper", poll_id, at, controller_id=self.zk.controller(),
                brokers=self._judged(self._zookeeper_brokers(live), at),
                topic_count=last["topic_count"], partition_count=last["partition_count"],
                replica_lag_time_max_ms=last.get("replica_lag_time_max_ms"),
                leader_imbalance_per_broker_percentage=last.get("leader_imbalance_per_broker_percentage"),
                reassignment_in_progress=self.zk.reassigning))
        out += self._mirror_topics(topics, poll_id, at, live, arrived, resolves=not self._degraded)
        return self._share.stamp(out) if self._share is not None else out

    def _mirror_topics(self, topics: Iterable[str], poll_id: int, at: int, live: set[int],
                       arrived: dict[str, list[dict[str, Any]]] | None, resolves: bool = True) -> list[dict[str, Any]]:
        """Metadata-only topic records of `topics` from the ZooKeeper mirror (see quick_records)."""
        assert self.zk is not None
        out = []
        for topic in sorted(topics):
            assignment = self.zk.assignment(topic)
            if not assignment:
                continue
            parts = []
            moves = self.zk.moves(topic)
            before = self._assignments.get(topic) or {}
            pending = {p["partition"]: p for p in (arrived or {}).get(topic, [])}
            for pid, replicas in sorted(assignment.items()):
                zs = self.zk.partition(topic, pid)
                if zs is None:
                    continue
                part = {"partition": pid, "leader": zs.leader, "leader_epoch": zs.leader_epoch,
                        "replicas": list(replicas), "isr": list(zs.isr), "zk_mtime_ms": zs.mtime_ms}
                if (offline := self._offline_replicas.get((topic, pid))) is not None:
                    part["offline_replicas"] = offline
                newer = pending.get(pid)
                if newer is not None and _later_election(newer, zs.leader_epoch, replicas):
                    part.update(leader=newer["leader"], leader_epoch=newer["leader_epoch"], isr=list(newer["isr"]))
                    part.pop("zk_mtime_ms")
                self._no_older(topic, part)  # this partition's watch may not have fired yet
                self._carry_move(topic, part, moves.get(pid), before.get(pid))
                parts.append(self._memory.mark_change(topic, part))
            min_isr, unclean = self._configs.of(topic)
            rec = topic_record(self.cluster.name, "zookeeper", poll_id, at, topic=topic, live_brokers=live,
                               partitions=parts, min_insync_replicas=min_isr, unclean_leader_election=unclean,
                               replica_lag_time_max_ms=self._configs.replica_lag_time_max_ms, has_offsets=False,
                               resolves=resolves)
            # as the last poll found them, with the offline replicas it carries above (a broker dead then and
            # registered now reports no failed directory: its replicas there are a restart's moment)
            log_dirs.with_failed_dirs([rec], self._failed_dir_brokers or [])
            # A topic no full poll has recorded yet, whole in the mirror (every partition's state written):
            # its first layout goes to the history's assignments table now. A topic created and grown
            # between two full polls would otherwise be recorded first with its grown size, and a restarted
            # pipeline would take its expansion for a topic laid out that way (pipelines/assignment_history.py).
            if topic not in self._assignments and len(parts) == len(assignment):
                rec["topic_state"]["assignment"] = "changed"
            out.append(rec)
        return out

    def _metadata(self, admin: Any) -> dict[str, Any]:
        try:  # the brokers that left a probe unanswered since the last poll (probe()): asked last, and
            probed = self._probes.silent(admin._client, PROBE_SILENT_S)  # silent since that probe
        except Exception as e:  # noqa: BLE001 - the poll's own requests still find a silent broker
            log.debug("cluster %s: probes not read: %s", self.cluster.name, e)
            probed = {}
        silent = self.last_offsets.unanswered if self.last_offsets is not None else set()
        timed_out: dict[int, float] = {}
        try:
            self._last_node, md = metadata.metadata(admin._client, self._last_node, silent | set(probed),
                                                    self.settings.request_timeout_ms, timed_out, self._topic_blocks)
        finally:
            since = dict(timed_out)
            for b, t in probed.items():
                since[b] = min(t, since.get(b, t))
            self._reach.note_silent(since)
        return md

    def _client(self, avoid: Any = None) -> Any:
        if self._admin is None:
            seen = [f"{b['host']}:{b['port']}" for bid, b in sorted(self._live_last.items()) if bid != avoid]
            self._admin = metadata.admin_client(self.cluster, self.settings, seen)
        return self._admin

    def _close(self) -> None:
        self._side.close()
        if self._admin is not None:
            try:
                self._admin.close()
            except Exception:  # noqa: BLE001 - closing a broken client must not mask the real error
                pass
            self._admin = None
