"""`krm demo`: docs/cases/rf1-outage-zk-chroot.md replayed on a real local cluster, narrated in a few lines.

A 3-broker ZooKeeper-mode cluster under the chroot /kafka_cluster_01, a replication-factor-1 topic
(chosen, as in the incident, to save replication traffic) and an RF-3 topic for contrast. The
collector and pipeline run; one broker is SIGKILLed; the leaderless partitions appear on /metrics
with their cause; the broker comes back and the incidents resolve. Every JVM logs to files.
"""

from __future__ import annotations

import logging
import time
from typing import Any

from foundation.config import load_config
from foundation.errors import KrmError
from foundation.paths import clusters_root
from krm.runner import Monitor
from krm.scrape import scrape, series
from lab.local_cluster import LocalCluster
from pipelines.detectors.offline import TYPE as OFFLINE
from pipelines.detectors.offline import OfflineDetails
from pipelines.incident_store import IncidentStore
from pipelines.tables import Tables

RF1_TOPIC = "dw_test_kafka_0816000"
RF3_TOPIC = "orders"
VICTIM = 2


class _Clock:
    def __init__(self) -> None:
        self.t0 = time.monotonic()

    def say(self, msg: str) -> None:
        print(f"[{time.monotonic() - self.t0:6.1f}s] {msg}", flush=True)


def run_demo(keep: bool = False, brokers: int = 3) -> int:
    from kafka.admin import KafkaAdminClient, NewTopic

    logging.getLogger().setLevel(logging.WARNING)
    clock = _Clock()
    say = clock.say
    say(f"starting a real {brokers}-broker Kafka 3.9 cluster (ZooKeeper mode, chroot /kafka_cluster_01) ...")
    cluster = LocalCluster(root=clusters_root() / "demo", mode="zk", brokers=brokers, chroot="/kafka_cluster_01").up()
    monitor: Monitor | None = None
    try:
        say(f"cluster up: bootstrap {cluster.bootstrap_servers}, ZooKeeper {cluster.zookeeper}")
        admin = KafkaAdminClient(bootstrap_servers=cluster.bootstrap_servers, client_id="krm-demo")
        admin.create_topics([NewTopic(RF1_TOPIC, brokers * 2, 1), NewTopic(RF3_TOPIC, brokers, min(3, brokers))])
        admin.close()
        say(f"created topic {RF1_TOPIC} ({brokers * 2} partitions, replication factor 1) "
            f"and {RF3_TOPIC} ({brokers} partitions, RF {min(3, brokers)})")

        config = load_config(cluster.config_path)
        say("starting the collector and the Spark pipeline (first start takes ~15 s) ...")
        monitor = Monitor(config).start()
        url = monitor.metrics_url
        _wait(lambda: _healthy(url, cluster.name, brokers), 90, "the pipeline's first healthy view")
        say(f"monitoring: {brokers} brokers up, 0 offline partitions  ({url})")

        doomed = _partitions_on(cluster, RF1_TOPIC, VICTIM)
        say(f"killing broker {VICTIM} with SIGKILL, as in the field case (docs/cases/rf1-outage-zk-chroot.md); "
            f"it is the only replica of "
            f"{RF1_TOPIC} partitions {sorted(doomed)}")
        cluster.kill(VICTIM)
        t_kill = time.monotonic()
        seen: set[tuple[str, str]] = set()
        early: set[tuple[str, str]] = set()

        def alerts() -> bool:
            samples = scrape(url)
            for s in series(samples, "krm_partition_unavailable", cluster=cluster.name):
                k = (s.labels["topic"], s.labels["partition"])
                if s.labels["cause"] == "leader_unreachable" and k not in early and k not in seen:
                    early.add(k)
                    say(f"  ALERT  krm_partition_unavailable topic={k[0]} partition={k[1]} cause=leader_unreachable"
                        f"  (+{time.monotonic() - t_kill:.1f}s: before Kafka's controller notices)")
            for s in series(samples, "krm_partition_offline", cluster=cluster.name):
                k = (s.labels["topic"], s.labels["partition"])
                if k not in seen:
                    seen.add(k)
                    say(f"  ALERT  krm_partition_offline topic={k[0]} partition={k[1]} "
                        f"cause={s.labels['cause']}  (+{time.monotonic() - t_kill:.1f}s after the kill)")
            return {(RF1_TOPIC, str(p)) for p in doomed} <= seen

        _wait(alerts, 90, "the offline alerts")
        say(f"the RF-{min(3, brokers)} topic {RF3_TOPIC} moved its leaders and stayed online")

        say(f"restarting broker {VICTIM} ...")
        cluster.start(VICTIM)
        t_start = time.monotonic()
        _wait(lambda: not series(scrape(url), "krm_partition_offline", cluster=cluster.name), 90, "the resolution")
        say(f"  RESOLVED  all {len(doomed)} partitions have a leader again (+{time.monotonic() - t_start:.1f}s)")

        time.sleep(1.0)  # the incident upsert follows /metrics by a few hundred ms
        incidents = [i for i in IncidentStore(Tables(config.pipeline.data_dir).incidents).read() if i.topic == RF1_TOPIC]
        say("summary:")
        for i in incidents:
            dur = ((i.resolved_at_ms or i.last_seen_at_ms) - i.opened_at_ms) / 1000
            must = i.facts.must_return if isinstance(i.facts, OfflineDetails) else ()
            root = i.root_cause or i.cause
            print(f"         {i.type} {i.topic}/{i.partition} cause={root} {i.status} after {dur:.1f}s"
                  + (f" (last: {i.cause})" if i.cause != root else "")
                  + (f" (must return: broker {','.join(map(str, must))})" if must else ""))
        print("\n  The lesson (docs/cases/rf1-outage-zk-chroot.md): a replication-factor-1 partition is offline "
              "for as long as its one broker"
              "\n  is down. Before maintenance, move such partitions off the broker.\n")
        say("stopping krm: it writes to the history what it has read, so the post-mortem below is whole")
        monitor.stop()
        monitor = None
        if incidents:  # the page's incident: an offline partition, the one naming the broker to bring back first
            shown = min(incidents, key=lambda i: (i.type != OFFLINE,
                                                  not (isinstance(i.facts, OfflineDetails) and i.facts.must_return)))
            _history(say, cluster.config_path, shown)
        print(f"\n  History: .venv/bin/krm incidents --config {cluster.config_path}")
        return 0
    finally:
        if monitor is not None:
            monitor.stop()
        if keep:
            say("cluster left running: .venv/bin/krm local-cluster status --name demo")
        else:
            cluster.down()
            say("cluster stopped")


def _history(say: Any, config_path: Any, incident: Any) -> None:
    """The answers an on-call engineer asks for after the page, from the tables the run wrote: one
    incident whole, its partition's timeline (and a PNG for the post-mortem), and SQL over the
    history — each as the command to type, then what it printed."""
    import shlex
    import subprocess
    import sys
    from pathlib import Path

    krm = Path(sys.executable).with_name("krm")
    base = [str(krm)] if krm.exists() else [sys.executable, "-m", "krm.cli"]
    plot = Path(config_path).parent / "demo-timeline.png"
    asks = [
        ["incidents", "show", incident.incident_id],
        ["timeline", "--topic", incident.topic, "--partition", str(incident.partition), "--since", "15m",
         "--plot", str(plot)],
        ["sql", "SELECT type, cause, count(*) AS incidents, round(max(epoch(coalesce(resolved_at, last_seen_at)"
                " - opened_at)), 1) AS longest_s FROM incidents GROUP BY type, cause ORDER BY incidents DESC"],
    ]
    for ask in asks:
        cmd = [*base, *ask, "--config", str(config_path)]
        say("$ krm " + " ".join(shlex.quote(a) for a in ask) + " --config " + str(config_path))
        out = subprocess.run(cmd, capture_output=True, text=True, timeout=120)
        lines = (out.stdout or out.stderr).rstrip().splitlines()
        for line in lines[:14]:
            print(f"         {line}")
        if len(lines) > 14:
            print(f"         ... ({len(lines) - 14} more lines)")
    if plot.exists():
        say(f"timeline plot for the post-mortem: {plot}")


def _wait(check: Any, timeout_s: float, what: str) -> None:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        try:
            if check():
                return
        except OSError:
            pass  # /metrics not up yet
        time.sleep(0.2)
    raise KrmError(f"timed out after {timeout_s:.0f}s waiting for {what}")


def _healthy(url: str, cluster: str, brokers: int) -> bool:
    samples = scrape(url)
    up = series(samples, "krm_broker_up", cluster=cluster)
    offline = series(samples, "krm_cluster_offline_partitions", cluster=cluster)
    return len([s for s in up if s.value == 1]) == brokers and bool(offline) and offline[0].value == 0


def _partitions_on(cluster: Any, topic: str, broker: int) -> set[int]:
    from kafka.admin import KafkaAdminClient

    admin = KafkaAdminClient(bootstrap_servers=cluster.bootstrap_servers, client_id="krm-demo")
    try:
        (t,) = admin.describe_topics([topic])
        return {p["partition"] for p in t["partitions"] if p["replicas"] == [broker]}
    finally:
        admin.close()
