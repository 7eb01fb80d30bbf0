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
import time
from typing import Any

from collectors import access, capabilities, gc_pause, kraft, log_dirs, metadata, offsets, tiered
from collectors.kafka_client import AdminClient, NodeId
from collectors.kraft_protocol import DESCRIBE_QUORUM_KEY, DESCRIBE_TOPIC_PARTITIONS_KEY
from collectors.metadata import ask
from collectors.poll_records import SOURCE, PollRecords
from collectors.poller_parts import PollerParts
from collectors.records import cluster_record
from collectors.wire import MdAnswer, MdTopic, TopicBlocks
from collectors.zk_mirror_records import ZkMirror
from collectors.zookeeper import ZkState
from foundation.config import ClusterConfig, CollectorConfig
from schemas.quiet import Thresholds
from schemas.typed import Broker, ClusterObservation, ClusterState, Observation, Quorum

log = logging.getLogger(__name__)

PROBE_SILENT_S = 0.05  # a probe unanswered this long counts as a hint of silence (a healthy broker answers in ms)


class AdminSource:
    """Polls one cluster: the poll's order and its failures, and the checks between polls (brokers_changed,
    probe). What it remembers is in its parts (collectors/poller_parts.py); its records are built by
    collectors/poll_records.py and, from ZooKeeper alone, collectors/zk_mirror_records.py."""

    source = SOURCE

    def __init__(self, cluster: ClusterConfig, settings: CollectorConfig, zk: ZkState | None = None,
                 quiet: Thresholds | None = None) -> None:
        self.parts = PollerParts(cluster, settings, zk, quiet)
        self.records = PollRecords(self.parts)
        self.mirror = ZkMirror(self.parts)
        self.cluster, self.settings = cluster, settings
        self._admin: AdminClient | None = None  # opened by the first poll
        self._last_node: NodeId | None = None  # the broker that answered the last Metadata request
        self._capabilities: dict[str, bool] = {}  # what the brokers let krm ask (collectors/capabilities.py)
        self._elr_known = False  # this poll asked DescribeTopicPartitions (KRaft 3.7+): ELR known, empty unless said
        self._offset_requests = offsets.Requests()  # the previous poll's ListOffsets requests, reused when unchanged
        self._plans = offsets.Plans()  # each topic's part of the offsets plan, kept while unchanged
        self._topic_blocks = TopicBlocks()  # the last Metadata answer's healthy topics, reused when unchanged
        self.last_offsets: offsets.OffsetsRound | None = None  # for benchmarks and logs
        self.poll_phases: list[tuple[str, float]] = []  # the last poll's steps: (name, time.monotonic() at its end)

    @property
    def zk(self) -> ZkState | None:
        return self.parts.zk

    @property
    def broker_view(self) -> dict[int, tuple[bool, int]]:
        """broker -> (reachable, partitions it leads) as the last poll saw it (collectors/stats.py)."""
        return self.parts.brokers.view

    @property
    def frozen_topics(self) -> int:
        return self.parts.views.frozen_topics

    def quick_records(self, topics: set[str]) -> list[Observation]:
        """The ZooKeeper mirror's records of `topics` (collectors/zk_mirror_records.py)."""
        return self.mirror.quick_records(topics)

    def poll(self) -> list[Observation]:
        """One poll: a `cluster` record, then one `topic` record per topic. Never raises for an
        unreachable cluster: the failure is itself the observation (a cluster record with `error`)."""
        my = self.parts
        if my.zk_state is not None:
            my.zk_state.note_phase()
        with gc_pause.paused():
            records = self._poll()
        return my.share.stamp(records) if my.share is not None else records

    def _poll(self) -> list[Observation]:
        my = self.parts
        poll_id = my.published.next_poll()  # quick_records (another thread) numbers its records from the same sequence
        phases = self.poll_phases = [("start", time.monotonic())]
        if my.access.waiting():
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
            # the answer goes to quick records until this poll's records are built (collectors/published.py)
            node = self._last_node  # the broker that answered it
            assert node is not None
            observed_at_ms = my.published.arrive({t["topic"]: t["partitions"] for t in topics}
                                                 if self.zk is not None else None)
            phases.append(("metadata", time.monotonic()))
        except Exception as e:  # noqa: BLE001 - any client failure becomes an observation
            self._close()
            my.access.failed(access.explain(e, self.cluster.name, self.cluster.bootstrap_servers, self.cluster.security,
                                        timeout_s=self.settings.request_timeout_ms / 1000))
            return self._failed_poll(poll_id)
        my.access.succeeded()
        self._capabilities = capabilities.of(admin._client.get_api_versions(), kraft=self.zk is None)
        if my.dirs.disks.poll_s > 0:  # the directories' sizes (DescribeLogDirs v4): an ACL refusal says no too
            self._capabilities["log_dir_sizes"] = (log_dirs.supports_v4(admin._client.get_api_versions())
                                                   and not my.dirs.refused)
        if my.configs.tiered:  # only said where it matters: a cluster with tiered topics
            self._capabilities["tiered_offsets"] = tiered.supported(admin._client.get_api_versions())
        mine = my.mine(topics)  # the topics this process asks about and publishes (all unless split)
        if my.configs.may_ask(self.zk is None or self.zk.connected):
            my.configs.refresh_or_back_off(admin._client, node, [t["topic"] for t in mine],
                                              [b["node_id"] for b in md["brokers"]])
        if self.zk is None:
            self._kraft_view(admin, mine, node)
        phases.append(("configs", time.monotonic()))
        # to the controller in ZooKeeper mode (a broker answers NOT_CONTROLLER otherwise), else to the
        # broker that answered the Metadata request (KRaft brokers forward it)
        controller = md.get("controller_id")
        zk_controller = self.zk is not None and controller is not None and controller >= 0
        if self._capabilities.get("reassignments", True):  # a broker before 2.4 cannot answer it
            my.side.ask_moves(admin._client, controller if zk_controller and controller is not None else node)
        live = {b["node_id"] for b in md["brokers"]}
        zk_live = self.zk.live_brokers() if self.zk is not None else None
        if zk_live is not None:
            live &= zk_live  # a broker whose registration vanished is not asked (it cannot answer)
        my.brokers.reach.note_live(zk_live if zk_live is not None else live)
        if log_dirs.announced(admin._client.get_api_versions()) and my.dirs.disks.due(time.monotonic()):
            # answered during the offsets round, read after it
            my.dirs.requests.send(admin._client, live, log_dirs.supports_v4(admin._client.get_api_versions()),
                                    self.settings.request_timeout_ms, time.monotonic())
        replica_of, leader_of = self._plans.plan(mine, live)
        tiered_of = self._tiered_plan(mine, live)
        try:
            found = offsets.fetch(admin._client, replica_of, leader_of, self.settings.offsets_timeout_ms / 1000,
                                  self._offset_requests, tiered_of, my.brokers.reach.judged_at())
        except Exception as e:  # noqa: BLE001 - metadata without offsets is still worth publishing
            log.warning("cluster %s: offsets not fetched (%s)", self.cluster.name, e)
            found = offsets.OffsetsRound()
        self.last_offsets = found
        phases.append(("offsets", time.monotonic()))
        my.brokers.listen()  # how late each broker answers
        declared_before = set(my.brokers.reach.declared)
        unreachable = my.brokers.unreachable(found)
        if self.zk is not None and unreachable - declared_before:
            # a clean stop's leaderships are already elsewhere in ZooKeeper; the watches may not have said so yet
            self.zk.reread_led_by(unreachable - declared_before)
        if log.isEnabledFor(logging.DEBUG):
            log.debug("cluster %s poll %d: metadata from broker %s, offsets asked %s answered %s, unreachable %s, "
                      "answers in %s", self.cluster.name, poll_id, self._last_node, sorted(found.asked),
                      sorted(found.answered), sorted(unreachable),
                      {b: f"{s * 1000:.0f}ms" for b, s in sorted(my.brokers.answer_s.items())})
        quorum = (my.side.harvest_quorum(found.answered | ({node} if isinstance(node, int) else set()))
                  if self.zk is None else None)
        my.side.harvest_moves()
        records = self._records(md, topics, observed_at_ms, found, poll_id, quorum, unreachable)
        phases.append(("records", time.monotonic()))
        brokers = _cluster_state(records)["brokers"]
        my.dirs.sample(brokers)
        my.dirs.ask(admin._client, records, brokers, found)
        phases.append(("log_dirs", time.monotonic()))
        return records

    def phases_said(self) -> str:
        """The last poll's steps and what each took ("metadata 0.01 s, configs 4.20 s, ..."): said when a
        poll is slow, so its cause is in the log."""
        marks = self.poll_phases
        if len(marks) < 2:
            return "it reached no broker (its Metadata request failed, or a refusal is waited out)"
        return ", ".join(f"{name} {t - marks[i][1]:.2f} s" for i, (name, t) in enumerate(marks[1:]))

    def _records(self, md: MdAnswer, topics: list[MdTopic], observed_at_ms: int, found: offsets.OffsetsRound,
                 poll_id: int, quorum: Quorum | None = None,
                 unreachable: set[int] | frozenset[int] = frozenset()) -> list[Observation]:
        """The poll's records (collectors/poll_records.py), with what this poll learnt of the brokers."""
        return self.records.build(md, topics, observed_at_ms, found, poll_id, quorum, unreachable,
                                  self._capabilities, self._elr_known)

    def _tiered_plan(self, topics: list[MdTopic], live: set[int]) -> dict[int, list[offsets.TopicPartition]]:
        """Leader -> its partitions of tiered topics, when the brokers can say (collectors/tiered.py)."""
        tiered_topics = self.parts.configs.tiered
        if not tiered_topics or not self._capabilities.get("tiered_offsets"):
            return {}
        out: dict[int, list[offsets.TopicPartition]] = {}
        for t in topics:
            if t["topic"] in tiered_topics:
                for p in t["partitions"]:
                    if p["leader"] in live:
                        out.setdefault(p["leader"], []).append((t["topic"], p["partition"]))
        return out

    def _failed_poll(self, poll_id: int) -> list[Observation]:
        """What a poll that reached no broker still knows. ZooKeeper mode: the mirror's view of every
        topic with ZooKeeper's live brokers (a whole cluster down leaves dead leaders in the state
        znodes: offline by Kafka's definition); these records open incidents and resolve none, since a
        registration alone makes nothing available (docs/collector.md)."""
        my = self.parts
        live = self.zk.live_brokers() if self.zk is not None else None
        book = my.brokers
        book.view = {b: (False, n) for b, (_, n) in book.view.items()}  # none answered this poll
        # Without ZooKeeper nobody said who is live: the next poll that reaches a broker sees every
        # broker come back (the whole cluster may have restarted meanwhile).
        book.reach.note_live(live if live is not None else set())
        if live is None:  # KRaft, or krm's own ZooKeeper session is down too
            return [self._failure_record(poll_id)]
        topics = self.zk.topics()  # type: ignore[union-attr]
        # Who is registered is known without a broker: BROKER_DOWN opens during a whole-cluster
        # outage, so a restart resolves it broker by broker instead of raising it for the brokers
        # not yet back (the fault loops' cluster-down). Reachability is unknown: nobody answered.
        held = {r for t in topics for rs in (self.zk.assignment(t) or {}).values() for r in rs}  # type: ignore[union-attr]
        brokers = self.mirror.zookeeper_brokers(live, held)
        for b in brokers:
            b["reachable"] = None
        # judged on ZooKeeper's state as the quick records are: the last broker of a whole-cluster stop
        # could hand nothing over, and only these records look at it once the polls fail
        self.mirror.judged(brokers, int(time.time() * 1000))
        failure = self._failure_record(poll_id, brokers)
        share = my.share
        mine = topics if share is None else [t for t in topics if share.holds(t)]
        return [failure, *self.mirror.mirror_topics(mine, poll_id, failure["observed_at_ms"], live, None, resolves=False)]

    def _failure_record(self, poll_id: int, brokers: list[Broker] | None = None) -> ClusterObservation:
        problem = self.parts.access.problem
        assert problem is not None
        return cluster_record(self.cluster.name, SOURCE, poll_id, int(time.time() * 1000), controller_id=None,
                              brokers=brokers or [], topic_count=0, partition_count=0, error=problem.message,
                              error_reason=problem.reason)

    def brokers_changed(self) -> bool:
        """The fast path where there are no ZooKeeper watches (KRaft): a Metadata request for no
        topic (the live brokers only: a few hundred bytes at any cluster size) to the broker that
        answered the last poll. True when its live brokers differ from that poll's:
        a broker fenced, unfenced or registered, which the controller writes in the same batch as
        the leader and ISR changes it causes (ReplicationControlManager.handleBrokerFenced), so the
        caller polls at once instead of at the next interval. A failure also says "poll now"."""
        if self._admin is None or self.parts.brokers.live_last_ids is None or self._last_node is None:
            return False
        client, node, sent_at = self._admin._client, self._last_node, time.monotonic()
        try:
            live = metadata.live_brokers(client, node, min(self.settings.request_timeout_ms, 500))
        except Exception as e:  # noqa: BLE001 - the broker that answered last does not: a full poll finds out
            log.debug("cluster %s: live-broker check to broker %s failed after %.2fs: %r", self.cluster.name, node,
                      time.monotonic() - sent_at, e)
            if isinstance(node, int):  # timed out: its silence counts from this request
                self.parts.brokers.probes.note_unanswered(node, sent_at, e)
            return True
        return live != self.parts.brokers.live_last_ids

    def probe(self) -> bool:
        """Between polls: a brokers-only Metadata request to each broker live at the last poll that has
        none outstanding (collectors/reachability.py Probes). A broker nobody can reach any more is then
        silent from its last contact, not from the next poll's request: its partitions are named that
        much sooner. Nothing is judged here; the next poll's offsets round confirms.
        True when a broker the last poll called unreachable answered: poll now, its partitions are
        cleared without waiting for the next interval."""
        book = self.parts.brokers
        admin, live = self._admin, book.live_last_ids
        if admin is None or not live:
            return False
        try:
            back = book.probes.tick(admin._client, live, metadata.brokers_request(admin._client))
        except Exception as e:  # noqa: BLE001 - the next poll finds out what is wrong
            log.debug("cluster %s: reachability probe not sent: %s", self.cluster.name, e)
            return False
        return not back.isdisjoint(book.reach.declared)

    def close(self) -> None:
        self.parts.brokers.close()
        self._close()

    def _kraft_view(self, admin: AdminClient, topics: list[MdTopic], node: NodeId) -> None:
        """ELR per partition (overlaid on `topics`, in place) and the DescribeQuorum question, to the
        broker that answered the Metadata request. A failure keeps the Metadata view and is logged
        once: ELR absent means "not known", and the detectors then judge by the ISR alone."""
        client = admin._client
        versions = client.get_api_versions()
        timeout = self.settings.request_timeout_ms

        def send(request: object) -> Any:
            return ask(client, node, request, timeout)

        self._elr_known = False
        if kraft.supports(versions, DESCRIBE_TOPIC_PARTITIONS_KEY):
            blocks = self._topic_blocks  # (a topic it remembers is healthy: no ELR to ask for)
            wanted = [t["topic"] for t in topics
                      if not blocks.healthy(t["topic"], t["partitions"]) and kraft.needs_elr(t["partitions"])]
            overlay = (self.parts.notes.call("DescribeTopicPartitions", lambda: kraft.describe_partitions(send, wanted))
                       if wanted else {})
            if overlay is not None:
                # every other topic has neither ELR nor last known ELR (needs_elr): _records says so
                self._elr_known = True
                kraft.apply_elr(topics, overlay, set(wanted))
        if kraft.supports(versions, DESCRIBE_QUORUM_KEY):
            self.parts.side.ask_quorum(client, node)

    def _metadata(self, admin: AdminClient) -> MdAnswer:
        try:  # the brokers that left a probe unanswered since the last poll (probe()): asked last, and
            probed = self.parts.brokers.probes.silent(admin._client, PROBE_SILENT_S)  # silent since that probe
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
            self.parts.brokers.reach.note_silent(since)
        return md

    def _client(self, avoid: NodeId | None = None) -> AdminClient:
        if self._admin is None:
            seen = [f"{b['host']}:{b['port']}" for bid, b in sorted(self.parts.brokers.live_last.items()) if bid != avoid]
            self._admin = metadata.admin_client(self.cluster, self.settings, seen)
        return self._admin

    def _close(self) -> None:
        self.parts.side.close()
        if self._admin is not None:
            try:
                self._admin.close()
            except Exception:  # noqa: BLE001 - closing a broken client must not mask the real error
                pass
            self._admin = None


def _cluster_state(records: list[Observation]) -> ClusterState:
    """The poll's cluster record's state: the first of its records (PollRecords._records)."""
    first = records[0]
    assert first["kind"] == "cluster", first["kind"]
    return first["cluster_state"]
