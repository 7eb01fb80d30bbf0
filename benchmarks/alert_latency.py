"""Alert latency on a real local cluster: broker SIGKILL -> krm_partition_offline on /metrics.

For each of N rounds: SIGKILL a broker that is the only replica of some RF-1 partitions, scrape
/metrics every 50 ms until every such partition is reported offline, then restart the broker and
wait for the series to clear. Two latencies per round:

- kill -> alert: wall clock from os.kill to the first scrape showing all of them;
- controller -> alert: from the controller's decision to that same scrape. ZooKeeper mode: the
  modification time (mtime) of the partition's `state` znode, i.e. the controller's write of
  `leader: -1`. KRaft (no watches: the collector's poll is the only path): the time the active
  controller logged "Fencing broker N" (ReplicationControlManager), which writes the partitions'
  leader -1 in the same batch of records. Same machine, same clock.

Usage: .venv/bin/python benchmarks/alert_latency.py [--mode zk|kraft] [--kafka-version V] [--rounds 20] [--poll 1.0]
Prints one line per round and a p50/p95 summary (append it to benchmarks/BENCHMARKS.md).
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import re
import statistics
import sys
import tempfile
import time
from pathlib import Path


from foundation.config import load_config
from krm.runner import Monitor
from krm.scrape import scrape, series
from lab.local_cluster import LocalCluster
from lab.harness import create_topic, wait_for, write_config


def pct(values: list[float], q: float) -> float:
    s = sorted(values)
    return s[min(len(s) - 1, int(round(q * (len(s) - 1))))]


FENCING = re.compile(r"^\[(\d{4}-\d\d-\d\d \d\d:\d\d:\d\d),(\d{3})\] INFO .*Fencing broker (\d+) ")


def fenced_at(cluster: LocalCluster, broker: int, after: float) -> float:
    """When the active controller fenced `broker` (its log line; the JVM logs in local time)."""
    for _ in range(100):
        for cid in cluster.controller_ids:
            log = cluster.root / f"controller-{cid}" / "logs" / "server.log"
            for line in reversed(log.read_text(errors="replace").splitlines()):
                m = FENCING.match(line)
                if m and int(m.group(3)) == broker:
                    t = datetime.datetime.strptime(m.group(1), "%Y-%m-%d %H:%M:%S").timestamp() + int(m.group(2)) / 1000
                    if t >= after - 1:
                        return t
        time.sleep(0.1)
    raise SystemExit(f"no 'Fencing broker {broker}' line in the controllers' logs")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--mode", choices=["zk", "kraft"], default="zk")
    ap.add_argument("--kafka-version", default="", help="default: 3.9.1 in zk mode, the newest 4.x in KRaft mode")
    ap.add_argument("--rounds", type=int, default=20)
    ap.add_argument("--poll", type=float, default=1.0, help="collector poll interval, seconds")
    ap.add_argument("--separate-observations", action="store_true",
                    help="put the observations topic on a second (1-broker KRaft) cluster, as recommended in production")
    args = ap.parse_args()
    os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")

    tmp = Path(tempfile.mkdtemp(prefix="krm-bench-"))
    cluster = LocalCluster(root=tmp / "bench", mode=args.mode, brokers=3, kafka_version=args.kafka_version,
                           chroot="/kafka_cluster_01" if args.mode == "zk" else None).up()
    monitor = None
    obs_cluster = None
    try:
        if args.separate_observations:
            obs_cluster = LocalCluster(root=tmp / "observations", mode="kraft", brokers=1).up()
        assignment = create_topic(cluster, "bench-rf1", partitions=6, rf=1)
        config = load_config(write_config(cluster, tmp, poll_interval_s=args.poll, observations_on=obs_cluster,
                                                history_trigger_s=10.0))
        monitor = Monitor(config).start()
        url = monitor.metrics_url
        wait_for(lambda: series(scrape(url), "krm_cluster_offline_partitions", cluster=cluster.name), 120, "/metrics")
        zk = None
        if args.mode == "zk":
            from kazoo.client import KazooClient

            zk = KazooClient(hosts=cluster.zookeeper)
            zk.start(timeout=10)
        kill_lat: list[float] = []
        ctl_lat: list[float] = []
        for rnd in range(args.rounds):
            victim = 1 + rnd % 3
            doomed = {str(p) for p, r in assignment.items() if r == [victim]}
            if not doomed:
                continue
            cluster.kill(victim)
            t_kill = time.time()
            while True:
                got = {s.labels["partition"] for s in series(scrape(url), "krm_partition_offline", cluster=cluster.name)
                       if s.labels["topic"] == "bench-rf1"}
                if doomed <= got:
                    t_alert = time.time()
                    break
                if time.time() - t_kill > 90:
                    raise SystemExit(f"round {rnd}: no alert after 90 s")
                time.sleep(0.05)
            kill_lat.append(t_alert - t_kill)
            line = f"round {rnd:2d} broker {victim}: kill->alert {t_alert - t_kill:5.2f}s"
            if zk is not None:
                p = sorted(doomed)[0]
                data, stat = zk.get(f"/brokers/topics/bench-rf1/partitions/{p}/state")
                assert json.loads(data)["leader"] == -1
                ctl_lat.append(t_alert - stat.mtime / 1000)
                line += f"  controller->alert {ctl_lat[-1]:5.2f}s  (kill->controller {stat.mtime / 1000 - t_kill:5.2f}s)"
            else:
                t_fence = fenced_at(cluster, victim, after=t_kill)
                ctl_lat.append(t_alert - t_fence)
                line += f"  controller->alert {ctl_lat[-1]:5.2f}s  (kill->controller {t_fence - t_kill:5.2f}s)"
            print(line, flush=True)
            cluster.start(victim)
            wait_for(lambda: not series(scrape(url), "krm_partition_offline", cluster=cluster.name), 90, "clear")
        where = "separate cluster" if obs_cluster else "the monitored cluster"
        print(f"\nmode={args.mode} kafka={cluster.kafka_version} poll={args.poll}s rounds={len(kill_lat)} "
              f"observations topic on {where}")
        print(f"kill -> /metrics        p50 {statistics.median(kill_lat):.2f}s  p95 {pct(kill_lat, 0.95):.2f}s  "
              f"max {max(kill_lat):.2f}s")
        if ctl_lat:
            print(f"controller -> /metrics  p50 {statistics.median(ctl_lat):.2f}s  p95 {pct(ctl_lat, 0.95):.2f}s  "
                  f"max {max(ctl_lat):.2f}s")
        if zk is not None:
            zk.stop()
        return 0
    finally:
        if monitor is not None:
            monitor.stop()
        cluster.down()
        if obs_cluster is not None:
            obs_cluster.down()


if __name__ == "__main__":
    sys.exit(main())
