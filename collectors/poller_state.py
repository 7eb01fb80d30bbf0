"""What one cluster's poller remembers between polls, and what it must never publish against it.

The state is shared by the poll (collectors/admin.py), the records built from it
(collectors/poll_records.py) and the ZooKeeper mirror's records (collectors/zk_mirror_records.py): each
adds its methods to `PollerState`, and `AdminSource` is all of them. Here too what every record of a
partition goes through: ZooKeeper's overlay, a move carried, and never an older leader epoch than published.
"""

from __future__ import annotations

import math
import threading
import time
from typing import Any

from collectors import access, log_dirs, offsets, reassignments, topic_share, wire
from collectors.departures import Departures
from collectors.disk_watch import DiskWatch
from collectors.memory import PartitionMemory
from collectors.answer_times import AnswerTimes
from collectors.reachability import Probes, Reachability
from collectors.side_channel import Notes, SideChannel
from collectors.topic_configs import TopicConfigs
from collectors.zookeeper import ZkState
from foundation.backoff import Retry
from foundation.config import ClusterConfig, CollectorConfig
from schemas.quiet import Thresholds
from schemas.typed import ClusterState, Partition


NO_OLDER_WINDOW_S = 30.0  # far beyond a metadata propagation between the controller and the brokers


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


class PollerState:
    """One cluster's poller: its state; construct validates nothing and opens nothing."""

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
        self._last_cluster_state: ClusterState | None = None  # for the ZooKeeper-triggered cluster record
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
        # how late each broker answers, on a thread and client of its own (collectors/answer_times.py)
        self._answer_times = AnswerTimes(cluster, settings.reach_probe_s,
                                         max(settings.request_timeout_ms, int(3000 * settings.unreachable_after_s)))
        self._contact: dict[int, float] = {}  # broker -> when it was last heard from (time.monotonic())
        self._answer_s: dict[int, float] = {}  # broker -> how late it answers now (the median round trip)
        self._problem: access.AccessProblem | None = None  # why the last poll failed (logged once per change)
        self._access = Retry(access.ACCESS_BACKOFF)  # polls refused for credentials, TLS or protocol, in a row
        self._denied_logged: frozenset[str] = frozenset()
        self.last_offsets: offsets.OffsetsRound | None = None  # for benchmarks and logs
        self.poll_phases: list[tuple[str, float]] = []  # the last poll's steps: (name, time.monotonic() at its end)
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

    def _mine(self, topics: list[dict[str, Any]]) -> list[dict[str, Any]]:
        """The topics this process polls: its share's (`--topic-share`), else all."""
        share = self._share
        return topics if share is None else [t for t in topics if share.holds(t["topic"])]

    def _note_live(self, live: set[int]) -> None:
        self._reach.note_live(live)

    def _carry_move(self, topic: str, part: Partition, move: Any, before: Any,
                    key: tuple[str, int] | None = None) -> None:
        """`before`: the partition's replicas as the last full poll published them; `key`: (topic, partition)."""
        key = key or (topic, part["partition"])
        applied = reassignments.annotate(part, move, self._applied.get(key), before)
        if applied:
            self._applied[key] = applied
        else:
            self._applied.pop(key, None)

    def _no_older(self, topic: str, part: Partition, key: tuple[str, int] | None = None,
                  now: float | None = None) -> None:
        """A record never goes back in leader epoch: the brokers' metadata and the ZooKeeper mirror trail
        each other by a few ms, and epochs only grow, so a part older than what was already published
        takes the published leader and ISR (docs/collector.md)."""
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
            part["leader_epoch"], part["leader"], part["isr"] = newer[0], newer[1], list(newer[2])
            part.pop("zk_mtime_ms", None)
        else:
            self._published[key] = (epoch, part["leader"], part["isr"])  # (never changed in place)
            self._published_at[key] = now

    def _overlay_zk(self, topic: str, part: Partition, zk_assignment: dict[int, tuple[int, ...]] | None) -> None:
        """Leader, epoch and ISR as the controller wrote them to ZooKeeper, which the brokers'
        metadata caches (and so the Admin API) trail by up to a metadata propagation."""
        if self.zk is None:
            return
        zs = self.zk.partition(topic, part["partition"])
        epoch = part.get("leader_epoch")
        if zs is not None and zs.leader_epoch >= (epoch if epoch is not None else -1):
            part["leader"], part["leader_epoch"], part["isr"] = zs.leader, zs.leader_epoch, list(zs.isr)
            part["zk_mtime_ms"] = zs.mtime_ms
            replicas = (zk_assignment or {}).get(part["partition"])
            if replicas:  # the controller's own assignment beside its leader and ISR: one consistent view
                part["replicas"] = list(replicas)  # (the Admin API's can trail a reassignment's writes)
