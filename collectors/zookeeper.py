"""ZooKeeper source (ZooKeeper-mode clusters, any chroot): the controller's own view, kept by watches.

In ZooKeeper mode the controller writes every leader election and ISR change to the partition's
`state` znode *before* it tells the brokers (KafkaController -> ZkPartitionStateMachine ->
KafkaZkClient.updateLeaderAndIsr, then UpdateMetadata requests), so the brokers' metadata caches,
and with them the Admin API, trail ZooKeeper. This module mirrors, through watches:
- `/brokers/ids` (registered brokers; ephemeral znodes that vanish when a broker's session ends),
- `/controller`,
- `/brokers/topics/<t>` (the assignment: partition -> replicas),
- `/brokers/topics/<t>/partitions/<p>/state` (leader, leader_epoch, isr, controller_epoch), with the
  znode's modification time (`mtime`, ZooKeeper's clock at Kafka's write) and version,
- `/admin/reassign_partitions` (present while a reassignment runs).

The collector then takes leader, epoch, ISR and live brokers from here, and offsets and configs
from the Admin API: one source per field, so the two never disagree about a partition. A state
change marks its topic dirty and wakes the collector, which publishes that topic at once (a
metadata-only record, see collectors/admin.py) instead of at the next tick. A broker registration
or controller change asks for a full poll, repeated over the next seconds because the brokers'
offsets and metadata settle after the controller's writes.

A dead ZooKeeper never stops the collector: it logs once and the Admin API view is used alone.
"""

from __future__ import annotations

import json
import logging
import socket
import ssl
import threading
import time
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Callable

from foundation.config import ClusterConfig
from foundation.security import TlsFiles, ZooKeeperSecurity, kazoo_kwargs

if TYPE_CHECKING:
    from kazoo.client import KazooClient
    from kazoo.protocol.states import ZnodeStat

# a DataWatch callback: False stops the watch
Watch = Callable[[bytes | None, "ZnodeStat | None"], "bool | None"]

log = logging.getLogger(__name__)

BURST_S = (0.05, 0.3, 1.0, 2.5)  # full re-polls after a broker or controller change
# A deleted /controller is normally re-created by the next broker within milliseconds (every broker
# watches it and races to create it: KafkaController.scala, `elect`). Until this long has passed the
# previous holder is still reported, as the brokers' own Metadata answers do (their metadata cache
# keeps the old controller id until the new controller's UpdateMetadata): an ordinary fail-over is
# no "no active controller" page.
CONTROLLER_ELECTION_GRACE_S = 5.0
# the longest a poll waits for ZooKeeper's answers on the leaderships of a broker it just found down
REREAD_TIMEOUT_S = 1.0


@dataclass(frozen=True)
class ZkPartition:
    leader: int
    leader_epoch: int
    isr: tuple[int, ...]
    controller_epoch: int | None
    mtime_ms: int  # ZooKeeper's modification time of the state znode: when Kafka wrote it
    version: int


class ZkState:
    """Construct opens nothing; start() connects and sets the watches."""

    def __init__(self, cluster: ClusterConfig, wake_poll: Callable[[], None],
                 wake_publish: Callable[[], None] | None = None) -> None:
        if not cluster.zookeeper:
            raise ValueError(f"cluster {cluster.name} has no zookeeper address")
        self.cluster = cluster
        self.wake_poll = wake_poll  # a full poll is wanted (broker or controller change)
        self.wake_publish = wake_publish or wake_poll  # topics are dirty (state znode change)
        self._zk: KazooClient | None = None
        self._lock = threading.Lock()
        self._brokers: set[int] | None = None
        self._controller: int | None = None
        self._controller_previous: int | None = None  # the holder before a deletion, during the grace
        self._controller_gone_at: float | None = None  # monotonic time /controller was found deleted
        self._previous_kraft_epoch = -1
        self._controller_seen = False
        self._controller_kraft_epoch = -1  # /controller's kraftControllerEpoch: >= 0 once a KRaft controller holds it
        self._migration_offset: int | None = None  # /migration's kraft_metadata_offset; None: no migration
        self._migration_changed_at = time.monotonic()  # when /migration last changed
        self._migration_data: bytes | None = None
        self._phase: int | None = None  # the last migration phase logged
        self._phase_since_ms: int | None = None  # epoch ms when krm first saw that phase
        self._assignments: dict[str, dict[int, tuple[int, ...]]] = {}
        # topic -> partition -> (adding, removing) while a reassignment moves it (the topic znode's
        # adding_replicas / removing_replicas, written by the controller since Kafka 2.4, KIP-455)
        self._moves: dict[str, dict[int, tuple[tuple[int, ...], tuple[int, ...]]]] = {}
        self._states: dict[tuple[str, int], ZkPartition] = {}
        self._watched_states: set[tuple[str, int]] = set()
        self._dirty: set[str] = set()
        self._poll_requested = False
        self._timers: list[threading.Timer] = []
        self._stopping = False
        self.reassigning = False
        self.events = 0

    # ------------------------------------------------------------------ lifecycle

    def start(self) -> ZkState:
        from kazoo.client import KazooClient

        self._zk = KazooClient(hosts=self.cluster.zookeeper, timeout=6.0, read_only=True,
                               **kazoo_kwargs(self.cluster.zookeeper_security))
        self._zk.add_listener(self._on_connection)
        try:
            self._zk.start(timeout=10)
        except Exception as e:  # noqa: BLE001 - degrade to the Admin API alone
            log.warning("cluster %s: ZooKeeper %s %s; using the Admin API alone", self.cluster.name,
                        self.cluster.zookeeper, _zk_failure(e, self.cluster.zookeeper_security, self.cluster.zookeeper or ""))
            self._stopping = True  # no background reconnects: the watches were never set up
            self._zk.stop()
            return self
        zk = self._zk
        # who holds the metadata first (each watch reads at once): a poll between two of these must
        # not judge a migrated cluster's empty /brokers/ids as every broker gone
        zk.DataWatch("/migration", self._on_migration)
        zk.DataWatch("/controller", self._on_controller)
        zk.ChildrenWatch("/brokers/ids", self._on_ids)
        zk.ChildrenWatch("/brokers/topics", self._on_topics)
        zk.DataWatch("/admin/reassign_partitions", self._on_reassign)
        return self

    def stop(self) -> None:
        self._stopping = True  # the session's end is ours, not news
        with self._lock:
            for t in self._timers:
                t.cancel()
            self._timers = []
        if self._zk is not None:
            try:
                self._zk.stop()
                self._zk.close()
            except Exception:  # noqa: BLE001 - closing a broken session must not mask anything
                pass
            self._zk = None

    @property
    def connected(self) -> bool:
        return self._zk is not None and self._zk.connected

    # ------------------------------------------------------------------ the ZooKeeper → KRaft migration

    @property
    def kraft_in_charge(self) -> bool:
        """Whether a KRaft controller holds the metadata (KIP-866): it claimed /controller with its
        epoch (a migration's dual writes), or the migration finished and left ZooKeeper for good.
        ZooKeeper is then a mirror at best: KRaft brokers never register in /brokers/ids."""
        return self.migration_phase() in (MIGRATION, POST_MIGRATION)

    def migration_phase(self, now: float | None = None) -> int:
        """The cluster's phase, numbered as Kafka's ZkMigrationState (metadata/.../migration/
        ZkMigrationState.java) so an operator reads it as the controller's own metric: ZK (4) no
        migration, PRE_MIGRATION (2) a KRaft controller claimed /controller and is copying
        ZooKeeper's metadata, MIGRATION (1) dual writes, POST_MIGRATION (3) finalized (the
        controllers left ZooKeeper: /controller gone for good after the migration)."""
        with self._lock:
            offset, epoch = self._migration_offset, self._controller_kraft_epoch
            changed_at = self._migration_changed_at
            holder = self._controller
            if holder is None and self._controller_gone_at is not None:
                now = time.monotonic() if now is None else now
                if now - self._controller_gone_at < CONTROLLER_ELECTION_GRACE_S:
                    holder, epoch = self._controller_previous, self._previous_kraft_epoch
        if holder is not None and epoch >= 0:
            if offset is None or offset < 0:
                return PRE_MIGRATION
            # the last KRaft controller's claim on /controller stays after finalization; what stops
            # is the mirroring: in dual writes /migration follows the metadata log, which the
            # controller extends at least every metadata.max.idle.interval.ms (500 ms, KIP-835)
            quiet = (time.monotonic() if now is None else now) - changed_at
            return POST_MIGRATION if quiet > MIGRATION_QUIET_S else MIGRATION
        if holder is None and offset is not None and offset >= 0:
            return POST_MIGRATION
        return ZK

    def migration_phase_since_ms(self) -> int | None:
        """When krm first saw the current phase (epoch ms; a phase older than krm's start counts from it)."""
        with self._lock:
            return self._phase_since_ms

    def zk_brokers(self) -> int | None:
        """Brokers registered in ZooKeeper (during a migration: those still in ZooKeeper mode)."""
        with self._lock:
            return len(self._brokers) if self._brokers is not None and self.connected else None

    def _on_migration(self, data: bytes | None, _stat: ZnodeStat | None) -> None:
        offset = _json(data).get("kraft_metadata_offset") if data else None
        with self._lock:
            if data != self._migration_data:  # kazoo reads it again after a reconnect: not a change
                self._migration_data, self._migration_changed_at = data, time.monotonic()
            self._migration_offset = int(offset) if isinstance(offset, int) else None
        self.note_phase()

    def note_phase(self) -> None:
        """Log the migration phase when it changed (a poll calls this too: finalization shows as the
        mirroring going quiet, with no watch firing)."""
        self._log_phase()

    def _log_phase(self) -> None:
        phase = self.migration_phase()
        with self._lock:
            changed = phase != self._phase and (self._phase is not None or phase != ZK)
            if phase != self._phase:
                self._phase_since_ms = int(time.time() * 1000)
            self._phase = phase
        if changed:
            log.info("cluster %s: ZooKeeper → KRaft migration: %s", self.cluster.name, PHASE_WORDS[phase])
            self._burst()

    # ------------------------------------------------------------------ what the collector reads

    def live_brokers(self) -> set[int] | None:
        """Registered broker ids, or None when ZooKeeper's view is not available."""
        with self._lock:
            return set(self._brokers) if self._brokers is not None and self.connected else None

    def controller(self, now: float | None = None) -> int | None:
        """The broker holding /controller; the previous holder for CONTROLLER_ELECTION_GRACE_S after a
        deletion (an election in progress), None after that."""
        with self._lock:
            if self._controller is None and self._controller_gone_at is not None:
                now = time.monotonic() if now is None else now
                if now - self._controller_gone_at < CONTROLLER_ELECTION_GRACE_S:
                    return self._controller_previous
            return self._controller

    def partition(self, topic: str, partition: int) -> ZkPartition | None:
        if not self.connected:
            return None
        with self._lock:
            return self._states.get((topic, partition))

    def reread_led_by(self, brokers: set[int], timeout_s: float = REREAD_TIMEOUT_S) -> int:
        """Read again, from ZooKeeper itself, the state of every partition the mirror says one of
        `brokers` leads; returns how many had changed. For brokers a poll has just found down: a clean
        stop closes its ports only after the controller wrote its leaderships elsewhere
        (KafkaController.doControlledShutdown answers once they are moved), but the watches deliver
        those writes a moment later on a loaded machine, and the poll would otherwise call the old
        leader's partitions leaderless. A crashed broker's leaderships read back unchanged: its page
        waits only for these reads (one round trip, all sent at once), at most `timeout_s`."""
        zk = self._zk
        if zk is None or not brokers or not zk.connected:
            return 0
        with self._lock:
            keys = [k for k, st in self._states.items() if st.leader in brokers]
        if not keys:
            return 0
        deadline = time.monotonic() + timeout_s
        try:
            zk.sync_async("/brokers/topics").get(timeout=timeout_s)  # the server's view caught up with the leader's
            pending = [(k, zk.get_async(f"/brokers/topics/{k[0]}/partitions/{k[1]}/state")) for k in keys]
        except Exception as e:  # noqa: BLE001 - the mirror as it is, then
            log.info("cluster %s: ZooKeeper re-read of brokers %s' leaderships failed (%s)",
                     self.cluster.name, sorted(brokers), e)
            return 0
        changed = 0
        for key, answer in pending:
            try:
                data, stat = answer.get(timeout=max(0.0, deadline - time.monotonic()))
            except Exception:  # noqa: BLE001 - a deleted znode or the deadline: its watch will say
                continue
            state = _state(data, stat)
            if state is None:
                continue
            with self._lock:
                if key in self._states and _newer(state, self._states[key]) and state != self._states[key]:
                    self._states[key] = state
                    changed += 1
        if changed:
            log.info("cluster %s: %d partition state(s) of brokers %s re-read from ZooKeeper ahead of their watches",
                     self.cluster.name, changed, sorted(brokers))
        return changed

    def assignment(self, topic: str) -> dict[int, tuple[int, ...]] | None:
        with self._lock:
            a = self._assignments.get(topic)
            return dict(a) if a is not None else None

    def moves(self, topic: str) -> dict[int, tuple[tuple[int, ...], tuple[int, ...]]]:
        """partition -> (adding, removing) replicas of the topic's running reassignments."""
        with self._lock:
            return dict(self._moves.get(topic) or {})

    def topics(self) -> list[str]:
        """Every topic the mirror holds an assignment of."""
        with self._lock:
            return sorted(self._assignments)

    def take_dirty(self) -> set[str]:
        """Topics whose state changed since the last call."""
        with self._lock:
            dirty, self._dirty = self._dirty, set()
            return dirty

    def take_poll_request(self) -> bool:
        """Whether a full poll was asked for since the last call."""
        with self._lock:
            asked, self._poll_requested = self._poll_requested, False
            return asked

    # ------------------------------------------------------------------ watches (kazoo's thread)

    def _on_ids(self, children: list[str]) -> None:
        ids = {int(c) for c in children if c.isdigit()}
        with self._lock:
            first = self._brokers is None
            self._brokers = ids
        if not first:
            log.info("cluster %s: registered brokers now %s", self.cluster.name, sorted(ids))
            self._burst()

    def _on_controller(self, data: bytes | None, stat: ZnodeStat | None) -> None:
        doc = _json(data) if data else {}
        cid = doc.get("brokerid")
        kraft_epoch = doc.get("kraftControllerEpoch", -1)  # ControllerZNode: -1 for a ZooKeeper-mode controller
        with self._lock:
            first = not self._controller_seen
            self._controller_seen = True
            if cid is None and self._controller is not None and not first:
                self._controller_previous, self._controller_gone_at = self._controller, time.monotonic()
                self._previous_kraft_epoch = self._controller_kraft_epoch
            elif cid is not None:
                self._controller_previous, self._controller_gone_at = None, None
            self._controller = cid
            self._controller_kraft_epoch = kraft_epoch if isinstance(kraft_epoch, int) else -1
        self._log_phase()
        if not first:
            log.info("cluster %s: /controller now %s", self.cluster.name, cid)
            self._burst()
            if cid is None:  # look again once the grace is over: still none is news
                self._later(CONTROLLER_ELECTION_GRACE_S + 0.05, self._request_poll)

    def _on_reassign(self, data: bytes | None, _stat: ZnodeStat | None) -> None:
        self.reassigning = data is not None

    def _on_topics(self, children: list[str]) -> None:
        with self._lock:
            new = [t for t in children if t not in self._assignments]
            for t in new:
                self._assignments[t] = {}
        zk = self._zk
        if zk is None:  # stopped meanwhile
            return
        for t in new:
            zk.DataWatch(f"/brokers/topics/{t}", self._assignment_watch(t))

    def _assignment_watch(self, topic: str) -> Watch:
        def on_assignment(data: bytes | None, _stat: ZnodeStat | None) -> bool | None:
            if data is None:  # topic deleted
                with self._lock:
                    self._assignments.pop(topic, None)
                    self._moves.pop(topic, None)
                    for key in [k for k in self._states if k[0] == topic]:
                        del self._states[key]
                    self._watched_states = {k for k in self._watched_states if k[0] != topic}
                return False
            doc = _json(data)
            parts = {int(p): tuple(r) for p, r in (doc.get("partitions") or {}).items()}
            moves = zk_moves(doc)
            with self._lock:
                self._assignments[topic] = parts
                self._moves[topic] = moves
                new = [(topic, p) for p in parts if (topic, p) not in self._watched_states]
                self._watched_states.update(new)
            zk = self._zk
            if zk is None:  # stopped meanwhile
                return False
            for t, p in new:
                zk.DataWatch(f"/brokers/topics/{t}/partitions/{p}/state", self._state_watch(t, p))
            return None
        return on_assignment

    def _state_watch(self, topic: str, partition: int) -> Watch:
        seen = {"first": True}

        def on_state(data: bytes | None, stat: ZnodeStat | None) -> bool | None:
            first = seen.pop("first", False)
            if data is None or stat is None:
                with self._lock:
                    self._states.pop((topic, partition), None)
                    if topic not in self._assignments:
                        return False
                return None
            state = _state(data, stat)
            if state is None:
                return None
            with self._lock:
                if not _newer(state, self._states.get((topic, partition))):
                    return None  # reread_led_by already holds a later write
                self._states[(topic, partition)] = state
                if not first:
                    self._dirty.add(topic)
            if not first:
                self.events += 1
                self.wake_publish()
            return None
        return on_state

    def _burst(self) -> None:
        self.events += 1
        for delay in BURST_S:
            self._later(delay, self._request_poll)

    def _later(self, delay: float, action: Callable[[], None]) -> None:
        with self._lock:
            self._timers = [t for t in self._timers if t.is_alive()]
            t = threading.Timer(delay, action)
            t.daemon = True
            t.start()
            self._timers.append(t)

    def _request_poll(self) -> None:
        with self._lock:
            self._poll_requested = True
        self.wake_poll()

    def _on_connection(self, state: str) -> None:
        if self._stopping:
            return
        if state == "LOST":
            log.warning("cluster %s: ZooKeeper session lost; the Admin API view is used until it returns",
                        self.cluster.name)
        elif state == "CONNECTED" and self._zk is not None and self.events:
            threading.Timer(0.0, self._burst).start()  # whatever happened while disconnected: look now


MIGRATION_QUIET_S = 60.0  # /migration unchanged this long while a KRaft controller holds /controller: finalized
# Kafka's ZkMigrationState values (metadata/src/main/java/org/apache/kafka/metadata/migration/ZkMigrationState.java)
MIGRATION, PRE_MIGRATION, POST_MIGRATION, ZK = 1, 2, 3, 4
PHASE_WORDS = {
    ZK: "none (ZooKeeper holds the metadata)",
    PRE_MIGRATION: "a KRaft controller claimed /controller and copies ZooKeeper's metadata",
    MIGRATION: "dual writes (a KRaft controller holds the metadata and mirrors it to ZooKeeper); brokers are "
               "judged from the Admin API, not /brokers/ids",
    POST_MIGRATION: "finalized (the KRaft controllers left ZooKeeper); brokers are judged from the Admin API",
}


def zk_moves(doc: dict[str, Any]) -> dict[int, tuple[tuple[int, ...], tuple[int, ...]]]:
    """partition -> (adding, removing) from a topic znode (version 2: `adding_replicas` and
    `removing_replicas`, each partition -> brokers, present only for partitions being moved;
    kafka.zk.TopicZNode in core/src/main/scala/kafka/zk/ZkData.scala)."""
    adding, removing = doc.get("adding_replicas") or {}, doc.get("removing_replicas") or {}
    out = {}
    for p in set(adding) | set(removing):
        a, r = tuple(adding.get(p) or ()), tuple(removing.get(p) or ())
        if a or r:
            out[int(p)] = (a, r)
    return out


def _state(data: bytes, stat: ZnodeStat) -> ZkPartition | None:
    """A partition's state znode as the mirror holds it; None when it names no leader."""
    s = _json(data)
    if "leader" not in s:
        return None
    return ZkPartition(int(s["leader"]), int(s.get("leader_epoch", -1)), tuple(s.get("isr") or ()),
                       s.get("controller_epoch"), int(stat.mtime), int(stat.version))


def _newer(state: ZkPartition, held: ZkPartition | None) -> bool:
    """Whether `state` may replace `held`: not an older version of the same znode (a watch's read
    that a direct re-read overtook). A re-created znode (a topic deleted and created again) starts its
    versions over, later in ZooKeeper's clock."""
    return held is None or state.version >= held.version or state.mtime_ms > held.mtime_ms


def _json(data: bytes) -> dict[str, Any]:
    try:
        value = json.loads(data.decode())
        return value if isinstance(value, dict) else {}
    except (ValueError, UnicodeDecodeError):
        return {}


def _zk_failure(e: BaseException, security: ZooKeeperSecurity | None, hosts: str = "") -> str:
    """Why a ZooKeeper session did not start, said for an operator. kazoo retries a refused TLS
    handshake until its start times out, so over TLS one handshake of our own tells why."""
    from kazoo.exceptions import AuthFailedError, SessionClosedRequireSaslError

    sasl_user = getattr(security, "username", None)
    if isinstance(e, SessionClosedRequireSaslError):
        return "requires SASL authentication: set [clusters.zookeeper_security] sasl_username and sasl_password_file"
    if isinstance(e, AuthFailedError):
        return f"refused the login (DIGEST-MD5, user {sasl_user})" if sasl_user else "refused the login"
    tls = getattr(security, "tls", None)
    refused = tls_refusal(hosts, tls) if tls is not None and hosts else None
    if refused:
        return f"refused the TLS connection: {refused}"
    return f"unreachable ({type(e).__name__}{': ' + str(e) if str(e) else ''})"


def tls_refusal(hosts: str, tls: TlsFiles, timeout_s: float = 2.0) -> str | None:
    """Why the first ZooKeeper server that answers refuses our TLS (its certificate not trusted, or
    ours refused: with TLS 1.3 the server's alert comes after the handshake, on the first read), or
    None when the handshake holds or no server answers."""
    for host, port in _zk_addresses(hosts):
        try:
            with socket.create_connection((host, port), timeout=timeout_s) as raw:
                with tls.context().wrap_socket(raw, server_hostname=host) as conn:
                    try:
                        conn.recv(1)  # ZooKeeper waits for our ConnectRequest: silence means accepted
                    except (TimeoutError, socket.timeout):
                        return None
        except ssl.SSLCertVerificationError as err:
            return f"its certificate was not accepted ({err.verify_message}); is ssl_cafile {tls.cafile} its CA?"
        except ssl.SSLError as err:
            if tls.certfile:
                return f"it refused the client certificate {tls.certfile} ({err.reason})"
            return f"it requires a client certificate and none is configured: set ssl_certfile ({err.reason})"
        except OSError:
            continue
    return None


def _zk_addresses(hosts: str) -> list[tuple[str, int]]:
    """host:port pairs of a ZooKeeper connect string (the chroot after the last server dropped)."""
    out = []
    for part in hosts.split("/", 1)[0].split(","):
        host, _, port = part.strip().rpartition(":")
        if host and port.isdigit():
            out.append((host.strip("[]"), int(port)))
    return out

