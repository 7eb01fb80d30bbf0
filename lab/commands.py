"""The lab's commands: `krm local-cluster`, `krm simulate` and `krm demo`, for trying and testing krm.

The product's command line (krm/cli.py) never imports the lab: it finds these commands through the
`krm.commands` entry point (pyproject.toml), which names `add_commands` below.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

from foundation.errors import KrmError
from foundation.paths import clusters_root
from krm.commands.common import resolve_config


def _cluster_root(name: str) -> Path:
    return clusters_root() / name


def cmd_local_cluster(args: argparse.Namespace) -> int:
    from lab.local_cluster import LocalCluster

    root = _cluster_root(args.name)
    if args.action == "up":
        if not args.json:
            print(f"starting {args.brokers}-broker {args.mode} cluster {args.name!r} ...", file=sys.stderr)
        bad = [kv for kv in args.broker_config if "=" not in kv]
        if bad:
            raise KrmError(f"--broker-config takes KEY=VALUE, got {bad[0]!r}")
        c = LocalCluster(root=root, mode=args.mode, brokers=args.brokers, chroot=args.chroot,
                         broker_config=dict(kv.split("=", 1) for kv in args.broker_config),
                         kafka_version=args.kafka_version or "", controllers=args.controllers,
                         security=args.security, session_timeout_ms=args.session_timeout_ms,
                         tiered_storage=args.tiered_storage, kerberos=args.kerberos, disk_layer=args.disk_layer).up()
        _print_status(c.status(), args.json)
        return 0
    c = LocalCluster.load(root)
    if args.action == "status":
        _print_status(c.status(), args.json)
    elif args.action == "add-broker":
        bid = c.add_broker()
        print(f"broker {bid} added and registered; Kafka moves no existing replica to it")
    elif args.action == "down":
        c.down()
        print(f"cluster {args.name!r} stopped (data kept in {root} until the next `up`)")
    elif args.action == "migrate":
        steps = LocalCluster.MIGRATION_STEPS if args.step == "all" else (args.step,)
        for step in steps:
            print(f"migration step {step} ...", file=sys.stderr)
            c.migrate(step)
            print(f"migration step {step} done; ZooKeeper's /migration: {c.migration_state()}")
    elif args.action == "start":
        c.start(args.broker_id, kafka_version=args.kafka_version)
        node = c.broker(args.broker_id)
        print(f"{node.role} {args.broker_id}: started on Kafka {node.kafka_version or c.kafka_version}")
    elif args.action == "slow":
        said = c.slow(args.broker_id, cpu_pct=args.cpu, disk_delay_ms=args.disk_delay)
        print(f"broker {args.broker_id}: {said}; `krm local-cluster fast {args.broker_id}` undoes it")
    elif args.action == "fast":
        c.fast(args.broker_id)
        print(f"broker {args.broker_id}: full speed again")
    elif args.action in ("cut", "heal"):
        getattr(c, args.action)(args.broker_id)
        print(f"broker {args.broker_id}: listener port {c.broker(args.broker_id).port} "
              + ("cut off (packets dropped)" if args.action == "cut" else "reachable again"))
    else:
        getattr(c, args.action)(args.broker_id)
        node = c.broker(args.broker_id)
        status = c.status()
        state = {**status["brokers"], **(status.get("controllers") or {})}[str(node.id)]["state"]
        print(f"{node.role} {args.broker_id}: {args.action} done, now {state}")
    return 0


def _print_status(status: dict[str, Any], as_json: bool) -> None:
    if as_json:
        print(json.dumps(status, indent=2))
        return
    secured = f", {status['security']['security_protocol']}" if status.get("security") else ""
    print(f"cluster {status['name']} (Kafka {status.get('kafka_version', '?')}, {status['mode']}{secured}): "
          f"bootstrap {status['bootstrap_servers']}")
    if status["zookeeper"]:
        print(f"  zookeeper  {status['zookeeper']}")
    for cid, ctl in (status.get("controllers") or {}).items():
        print(f"  controller {cid:>4}  port {ctl['port']}  pid {ctl['pid'] or '-':>7}  {ctl['state']}")
    for bid, b in status["brokers"].items():
        print(f"  broker {bid:>3}  port {b['port']}  pid {b['pid'] or '-':>7}  {b['state']}")
    print(f"  krm config {status['config']}")


def cmd_simulate(args: argparse.Namespace) -> int:
    from foundation.config import load_config
    from lab.simulate.faults import load_script
    from lab.simulate.model import SimSettings
    from lab.simulate.run import fleet_names, open_truth, simulate

    config = load_config(resolve_config(args.config))
    name = args.cluster_name or config.clusters[0].name
    settings = SimSettings(brokers=args.brokers, topics=args.topics, partitions_per_topic=args.partitions_per_topic,
                           replication_factor=args.replication_factor, rf1_topics=args.rf1_topics,
                           min_insync_replicas=args.min_insync_replicas, write_rate=args.write_rate,
                           replica_lag_time_max_ms=args.replica_lag_time_max_ms, seed=args.seed)
    share = None
    if args.topic_share:
        from collectors import topic_share

        try:
            share = topic_share.parse(args.topic_share)
        except ValueError as e:
            raise KrmError(f"--topic-share: {e}") from None
        if args.truth:
            raise KrmError("--topic-share publishes one share of the topics; the faults' truth needs the whole "
                           "cluster (run without it; --faults alone is fine: every share, run with the same script "
                           "and seed, injects them into the same simulated cluster and publishes its own topics)")
    if args.clusters < 1:
        raise KrmError(f"--clusters {args.clusters}: at least 1")
    names = fleet_names(name, args.clusters)
    hangs: dict[str, float] = {}
    for h in args.hang:
        cluster, _, at = h.rpartition("@")
        try:
            hangs[cluster] = float(at)
        except ValueError:
            raise KrmError(f"--hang {h!r}: CLUSTER@SECONDS, e.g. {names[-1]}@60") from None
        if cluster not in names:
            raise KrmError(f"--hang {h!r}: no simulated cluster {cluster!r} (they are {names[0]} ... {names[-1]})")
    faults = load_script(args.faults) if args.faults else []
    truth = open_truth(args.truth)
    try:
        stats = simulate(config, name, settings, faults, args.poll_interval, args.duration, truth,
                         unclean_topic=args.unclean_topic, expand_topic=args.expand_topic, prebuild=args.prebuild,
                         share=share, clusters=args.clusters, hangs=hangs)
    finally:
        if truth is not None:
            truth.close()
    if stats.build_s:
        print(f"{len(stats.build_s)} polls: build p50 {sorted(stats.build_s)[len(stats.build_s) // 2]:.2f}s, "
              f"max {max(stats.build_s):.2f}s; {sum(stats.bytes) / 1e6:.0f} MB published", file=sys.stderr)
    return 0


def cmd_demo(args: argparse.Namespace) -> int:
    from lab.demo import run_demo

    return run_demo(keep=args.keep, brokers=args.brokers)


def _kafka_versions() -> str:
    from lab.local_cluster import COMPAT_VERSIONS, KAFKA_RUNTIMES

    return (", ".join(v for v in KAFKA_RUNTIMES if v not in COMPAT_VERSIONS) + "; with `make compat-jars` also "
            + ", ".join(COMPAT_VERSIONS) + "; KRaft from 3.3, ZooKeeper mode up to 3.9")



def add_commands(sub: Any) -> None:
    """Add the lab's commands to `krm`'s subcommands (the `krm.commands` entry point)."""
    d = sub.add_parser("demo", help="local cluster + collector + pipeline; kill a broker holding RF-1 partitions; watch alerts")
    d.add_argument("--brokers", type=int, default=3)
    d.add_argument("--keep", action="store_true", help="leave the cluster running at the end")
    d.set_defaults(func=cmd_demo)

    lc = sub.add_parser("local-cluster", help="a real local Kafka cluster (3.9 ZooKeeper or KRaft, 4.x KRaft) for trying krm")
    lcs = lc.add_subparsers(dest="action", required=True, metavar="ACTION")
    up = lcs.add_parser("up", help="start a new cluster (wipes an earlier one of the same name)")
    up.add_argument("--mode", choices=["zk", "kraft"], default="zk")
    up.add_argument("--brokers", type=int, default=3)
    up.add_argument("--chroot", help="ZooKeeper chroot, e.g. /kafka_cluster_01 (zk mode)")
    up.add_argument("--kafka-version", metavar="V",
                    help="Kafka release (default: the newest 4.x in KRaft mode, 3.9.1 in zk mode; available: "
                         + _kafka_versions() + ")")
    up.add_argument("--controllers", type=int, default=1, help="KRaft: controller quorum voters (node ids 1000, 1001, ...)")
    up.add_argument("--security", choices=["plaintext", "sasl_ssl", "mtls"], default="plaintext",
                    help="sasl_ssl: SCRAM-SHA-512 or PLAIN over TLS (a CA of the cluster's own), ACLs enforced, krm "
                         "connecting as its least-privilege user 'krm' (password in a file the config names); mtls: "
                         "TLS with client certificates (CN=krm is User:krm), ZooKeeper over TLS too in zk mode")
    up.add_argument("--session-timeout-ms", type=int, default=6000, metavar="MS",
                    help="how long a silent broker stays registered: the ZooKeeper session (zk mode) or the "
                         "controllers' broker.session.timeout.ms (KRaft); default 6000, Kafka's own 18000 / 9000")
    up.add_argument("--kerberos", action="store_true",
                    help="with --security sasl_ssl: a Kerberos KDC of the cluster's own (MIT krb5kdc, realm KRM.LOCAL) "
                         "and GSSAPI on the listener; keytabs and krb5.conf in the cluster's secrets folder")
    up.add_argument("--tiered-storage", action="store_true",
                    help="KIP-405 remote storage on the brokers (Kafka 3.9+, plaintext): a folder "
                         "of the cluster as the remote tier; topics opt in with remote.storage.enable=true")
    up.add_argument("--disk-layer", action="store_true",
                    help="each broker's first log directory on a pass-through FUSE layer (root, /dev/fuse, libfuse2), "
                         "so `slow BROKER --disk-delay MS` can make its disk answer late")
    up.add_argument("--broker-config", action="append", default=[], metavar="KEY=VALUE",
                    help="extra broker setting, repeatable (e.g. replica.lag.time.max.ms=5000)")
    up.add_argument("--json", action="store_true")
    for action, helptext in (("kill", "SIGKILL one broker (or KRaft controller, by node id)"),
                             ("stop", "SIGTERM one broker: controlled shutdown, waits for the exit"),
                             ("start", "start a stopped broker"),
                             ("pause", "SIGSTOP one broker"), ("resume", "SIGCONT a paused broker"),
                             ("cut", "gray failure: drop every packet to the broker's listener (nftables, root); "
                                     "its process, session and heartbeats live on"),
                             ("heal", "let packets reach a cut broker's listener again"),
                             ("slow", "a slow broker that stays registered and answers: --cpu PCT caps its JVM at PCT %% of "
                                      "one core (a CPU cgroup, root); --disk-delay MS delays each write and "
                                      "sync of its log directory (a cluster started with `up --disk-layer`)"),
                             ("fast", "undo `slow`")):
        a = lcs.add_parser(action, help=helptext)
        a.add_argument("broker_id", type=int, metavar="BROKER_ID")
        if action == "slow":
            a.add_argument("--cpu", type=float, metavar="PCT", help="cap the broker's CPU at PCT %% of one core")
            a.add_argument("--disk-delay", type=int, metavar="MS",
                           help="each write and sync of its log directory waits MS (0: none; needs `up --disk-layer`)")
        if action == "start":
            a.add_argument("--kafka-version", metavar="V", help="start it on this Kafka release from now on (a rolling "
                                                                 "upgrade step: same data and settings)")
    lcs.add_parser("add-broker", help="expand the cluster by one broker (the next id)")
    mig = lcs.add_parser("migrate", help="ZooKeeper → KRaft migration, one step at a time (zk mode, plaintext)",
                         description="Kafka's migration as an operator runs it: `controllers` (KRaft controllers "
                                     "with zookeeper.metadata.migration.enable), `brokers` (rolling restart into "
                                     "migration mode; the controller copies ZooKeeper's metadata, then writes both), "
                                     "`kraft-brokers` (rolling restart into KRaft mode), `finalize` (controllers "
                                     "restarted without ZooKeeper); `all` runs the four in order.")
    mig.add_argument("step", choices=["controllers", "brokers", "kraft-brokers", "finalize", "all"])
    st = lcs.add_parser("status", help="processes, ports and states")
    st.add_argument("--json", action="store_true")
    lcs.add_parser("down", help="stop every process of the cluster")
    for sp in lcs.choices.values():
        sp.add_argument("--name", default="default", help="which local cluster (several can run at once)")
    lc.set_defaults(func=cmd_local_cluster)


    sm = sub.add_parser("simulate", help="a model Kafka cluster of any size publishing observations, with scripted faults",
                        description="Steps an in-memory Kafka cluster (Kafka's placement, ISR and election rules) every "
                                    "poll interval and publishes observation records exactly as the collector would, to "
                                    "the config's observations topic; run `krm pipeline` on the same config. --faults "
                                    "injects scripted faults (lab/simulate/faults.py); --truth writes what each must produce.")
    sm.add_argument("--config", help="krm TOML config: its observations topic (and first cluster's name)")
    sm.add_argument("--cluster-name", help="name of the simulated cluster (default: the config's first cluster)")
    sm.add_argument("--brokers", type=int, default=30)
    sm.add_argument("--topics", type=int, default=100)
    sm.add_argument("--partitions-per-topic", type=int, default=100)
    sm.add_argument("--replication-factor", type=int, default=3)
    sm.add_argument("--rf1-topics", type=int, default=0, help="extra single-replica topics")
    sm.add_argument("--min-insync-replicas", type=int, default=2)
    sm.add_argument("--write-rate", type=float, default=2.0, help="mean messages/s per partition (a quarter idle)")
    sm.add_argument("--replica-lag-time-max-ms", type=int, default=30_000)
    sm.add_argument("--seed", type=int, default=1)
    sm.add_argument("--topic-share", metavar="I/N",
                    help="publish only the I-th of N shares of the topics, as `krm collect --topic-share` does (run N "
                         "processes with the same --seed for the whole cluster)")
    sm.add_argument("--clusters", type=int, default=1, metavar="N",
                    help="a fleet: N clusters of this size (NAME-001 ... NAME-N, each its own seed) from one process; "
                         "--faults go to the first")
    sm.add_argument("--hang", action="append", default=[], metavar="CLUSTER@S",
                    help="from S seconds into the run, CLUSTER answers nothing: only the cluster record a collector "
                         "publishes for a cluster it cannot reach (repeatable)")
    sm.add_argument("--poll-interval", type=float, default=10.0, metavar="S")
    sm.add_argument("--duration", type=float, default=600.0, metavar="S")
    sm.add_argument("--faults", metavar="FILE", help="fault script (JSON list or TOML [[fault]] tables)")
    sm.add_argument("--truth", metavar="FILE", help="write each injected fault and its expected incidents (JSON lines)")
    sm.add_argument("--unclean-topic", action="store_true", help="add sim-unclean: RF 2, unclean election on, busy")
    sm.add_argument("--expand-topic", action="store_true", help="add sim-expand: RF 1, 20 partitions")
    sm.add_argument("--prebuild", action="store_true",
                    help="build every poll first (in simulated time, in a temp dir), then publish them on schedule "
                         "restamped to the publication time: the simulator's CPU then does not compete with a "
                         "pipeline on the same machine")
    sm.set_defaults(func=cmd_simulate)

