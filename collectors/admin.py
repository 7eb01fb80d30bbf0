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
import threading
import time
from typing import Any, Iterable

from collectors import access, gc_pause, kraft, offsets, reassignments, wire
from collectors.departures import Departures
from collectors.kraft_protocol import DESCRIBE_QUORUM_KEY, DESCRIBE_TOPIC_PARTITIONS_KEY, describe_quorum_request
from collectors.memory import PartitionMemory
from collectors.records import cluster_record, topic_record
from collectors.zookeeper import ZkState
from foundation.config import ClusterConfig, CollectorConfig
from foundation.security import kafka_python_kwargs

log = logging.getLogger(__name__)

TOPIC_CONFIGS = ("min.insync.replicas", "unclean.leader.election.enable")
BROKER_CONFIGS = ("replica.lag.time.max.ms", "leader.imbalance.per.broker.percentage")
# kafka-python refuses an answer over 1 MB by default, and a Metadata answer passes that at about
# 20,000 partitions (Kafka's Java clients put no limit on a response's size); the stand-in broker of
# benchmarks/collector_poll.py found it.
MAX_ANSWER_BYTES = 1 << 30


def ask(client: Any, node: int, request: Any, timeout_ms: int) -> Any:
    """One request to one broker, waiting at most `timeout_ms` in all (connecting included): a
    SIGSTOPped broker accepts the TCP connection and then answers nothing."""
    from kafka.errors import KafkaConnectionError, KafkaTimeoutError

    deadline = time.monotonic() + timeout_ms / 1000
    while not client.ready(node, metadata_priority=False):
        if client.connection_failed(node):
            raise KafkaConnectionError(f"connection to broker {node} refused")
        if time.monotonic() >= deadline:
            raise KafkaTimeoutError(f"broker {node} not ready within {timeout_ms} ms")
        client.poll(timeout_ms=20)
    remaining_ms = max(1, int((deadline - time.monotonic()) * 1000))
    future = client.send(node, request, wakeup=False, request_timeout_ms=remaining_ms)
    while not future.is_done:
        client.poll(timeout_ms=min(50, remaining_ms))
        if time.monotonic() > deadline + 1.0:  # the client fails it at the deadline; never spin past it
            raise KafkaTimeoutError(f"broker {node} did not answer within {timeout_ms} ms")
    if future.failed():
        raise future.exception
    return future.value


NO_OLDER_WINDOW_S = 30.0  # far beyond a metadata propagation between the controller and the brokers


def config_backoff_s(failures: int, refresh_s: float) -> float:
    """Seconds before DescribeConfigs is sent again after `failures` failures in a row: the refresh
    interval (at least 30 s), doubling, at most an hour. Each unanswered request may hold a broker
    thread (see `_may_ask_configs`), so over a long outage only a handful are ever sent."""
    return min(3600.0, max(30.0, refresh_s) * 2 ** max(0, failures - 1))


def refusing(addresses: dict[int, tuple[str, int]], timeout_s: float = 0.2) -> set[int]:
    """Which of these brokers refuse TCP connections: nothing listens, the process is gone. A paused
    process still accepts (the kernel completes the handshake) and an unreachable host times out:
    neither is definitive. All probed at once, so the poll waits `timeout_s` at most."""
    import errno
    import select
    import socket

    pending: dict[Any, int] = {}
    refused: set[int] = set()
    for b, (host, port) in addresses.items():
        s = socket.socket(socket.AF_INET6 if ":" in host else socket.AF_INET, socket.SOCK_STREAM)
        s.setblocking(False)
        rc = s.connect_ex((host, port))
        if rc in (0, errno.EINPROGRESS, errno.EWOULDBLOCK):
            pending[s] = b
        else:
            if rc == errno.ECONNREFUSED:
                refused.add(b)
            s.close()
    deadline = time.monotonic() + timeout_s
    try:
        while pending and (left := deadline - time.monotonic()) > 0:
            _, done, _ = select.select([], list(pending), [], left)
            for s in done:
                if s.getsockopt(socket.SOL_SOCKET, socket.SO_ERROR) == errno.ECONNREFUSED:
                    refused.add(pending[s])
                s.close()
                del pending[s]
    finally:
        for s in pending:
            s.close()
    return refused


def _later_election(part: dict[str, Any], epoch: int, replicas: Any) -> bool:
    """`part` (a Metadata answer's partition) comes from a later election than `epoch`, for the same
    replicas: a topic deleted and created again starts its epochs from 0 on another assignment."""
    mine = part.get("leader_epoch")
    return mine is not None and mine > epoch and set(part["isr"]) | ({part["leader"]} - {-1}) <= set(replicas)


class AdminSource:
    """Polls one cluster. Construct validates nothing and opens nothing; the first poll connects."""

    source = "admin"

    def __init__(self, cluster: ClusterConfig, settings: CollectorConfig, zk: ZkState | None = None) -> None:
        self.cluster = cluster
        self.settings = settings
        self.zk = zk  # ZooKeeper mode: leader, epoch, ISR and live brokers come from the controller's writes
        self._admin: Any = None
        self._poll_id = 0
        self._poll_lock = threading.Lock()
        self._known_brokers: dict[int, dict[str, Any]] = {}  # every broker seen live since start
        self._configs: dict[str, tuple[int | None, bool | None]] = {}
        self._configs_at = 0.0
        # (topic, partition) -> (leader_epoch, leader, isr, when) last published: never go back (_no_older)
        self._published: dict[tuple[str, int], tuple[int, int, list[int], float]] = {}
        # this poll's Metadata answer from its arrival until its records register their epochs (_records):
        # quick records stamped meanwhile must not publish an older state (see _metadata_arrived)
        self._arrived: dict[str, list[dict[str, Any]]] | None = None
        self._configs_failures = 0  # DescribeConfigs that failed in a row (see config_backoff_s)
        self._configs_retry_at = 0.0
        self._degraded = False
        self._last_node: Any = None
        self._live_last: dict[int, dict[str, Any]] = {}  # brokers alive at the last successful poll
        self._live_last_ids: set[int] | None = None  # their ids, for brokers_changed
        self._memory = PartitionMemory()
        self._last_cluster_state: dict[str, Any] | None = None  # for the ZooKeeper-triggered cluster record
        self._assignments: dict[str, tuple[tuple[int, tuple[int, ...]], ...]] = {}  # topic -> last published map
        self._snapshot_at = 0.0
        self._replica_lag_time_max_ms: int | None = None
        self._leader_imbalance_pct: int | None = None
        self._kraft_failed: set[str] = set()  # KRaft requests that failed: logged once until they work again
        self._quorum: dict[str, Any] | None = None  # the last DescribeQuorum answer (KRaft)
        self._quorum_ask: tuple[Any, int, float] | None = None  # (future, broker, sent at) while unanswered
        self._quorum_client: Any = None  # its own connection (see _kraft_view)
        self._silent_since: dict[int, float] = {}  # broker -> first poll it did not answer (timeouts)
        self._live_since: dict[int, float] | None = None  # broker -> when krm saw it become live (_note_live)
        self._problem: access.AccessProblem | None = None  # why the last poll failed (logged once per change)
        self._access_failures = 0  # consecutive polls refused for credentials, TLS or protocol
        self._retry_at = 0.0  # after such a refusal: no new connection before this (monotonic)
        self._config_denied: set[str] = set()  # ACLs DescribeConfigs found missing (kept until the next refresh)
        self._quorum_denied = False  # DescribeQuorum refused: no DESCRIBE on the cluster
        self._denied_logged: frozenset[str] = frozenset()
        self.last_offsets: offsets.OffsetsRound | None = None  # for benchmarks and logs
        self._moves: reassignments.Moves = {}  # the last ListPartitionReassignments answer
        self._moves_ask: tuple[Any, float] | None = None  # (future, sent at) while unanswered
        self._elr_known = False  # this poll asked DescribeTopicPartitions (KRaft 3.7+): ELR known, empty unless said
        self._applied: reassignments.Moves = {}  # the moves the last records carried (reassignments.annotate)
        self._departures = Departures()  # how each down broker went down (controlled shutdown or not)

    def poll(self) -> list[dict[str, Any]]:
        """One poll: a `cluster` record, then one `topic` record per topic. Never raises for an
        unreachable cluster: the failure is itself the observation (a cluster record with `error`)."""
        with gc_pause.paused():
            return self._poll()

    def _poll(self) -> list[dict[str, Any]]:
        with self._poll_lock:  # quick_records (another thread) numbers its records from the same sequence
            self._poll_id += 1
            poll_id = self._poll_id
        if self._problem is not None and time.monotonic() < self._retry_at:
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
            self._problem, self._access_failures = None, 0
        if self._may_ask_configs():
            try:
                self._refresh_configs(admin, [t["topic"] for t in topics], [b["node_id"] for b in md["brokers"]])
                self._configs_failures = 0
            except Exception as e:  # noqa: BLE001 - stale configs beat a lost poll
                self._configs_failures += 1
                backoff = config_backoff_s(self._configs_failures, self.settings.config_refresh_s)
                self._configs_retry_at = time.monotonic() + backoff
                log.warning("cluster %s: topic configs not refreshed (%s); using the last known values, asking again "
                            "in %.0fs", self.cluster.name, e, backoff)
        if self.zk is None:
            self._kraft_view(admin, topics)
        self._ask_reassignments(admin, md)
        live = {b["node_id"] for b in md["brokers"]}
        zk_live = self.zk.live_brokers() if self.zk is not None else None
        if zk_live is not None:
            live &= zk_live  # a broker whose registration vanished is not asked (it cannot answer)
        self._note_live(zk_live if zk_live is not None else live)
        replica_of, leader_of = offsets.plan(
            ((t["topic"], p["partition"], p["leader"], p["replicas"]) for t in topics for p in t["partitions"]), live)
        try:
            found = offsets.fetch(admin._client, replica_of, leader_of, self.settings.offsets_timeout_ms / 1000)
        except Exception as e:  # noqa: BLE001 - metadata without offsets is still worth publishing
            log.warning("cluster %s: offsets not fetched (%s)", self.cluster.name, e)
            found = offsets.OffsetsRound()
        self.last_offsets = found
        unreachable = self._unreachable(found)
        if log.isEnabledFor(logging.DEBUG):
            log.debug("cluster %s poll %d: metadata from broker %s, offsets asked %s answered %s, unreachable %s",
                      self.cluster.name, poll_id, self._last_node, sorted(found.asked), sorted(found.answered),
                      sorted(unreachable))
        quorum = self._harvest_quorum(found.answered | {self._last_node}) if self.zk is None else None
        self._harvest_reassignments()
        return self._records(md, topics, observed_at_ms, found, poll_id, quorum, unreachable)

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
        connecting again, longer each time (access.ACCESS_RETRY_S): no login storm on the brokers."""
        if self._problem is None or problem.message != self._problem.message:
            log.warning("%s", problem.message)
        self._problem = problem
        self._degraded = True
        if problem.reason in access.ACCESS_REASONS:
            delays = access.ACCESS_RETRY_S
            self._retry_at = time.monotonic() + delays[min(self._access_failures, len(delays) - 1)]
            self._access_failures += 1
        else:
            self._access_failures = 0

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
        failure = self._failure_record(poll_id, brokers)
        return [failure, *self._mirror_topics(topics, poll_id, failure["observed_at_ms"], live, None, resolves=False)]

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

    def _denied(self) -> list[str]:
        """The ACLs this poll found missing; a change is logged once, in one line."""
        denied = set(self._config_denied)
        if self._quorum_denied:
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
        from kafka.protocol.metadata import MetadataRequest

        client = self._admin._client
        version = client.api_version(MetadataRequest, max_version=8)
        request = (MetadataRequest[version](topics=[], allow_auto_topic_creation=False,
                                            include_cluster_authorized_operations=False,
                                            include_topic_authorized_operations=False) if version >= 8
                   else MetadataRequest[version](topics=[], allow_auto_topic_creation=False))
        try:
            md = ask(client, self._last_node, request, min(self.settings.request_timeout_ms, 500)).to_object()
        except Exception:  # noqa: BLE001 - the broker that answered last does not: a full poll finds out
            return True
        # the live brokers only: a KRaft broker names a random live broker as "controller" (KIP-590)
        return {b["node_id"] for b in md["brokers"]} != self._live_last_ids

    def close(self) -> None:
        self._close()

    # ------------------------------------------------------------------ internals

    def _records(self, md: dict[str, Any], topics: list[dict[str, Any]], observed_at_ms: int,
                 found: offsets.OffsetsRound, poll_id: int, quorum: dict[str, Any] | None = None,
                 unreachable: set[int] | frozenset[int] = frozenset()) -> list[dict[str, Any]]:
        live = {b["node_id"]: b for b in md["brokers"]}
        for bid, b in live.items():
            self._known_brokers[bid] = b
        self._live_last = live
        self._live_last_ids = set(live)
        zk_live = self.zk.live_brokers() if self.zk is not None else None
        if zk_live is not None:  # registered in ZooKeeper: what the controller acts on
            live = {bid: self._known_brokers.get(bid, {}) for bid in zk_live}
        referenced = {r for t in topics for p in t["partitions"] for r in p["replicas"]}
        brokers = [
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
            topic_count=len(topics), partition_count=sum(len(t["partitions"]) for t in topics),
            replica_lag_time_max_ms=self._replica_lag_time_max_ms,
            leader_imbalance_per_broker_percentage=self._leader_imbalance_pct,
            reassignment_in_progress=self.zk.reassigning if zk_live is not None else None,  # type: ignore[union-attr]
            quorum=quorum, denied=self._denied(),
        )]
        self._last_cluster_state = records[0]["cluster_state"]
        present = set()
        published: list[dict[str, Any]] = []  # every partition as this poll publishes it
        snapshot = time.monotonic() - self._snapshot_at >= self.settings.assignment_snapshot_s
        if snapshot:
            self._snapshot_at = time.monotonic()
        hw_of, start_of, leo_of, annotate = found.hw.get, found.log_start.get, found.leo.get, self._memory.annotate
        elr_known = self.zk is None and self._elr_known
        for t in topics:
            min_isr, unclean = self._configs.get(t["topic"], (None, None))
            name = t["topic"]
            parts = []
            zk_assignment = self.zk.assignment(name) if self.zk is not None else None
            zk_moves = self.zk.moves(name) if self.zk is not None and self.zk.connected else None
            for p in t["partitions"]:
                pid = p["partition"]
                present.add((name, pid))
                replicas = p["replicas"]
                part = {"partition": pid, "leader": p["leader"], "leader_epoch": p.get("leader_epoch"),
                        "replicas": list(replicas), "isr": list(p["isr"]),
                        "offline_replicas": list(p.get("offline_replicas") or [])}
                if "elr" in p:
                    part["elr"], part["last_known_elr"] = p["elr"], p["last_known_elr"]
                elif elr_known:
                    part["elr"], part["last_known_elr"] = [], []
                self._overlay_zk(name, part, zk_assignment)
                self._no_older(name, part)
                # the controller's answer first: the mirror's watch on the topic znode can fire after the
                # brokers' metadata already lists the adding replicas (one false under-replicated poll)
                self._carry_move(name, part, self._moves.get((name, pid)) or (zk_moves or {}).get(pid))
                key = (name, pid)
                part["high_watermark"] = hw_of(key)
                part["log_start_offset"] = start_of(key)
                part["replica_offsets"] = [{"broker": r, "log_end_offset": o} for r in replicas
                                           if (o := leo_of((name, pid, r))) is not None]
                parts.append(annotate(name, part, observed_at_ms))
            published.extend(parts)
            signature = tuple(sorted([(p["partition"], tuple(p["replicas"])) for p in parts]))
            changed = self._assignments.get(name) != signature
            self._assignments[name] = signature
            rec = topic_record(
                self.cluster.name, self.source, poll_id, observed_at_ms, topic=t["topic"], live_brokers=live,
                partitions=parts, min_insync_replicas=min_isr, unclean_leader_election=unclean,
                replica_lag_time_max_ms=self._replica_lag_time_max_ms, unreachable_brokers=unreachable,
            )
            # assignment history (pipelines/history.py): on every change, and all topics periodically
            rec["topic_state"]["assignment"] = "changed" if changed else ("snapshot" if snapshot else None)
            records.append(rec)
        # How each down broker went: judged on the partitions as published (ZooKeeper mode: leader and
        # ISR as the controller wrote them, which the brokers' metadata caches trail; its brokers' live
        # flags come from ZooKeeper too), so one consistent view. The cluster record holds these dicts.
        self._departures.annotate(brokers, lambda: published, observed_at_ms)
        for gone in [name for name in self._assignments if name not in {t["topic"] for t in topics}]:
            del self._assignments[gone]
        self._memory.forget_missing(present)
        for gone in [k for k in self._published if k not in present]:
            del self._published[gone]
        with self._poll_lock:
            self._arrived = None  # its epochs are in _published now
        return records

    def _note_live(self, live: set[int]) -> None:
        """Remember when each broker became live (registered in ZooKeeper, unfenced in KRaft) as krm
        saw it, for the start-up grace of `_unreachable`. The brokers of krm's first view are taken
        as long live: krm did not see them start."""
        now = time.monotonic()
        if self._live_since is None:
            self._live_since = dict.fromkeys(live, float("-inf"))
            return
        for b in [b for b in self._live_since if b not in live]:
            del self._live_since[b]
        for b in live:
            self._live_since.setdefault(b, now)

    def _unreachable(self, found: offsets.OffsetsRound) -> set[int]:
        """Registered brokers clients cannot use now, among those that did not answer this poll's
        offsets requests. A refused TCP connection is definitive: the process is gone (Kafka's
        controller notices only when the broker's session expires). A silent broker is not, at
        first: a GC pause or a SIGSTOP accepts connections and answers again a second or two
        later. Only silence lasting `unreachable_after_s` counts.

        Except at start-up: a broker registers in ZooKeeper (KafkaServer.startup) or is unfenced
        (BrokerServer.startup) before `socketServer.enableRequestProcessing` opens its ports, and
        the controller may make it a leader in between. Its refusals count only once it has been
        live for `unreachable_after_s` (the fault loops' cluster-down: sub-second critical
        PARTITION_UNAVAILABLE pages at every restart of the cluster)."""
        now = time.monotonic()
        silent = found.asked - found.answered
        addresses = {b: (m["host"], m["port"]) for b in silent
                     if (m := self._known_brokers.get(b) or {}).get("host") and m.get("port")}
        refused = refusing(addresses) if addresses else set()
        for b in silent:
            if b in refused:
                self._silent_since.pop(b, None)
            else:
                self._silent_since.setdefault(b, now)
        for b in [b for b in self._silent_since if b not in found.asked or b in found.answered]:
            del self._silent_since[b]
        after = self.settings.unreachable_after_s
        since = self._live_since or {}
        started = {b for b in refused if now - since.get(b, float("-inf")) >= after}
        return started | {b for b, t in self._silent_since.items() if now - t >= after}

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
            wanted = [t["topic"] for t in topics if kraft.needs_elr(t["partitions"])]
            overlay = (self._kraft_call("DescribeTopicPartitions", lambda: kraft.describe_partitions(send, wanted))
                       if wanted else {})
            if overlay is not None:
                # every other topic has neither ELR nor last known ELR (needs_elr): _records says so
                self._elr_known = True
                described = set(wanted)
                for t in topics:
                    if t["topic"] not in described:
                        continue
                    name = t["topic"]
                    for p in t["partitions"]:
                        known = overlay.get((name, p["partition"]))
                        if known:
                            p.update(known)
                        else:
                            p["elr"], p["last_known_elr"] = [], []
        if kraft.supports(versions, DESCRIBE_QUORUM_KEY) and self._quorum_ask is None:
            # Sent now, harvested after the offsets round (_harvest_quorum), on a connection of its
            # own: a broker with no active controller to forward it to holds it, and a broker serves
            # one connection's requests in order, so on the shared connection it would hold up the
            # offsets requests (the broker would look unreachable).
            qc = self._quorum_connection(client)
            node = self._last_node
            if qc.ready(node, metadata_priority=False):
                future = qc.send(node, describe_quorum_request(), wakeup=False,
                                 request_timeout_ms=kraft.QUORUM_REQUEST_TIMEOUT_MS)
                self._quorum_ask = (future, node, time.monotonic())
            else:
                qc.poll(timeout_ms=0)  # connecting: asked at a later poll

    def _quorum_connection(self, client: Any) -> Any:
        if self._quorum_client is None:
            from kafka.client_async import KafkaClient

            qc = KafkaClient(
                bootstrap_servers=client.config["bootstrap_servers"], client_id=f"krm-quorum-{self.cluster.name}",
                api_version=client.config["api_version"], request_timeout_ms=kraft.QUORUM_REQUEST_TIMEOUT_MS,
                reconnect_backoff_max_ms=1000, receive_message_max_bytes=MAX_ANSWER_BYTES,
                **kafka_python_kwargs(self.cluster.security))
            qc.cluster.request_update()
            deadline = time.monotonic() + self.settings.request_timeout_ms / 1000
            while qc.cluster.broker_metadata(self._last_node) is None and time.monotonic() < deadline:
                qc.poll(timeout_ms=50)  # learn the broker ids (it starts with bootstrap addresses only)
            self._quorum_client = qc
        return self._quorum_client

    def _harvest_quorum(self, answered: set[int]) -> dict[str, Any] | None:
        """The quorum for this poll's cluster record: the answer if it came, else the last one while
        the question is younger than QUORUM_PATIENCE_MS; past that, "no leader" — but only if the
        asked broker answered its offsets requests this poll (a dead or paused broker says nothing
        about the controllers). A broken connection or a refusal judges nothing."""
        if self._quorum_ask is None:
            return self._quorum
        future, node, sent_at = self._quorum_ask
        self._quorum_client.poll(timeout_ms=0)
        if not future.is_done:
            waited_ms = (time.monotonic() - sent_at) * 1000
            if waited_ms < kraft.QUORUM_PATIENCE_MS or node not in answered:
                return self._quorum
            return {"leader_id": -1, "voters": [],
                    "error": f"DescribeQuorum unanswered for over {kraft.QUORUM_PATIENCE_MS / 1000:.0f}s by broker "
                             f"{node} (no active controller reachable)"}
        self._quorum_ask = None
        if future.failed():
            self._note_kraft("DescribeQuorum", future.exception)
            self._quorum = None
            return None
        try:
            self._quorum = kraft.quorum_state(future.value.to_object())
            self._quorum_denied = False
        except PermissionError:  # a missing ACL: said in the cluster record's `denied`, not as a failure
            self._quorum, self._quorum_denied = None, True
        except Exception as e:  # noqa: BLE001 - the Metadata view still stands
            self._note_kraft("DescribeQuorum", e)
            self._quorum = None
        else:
            self._note_kraft("DescribeQuorum", None)
        return self._quorum

    def _carry_move(self, topic: str, part: dict[str, Any], move: Any) -> None:
        key = (topic, part["partition"])
        applied = reassignments.annotate(part, move, self._applied.get(key))
        if applied:
            self._applied[key] = applied
        else:
            self._applied.pop(key, None)

    def _ask_reassignments(self, admin: Any, md: dict[str, Any]) -> None:
        """Send ListPartitionReassignments, to the controller in ZooKeeper mode (a broker answers
        NOT_CONTROLLER otherwise) or to the broker that answered the Metadata request (KRaft brokers
        forward it), on the side connection DescribeQuorum uses: a hung controller (SIGSTOP) must
        neither hold the poll nor, on the shared connection, the offsets requests behind it. Harvested
        after the offsets round (_harvest_reassignments); one question in flight at a time."""
        if self._moves_ask is not None:
            return
        controller = md.get("controller_id")
        node = controller if self.zk is not None and controller is not None and controller >= 0 else self._last_node
        qc = self._quorum_connection(admin._client)
        if qc.ready(node, metadata_priority=False):
            timeout = self.settings.request_timeout_ms
            future = qc.send(node, reassignments.request(timeout), wakeup=False, request_timeout_ms=2 * timeout)
            self._moves_ask = (future, time.monotonic())
        qc.poll(timeout_ms=0)  # on the wire now (or connecting: asked at a later poll)

    def _harvest_reassignments(self) -> None:
        """The answer if it came during the offsets round; else the last one stays (at most one poll
        old) until it comes or fails. A failure is logged once and judges partitions as before."""
        if self._moves_ask is None or self._quorum_client is None:
            return
        future, _sent = self._moves_ask
        self._quorum_client.poll(timeout_ms=0)
        if not future.is_done:
            return
        self._moves_ask = None
        if future.failed():
            self._note_kraft("ListPartitionReassignments", future.exception)
            self._moves = {}
            return
        moves = self._kraft_call("ListPartitionReassignments", lambda: reassignments.parse(future.value.to_object()))
        self._moves = moves or {}

    def _kraft_call(self, what: str, call: Any) -> Any:
        try:
            result = call()
        except Exception as e:  # noqa: BLE001 - the Metadata view still stands
            self._note_kraft(what, e)
            return None
        self._note_kraft(what, None)
        return result

    def _note_kraft(self, what: str, error: BaseException | None) -> None:
        """A KRaft request's failure is logged once, and so is its recovery."""
        if error is not None and what not in self._kraft_failed:
            log.warning("cluster %s: %s failed (%s: %s); going on without it", self.cluster.name, what,
                        type(error).__name__, error)
            self._kraft_failed.add(what)
        elif error is None and what in self._kraft_failed:
            log.warning("cluster %s: %s answered again", self.cluster.name, what)
            self._kraft_failed.discard(what)

    def _no_older(self, topic: str, part: dict[str, Any]) -> None:
        """A record never goes back in leader epoch. The two views krm reads trail each other by a
        few ms: at a broker's return the brokers' metadata named the new leader while the mirror's
        watch for that partition had not fired yet, and a quick record for another partition's
        change, stamped later, republished the old state (an OFFLINE_PARTITION reopened for 2 ms).
        Leader epochs only grow (the controller bumps one at every election), so a part older
        than what was already published takes the published leader and ISR."""
        epoch = part.get("leader_epoch")
        if epoch is None:
            return
        key = (topic, part["partition"])
        newer = self._published.get(key)
        now = time.monotonic()
        # Only for the lag between the views (ms to a metadata propagation), and only with the leader and
        # ISR among the replicas: a topic deleted and created again starts its epochs from 0.
        if (newer is not None and newer[0] > epoch and now - newer[3] < NO_OLDER_WINDOW_S
                and set(newer[2]) | ({newer[1]} - {-1}) <= set(part["replicas"])):
            part.update(leader_epoch=newer[0], leader=newer[1], isr=list(newer[2]))
            part.pop("zk_mtime_ms", None)
        else:
            self._published[key] = (epoch, part["leader"], list(part["isr"]), now)

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
                brokers=self._zookeeper_brokers(live),
                topic_count=last["topic_count"], partition_count=last["partition_count"],
                replica_lag_time_max_ms=last.get("replica_lag_time_max_ms"),
                leader_imbalance_per_broker_percentage=last.get("leader_imbalance_per_broker_percentage"),
                reassignment_in_progress=self.zk.reassigning))
        return out + self._mirror_topics(topics, poll_id, at, live, arrived, resolves=not self._degraded)

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
            pending = {p["partition"]: p for p in (arrived or {}).get(topic, [])}
            for pid, replicas in sorted(assignment.items()):
                zs = self.zk.partition(topic, pid)
                if zs is None:
                    continue
                part = {"partition": pid, "leader": zs.leader, "leader_epoch": zs.leader_epoch,
                        "replicas": list(replicas), "isr": list(zs.isr), "zk_mtime_ms": zs.mtime_ms}
                newer = pending.get(pid)
                if newer is not None and _later_election(newer, zs.leader_epoch, replicas):
                    part.update(leader=newer["leader"], leader_epoch=newer["leader_epoch"], isr=list(newer["isr"]))
                    part.pop("zk_mtime_ms")
                self._no_older(topic, part)  # this partition's watch may not have fired yet
                self._carry_move(topic, part, moves.get(pid))
                parts.append(part)
            min_isr, unclean = self._configs.get(topic, (None, None))
            out.append(topic_record(self.cluster.name, "zookeeper", poll_id, at, topic=topic, live_brokers=live,
                                    partitions=parts, min_insync_replicas=min_isr, unclean_leader_election=unclean,
                                    replica_lag_time_max_ms=self._replica_lag_time_max_ms, has_offsets=False,
                                    resolves=resolves))
        return out

    def _metadata(self, admin: Any) -> dict[str, Any]:
        """One MetadataRequest for all topics, to the broker that answered last (brokers that did not
        answer the last offsets round go last); on a failure or after request_timeout_ms, to the
        next broker the client knows. A dead or paused broker costs one poll at most that timeout
        once, not a failed poll."""
        from kafka.protocol.metadata import MetadataRequest

        client = admin._client
        version = client.api_version(MetadataRequest, max_version=8)
        if version >= 8:  # (8 at most) decoded by hand: see collectors/wire.py
            request = wire.MetadataRequestV8(topics=None, allow_auto_topic_creation=False,
                                             include_cluster_authorized_operations=False,
                                             include_topic_authorized_operations=False)
        else:
            request = MetadataRequest[version](topics=None, allow_auto_topic_creation=False)
        known = [b.nodeId for b in client.cluster.brokers()] or [client.least_loaded_node()]
        silent = self.last_offsets.unanswered if self.last_offsets is not None else set()
        order = sorted(known, key=lambda n: (n in silent, n != self._last_node, n))
        last_error: Exception | None = None
        for node in order:
            try:
                response = ask(client, node, request, self.settings.request_timeout_ms)
            except Exception as e:  # noqa: BLE001 - try the next broker
                last_error = e
                continue
            self._last_node = node
            try:
                client.cluster.update_metadata(response)  # so the offsets round can reach new brokers
            except Exception as e:  # noqa: BLE001 - the client's own refresh will catch up
                log.debug("client metadata not updated: %s", e)
            return response.to_object()
        raise last_error or RuntimeError("no broker to ask")

    def _may_ask_configs(self) -> bool:
        """Not while a DescribeConfigs backs off, nor while krm's own ZooKeeper session is down in
        ZooKeeper mode. A ZooKeeper-mode broker reads topic configs from ZooKeeper (AdminZkClient):
        with ZooKeeper gone, the request holds one of the broker's request handler threads until
        ZooKeeper is back, and a few of them stop the broker answering anyone (measured: two with
        num.io.threads 2) — krm must not take a broker down, nor page about it afterwards."""
        if time.monotonic() < self._configs_retry_at:
            return False
        return self.zk is None or self.zk.connected

    def _refresh_configs(self, admin: Any, topics: list[str], brokers: list[int]) -> None:
        """Topic configs change rarely: fetch all every config_refresh_s, and new topics at once.
        Values are the effective ones (topic override, else broker default). With them, one
        broker's replica.lag.time.max.ms: the default HW-stall window."""
        from kafka.admin import ConfigResourceType
        from kafka.protocol.admin import DescribeConfigsRequest

        due = time.monotonic() - self._configs_at >= self.settings.config_refresh_s
        wanted = topics if due else [t for t in topics if t not in self._configs]
        if not wanted and self._replica_lag_time_max_ms is not None:
            return
        if self._last_node not in brokers:
            return
        resources = [(ConfigResourceType.TOPIC.value, t, list(TOPIC_CONFIGS)) for t in wanted]
        if due or self._replica_lag_time_max_ms is None:
            # a broker config is answered only by that broker: the one that just answered metadata,
            # which gets the whole request (under the same bounded timeout as the metadata)
            resources.append((ConfigResourceType.BROKER.value, str(self._last_node), list(BROKER_CONFIGS)))
        client = admin._client
        version = client.api_version(DescribeConfigsRequest, max_version=2)
        request = (DescribeConfigsRequest[version](resources=resources) if version == 0 else
                   DescribeConfigsRequest[version](resources=resources, include_synonyms=False))
        fresh: dict[str, tuple[int | None, bool | None]] = {}
        denied: set[str] = set()
        response = ask(client, self._last_node, request, self.settings.request_timeout_ms)
        for res in response.to_object()["resources"]:
            if res["error_code"] in (access.TOPIC_AUTHORIZATION_FAILED, access.CLUSTER_AUTHORIZATION_FAILED):
                kind = "TOPIC" if res["resource_type"] == ConfigResourceType.TOPIC.value else "CLUSTER"
                denied.add(f"DESCRIBE_CONFIGS on {kind} {res['resource_name'] if kind == 'TOPIC' else ''}".rstrip())
            if res["error_code"] != 0:
                continue
            entries = {e["config_names"]: e["config_value"] for e in res["config_entries"]}
            if res["resource_type"] == ConfigResourceType.BROKER.value:
                lag = entries.get("replica.lag.time.max.ms")
                pct = entries.get("leader.imbalance.per.broker.percentage")
                self._replica_lag_time_max_ms = int(lag) if lag is not None else None
                self._leader_imbalance_pct = int(pct) if pct is not None else None
                continue
            min_isr = entries.get("min.insync.replicas")
            unclean = entries.get("unclean.leader.election.enable")
            fresh[res["resource_name"]] = (
                int(min_isr) if min_isr is not None else None,
                unclean.lower() == "true" if unclean is not None else None,
            )
        if due:
            self._configs = fresh
            self._configs_at = time.monotonic()
            self._config_denied = denied
        else:
            self._configs.update(fresh)
            self._config_denied |= denied

    def _client(self, avoid: Any = None) -> Any:
        if self._admin is None:
            from kafka.admin import KafkaAdminClient

            seen = [f"{b['host']}:{b['port']}" for bid, b in sorted(self._live_last.items()) if bid != avoid]
            self._admin = KafkaAdminClient(
                bootstrap_servers=seen + self.cluster.bootstrap_servers.split(","),
                client_id=f"krm-collector-{self.cluster.name}",
                request_timeout_ms=self.settings.request_timeout_ms,
                api_version_auto_timeout_ms=self.settings.request_timeout_ms,
                reconnect_backoff_max_ms=1000,  # a restarted broker is asked again within a second
                receive_message_max_bytes=MAX_ANSWER_BYTES,
                **kafka_python_kwargs(self.cluster.security),
            )
        return self._admin

    def _close(self) -> None:
        self._quorum_ask = None
        self._moves_ask = None
        if self._quorum_client is not None:
            try:
                self._quorum_client.close()
            except Exception:  # noqa: BLE001 - as below
                pass
            self._quorum_client = None
        if self._admin is not None:
            try:
                self._admin.close()
            except Exception:  # noqa: BLE001 - closing a broken client must not mask the real error
                pass
            self._admin = None
