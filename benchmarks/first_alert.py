"""Broker SIGKILL -> the first per-partition signal: krm against Kafka's own OfflinePartitionsCount
(JMX exporter) and kafka_exporter, all scraped by one Prometheus, at Kafka's default session timeouts.

The monitored cluster (3 brokers) runs with Kafka's own session timeout (ZooKeeper mode 18 s, KRaft
9 s), the observations topic on a second cluster. Two topics: `fa-rf1` (6 partitions, RF 1: offline
once the controller acts) and `fa-rf3` (6 partitions, RF 3: the controller moves leadership). Each
round: preferred leaders restored, the next broker SIGKILLed, then one Prometheus (every target scraped
each `--scrape-interval`) is read for the first scrape in which each source showed every partition
the victim led:

- krm: all of them in `krm_partition_unavailable` (krm's own verdict, before the controller's); and
  the RF-1 ones in `krm_partition_offline` (Kafka's verdict as krm reports it);
- Kafka: `kafka_controller_kafkacontroller_offlinepartitionscount` (the active controller, JMX
  exporter) counting at least the victim's RF-1 partitions (Kafka exposes no per-partition offline
  flag; RF-3 partitions never go offline);
- kafka_exporter (danielqsj/kafka_exporter, built from its source: `--kafka-exporter PATH`): each
  partition's `kafka_topic_partition_leader` no longer the victim (gone or moved), or
  `kafka_topic_partition_under_replicated_partition` 1. Also reported: the first scrape without the
  partitions' `kafka_topic_partition_current_offset` (its ListOffsets to the dead leader failing), a
  signal an `absent()` rule could use although no shipped kafka_exporter alert does.

Same machine, same clock; times are Prometheus scrape timestamps minus the kill.

Usage: .venv/bin/python benchmarks/first_alert.py --mode zk|kraft --rounds 20 --kafka-exporter PATH [--json F]
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.parse
import urllib.request
from pathlib import Path
from typing import Callable


from alert_latency import fenced_at, pct
from foundation.config import PipelineConfig, load_config
from foundation.paths import jar_group
from krm.runner import Monitor
from krm.scrape import scrape, series
from lab.local_cluster import JVM_OPTS, LocalCluster, free_port
from lab.harness import create_topic, wait_for, write_config

RF1, RF3 = "fa-rf1", "fa-rf3"
DEFAULT_SESSION_MS = {"zk": 18000, "kraft": 9000}  # zookeeper.session.timeout.ms / broker.session.timeout.ms


class Prometheus:
    """One Prometheus scraping every source at the same interval; read back as raw samples."""

    def __init__(self, work: Path, jobs: dict[str, list[str]], interval_s: float) -> None:
        binary = shutil.which("prometheus")
        if not binary:
            raise SystemExit("prometheus is not installed (`make test` installs Debian's)")
        self.port = free_port()
        iv = f"{int(interval_s * 1000)}ms"
        cfg = f"global:\n  scrape_interval: {iv}\n  scrape_timeout: {iv}\nscrape_configs:\n"
        for job, targets in jobs.items():
            cfg += f"  - job_name: {job}\n    static_configs:\n      - targets: [{', '.join(repr(t) for t in targets)}]\n"
        (work / "prometheus.yml").write_text(cfg)
        self.proc = subprocess.Popen([binary, f"--config.file={work / 'prometheus.yml'}",
                                      f"--storage.tsdb.path={work / 'prom-data'}",
                                      f"--web.listen-address=127.0.0.1:{self.port}"],
                                     stdout=(work / "prometheus.log").open("w"), stderr=subprocess.STDOUT)
        wait_for(lambda: self._get("/-/ready") is not None, 60, "Prometheus ready")

    def _get(self, path: str) -> bytes | None:
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{self.port}{path}", timeout=10) as r:
                return r.read()
        except OSError:
            return None

    def samples(self, selector: str, since: float) -> list[tuple[dict[str, str], dict[float, float]]]:
        """Every raw sample of `selector` scraped at or after `since`: (labels, {timestamp: value})."""
        now = time.time()
        q = urllib.parse.urlencode({"query": f"{selector}[{int(now - since) + 2}s]", "time": f"{now:.3f}"})
        body = self._get(f"/api/v1/query?{q}")
        if body is None:
            raise RuntimeError(f"Prometheus did not answer the query {selector}")
        return [(r["metric"], {float(t): float(v) for t, v in r["values"] if float(t) >= since})
                for r in json.loads(body)["data"]["result"]]

    def scrapes(self, job: str, since: float) -> list[float]:
        """Timestamps of the job's successful scrapes since `since`, oldest first."""
        return sorted(t for _, vals in self.samples(f'up{{job="{job}"}}', since) for t, v in vals.items() if v == 1)

    def stop(self) -> None:
        self.proc.terminate()
        self.proc.wait(timeout=30)


def start_kafka_exporter(binary: str, cluster: LocalCluster, refresh: str, log: Path) -> tuple[subprocess.Popen, str]:
    port = free_port()
    proc = subprocess.Popen([binary, *[f"--kafka.server={s}" for s in cluster.bootstrap_servers.split(",")],
                             f"--web.listen-address=127.0.0.1:{port}", f"--refresh.metadata={refresh}"],
                            stdout=log.open("w"), stderr=subprocess.STDOUT)
    return proc, f"127.0.0.1:{port}"


def partitions_now(cluster: LocalCluster) -> dict[tuple[str, int], tuple[int, list[int], list[int]]]:
    """(topic, partition) -> (leader, replicas, isr) from the brokers' metadata."""
    from kafka.admin import KafkaAdminClient

    admin = KafkaAdminClient(bootstrap_servers=cluster.bootstrap_servers, client_id="krm-bench")
    try:
        out = {}
        for t in admin.describe_topics([RF1, RF3]):
            for p in t["partitions"]:
                out[(t["topic"], p["partition"])] = (p["leader"], p["replicas"], p["isr"])
        return out
    finally:
        admin.close()


def restore_preferred_leaders(cluster: LocalCluster, work: Path) -> None:
    """Every RF-3 replica back in sync, then Kafka's own preferred election (LeaderElectionCommand)."""
    wait_for(lambda: all(len(isr) == len(replicas) for _, replicas, isr in partitions_now(cluster).values()),
             120, "every replica back in sync")
    elect = work / "elect.json"
    elect.write_text(json.dumps({"partitions": [{"topic": RF3, "partition": p} for p in range(6)]}))
    cp = str(jar_group("kafka")[0].parent / "*")
    subprocess.run(["java", *JVM_OPTS, "-cp", cp, "org.apache.kafka.tools.LeaderElectionCommand",
                    "--bootstrap-server", cluster.bootstrap_servers, "--election-type", "PREFERRED",
                    "--path-to-json-file", str(elect)], capture_output=True, text=True, timeout=120)
    wait_for(lambda: all(leader == replicas[0] for (topic, _), (leader, replicas, _) in partitions_now(cluster).items()
                         if topic == RF3), 60, "preferred leaders")


def first_scrape(times: list[float], seen_at: Callable[[float], bool]) -> float | None:
    return next((t for t in times if seen_at(t)), None)


def measure(prom: Prometheus, cluster: str, victim: int, doomed: set[tuple[str, int]], t_kill: float,
            has_exporter: bool) -> dict[str, float | None]:
    """Seconds from the kill to each source's first scrape that showed all of `doomed` (None: not yet)."""

    def by_time(selector: str, keep=lambda labels, v: True) -> dict[float, set[tuple[str, int]]]:
        at: dict[float, set[tuple[str, int]]] = {}
        for labels, vals in prom.samples(selector, t_kill):
            for t, v in vals.items():
                if keep(labels, v):
                    at.setdefault(t, set()).add((labels["topic"], int(labels["partition"])))
        return at

    rf1 = {p for p in doomed if p[0] == RF1}
    out: dict[str, float | None] = {}
    krm_times = prom.scrapes("krm", t_kill)
    unavailable = by_time(f'krm_partition_unavailable{{cluster="{cluster}"}}')
    offline = by_time(f'krm_partition_offline{{cluster="{cluster}"}}')
    out["krm_unavailable"] = first_scrape(krm_times, lambda t: doomed <= unavailable.get(t, set()))
    out["krm_offline"] = first_scrape(krm_times, lambda t: rf1 <= offline.get(t, set()))
    counts = sorted(t for _, vals in prom.samples("kafka_controller_kafkacontroller_offlinepartitionscount", t_kill)
                    for t, v in vals.items() if v >= len(rf1))
    out["kafka_offline_count"] = counts[0] if counts else None
    if has_exporter:
        ex_times = prom.scrapes("kafka_exporter", t_kill)
        topics = f'topic=~"{RF1}|{RF3}"'
        still_led = by_time(f"kafka_topic_partition_leader{{{topics}}}", lambda _, v: v == victim)
        under = by_time(f"kafka_topic_partition_under_replicated_partition{{{topics}}}", lambda _, v: v == 1)
        offsets = by_time(f"kafka_topic_partition_current_offset{{{topics}}}")
        out["exporter_moved_or_urp"] = first_scrape(
            ex_times, lambda t: all(p not in still_led.get(t, set()) or p in under.get(t, set()) for p in doomed))
        out["exporter_offsets_gone"] = first_scrape(ex_times, lambda t: not (doomed & offsets.get(t, set())))
    return {k: (None if v is None else round(v - t_kill, 2)) for k, v in out.items()}


def summary(rounds: list[dict], key: str) -> str:
    vals = [r[key] for r in rounds if r.get(key) is not None]
    missed = len(rounds) - len(vals)
    if not vals:
        return f"{key:<24} never seen"
    return (f"{key:<24} p50 {statistics.median(vals):5.2f}s  p95 {pct(vals, 0.95):5.2f}s  max {max(vals):5.2f}s"
            + (f"  (not seen in {missed} of {len(rounds)} rounds)" if missed else ""))


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--mode", choices=["zk", "kraft"], default="zk")
    ap.add_argument("--kafka-version", default="", help="default: 3.9.1 in zk mode, the newest 4.x in KRaft mode")
    ap.add_argument("--rounds", type=int, default=20)
    ap.add_argument("--poll", type=float, default=1.0, help="krm collector poll interval, seconds")
    ap.add_argument("--session-ms", type=int, default=0, help="session timeout; default Kafka's (zk 18000, KRaft 9000)")
    ap.add_argument("--scrape-interval", type=float, default=1.0, help="Prometheus scrape interval for every source")
    ap.add_argument("--kafka-exporter", metavar="PATH", help="kafka_exporter binary (none: krm and Kafka's JMX only)")
    ap.add_argument("--exporter-refresh", default="1s", help="kafka_exporter --refresh.metadata")
    ap.add_argument("--json", help="also write every round and the summary here")
    ap.add_argument("--history-trigger", type=float, default=PipelineConfig().history_trigger_s,
                    help="krm's history_trigger_s (default: krm's own default)")
    ap.add_argument("--log-level", default="WARNING", help="krm's log level (DEBUG: each poll and batch, timed)")
    args = ap.parse_args()
    logging.basicConfig(level=args.log_level.upper(), format="%(asctime)s %(threadName)s %(name)s %(message)s")
    for noisy in ("kafka", "kazoo", "py4j", "great_expectations"):
        logging.getLogger(noisy).setLevel(logging.WARNING)
    os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    if args.kafka_exporter and not os.access(args.kafka_exporter, os.X_OK):
        raise SystemExit(f"--kafka-exporter {args.kafka_exporter} is not executable")
    session_ms = args.session_ms or DEFAULT_SESSION_MS[args.mode]

    work = Path(tempfile.mkdtemp(prefix="krm-first-alert-"))
    print(f"work folder {work}", flush=True)
    cluster = LocalCluster(root=work / "monitored", mode=args.mode, brokers=3, kafka_version=args.kafka_version,
                           session_timeout_ms=session_ms).up()
    obs = LocalCluster(root=work / "observations", mode="kraft", brokers=1).up()
    procs: list[subprocess.Popen] = []
    monitor = prom = zk = None
    try:
        create_topic(cluster, RF1, partitions=6, rf=1)
        create_topic(cluster, RF3, partitions=6, rf=3)
        monitor = Monitor(load_config(write_config(cluster, work, poll_interval_s=args.poll,
                                                   history_trigger_s=args.history_trigger, observations_on=obs))).start()
        jobs = {"krm": [urllib.parse.urlsplit(monitor.metrics_url).netloc],
                "jmx": [f"127.0.0.1:{n.jmx_port}" for n in cluster.nodes.values() if n.jmx_port]}
        if args.kafka_exporter:
            proc, target = start_kafka_exporter(args.kafka_exporter, cluster, args.exporter_refresh,
                                                work / "kafka_exporter.log")
            procs.append(proc)
            jobs["kafka_exporter"] = [target]
        prom = Prometheus(work, jobs, args.scrape_interval)
        wait_for(lambda: all(prom.scrapes(job, time.time() - 5) for job in jobs), 180, "every source scraped")
        # The first alert batch that carries records runs Spark's cold paths (class loading, JIT,
        # code generation). A kill before it ends measured krm's start-up, not its detection
        # (benchmarks/BENCHMARKS.md, "The first round explained"). Its end is the first
        # observation age on /metrics.
        wait_for(lambda: series(scrape(monitor.metrics_url), "krm_observation_age_seconds"), 180,
                 "the first alert batch with records (krm_observation_age_seconds)")
        if args.mode == "zk":
            from kazoo.client import KazooClient

            zk = KazooClient(hosts=cluster.zookeeper)
            zk.start(timeout=10)
        print(f"mode={args.mode} kafka={cluster.kafka_version} session={session_ms} ms poll={args.poll}s "
              f"scrape={args.scrape_interval}s kafka_exporter={'yes' if args.kafka_exporter else 'no'}", flush=True)
        rounds: list[dict] = []
        for rnd in range(args.rounds):
            restore_preferred_leaders(cluster, work)
            victim = cluster.broker_ids[rnd % len(cluster.broker_ids)]
            state = partitions_now(cluster)
            doomed = {tp for tp, (leader, _, _) in state.items() if leader == victim}
            cluster.kill(victim)
            t_kill = time.time()
            logging.getLogger("first_alert").info("round %d: broker %d killed", rnd, victim)
            result: dict = {}
            deadline = t_kill + session_ms / 1000 + 60
            while time.time() < deadline:
                time.sleep(2)
                result = measure(prom, cluster.name, victim, doomed, t_kill, bool(args.kafka_exporter))
                if all(v is not None for v in result.values()):
                    break
            if zk is not None:
                p = min(p for t, p in doomed if t == RF1)
                _, stat = zk.get(f"/brokers/topics/{RF1}/partitions/{p}/state")
                result["controller"] = round(stat.mtime / 1000 - t_kill, 2)
            else:
                result["controller"] = round(fenced_at(cluster, victim, after=t_kill) - t_kill, 2)
            result |= {"round": rnd, "victim": victim, "rf1": sum(1 for t, _ in doomed if t == RF1),
                       "rf3_led": sum(1 for t, _ in doomed if t == RF3)}
            rounds.append(result)
            print(json.dumps(result), flush=True)
            cluster.start(victim)
            wait_for(lambda: not any(prom.samples(f'{m}{{cluster="{cluster.name}"}}', time.time() - 1.5)
                                     for m in ("krm_partition_unavailable", "krm_partition_offline")), 120,
                     "krm clear after the restart")
        keys = ["controller", "krm_unavailable", "krm_offline", "kafka_offline_count"]
        if args.kafka_exporter:
            keys += ["exporter_moved_or_urp", "exporter_offsets_gone"]
        print(f"\nmode={args.mode} kafka={cluster.kafka_version} session={session_ms} ms rounds={len(rounds)} "
              f"(seconds from the SIGKILL to the first Prometheus scrape showing it)")
        for k in keys:
            print(summary(rounds, k))
        if args.json:
            Path(args.json).write_text(json.dumps({"mode": args.mode, "kafka": cluster.kafka_version,
                                                   "session_ms": session_ms, "poll_s": args.poll,
                                                   "scrape_interval_s": args.scrape_interval, "rounds": rounds,
                                                   "summary": [summary(rounds, k) for k in keys]}, indent=1))
        return 0
    finally:
        if zk is not None:
            zk.stop()
        if prom is not None:
            prom.stop()
        for p in procs:
            p.terminate()
        if monitor is not None:
            monitor.stop()
        cluster.down()
        obs.down()


if __name__ == "__main__":
    sys.exit(main())
