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
from collectors.kraft_protocol import DESCRIBE_QUORUM_KEY, DESCRIBE_TOPIC_PARTITIONS_KEY
from collectors.metadata import ask
from collectors.poll_records import PollRecords
from collectors.records import cluster_record
from collectors.zk_mirror_records import ZkMirrorRecords
from schemas.typed import Broker, ClusterObservation, ClusterState, Observation

log = logging.getLogger(__name__)

PROBE_SILENT_S = 0.05  # a probe unanswered this long counts as a hint of silence (a healthy broker answers in ms)


class AdminSource(PollRecords, ZkMirrorRecords):
    """Polls one cluster: the poll's order and its failures, the checks between polls (brokers_changed,
    probe) and the log directories' questions. Its state is collectors/poller_state.py's; its records are
    built by collectors/poll_records.py and, from ZooKeeper alone, collectors/zk_mirror_records.py."""

    def poll(self) -> list[Observation]:
        """One poll: a `cluster` record, then one `topic` record per topic. Never raises for an
        unreachable cluster: the failure is itself the observation (a cluster record with `error`)."""
        if self._zk_state is not None:
            self._zk_state.note_phase()
        with gc_pause.paused():
            records = self._poll()
        return self._share.stamp(records) if self._share is not None else records

    def _poll(self) -> list[Observation]:
        with self._poll_lock:  # quick_records (another thread) numbers its records from the same sequence
            self._poll_id += 1
            poll_id = self._poll_id
        phases = self.poll_phases = [("start", time.monotonic())]
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
            phases.append(("metadata", time.monotonic()))
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
        phases.append(("configs", time.monotonic()))
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
        phases.append(("offsets", time.monotonic()))
        self._contact, self._answer_s = self._answer_times.start().answers()  # how late each broker answers
        unreachable = self._unreachable(found)
        if log.isEnabledFor(logging.DEBUG):
            log.debug("cluster %s poll %d: metadata from broker %s, offsets asked %s answered %s, unreachable %s, "
                      "answers in %s", self.cluster.name, poll_id, self._last_node, sorted(found.asked),
                      sorted(found.answered), sorted(unreachable),
                      {b: f"{s * 1000:.0f}ms" for b, s in sorted(self._answer_s.items())})
        quorum = self._side.harvest_quorum(found.answered | {self._last_node}) if self.zk is None else None
        self._side.harvest_moves()
        records = self._records(md, topics, observed_at_ms, found, poll_id, quorum, unreachable)
        phases.append(("records", time.monotonic()))
        self._sample_dirs(records)
        self._ask_dirs(admin, records, found)
        phases.append(("log_dirs", time.monotonic()))
        return records

    def phases_said(self) -> str:
        """The last poll's steps and what each took ("metadata 0.01 s, configs 4.20 s, ..."): said when a
        poll is slow, so its cause is in the log."""
        marks = self.poll_phases
        if len(marks) < 2:
            return "it reached no broker (its Metadata request failed, or a refusal is waited out)"
        return ", ".join(f"{name} {t - marks[i][1]:.2f} s" for i, (name, t) in enumerate(marks[1:]))

    def _sample_dirs(self, records: list[Observation]) -> None:
        """The directories' answers in since the last poll (sent every `log_dir_poll_s` before the offsets
        round: collectors/disk_watch.py); the cluster record's brokers carry the last word of each, and a
        down broker whose disks were full when it went says so."""
        brokers = _cluster_state(records)["brokers"]
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

    def _ask_dirs(self, admin: Any, records: list[Observation], found: offsets.OffsetsRound) -> None:
        """Where Metadata lists a live broker's replica offline, ask that broker whether a log directory
        failed (collectors/log_dirs.py): the topic records then say which brokers report one, and the
        offline rule names a failed directory on that evidence only, never on a restart's moment."""
        if not self._offline_replicas:
            self._failed_dir_brokers = None
            return
        live = {b["id"] for b in _cluster_state(records)["brokers"] if b["live"]}
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

    def _failed_poll(self, poll_id: int) -> list[Observation]:
        """What a poll that reached no broker still knows. ZooKeeper mode: the mirror's view of every
        topic with ZooKeeper's live brokers (a whole cluster down leaves dead leaders in the state
        znodes: offline by Kafka's definition); these records open incidents and resolve none, since a
        registration alone makes nothing available (docs/collector.md)."""
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
        brokers = self._zookeeper_brokers(live, held)
        for b in brokers:
            b["reachable"] = None
        # judged on ZooKeeper's state as the quick records are: the last broker of a whole-cluster stop
        # could hand nothing over, and only these records look at it once the polls fail
        self._judged(brokers, int(time.time() * 1000))
        failure = self._failure_record(poll_id, brokers)
        mine = topics if self._share is None else [t for t in topics if self._share.holds(t)]
        return [failure, *self._mirror_topics(mine, poll_id, failure["observed_at_ms"], live, None, resolves=False)]

    def _failure_record(self, poll_id: int, brokers: list[Broker] | None = None) -> ClusterObservation:
        problem = self._problem
        assert problem is not None
        return cluster_record(self.cluster.name, self.source, poll_id, int(time.time() * 1000), controller_id=None,
                              brokers=brokers or [], topic_count=0, partition_count=0, error=problem.message,
                              error_reason=problem.reason)

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
        self._answer_times.close()
        self._close()

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


def _cluster_state(records: list[Observation]) -> ClusterState:
    """The poll's cluster record's state: the first of its records (PollRecords._records)."""
    first = records[0]
    assert first["kind"] == "cluster", first["kind"]
    return first["cluster_state"]
