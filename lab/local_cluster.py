"""A real local Kafka cluster from Maven Central jars: ZooKeeper mode (3.9, optional chroot) or KRaft
(3.9 or 4.x, one controller or a quorum of them).

Used by `krm local-cluster`, `krm demo` and the test suite's session fixtures. Every process is a
real JVM started detached (it outlives the CLI call that started it), logs to files under the
cluster's folder, listens on free loopback ports and carries the JMX exporter agent. The cluster's
state (pids, ports) lives in `<root>/state.json`, so later CLI calls can kill, pause or stop it.

Versions: ZooKeeper mode runs Kafka 3.9.1, the last release with ZooKeeper; KRaft mode defaults to the
newest Kafka 4.x fetched by `make jars` (Eligible Leader Replicas on by default) and takes 3.9.1 with
`--kafka-version`. Each version's jars sit in their own folder (KAFKA_RUNTIMES).

Timing settings differ from Kafka's defaults only where fault tests would otherwise wait:
ZooKeeper session 6 s (default 18 s), KRaft broker session 6 s (default 9 s),
replica.lag.time.max.ms 10 s (default 30 s). Override any broker setting with `broker_config`.
"""

from __future__ import annotations

import base64
import hashlib
import json
import logging
import os
import random
import shutil
import signal
import socket
import subprocess
import time
import uuid
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from foundation.errors import ClusterError
from foundation.paths import CONF_DIR, IN_CHECKOUT, JVM_DIR, jar_group, jars_dir
from lab import cpu_cap, packet_filter, slow_disk
from lab.local_kdc import LocalKdc
from lab.local_security import ADMIN_USER, KRM_USER, MECHANISM, LocalSecurity, grant_krm_acls

log = logging.getLogger(__name__)

KRAFT_CONTROLLER_ID = 1000  # the first controller's node id; a quorum of N uses 1000 .. 1000+N-1
# Kafka version -> (jar group under .cache/jars, log4j configuration it reads). One pom per version in jvm/.
KAFKA_RUNTIMES = {
    "3.9.1": ("kafka", "kafka-log4j.properties"),  # reload4j (log4j 1 API)
    "4.4.0": ("kafka-4.4.0", "kafka-log4j2.properties"),  # log4j2
}
# The compatibility lines (`make compat-jars`, not `make jars`: the suite runs on the two above): the
# last release of each line from 2.8, each in its own folder, from jvm/kafka-pom.xml (3.x and 2.8:
# log4j 1 via reload4j) or jvm/kafka4-pom.xml (4.x: log4j2) with the version as a property.
COMPAT_VERSIONS = ("2.8.2", "3.0.2", "3.1.2", "3.2.3", "3.3.2", "3.4.1", "3.5.2", "3.6.2", "3.7.2", "3.8.1", "3.9.2",
                   "4.0.2", "4.1.2", "4.2.2", "4.3.1")
KAFKA_RUNTIMES |= {v: (f"kafka-{v}", "kafka-log4j2.properties" if v.startswith("4.") else "kafka-log4j.properties")
                   for v in COMPAT_VERSIONS}
KRAFT_SINCE = "3.3"  # KRaft production-ready (KIP-833); earlier releases only as a preview
ZK_KAFKA_VERSION = "3.9.1"  # ZooKeeper mode was removed in Kafka 4.0
KRAFT_KAFKA_VERSION = "4.4.0"  # the newest Kafka 4.x on Maven Central
SECURITY_MODES = ("plaintext", "sasl_ssl", "mtls")
TIERED_SINCE = (3, 9)  # tiered storage (KIP-405) production-ready
REMOTE_STORAGE_MANAGER = "io.krm.tiered.FolderRemoteStorageManager"  # jvm/tiered/, compiled on first use


def release_tuple(version: str) -> tuple[int, ...]:
    """(major, minor) of a release, for comparing lines: "3.9.2" -> (3, 9)."""
    return tuple(int(x) for x in version.split(".")[:2])


def default_kafka_version(mode: str) -> str:
    return ZK_KAFKA_VERSION if mode == "zk" else KRAFT_KAFKA_VERSION
JVM_OPTS = ["-Xms64m", "-XX:+UseSerialGC", "-Djava.awt.headless=true"]  # + $KRM_JVM_OPTS (split on spaces)
HEAP_MB = 384  # enough for the tests' few hundred partitions; benchmarks with thousands pass more


_HANDED_OUT: set[int] = set()  # ports this process gave out: never twice


def _ephemeral_start() -> int:
    try:
        return int(Path("/proc/sys/net/ipv4/ip_local_port_range").read_text().split()[0])
    except (OSError, ValueError, IndexError):
        return 32768  # Linux's default start


def free_port() -> int:
    """A free loopback port below the kernel's ephemeral range: a port picked there is only taken
    when a process binds it, where one inside the range may be handed to any outgoing connection
    between this check and the bind (a broker's port once went so: `Address already in use` while
    the suite's clients connected elsewhere). Random, so two processes seldom pick alike."""
    low, high = 10_000, _ephemeral_start() - 1
    for _ in range(200 if high - low > 1000 else 0):
        port = random.randint(low, high)
        if port in _HANDED_OUT:
            continue
        try:
            with socket.socket() as s:
                s.bind(("127.0.0.1", port))
        except OSError:
            continue
        _HANDED_OUT.add(port)
        return port
    with socket.socket() as s:  # no room below the range: the kernel's choice
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def free_port_pair() -> int:
    """A port P with P + 1 free too, below the ephemeral range as `free_port`'s (a pair for a
    process that binds its port and the next one)."""
    low, high = 10_000, _ephemeral_start() - 2
    for _ in range(200):
        port = random.randint(low, max(low, high))
        if port in _HANDED_OUT or port + 1 in _HANDED_OUT:
            continue
        try:
            with socket.socket() as a, socket.socket() as b:
                a.bind(("127.0.0.1", port))
                b.bind(("127.0.0.1", port + 1))
        except OSError:
            continue
        _HANDED_OUT.update((port, port + 1))
        return port
    raise RuntimeError(f"no two free neighbouring ports between {low} and {high + 1}")


def _port_open(port: int) -> bool:
    with socket.socket() as s:
        s.settimeout(0.2)
        return s.connect_ex(("127.0.0.1", port)) == 0


def _pid_state(pid: int | None) -> str:
    """'running', 'paused' (SIGSTOPped), or 'dead' for a pid of ours."""
    if not pid:
        return "dead"
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return "dead"
    state = stat[stat.rindex(")") + 2]
    if state in "ZX":
        return "dead"
    return "paused" if state in "Tt" else "running"


@dataclass
class Node:
    """One JVM of the cluster: a broker, the ZooKeeper server or the KRaft controller."""

    role: str  # broker | zookeeper | controller
    id: int
    port: int
    jmx_port: int | None = None
    pid: int | None = None
    kafka_version: str | None = None  # this node's own Kafka after a rolling upgrade (None: the cluster's)

    @property
    def name(self) -> str:
        return self.role if self.role == "zookeeper" else f"{self.role}-{self.id}"


def new_cluster_id() -> str:
    """A random cluster id as Kafka makes them (URL-safe base64 of a UUID) without a '-': one starting
    with '-' (one in 64) reads as an option to kafka-storage's argument parser and the format fails.
    Kafka's own Uuid.randomUuid() refuses a leading '-' for the same reason, and since KAFKA-20072
    any '-' (clients/src/main/java/org/apache/kafka/common/Uuid.java)."""
    while True:
        cid = base64.urlsafe_b64encode(uuid.uuid4().bytes).decode().rstrip("=")
        if "-" not in cid:
            return cid


@dataclass
class LocalCluster:
    root: Path
    mode: str = "zk"
    brokers: int = 3
    chroot: str | None = None
    broker_config: dict[str, str] = field(default_factory=dict)
    nodes: dict[str, Node] = field(default_factory=dict)
    cluster_id: str = ""
    metrics_port: int = 0
    heap_mb: int = HEAP_MB  # each broker's (and ZooKeeper's / the controller's) -Xmx
    kafka_version: str = ""  # empty: default_kafka_version(mode)
    controllers: int = 1  # KRaft: voters of the controller quorum
    # or "sasl_ssl" (SCRAM-SHA-512 and PLAIN over TLS) or "mtls" (client certificates; ZooKeeper over
    # TLS too), ACLs on either way (lab/local_security.py)
    security: str = "plaintext"
    # How long a silent broker keeps its registration: zookeeper.session.timeout.ms (ZooKeeper mode) or
    # the controllers' broker.session.timeout.ms (KRaft). Short for tests; Kafka's defaults are 18000 / 9000.
    session_timeout_ms: int = 6000
    # ZooKeeper → KRaft migration (`migrate`): "" none, "controllers" (KRaft controllers waiting for
    # the brokers), "hybrid" (brokers in migration mode: ZooKeeper's metadata copied, dual writes),
    # "kraft_brokers" (brokers in KRaft mode, the controllers still writing ZooKeeper); finalizing
    # makes the cluster's mode "kraft"
    migration: str = ""
    # KIP-405 tiered storage on the brokers (Kafka >= 3.9): a folder of this cluster as the remote tier
    # through krm's FolderRemoteStorageManager (jvm/tiered/); a topic uses it with remote.storage.enable=true
    tiered_storage: bool = False
    # sasl_ssl only: a Kerberos KDC of the cluster's own (lab/local_kdc.py) and GSSAPI on the listener;
    # the KDC is not a Kafka node: its process is kept apart from `nodes`
    kerberos: bool = False
    kdc_node: Node | None = None
    # log directories per broker (JBOD: `data`, `data-2`, ...), so one can fail while the broker lives
    # (`fail_log_dir`)
    log_dirs: int = 1
    # each broker's first log directory on the lab's delay layer (lab/slow_disk.py), so `slow --disk-delay` can
    # make its disk answer late; broker id -> the layer's pid
    disk_layer: bool = False
    layers: dict[int, int] = field(default_factory=dict)
    _mounts: list[Path] = field(default_factory=list)  # small_log_dir's filesystems, unmounted by `down`

    # ---------------------------------------------------------------- construction and state

    def __post_init__(self) -> None:
        if self.mode not in ("zk", "kraft"):
            raise ClusterError(f"mode must be 'zk' or 'kraft', got {self.mode!r}")
        if self.brokers < 1:
            raise ClusterError(f"--brokers must be at least 1, got {self.brokers}")
        if self.chroot is not None:
            if self.mode != "zk":
                raise ClusterError("--chroot applies to ZooKeeper mode only")
            if not self.chroot.startswith("/") or self.chroot == "/" or self.chroot.endswith("/"):
                raise ClusterError(f"--chroot must look like /kafka_cluster_01, got {self.chroot!r}")
        if not self.kafka_version:
            self.kafka_version = default_kafka_version(self.mode)
        if self.kafka_version not in KAFKA_RUNTIMES:
            raise ClusterError(f"--kafka-version {self.kafka_version} is not installed here; available: "
                               f"{', '.join(KAFKA_RUNTIMES)} (each comes from a pom in jvm/, fetched by `make jars`)")
        if self.mode == "kraft" and release_tuple(self.kafka_version) < release_tuple(KRAFT_SINCE):
            raise ClusterError(f"Kafka {self.kafka_version} has KRaft only as a preview; use --mode zk, or "
                               f"--kafka-version {KRAFT_SINCE} or later for KRaft mode")
        if self.mode == "zk" and int(self.kafka_version.split(".")[0]) >= 4:
            raise ClusterError(f"Kafka {self.kafka_version} has no ZooKeeper mode (removed in 4.0); "
                               f"use --mode kraft, or --kafka-version {ZK_KAFKA_VERSION} for ZooKeeper mode")
        if self.controllers < 1 or (self.mode == "zk" and self.controllers != 1):
            raise ClusterError(f"--controllers applies to KRaft mode and must be at least 1, got {self.controllers}")
        if self.security not in SECURITY_MODES:
            raise ClusterError(f"--security must be one of {', '.join(SECURITY_MODES)}, got {self.security!r}")
        if self.tiered_storage and release_tuple(self.kafka_version) < TIERED_SINCE:
            raise ClusterError(f"--tiered-storage needs Kafka 3.9 or later (tiered storage is production-ready "
                               f"from 3.9, KIP-405), got {self.kafka_version}")
        if self.tiered_storage and self.security != "plaintext":
            raise ClusterError("--tiered-storage is plaintext only here (the remote log metadata manager's own "
                               "clients are not given the cluster's credentials)")
        if self.kerberos and self.security != "sasl_ssl":
            raise ClusterError("--kerberos adds GSSAPI to a SASL_SSL listener: use it with --security sasl_ssl")
        if self.disk_layer and (why := slow_disk.available()) is not None:
            raise ClusterError(f"--disk-layer: {why}")
        if self.session_timeout_ms < 1000:
            raise ClusterError(f"--session-timeout-ms must be at least 1000, got {self.session_timeout_ms}")
        self.root = Path(self.root)

    @property
    def name(self) -> str:
        return self.root.name

    @classmethod
    def load(cls, root: Path) -> LocalCluster:
        state_file = Path(root) / "state.json"
        if not state_file.exists():
            raise ClusterError(f"no local cluster at {root}: start one with `krm local-cluster up`")
        s = json.loads(state_file.read_text())
        c = cls(root=Path(root), mode=s["mode"], brokers=len([n for n in s["nodes"].values() if n["role"] == "broker"]),
                chroot=s.get("chroot"), broker_config=s.get("broker_config", {}), cluster_id=s.get("cluster_id", ""),
                metrics_port=s.get("metrics_port", 0), heap_mb=s.get("heap_mb", HEAP_MB),
                kafka_version=s.get("kafka_version", ZK_KAFKA_VERSION),
                controllers=max(1, len([n for n in s["nodes"].values() if n["role"] == "controller"])),
                security=s.get("security", "plaintext"), session_timeout_ms=s.get("session_timeout_ms", 6000),
                migration=s.get("migration", ""), tiered_storage=s.get("tiered_storage", False),
                kerberos=s.get("kerberos", False), log_dirs=s.get("log_dirs", 1),
                disk_layer=s.get("disk_layer", False), layers={int(b): p for b, p in s.get("layers", {}).items()})
        c.kdc_node = Node(**s["kdc_node"]) if s.get("kdc_node") else None
        c.nodes = {k: Node(**v) for k, v in s["nodes"].items()}
        return c

    def _save(self) -> None:
        state = {
            "mode": self.mode, "chroot": self.chroot, "broker_config": self.broker_config,
            "cluster_id": self.cluster_id, "metrics_port": self.metrics_port, "heap_mb": self.heap_mb,
            "kafka_version": self.kafka_version, "security": self.security,
            "session_timeout_ms": self.session_timeout_ms, "migration": self.migration,
            "tiered_storage": self.tiered_storage, "kerberos": self.kerberos, "log_dirs": self.log_dirs,
            "disk_layer": self.disk_layer, "layers": {str(b): p for b, p in self.layers.items()},
            "kdc_node": vars(self.kdc_node) if self.kdc_node else None, "nodes": {k: vars(n) for k, n in self.nodes.items()},
        }
        tmp = self.root / "state.json.tmp"
        tmp.write_text(json.dumps(state, indent=2))
        tmp.replace(self.root / "state.json")

    @property
    def broker_ids(self) -> list[int]:
        return sorted(n.id for n in self.nodes.values() if n.role == "broker")

    @property
    def controller_ids(self) -> list[int]:
        return sorted(n.id for n in self.nodes.values() if n.role == "controller")

    def broker(self, broker_id: int) -> Node:
        """A broker by id; KRaft controllers are addressed by their node id too (1000, 1001, ...)."""
        node = self.nodes.get(f"broker-{broker_id}") or self.nodes.get(f"controller-{broker_id}")
        if node is None:
            raise ClusterError(f"no broker {broker_id} in cluster {self.name}; brokers: {self.broker_ids}"
                               + (f", controllers: {self.controller_ids}" if self.controller_ids else ""))
        return node

    @property
    def bootstrap_servers(self) -> str:
        return ",".join(f"127.0.0.1:{self.broker(b).port}" for b in self.broker_ids)

    @property
    def zookeeper(self) -> str | None:
        zk = self.nodes.get("zookeeper")
        return f"127.0.0.1:{zk.port}{self.chroot or ''}" if zk else None

    @property
    def config_path(self) -> Path:
        return self.root / "krm.toml"

    # ---------------------------------------------------------------- lifecycle

    def up(self, timeout_s: float = 120.0) -> LocalCluster:
        """Lay out folders, start every process and wait until all brokers are registered."""
        if (self.root / "state.json").exists() and any(
            _pid_state(n.pid) != "dead" for n in LocalCluster.load(self.root).processes
        ):
            raise ClusterError(f"cluster {self.name} is already running at {self.root}; `krm local-cluster down` first")
        self._runtime_jars(self.kafka_version)  # fail early with the setup hint
        if self.tiered_storage:
            self._remote_storage_classes()  # compiled once per Kafka release; fails early without a JDK
        if self.root.exists():  # `up` always makes a new cluster: stale ZooKeeper/KRaft data would clash
            slow_disk.unmount_under(self.root)  # an earlier cluster's disk layers, if its `down` never ran
            shutil.rmtree(self.root)
        self.root.mkdir(parents=True)
        self.cluster_id = new_cluster_id()
        self.nodes = {}
        if self.mode == "zk":
            self.nodes["zookeeper"] = Node("zookeeper", 0, free_port())
        else:
            for i in range(self.controllers):
                ctl = Node("controller", KRAFT_CONTROLLER_ID + i, free_port(), jmx_port=free_port())
                self.nodes[ctl.name] = ctl
        for i in range(1, self.brokers + 1):
            self.nodes[f"broker-{i}"] = Node("broker", i, free_port(), jmx_port=free_port())
        self.metrics_port = free_port()
        if self.secured:
            self._secrets.create()
        for node in self.nodes.values():
            self._write_node_config(node)
        self._write_krm_config()
        if self.kerberos:
            self.kdc_node = Node("kdc", 0, free_port())
            self.kdc.create(self.kdc_node.port)
        self._save()
        try:
            for b in self.broker_ids if self.disk_layer else ():
                self._mount_layer(b)
            if self.kdc_node is not None:
                self._launch(self.kdc_node)
                self._wait_port(self.kdc_node, timeout_s)
            if self.mode == "zk":
                self._launch(self.nodes["zookeeper"])
                self._wait_port(self.nodes["zookeeper"], timeout_s)
                if self.security == "sasl_ssl":
                    self._add_zk_scram_users()
            else:
                self._format_storage()
                for cid in self.controller_ids:
                    self._launch(self.broker(cid))
            for b in self.broker_ids:
                self._launch(self.broker(b))
            self.wait_for_brokers(self.broker_ids, timeout_s)
            if self.secured:
                self._grant_krm_acls()
        except BaseException:
            self.down()
            raise
        return self

    @property
    def processes(self) -> list[Node]:
        """Every process of the cluster: its Kafka nodes and, with --kerberos, its KDC."""
        return [*self.nodes.values(), *([self.kdc_node] if self.kdc_node else [])]

    def down(self) -> None:
        """Stop every process (SIGKILL: the data is throwaway) and wait until they are gone; undo any cut."""
        every = self.processes
        packet_filter.heal_all([n.port for n in every if n.port])
        for n in every:
            if n.role == "broker" and n.port and packet_filter.is_cut_outgoing(packet_filter.cgroup_name(n.port)):
                packet_filter.heal_outgoing(packet_filter.cgroup_name(n.port))
        for node in every:
            if node.pid and _pid_state(node.pid) != "dead":
                try:
                    os.kill(node.pid, signal.SIGKILL)
                except ProcessLookupError:
                    pass
        for node in every:
            self._reap(node)
            node.pid = None
            if node.role == "broker" and node.port:
                packet_filter.release_cgroup(packet_filter.cgroup_name(node.port))
            if node.role == "broker":
                cpu_cap.uncap(self._cpu_group(node))
        for b in list(self.layers):
            slow_disk.unmount(self.log_dir_paths(b)[0], self.layers.pop(b))
        if (self.root / "state.json").exists():
            self._save()
        self.release_small_log_dirs()

    def kill(self, broker_id: int) -> None:
        """SIGKILL one broker (or controller): no controlled shutdown, exactly like docs/cases/rf1-outage-zk-chroot.md's `kill`.
        On Kafka 4 the broker's next registration then counts as an unclean shutdown: the controller
        removes it from every partition's ELR (ReplicationControlManager.handleBrokerShutdown)."""
        node = self._live_broker(broker_id)
        os.kill(node.pid, signal.SIGKILL)  # type: ignore[arg-type]
        self._reap(node)
        node.pid = None
        self._save()

    def stop(self, broker_id: int, timeout_s: float = 60.0) -> None:
        """SIGTERM: Kafka's controlled shutdown (leadership moved away first, clean-shutdown marker
        written), then wait for the process to exit; SIGKILL if it does not within `timeout_s`."""
        node = self._live_broker(broker_id)
        if _pid_state(node.pid) == "paused":
            os.kill(node.pid, signal.SIGCONT)  # type: ignore[arg-type]
        os.kill(node.pid, signal.SIGTERM)  # type: ignore[arg-type]
        deadline = time.monotonic() + timeout_s
        while _pid_state(node.pid) != "dead" and time.monotonic() < deadline:
            try:
                if os.waitpid(node.pid, os.WNOHANG) != (0, 0):  # type: ignore[arg-type]
                    break
            except ChildProcessError:
                pass
            time.sleep(0.1)
        if _pid_state(node.pid) != "dead":
            log.warning("%s did not stop within %.0fs of SIGTERM; killing it", node.name, timeout_s)
            os.kill(node.pid, signal.SIGKILL)  # type: ignore[arg-type]
        self._reap(node)
        node.pid = None
        self._save()

    def start(self, broker_id: int, wait: bool = True, timeout_s: float = 90.0, kafka_version: str | None = None) -> None:
        """Start a stopped broker (or controller); with `kafka_version`, on that Kafka from now on: one
        step of a rolling upgrade (the same data directory and settings, another release's jars)."""
        node = self.broker(broker_id)
        if _pid_state(node.pid) != "dead":
            raise ClusterError(f"broker {broker_id} is already running (pid {node.pid})")
        if kafka_version:
            if kafka_version not in KAFKA_RUNTIMES:
                raise ClusterError(f"--kafka-version {kafka_version} is not installed here; available: "
                                   f"{', '.join(sorted(KAFKA_RUNTIMES))}")
            if self.mode == "zk" and int(kafka_version.split(".")[0]) >= 4:
                raise ClusterError(f"Kafka {kafka_version} has no ZooKeeper mode (removed in 4.0)")
            node.kafka_version = kafka_version
            self._save()
        if self.mode == "zk":
            self._await_zk_deregistration(broker_id)
        self._launch(node)
        if wait and node.role == "broker":
            self.wait_for_brokers([broker_id], timeout_s)
        elif wait:
            self._wait_port(node, timeout_s)

    def log_dir_paths(self, broker_id: int) -> list[Path]:
        d = self._node_dir(self.broker(broker_id))
        return [d / "data", *(d / f"data-{i}" for i in range(2, self.log_dirs + 1))]

    def log_dir_of(self, broker_id: int, topic: str, partition: int) -> int | None:
        """Which of the broker's log directories (0-based) holds its copy of the partition."""
        for i, path in enumerate(self.log_dir_paths(broker_id)):
            if (path / f"{topic}-{partition}").is_dir():
                return i
        return None

    def fail_log_dir(self, broker_id: int, index: int) -> None:
        """A disk failure on one log directory of a running broker (JBOD): the directory is removed,
        so the broker's next write there (the high-watermark checkpoint, every 5 s) fails with an
        I/O error and Kafka takes the directory offline (KIP-112); the broker and its other
        directories live on. Only a restart brings a failed directory back (`restore_log_dir`)."""
        if not 0 < index < self.log_dirs:
            raise ClusterError(f"log dir {index} of broker {broker_id}: 1..{self.log_dirs - 1} may fail "
                               "(the first holds the broker's own metadata)")
        shutil.rmtree(self.log_dir_paths(broker_id)[index])

    def restore_log_dir(self, broker_id: int, index: int) -> None:
        """A new, empty disk in place of a failed one, before the stopped broker starts again
        (KRaft: formatted as `kafka-storage format` would, the other directories left as they are)."""
        node = self.broker(broker_id)
        if _pid_state(node.pid) != "dead":
            raise ClusterError(f"stop broker {broker_id} before replacing its log dir")
        self.log_dir_paths(broker_id)[index].mkdir(parents=True, exist_ok=True)
        if self.mode == "kraft":
            self._format_storage([node])

    def cut_replication(self, broker_id: int) -> None:
        """A replication cut: every packet the broker sends to the other brokers' listeners is dropped
        (lab/packet_filter.py), so its replica fetchers stall, while clients, krm, its ZooKeeper session or
        KRaft heartbeats, and the followers fetching from it still reach it. `heal_replication` undoes it."""
        node = self._live_broker(broker_id)
        others = [n.port for n in self.nodes.values() if n.role == "broker" and n is not node and n.port]
        packet_filter.cut_outgoing(packet_filter.cgroup_name(node.port), others)

    def heal_replication(self, broker_id: int) -> bool:
        return packet_filter.heal_outgoing(packet_filter.cgroup_name(self.broker(broker_id).port))

    def small_log_dir(self, broker_id: int, index: int, size_mb: int) -> Path:
        """Put one log directory of a stopped broker on a filesystem of its own of `size_mb` (a tmpfs, as
        root), its contents kept: a disk that fills. `release_small_log_dirs` (and `down`) unmount it."""
        node = self.broker(broker_id)
        if _pid_state(node.pid) != "dead":
            raise ClusterError(f"stop broker {broker_id} before giving it a small disk")
        path = self.log_dir_paths(broker_id)[index]
        keep = path.with_name(path.name + ".before-mount")
        shutil.move(str(path), str(keep))
        path.mkdir()
        out = subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={size_mb}m", "tmpfs", str(path)],
                             capture_output=True, text=True)
        if out.returncode != 0:
            shutil.rmtree(path, ignore_errors=True)
            shutil.move(str(keep), str(path))
            raise ClusterError(f"cannot mount a {size_mb} MB tmpfs at {path} (root needed): {out.stderr.strip()}")
        for item in keep.iterdir():
            shutil.move(str(item), str(path / item.name))
        keep.rmdir()
        self._mounts.append(path)
        return path

    def release_small_log_dirs(self) -> None:
        """Unmount what small_log_dir mounted (the data on it is throwaway)."""
        while self._mounts:
            subprocess.run(["umount", "-l", str(self._mounts.pop())], capture_output=True)

    def add_broker(self, timeout_s: float = 90.0) -> int:
        """Cluster expansion: a new broker (next id, free ports, the same settings) joins and is
        registered. Kafka moves no existing replica onto it; only new topics and partitions use it."""
        bid = max(self.broker_ids) + 1
        node = Node("broker", bid, free_port(), jmx_port=free_port())
        self.nodes[node.name] = node
        self.brokers = len(self.broker_ids)
        self._write_node_config(node)
        self._write_krm_config()
        self._save()
        if self.disk_layer:
            self._mount_layer(bid)
        if self.mode == "kraft":
            self._format_storage([node])
        self._launch(node)
        self.wait_for_brokers([bid], timeout_s)
        return bid

    # ---------------------------------------------------------------- ZooKeeper → KRaft migration

    MIGRATION_STEPS = ("controllers", "brokers", "kraft-brokers", "finalize")

    def migrate(self, step: str, timeout_s: float = 180.0) -> None:
        """One step of Kafka's ZooKeeper → KRaft migration, as its operations guide has an operator
        do it: `controllers` (KRaft controllers formatted with the ZooKeeper cluster's id, started with
        zookeeper.metadata.migration.enable), `brokers` (a rolling restart into migration mode; when the
        last broker is in, the controller copies ZooKeeper's metadata and writes both from then on),
        `kraft-brokers` (a rolling restart into KRaft mode), `finalize` (the controllers restarted
        without ZooKeeper: no way back). Each rolling restart waits for a full ISR between brokers."""
        before = {"controllers": ("zk", ""), "brokers": ("zk", "controllers"), "kraft-brokers": ("zk", "hybrid"),
                  "finalize": ("zk", "kraft_brokers")}
        if step not in before:
            raise ClusterError(f"migration step must be one of {', '.join(self.MIGRATION_STEPS)}, got {step!r}")
        if self.secured:
            raise ClusterError("the local migration runs on plaintext clusters only")
        if (self.mode, self.migration) != before[step]:
            done = self.migration or ("finalized" if self.mode == "kraft" else "not started")
            raise ClusterError(f"cannot run migration step {step!r} now (migration: {done}); the steps run in "
                               f"order: {', '.join(self.MIGRATION_STEPS)}")
        if step == "controllers":
            self.cluster_id = self._zk_cluster_id()
            nodes = [Node("controller", KRAFT_CONTROLLER_ID + i, free_port(), jmx_port=free_port())
                     for i in range(self.controllers)]
            for node in nodes:
                self.nodes[node.name] = node
            self.migration = "controllers"
            for node in nodes:
                self._write_node_config(node)
            self._save()
            self._format_storage(nodes)
            for node in nodes:
                self._launch(node)
            for node in nodes:
                self._wait_port(node, timeout_s)
        elif step == "brokers":
            self.migration = "hybrid"
            self._roll(self.broker_ids, timeout_s)
            self._await_migrated(timeout_s)
        elif step == "kraft-brokers":
            self.migration = "kraft_brokers"
            self._roll(self.broker_ids, timeout_s)
        else:
            self.migration, self.mode = "", "kraft"
            self._roll(self.controller_ids, timeout_s)
        self._save()

    def migration_state(self) -> dict[str, Any] | None:
        """ZooKeeper's /migration znode (the KRaft controller's record of the migration), if any."""
        from kazoo.client import KazooClient

        zk = KazooClient(hosts=self.zookeeper, timeout=5.0)
        zk.start(timeout=10)
        try:
            if not zk.exists("/migration"):
                return None
            data, _ = zk.get("/migration")
            return dict(json.loads(data))
        finally:
            zk.stop()
            zk.close()

    def _zk_cluster_id(self) -> str:
        from kazoo.client import KazooClient

        zk = KazooClient(hosts=self.zookeeper, timeout=5.0)
        zk.start(timeout=10)
        try:
            data, _ = zk.get("/cluster/id")
            return str(json.loads(data)["id"])
        finally:
            zk.stop()
            zk.close()

    def _await_migrated(self, timeout_s: float) -> None:
        """Until the controller has copied ZooKeeper's metadata (KRaftMigrationDriver: /migration gets
        the metadata log offset of the copy)."""
        deadline = time.monotonic() + timeout_s
        state = None
        while time.monotonic() < deadline:
            state = self.migration_state()
            if state and int(state.get("kraft_metadata_offset", -1)) >= 0:
                return
            time.sleep(0.5)
        raise ClusterError(f"the KRaft controller did not migrate ZooKeeper's metadata within {timeout_s:.0f}s "
                           f"(/migration: {state}); see {self._log_hint(self.broker(self.controller_ids[0]))}")

    def _roll(self, node_ids: list[int], timeout_s: float) -> None:
        """A rolling restart with the current settings: one node at a time, controlled shutdown,
        and (brokers) every partition's ISR full again before the next."""
        for nid in node_ids:
            node = self.broker(nid)
            self.stop(nid)
            self._write_node_config(node)
            self._save()
            self.start(nid, timeout_s=timeout_s)
            if node.role == "broker":
                self.wait_for_full_isr(timeout_s)

    def wait_for_full_isr(self, timeout_s: float) -> None:
        """Until every partition has a leader and a full ISR (what an operator checks between two
        restarts: `kafka-topics --unavailable-partitions` and `--under-replicated-partitions` empty)."""
        admin = None
        try:
            deadline = time.monotonic() + timeout_s
            while time.monotonic() < deadline:
                try:
                    admin = admin or self.admin_client()  # its bootstrap broker may be the one restarting
                    topics = admin.describe_topics()
                    if all(p["leader"] >= 0 and len(p["isr"]) == len(p["replicas"])
                           for t in topics for p in t["partitions"]):
                        return
                except Exception:  # noqa: BLE001 - a broker restarting: ask again, with a new client
                    if admin is not None:
                        admin.close()
                    admin = None
                time.sleep(0.5)
        finally:
            if admin is not None:
                admin.close()
        raise ClusterError(f"partitions still without a leader or under-replicated after {timeout_s:.0f}s")

    def kill_zookeeper(self) -> None:
        """SIGKILL the ZooKeeper server (ZooKeeper mode): brokers keep serving clients but the
        controller can change nothing until it is back (fault loops, benchmarks/fault_loops.py)."""
        zk = self.nodes.get("zookeeper")
        if zk is None or _pid_state(zk.pid) == "dead":
            raise ClusterError("no running ZooKeeper in this cluster")
        os.kill(zk.pid, signal.SIGKILL)  # type: ignore[arg-type]
        self._reap(zk)
        zk.pid = None
        self._save()

    def start_zookeeper(self, timeout_s: float = 60.0) -> None:
        zk = self.nodes.get("zookeeper")
        if zk is None or _pid_state(zk.pid) != "dead":
            raise ClusterError("ZooKeeper is running or this cluster has none")
        self._launch(zk)
        self._wait_port(zk, timeout_s)

    def pause(self, broker_id: int) -> None:
        """SIGSTOP: the broker keeps its sockets and ZooKeeper session but answers nothing."""
        node = self._live_broker(broker_id)
        os.kill(node.pid, signal.SIGSTOP)  # type: ignore[arg-type]
        self._await_state(node, "paused")

    def cut(self, broker_id: int) -> None:
        """A gray failure (lab/packet_filter.py): the broker's listener drops every packet; Kafka
        still counts it alive (its session and heartbeats are its own outgoing connections)."""
        packet_filter.cut(self._live_broker(broker_id).port)

    def heal(self, broker_id: int, missing_ok: bool = False) -> None:
        """Undo `cut`; with `missing_ok`, a broker not cut off is no error (a test's cleanup)."""
        if not packet_filter.heal(self.broker(broker_id).port) and not missing_ok:
            raise ClusterError(f"broker {broker_id} is not cut off")

    def _cpu_group(self, node: Node) -> str:
        return f"{self.name}-{node.role}-{node.id}"

    def _layer_control(self, broker_id: int) -> Path:
        return self._node_dir(self.broker(broker_id)) / "disk-delay-ms"

    def _mount_layer(self, broker_id: int) -> None:
        """Put the broker's first log directory (empty: before its first start) on the delay layer."""
        path, d = self.log_dir_paths(broker_id)[0], self._node_dir(self.broker(broker_id))
        try:
            self.layers[broker_id] = slow_disk.mount(path.with_name(path.name + ".under-layer"), path,
                                                     self._layer_control(broker_id), d / "disk-layer.log")
        except slow_disk.LayerError as e:
            raise ClusterError(f"broker {broker_id}'s disk layer: {e}") from None
        self._save()

    def disk_delay_ms(self, broker_id: int) -> int | None:
        """How late its disk answers now (None: not on the delay layer)."""
        return slow_disk.delay_of(self._layer_control(broker_id)) if broker_id in self.layers else None

    def slow(self, broker_id: int, cpu_pct: float | None = None, disk_delay_ms: int | None = None) -> str:
        """A slow broker, still registered and answering: its JVM capped at `cpu_pct` % of one core (lab/cpu_cap.py;
        a restart ends the cap), and/or each write and sync of its log directory waiting `disk_delay_ms`
        (lab/slow_disk.py; a restart keeps it). `fast` undoes both. Says what it did."""
        if cpu_pct is None and disk_delay_ms is None:
            raise ClusterError("say how: --cpu PCT and/or --disk-delay MS")
        node = self._live_broker(broker_id)
        said = []
        if disk_delay_ms is not None:
            if broker_id not in self.layers:
                raise ClusterError(f"broker {broker_id}'s log directory is not on the lab's delay layer: start the "
                                   "cluster with `krm local-cluster up --disk-layer` (a FUSE file system under each "
                                   "broker's first log directory)")
            if disk_delay_ms < 0:
                raise ClusterError(f"--disk-delay must be 0 or more ms, got {disk_delay_ms}")
            slow_disk.set_delay(self._layer_control(broker_id), disk_delay_ms)
            said.append(f"each write and sync of its log directory waits {disk_delay_ms} ms")
        if cpu_pct is not None:
            assert node.pid is not None
            quota = cpu_cap.cap(self._cpu_group(node), node.pid, cpu_pct)
            said.append(f"CPU capped at {cpu_pct:g} % of one core ({quota} µs per {cpu_cap.PERIOD_US} µs)")
        return "; ".join(said)

    def fast(self, broker_id: int, missing_ok: bool = False) -> None:
        """Undo `slow`; with `missing_ok`, a broker not slowed is no error (a test's cleanup)."""
        node = self.broker(broker_id)
        delayed = bool(self.disk_delay_ms(broker_id))
        if delayed:
            slow_disk.set_delay(self._layer_control(broker_id), 0)
        if not cpu_cap.uncap(self._cpu_group(node)) and not delayed and not missing_ok:
            raise ClusterError(f"broker {broker_id} is not slowed")

    def resume(self, broker_id: int) -> None:
        node = self.broker(broker_id)
        if _pid_state(node.pid) == "dead":
            raise ClusterError(f"broker {broker_id} is not running; use `start`")
        os.kill(node.pid, signal.SIGCONT)  # type: ignore[arg-type]
        self._await_state(node, "running")

    def status(self) -> dict[str, Any]:
        """Machine-readable description; the `up --json` contract is a subset of this."""
        return {
            "name": self.name,
            "mode": self.mode,
            "kafka_version": self.kafka_version,
            "cluster_id": self.cluster_id,
            "bootstrap_servers": self.bootstrap_servers,
            "zookeeper": self.zookeeper,
            "controller": self._controller_status(self.controller_ids[0]) if self.controller_ids else None,
            "controllers": {str(c): self._controller_status(c) for c in self.controller_ids},
            "brokers": {
                str(b): {
                    "pid": self.broker(b).pid,
                    "port": self.broker(b).port,
                    "jmx_port": self.broker(b).jmx_port,
                    "state": _pid_state(self.broker(b).pid),
                    "cpu_cap_pct": cpu_cap.capped_pct(self._cpu_group(self.broker(b))),
                    "disk_delay_ms": self.disk_delay_ms(b),
                    "kafka_version": self.broker(b).kafka_version or self.kafka_version,
                    "log": str(self.root / f"broker-{b}" / "logs" / "server.log"),
                }
                for b in self.broker_ids
            },
            "config": str(self.config_path),
            "metrics_port": self.metrics_port,
            "root": str(self.root),
        } | ({"security": self._secrets.client_kwargs()} if self.secured else {})

    def wait_for_brokers(self, broker_ids: list[int], timeout_s: float) -> None:
        """Block until every given broker is in the cluster metadata (registered and unfenced) and
        answers a client itself: in ZooKeeper mode a broker registers before its listener processes
        requests, and a TLS client that connects in between is dropped."""
        from kafka.admin import KafkaAdminClient  # imported late: the CLI's --help stays fast

        deadline = time.monotonic() + timeout_s
        want = set(broker_ids)
        last_err: Exception | None = None
        while time.monotonic() < deadline:
            for b in broker_ids:
                node = self.broker(b)
                if _pid_state(node.pid) == "dead":
                    raise ClusterError(f"broker {b} exited while starting; see {self._log_hint(node)}")
            live_ports = [self.broker(b).port for b in self.broker_ids if _port_open(self.broker(b).port)]
            if live_ports:
                try:
                    admin = KafkaAdminClient(
                        bootstrap_servers=[f"127.0.0.1:{p}" for p in live_ports],
                        request_timeout_ms=3000, api_version_auto_timeout_ms=3000, client_id="krm-local-cluster",
                        **self.admin_kwargs(),
                    )
                    try:
                        seen = {b["node_id"] for b in admin.describe_cluster()["brokers"]}
                    finally:
                        admin.close()
                    if want <= seen and all(self._serving(b) for b in broker_ids):
                        return
                except Exception as e:  # noqa: BLE001 - any client error means "not ready yet"
                    last_err = e
            time.sleep(0.3)
        raise ClusterError(f"brokers {sorted(want)} not registered after {timeout_s:.0f}s (last error: {last_err}); "
                           f"see logs under {self.root}")

    @property
    def _oauth(self) -> bool:
        """sasl_ssl listeners take OAUTHBEARER too from Kafka 3.4 (OAuthBearerValidatorCallbackHandler)."""
        return self.security == "sasl_ssl" and release_tuple(self.kafka_version) >= (3, 4)

    def _serving(self, broker_id: int) -> bool:
        """Whether the broker completes a connection as a client makes one (TLS, login, ApiVersions)."""
        import socket

        from kafka.conn import BrokerConnection

        conn = BrokerConnection("127.0.0.1", self.broker(broker_id).port, socket.AF_INET,
                                client_id="krm-local-cluster", **self.admin_kwargs())
        try:
            return bool(conn.connect_blocking(timeout=3))
        except Exception:  # noqa: BLE001 - not serving yet
            return False
        finally:
            conn.close()

    # ---------------------------------------------------------------- security (--security sasl_ssl|mtls)

    @property
    def secured(self) -> bool:
        """TLS, logins and ACLs (sasl_ssl or mtls)."""
        return self.security != "plaintext"

    @property
    def _secrets(self) -> Any:
        return LocalSecurity(self.root, self.security)

    def admin_kwargs(self) -> dict[str, Any]:
        """kafka-python keyword arguments of the cluster's super user (empty when plaintext)."""
        return self._secrets.python_client_kwargs(ADMIN_USER) if self.secured else {}

    def admin_client(self) -> Any:
        """A KafkaAdminClient of the cluster's super user (tests and demos change ACLs with it)."""
        from kafka.admin import KafkaAdminClient

        return KafkaAdminClient(bootstrap_servers=self.bootstrap_servers, client_id="krm-local-cluster",
                                request_timeout_ms=10000, **self.admin_kwargs())

    def _grant_krm_acls(self) -> None:
        admin = self.admin_client()
        try:
            grant_krm_acls(admin)
        finally:
            admin.close()

    def _add_zk_scram_users(self) -> None:
        """ZooKeeper mode keeps SCRAM credentials in ZooKeeper; Kafka's own ConfigCommand writes them
        there before any broker starts (the brokers authenticate to each other as admin)."""
        zk = self.nodes["zookeeper"]
        if self.chroot:  # ConfigCommand writes under the chroot but, unlike a broker, does not create it
            from kazoo.client import KazooClient

            client = KazooClient(hosts=f"127.0.0.1:{zk.port}", timeout=5.0, **self._secrets.kazoo_kwargs())
            client.start(timeout=20)
            try:
                client.ensure_path(self.chroot)
            finally:
                client.stop()
                client.close()
        procs = []
        for user in (ADMIN_USER, KRM_USER):
            cmd = self._java(Node("zookeeper", 0, zk.port), [
                "kafka.admin.ConfigCommand", "--zookeeper", self._zk_connect(), "--alter", "--entity-type", "users",
                "--entity-name", user, "--add-config",
                f"{MECHANISM}=[iterations=4096,password={self._secrets.password(user)}]"])
            log_file = open(self._node_dir(zk) / f"scram-{user}.log", "w")
            procs.append((user, subprocess.Popen(cmd, stdout=log_file, stderr=subprocess.STDOUT,
                                                 stdin=subprocess.DEVNULL), log_file))
        for user, p, log_file in procs:
            rc = p.wait(timeout=120)
            log_file.close()
            if rc != 0:
                raise ClusterError(f"creating SCRAM user {user} failed (exit {rc}); "
                                   f"see {self._node_dir(zk) / f'scram-{user}.log'}")

    def _jaas(self, node: Node) -> list[str]:
        """ZooKeeper mode with sasl_ssl: ZooKeeper's user list; its clients' (brokers, Kafka tools) login."""
        if self.security != "sasl_ssl" or self.mode != "zk" or node.role == "controller":
            return []
        jaas = self._secrets.zk_server_jaas if node is self.nodes.get("zookeeper") else self._secrets.zk_client_jaas
        return [f"-Djava.security.auth.login.config={jaas}"]

    def _security_props(self, role: str) -> dict[str, Any]:
        """Listener and authorizer settings of a broker or controller, by the cluster's security."""
        if role == "controller":
            base = {"listener.security.protocol.map": "CONTROLLER:PLAINTEXT"}
            if not self.secured:
                return base
            # the brokers reach the controllers on the (loopback) PLAINTEXT controller listener, as
            # User:ANONYMOUS: broker registration and heartbeats need CLUSTER_ACTION, hence super user
            return base | {"authorizer.class.name": "org.apache.kafka.metadata.authorizer.StandardAuthorizer",
                           "super.users": "User:admin;User:ANONYMOUS"}
        if not self.secured:
            return {"listener": "PLAINTEXT", "listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,CONTROLLER:PLAINTEXT"}
        authorizer = ("kafka.security.authorizer.AclAuthorizer" if self.mode == "zk"
                      else "org.apache.kafka.metadata.authorizer.StandardAuthorizer")
        listener = self._secrets.listener
        return {"listener": listener, "listener.security.protocol.map": f"{listener}:{listener},CONTROLLER:PLAINTEXT",
                "authorizer.class.name": authorizer, "super.users": self._secrets.super_users,
                **self._secrets.listener_properties(listener, oauth=self._oauth,
                                                    kdc=self.kdc if self.kerberos else None)}

    # ---------------------------------------------------------------- internals

    def _controller_status(self, cid: int) -> dict[str, Any]:
        n = self.broker(cid)
        return {"id": n.id, "port": n.port, "pid": n.pid, "state": _pid_state(n.pid),
                "kafka_version": n.kafka_version or self.kafka_version}

    @property
    def _quorum_voters(self) -> str:
        return ",".join(f"{c}@127.0.0.1:{self.broker(c).port}" for c in self.controller_ids)

    def _live_broker(self, broker_id: int) -> Node:
        node = self.broker(broker_id)
        if _pid_state(node.pid) == "dead":
            raise ClusterError(f"broker {broker_id} is not running")
        return node

    def _node_dir(self, node: Node) -> Path:
        return self.root / node.name

    @property
    def kdc(self) -> LocalKdc:
        """The cluster's own KDC (--kerberos): realm, keytabs and krb5.conf."""
        return LocalKdc(self._secrets.dir / "kdc")

    def _log_hint(self, node: Node) -> str:
        d = self._node_dir(node)
        return f"{d / 'logs' / 'server.log'} and {d / 'stdout.log'}"

    def _write_node_config(self, node: Node) -> None:
        d = self._node_dir(node)
        (d / "data").mkdir(parents=True, exist_ok=True)
        (d / "logs").mkdir(parents=True, exist_ok=True)
        if node.role == "zookeeper":
            lines = [f"dataDir={d / 'data'}", "tickTime=1000", "maxClientCnxns=0", "admin.enableServer=false"]
            lines += (self._secrets.zoo_cfg(node.port) if self.secured
                      else [f"clientPort={node.port}", "clientPortAddress=127.0.0.1"])
            (d / "zoo.cfg").write_text("\n".join(lines) + "\n")
            return
        n = self.brokers
        props: dict[str, Any] = {"log.dirs": d / "data"}
        if node.role == "broker":
            props["log.dirs"] = ",".join(str(p) for p in self.log_dir_paths(node.id))
        if node.role == "controller":
            props |= {
                "process.roles": "controller",
                "node.id": node.id,
                "controller.quorum.voters": self._quorum_voters,
                "controller.listener.names": "CONTROLLER",
                **self._security_props("controller"),
                "listeners": f"CONTROLLER://127.0.0.1:{node.port}",
                "broker.session.timeout.ms": self.session_timeout_ms,
            }
            if self.tiered_storage:  # the controller validates a topic's remote.storage.enable against it
                props["remote.log.storage.system.enable"] = "true"
            if self.mode == "zk":  # a ZooKeeper-mode cluster's migration (KIP-866): the controller
                # copies ZooKeeper's metadata, then writes both until finalized; it sends the ZooKeeper-mode
                # brokers their requests on their inter-broker listener
                props |= {"zookeeper.metadata.migration.enable": "true", "zookeeper.connect": self._zk_connect(),
                          "zookeeper.session.timeout.ms": self.session_timeout_ms,
                          "inter.broker.listener.name": "PLAINTEXT",
                          "listener.security.protocol.map": "CONTROLLER:PLAINTEXT,PLAINTEXT:PLAINTEXT"}
        else:
            sec = self._security_props("broker")
            listener = sec.pop("listener")
            props |= {
                "listeners": f"{listener}://127.0.0.1:{node.port}",
                "advertised.listeners": f"{listener}://127.0.0.1:{node.port}",
                "inter.broker.listener.name": listener,
                "num.partitions": 1,
                "default.replication.factor": 1,
                "auto.create.topics.enable": "false",
                "offsets.topic.replication.factor": min(3, n),
                "offsets.topic.num.partitions": 5,
                "transaction.state.log.replication.factor": min(3, n),
                "transaction.state.log.min.isr": 1,
                "group.initial.rebalance.delay.ms": 0,
                "replica.lag.time.max.ms": 10000,
                "num.network.threads": 2,
                "num.io.threads": 2,
                "background.threads": 2,
            }
            if self.mode == "zk" and self.migration in ("", "controllers"):
                sec["listener.security.protocol.map"] = sec["listener.security.protocol.map"].replace(
                    ",CONTROLLER:PLAINTEXT", "")
                props |= {"broker.id": node.id, "zookeeper.connect": self._zk_connect(),
                          "zookeeper.session.timeout.ms": self.session_timeout_ms,
                          **(self._secrets.broker_zookeeper_properties() if self.secured else {})}
            elif self.mode == "zk" and self.migration == "hybrid":  # a ZooKeeper-mode broker in migration
                props |= {"broker.id": node.id, "zookeeper.connect": self._zk_connect(),
                          "zookeeper.session.timeout.ms": self.session_timeout_ms,
                          "zookeeper.metadata.migration.enable": "true",
                          "controller.quorum.voters": self._quorum_voters, "controller.listener.names": "CONTROLLER",
                          "inter.broker.protocol.version": ".".join(self.kafka_version.split(".")[:2])}
            else:
                props |= {
                    "process.roles": "broker",
                    "node.id": node.id,
                    "controller.quorum.voters": self._quorum_voters,
                    "controller.listener.names": "CONTROLLER",
                    "broker.heartbeat.interval.ms": 1000,
                }
            props |= sec
            if self.tiered_storage:
                props |= self._tiered_props(listener)
            props |= self.broker_config
        (d / "server.properties").write_text("".join(f"{k}={v}\n" for k, v in props.items()))

    @property
    def remote_storage_dir(self) -> Path:
        return self.root / "remote-storage"

    def _tiered_props(self, listener: str) -> dict[str, Any]:
        """KIP-405 broker settings: the remote tier (a shared folder, FolderRemoteStorageManager), the
        metadata of remote segments in Kafka's own topic (TopicBasedRemoteLogMetadataManager, the
        default, reached on the brokers' listener), and copy and local-retention tasks that run every
        second rather than every 30 s and 5 min, so a test sees segments move."""
        rlmm = "rlmm.config."
        return {
            "remote.log.storage.system.enable": "true",
            "remote.log.storage.manager.class.name": REMOTE_STORAGE_MANAGER,
            "remote.log.storage.manager.impl.prefix": "rsm.config.",
            "rsm.config.dir": self.remote_storage_dir,
            "remote.log.metadata.manager.listener.name": listener,
            "remote.log.metadata.manager.impl.prefix": rlmm,
            f"{rlmm}remote.log.metadata.topic.replication.factor": min(3, self.brokers),
            f"{rlmm}remote.log.metadata.topic.num.partitions": 5,
            "remote.log.manager.task.interval.ms": 1000,
            "log.retention.check.interval.ms": 1000,
        }

    def _zk_connect(self) -> str:
        return f"127.0.0.1:{self.nodes['zookeeper'].port}{self.chroot or ''}"

    @property
    def jmx_exporter_urls(self) -> list[str]:
        scheme = "https" if self.secured else "http"
        return [f"{b}={scheme}://127.0.0.1:{self.broker(b).jmx_port}/metrics" for b in self.broker_ids]

    def _write_krm_config(self) -> None:
        zk = f'zookeeper = "{self.zookeeper}"\n' if self.mode == "zk" else ""
        jmx = "jmx_exporter_urls = [" + ", ".join(f'"{u}"' for u in self.jmx_exporter_urls) + "]\n"
        sec = cluster_sec = obs_sec = ""
        if self.secured:  # the password stays in its file; the config names the file
            sec = self._secrets.config_toml()
            cluster_sec, obs_sec = f"\n[clusters.security]\n{sec}", f"\n[observations.security]\n{sec}"
            if self.mode == "zk":
                cluster_sec += f"\n[clusters.zookeeper_security]\n{self._secrets.zookeeper_toml()}"
            cluster_sec += f"\n[clusters.jmx_security]\n{self._secrets.jmx_toml()}"
        self.config_path.write_text(
            f"# krm configuration for local cluster {self.name!r} ({self.mode} mode), written by `krm local-cluster up`.\n"
            f"[[clusters]]\nname = \"{self.name}\"\nbootstrap_servers = \"{self.bootstrap_servers}\"\n{zk}{jmx}{cluster_sec}\n"
            f"[observations]\nbootstrap_servers = \"{self.bootstrap_servers}\"\ntopic = \"krm.observations\"\n{obs_sec}"
            f"\n"
            f"[collector]\npoll_interval_s = 1.0\n\n"
            f"[pipeline]\ndata_dir = \"{self.root / 'krm-data'}\"\nmetrics_port = {self.metrics_port}\n"
        )

    @staticmethod
    def _runtime_jars(version: str) -> list[Path]:
        """The jars of a Kafka release, or how to fetch them (the compatibility lines: `make compat-jars`)."""
        if version in COMPAT_VERSIONS and not (jars_dir() / KAFKA_RUNTIMES[version][0]).is_dir():
            where = "" if IN_CHECKOUT else " in a source checkout of krm"
            raise ClusterError(f"Kafka {version}'s jars are not fetched: run `make compat-jars`{where} (every "
                               f"compatibility line from Maven Central, once)")
        return jar_group(KAFKA_RUNTIMES[version][0])

    def _remote_storage_classes(self, version: str | None = None) -> Path:
        """jvm/tiered/*.java compiled against this Kafka release's jars, once (keyed by the sources'
        digest): a small Java class beats a jar per release, and Kafka publishes no remote storage
        manager outside its test jars."""
        version = version or self.kafka_version
        sources = sorted((JVM_DIR / "tiered").glob("*.java"))
        digest = hashlib.sha256(b"".join(p.read_bytes() for p in sources)).hexdigest()[:12]
        out = jars_dir() / "tiered" / f"{version}-{digest}"
        if (out / "io").is_dir():
            return out
        javac = shutil.which("javac")
        if javac is None:
            raise ClusterError("--tiered-storage compiles krm's remote storage manager (jvm/tiered/) and needs a JDK's "
                               "javac on PATH")
        tmp = out.with_name(out.name + ".tmp")
        shutil.rmtree(tmp, ignore_errors=True)
        kafka_cp = str(self._runtime_jars(version)[0].parent / "*")
        done = subprocess.run([javac, "-nowarn", "-cp", kafka_cp, "-d", str(tmp), *map(str, sources)],
                              capture_output=True, text=True)
        if done.returncode != 0:
            raise ClusterError(f"compiling {JVM_DIR / 'tiered'} against Kafka {version} failed:\n{done.stderr[-2000:]}")
        shutil.rmtree(out, ignore_errors=True)
        tmp.replace(out)
        return out

    def _java(self, node: Node, main: list[str]) -> list[str]:
        _, log_conf = KAFKA_RUNTIMES[node.kafka_version or self.kafka_version]
        kafka_cp = str(self._runtime_jars(node.kafka_version or self.kafka_version)[0].parent / "*")
        if self.tiered_storage and node.role == "broker":
            kafka_cp += os.pathsep + str(self._remote_storage_classes(node.kafka_version or self.kafka_version))
        oauth = self._secrets.oauth_jvm_properties() if self._oauth and node.role == "broker" else []
        if self.kerberos and node.role == "broker":
            oauth.append(f"-Djava.security.krb5.conf={self.kdc.krb5_conf}")
        cmd = ["java", *JVM_OPTS, *os.environ.get("KRM_JVM_OPTS", "").split(), f"-Xmx{self.heap_mb}m", *self._jaas(node),
               *oauth,
               f"-Dlog4j.configuration=file:{CONF_DIR / log_conf}",
               f"-Dlog4j2.configurationFile={CONF_DIR / log_conf}",
               f"-Dkafka.logs.dir={self._node_dir(node) / 'logs'}"]
        if node.jmx_port:
            agent = jar_group("agent")[0]
            exporter = self._secrets.jmx_exporter_config if self.secured else CONF_DIR / "jmx-exporter.yaml"
            cmd.append(f"-javaagent:{agent}=127.0.0.1:{node.jmx_port}:{exporter}")
        return cmd + ["-cp", kafka_cp, *main]

    def _command(self, node: Node) -> list[str]:
        d = self._node_dir(node)
        if node.role == "zookeeper":
            return self._java(node, ["org.apache.zookeeper.server.ZooKeeperServerMain", str(d / "zoo.cfg")])
        return self._java(node, ["kafka.Kafka", str(d / "server.properties")])

    def _format_storage(self, nodes: list[Node] | None = None) -> None:
        """KRaft: format every node's log dir with the cluster id, in parallel (one JVM each)."""
        procs = []
        for node in nodes if nodes is not None else list(self.nodes.values()):
            props = self._node_dir(node) / "server.properties"
            scram = self._secrets.scram_format_args() if self.security == "sasl_ssl" else []
            # `--cluster-id=ID`, one argument: a ZooKeeper-mode cluster's id, which a migration keeps, may
            # start with '-' (core/src/main/scala/kafka/utils/CoreUtils.scala generateUuidAsBase64 does
            # not avoid it), and the parser takes "-t -abc" for two options ("argument --cluster-id/-t:
            # expected one argument": one migration in 64 failed so)
            cmd = self._java(Node(node.role, node.id, node.port), ["kafka.tools.StorageTool", "format",
                                                                 f"--cluster-id={self.cluster_id}", "-c", str(props),
                                                                 "--ignore-formatted", *scram])
            out = open(self._node_dir(node) / "format.log", "w")
            procs.append((node, subprocess.Popen(cmd, stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL), out))
        for node, p, out in procs:
            rc = p.wait(timeout=120)
            out.close()
            if rc != 0:
                raise ClusterError(f"formatting {node.name} failed (exit {rc}); see {self._node_dir(node) / 'format.log'}")

    def _launch(self, node: Node) -> None:
        d = self._node_dir(node)
        d.mkdir(parents=True, exist_ok=True)
        cmd, env = self.kdc.command() if node.role == "kdc" else (self._command(node), None)
        # a broker in a cgroup of its own, so its outgoing connections can be cut (cut_replication)
        procs = packet_filter.prepare_cgroup(packet_filter.cgroup_name(node.port)) if node.role == "broker" else None
        if procs is not None:
            cmd = packet_filter.in_cgroup(procs, cmd)
        with open(d / "stdout.log", "ab") as out:
            p = subprocess.Popen(cmd, stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                 start_new_session=True, cwd=d, env=env)
        node.pid = p.pid
        self._save()

    def _wait_port(self, node: Node, timeout_s: float) -> None:
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            if _port_open(node.port):
                return
            if _pid_state(node.pid) == "dead":
                break
            time.sleep(0.1)
        raise ClusterError(f"{node.name} did not open port {node.port}; see {self._log_hint(node)}")

    def _await_zk_deregistration(self, broker_id: int) -> None:
        """A broker restarted before ZooKeeper expired its killed predecessor's session dies with
        NodeExists on /brokers/ids/<id> (KafkaZkClient.registerBroker). Wait for the node to go."""
        from kazoo.client import KazooClient

        zk = KazooClient(hosts=self.zookeeper, timeout=5.0, **(self._secrets.kazoo_kwargs() if self.secured else {}))
        zk.start(timeout=10)
        try:
            deadline = time.monotonic() + self.session_timeout_ms / 1000 + 14
            while zk.exists(f"/brokers/ids/{broker_id}") and time.monotonic() < deadline:
                time.sleep(0.2)
        finally:
            zk.stop()
            zk.close()

    @staticmethod
    def _await_state(node: Node, state: str) -> None:
        """Signals land asynchronously; return once the kernel shows the new state."""
        for _ in range(100):
            if _pid_state(node.pid) == state:
                return
            time.sleep(0.02)
        raise ClusterError(f"{node.name} (pid {node.pid}) did not become {state}")

    @staticmethod
    def _reap(node: Node) -> None:
        """Wait until a killed pid is gone; reap it if it is our child, so it leaves no zombie."""
        if not node.pid:
            return
        for _ in range(200):
            try:
                if os.waitpid(node.pid, os.WNOHANG) != (0, 0):
                    return
            except ChildProcessError:
                pass
            if _pid_state(node.pid) == "dead":
                return
            time.sleep(0.05)
