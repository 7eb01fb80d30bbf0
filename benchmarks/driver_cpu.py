"""CPU the pipeline's Spark driver spends watching a small, quiet cluster: the cost of krm per
monitored cluster at rest, and most of what the e2e suite's two cores are busy with.

A 3-broker KRaft cluster with a few topics, krm polling it, observations on the same cluster; after a
warm-up, the driver JVM's CPU seconds (utime + stime of the process, /proc) are read over a window,
with the collector in this process counted apart. Each `--case` is POLL_S:HISTORY_TRIGGER_S.

This Python process holds the collector and the pipeline's Python side (the alert batch's handler,
the data-quality runs, /metrics): the collector is its collector threads (`COLLECTOR_THREADS`, each
thread's CPU from /proc), the rest of the process is reported beside it (`python_rest_pct`). Records
before 2026-11-29's twenty-second session counted the whole process as the collector.

Beside krm, in the same run and against the same cluster, kafka_exporter (danielqsj/kafka_exporter, an
optional benchmark dependency, never vendored; found as benchmarks/collector_poll.py finds it) scraped
once per poll interval, as a Prometheus would scrape it to alert as fast: its process CPU over the
same window. With `--json`, the last stdout line is one JSON object: per case `poll_s`, `history_s`,
`driver_cpu_pct`, `collector_cpu_pct` (percent of one core; also as `driver_pct` / `collector_pct`, the
names of earlier records), `python_rest_pct` (the rest of this process), `alert_batches_per_s`, and
`exporter_pct` (null when it could not run), and `jmx` / `canary` (whether krm read the brokers' JMX
exporters and ran its canary: the evidence BROKER_SLOW judges from, docs/detections.md).

`--layouts` compares where the collector runs, one after the other against the same cluster: `run` (one
process, `krm run`), `split` (`krm collect` as its own process beside the pipeline in this one, the
production layout; its CPU is that process's) and `split-every-poll` (the same with
`unchanged_publish_s = 0`: the split layout before #63, when a collector apart published every poll).
Each result then also has `layout` and `total_pct` (driver + this process + a split collector).

Usage: .venv/bin/python benchmarks/driver_cpu.py --cases 1:5,1:10,2:10 --window 60 [--threads] [--json]
       [--layouts run,split,split-every-poll] [--mode kraft|zk]
       [--kafka-exporter PATH | --install-kafka-exporter] [--jmx] [--canary]
"""

from __future__ import annotations

import argparse
import json
import os
import re
import statistics
import subprocess
import tempfile
import threading
import time
from pathlib import Path


from foundation.config import load_config
from krm.runner import Monitor
from krm.scrape import scrape, series
from lab.local_cluster import LocalCluster
from pipelines.session import build_session
from lab.harness import KRM, create_topic, wait_for, write_config

from collector_poll import fetch, find_kafka_exporter, start_kafka_exporter

HZ = os.sysconf("SC_CLK_TCK")


def stat_cpu_s(stat: str) -> float:
    """utime + stime, in seconds, of a /proc/.../stat line."""
    fields = stat.rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / HZ


def cpu_s(pid: int) -> float:
    return stat_cpu_s(Path(f"/proc/{pid}/stat").read_text())


def thread_cpu_s(pid: int) -> dict[str, float]:
    """CPU seconds of each of a process's threads, keyed by thread id and name."""
    out = {}
    for tid in os.listdir(f"/proc/{pid}/task"):
        try:
            stat = Path(f"/proc/{pid}/task/{tid}/stat").read_text()
        except OSError:  # the thread ended
            continue
        out[f"{tid} {stat[stat.index('(') + 1:stat.rindex(')')]}"] = stat_cpu_s(stat)
    return out


def by_thread_kind(before: dict[str, float], after: dict[str, float]) -> list[tuple[str, float]]:
    """CPU seconds between two `thread_cpu_s` readings, summed over threads of one kind (the JVM's
    JIT compiler threads, its stream execution threads, its executor task threads, ...)."""
    kinds: dict[str, float] = {}
    for key, cpu in after.items():
        kind = re.sub(r"\d+", "N", key.split(" ", 1)[1])
        kinds[kind] = kinds.get(kind, 0.0) + cpu - before.get(key, 0.0)
    return sorted(kinds.items(), key=lambda kv: -kv[1])


# the collector's threads (collectors/daemon.py, publisher.py; kafka-python names a client's I/O thread
# after its client_id, krm-collector...)
COLLECTOR_THREADS = ("krm-collect", "krm-zk-publish-", "krm-canary-", "krm-jmx-", "krm-publisher", "krm-answer-time")


def own_threads_cpu_s() -> dict[str, float]:
    """CPU seconds of this process's live Python threads, by thread name."""
    names = {t.native_id: t.name for t in threading.enumerate()}
    cpu = {int(key.split(" ", 1)[0]): s for key, s in thread_cpu_s(os.getpid()).items()}
    out: dict[str, float] = {}
    for tid, name in names.items():
        if tid in cpu:
            out[name] = out.get(name, 0.0) + cpu[tid]
    return out


def collector_cpu_s(before: dict[str, float], after: dict[str, float]) -> float:
    """CPU seconds the collector's threads used between two `own_threads_cpu_s` readings."""
    return sum(cpu - before.get(name, 0.0) for name, cpu in after.items() if name.startswith(COLLECTOR_THREADS))


def driver_pid(spark) -> int:
    return int(spark.sparkContext._jvm.ProcessHandle.current().pid())


def phases(progress: list) -> str:
    """Median duration of each phase Spark reports (StreamingQueryProgress.durationMs) over the
    query's recent batches that read rows."""
    with_rows = [p.durationMs for p in progress if p.numInputRows]
    keys = sorted({k for d in with_rows for k in d})
    return ", ".join(f"{k} {statistics.median(d.get(k, 0) for d in with_rows):.0f}" for k in keys)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--cases", default="1:5,1:10,2:10", help="POLL_S:HISTORY_TRIGGER_S, comma separated")
    ap.add_argument("--window", type=float, default=60.0, help="seconds measured per case, after the warm-up")
    ap.add_argument("--warmup", type=float, default=30.0)
    ap.add_argument("--conf", action="append", default=[], metavar="KEY=VALUE", help="a Spark setting to try")
    ap.add_argument("--java-opts", default="", help="extra driver JVM options, e.g. for a profiler")
    ap.add_argument("--collector-set", action="append", default=[], metavar="KEY=VALUE",
                    help="a [collector] setting of krm's config to try, e.g. unchanged_publish_s=30")
    ap.add_argument("--debug", action="store_true", help="log each alert and history batch's timings")
    ap.add_argument("--threads", action="store_true",
                    help="also print the driver's CPU by kind of thread (JIT compilers, stream execution, tasks)")
    ap.add_argument("--json", action="store_true", help="the last stdout line: every case's figures as JSON")
    ap.add_argument("--layouts", default="run", help="run, split, split-every-poll; comma separated")
    ap.add_argument("--mode", default="kraft", choices=("kraft", "zk"), help="the watched cluster's mode")
    ap.add_argument("--kafka-exporter", metavar="PATH", help="kafka_exporter binary to run beside krm")
    ap.add_argument("--install-kafka-exporter", action="store_true", help="go install it when it is not found")
    ap.add_argument("--jmx", action="store_true",
                    help="krm also scrapes each broker's JMX exporter (the per-broker latency series), at the default "
                         "jmx_interval_s")
    ap.add_argument("--canary", action="store_true",
                    help="krm's canary too (`canary = true`: a write and read-back to a partition each broker holds), "
                         "at the default canary_interval_s")
    args = ap.parse_args()
    if args.debug:
        import logging

        logging.basicConfig(level=logging.WARNING, format="%(asctime)s %(name)s %(message)s")
        for name in ("pipelines.alert_path", "pipelines.history_path"):
            logging.getLogger(name).setLevel(logging.DEBUG)
    work = Path(tempfile.mkdtemp(prefix="krm-driver-cpu-"))
    cluster = LocalCluster(root=work / args.mode, mode=args.mode).up()
    extra = dict(kv.split("=", 1) for kv in args.conf)
    spark = build_session(master="local[2,4]", app_name="krm-driver-cpu", log_dir=work / "spark-logs", extra=extra,
                          driver_java_options=args.java_opts)
    pid = driver_pid(spark)
    exporter_bin, why_not = find_kafka_exporter(args.kafka_exporter, args.install_kafka_exporter)
    exporter = None
    results = []
    try:
        for i in range(4):
            create_topic(cluster, f"t{i}", partitions=6, rf=3)
        evidence = ("jmx_exporter_urls = [" + ", ".join(f'"{u}"' for u in cluster.jmx_exporter_urls) + "]\n"
                    if args.jmx else "") + ("canary = true\n" if args.canary else "")
        if exporter_bin:
            exporter, exporter_url = start_kafka_exporter(exporter_bin, cluster, work / "kafka_exporter.log")
        else:
            print(f"kafka_exporter: {why_not}", flush=True)
        print(f"{'layout':>16} {'poll s':>7} {'history s':>10} {'driver CPU %':>13} {'collector CPU %':>16}"
              f" {'python rest %':>14} {'total %':>8} {'alert batches/s':>16} {'kafka_exporter CPU %':>21}")
        for layout, case in [(lay, c) for lay in args.layouts.split(",") for c in args.cases.split(",")]:
            if layout not in ("run", "split", "split-every-poll"):
                raise SystemExit(f"unknown layout {layout!r}: run, split or split-every-poll")
            poll, history = (float(x) for x in case.split(":"))
            extra = "".join(f"{kv}\n" for kv in args.collector_set)
            if layout != "run":  # the collector's own /metrics on any free port beside the pipeline's
                extra += "metrics_port = 0\n" + ("unchanged_publish_s = 0\n" if layout == "split-every-poll" else "")
            path = write_config(cluster, work, poll_interval_s=poll, history_trigger_s=history, collector_extra=extra,
                                cluster_extra=evidence)
            collect = None
            if layout != "run":
                collect = subprocess.Popen([KRM, "collect", "--config", str(path)], stdin=subprocess.DEVNULL,
                                           stdout=open(work / f"collect-{layout}-{case}.log", "w"), stderr=subprocess.STDOUT)
            monitor = Monitor(load_config(path), collect=collect is None, spark=spark).start()
            try:
                url = monitor.metrics_url
                wait_for(lambda u=url: series(scrape(u), "krm_broker_up", cluster=cluster.name), 120, "krm up")
                time.sleep(args.warmup)
                scraping = threading.Event()
                if exporter is not None:  # scraped at the poll interval, as often as krm asks the cluster
                    threading.Thread(target=scrape_every, args=(exporter_url, poll, scraping), daemon=True).start()
                e0 = cpu_s(exporter.pid) if exporter is not None else 0.0
                d0, c0, b0, t0 = cpu_s(pid), time.process_time(), monitor.pipeline.state.snapshot.batches, time.time()
                k0 = cpu_s(collect.pid) if collect is not None else 0.0
                threads0 = thread_cpu_s(pid) if args.threads else {}
                own0 = own_threads_cpu_s()
                time.sleep(args.window)
                own1 = own_threads_cpu_s()
                threads1 = thread_cpu_s(pid) if args.threads else {}
                k1 = cpu_s(collect.pid) if collect is not None else 0.0
                dt = time.time() - t0
                driver = (cpu_s(pid) - d0) / dt
                process = (time.process_time() - c0) / dt
                collector = collector_cpu_s(own0, own1) / dt if collect is None else (k1 - k0) / dt
                rest = process - collector if collect is None else process
                total = driver + process + (collector if collect is not None else 0.0)
                batches = (monitor.pipeline.state.snapshot.batches - b0) / dt
                exported = (cpu_s(exporter.pid) - e0) / dt if exporter is not None else None
                scraping.set()
                shown = f"{100 * exported:21.1f}" if exported is not None else f"{'-':>21}"
                print(f"{layout:>16} {poll:7.1f} {history:10.1f} {100 * driver:13.0f} {100 * collector:16.1f}"
                      f" {100 * rest:14.1f} {100 * total:8.0f} {batches:16.2f} {shown}", flush=True)
                results.append({"layout": layout, "poll_s": poll, "history_s": history, "jmx": args.jmx,
                                "canary": args.canary,
                                "total_pct": round(100 * total, 1),
                                "driver_cpu_pct": round(100 * driver, 1), "collector_cpu_pct": round(100 * collector, 1),
                                "driver_pct": round(100 * driver, 1), "collector_pct": round(100 * collector, 1),
                                "python_rest_pct": round(100 * rest, 1),
                                "alert_batches_per_s": round(batches, 3),
                                "exporter_pct": None if exported is None else round(100 * exported, 2)})
                for q in monitor.pipeline.queries:
                    print(f"        {q.name}: median ms per batch {phases(q.recentProgress)}", flush=True)
                if args.threads:
                    kinds = by_thread_kind(threads0, threads1)
                    print("        driver threads, % of a core: " + ", ".join(
                        f"{kind} {100 * cpu / dt:.0f}" for kind, cpu in kinds[:6] if cpu / dt >= 0.005), flush=True)
                    own = sorted(((name, cpu - own0.get(name, 0.0)) for name, cpu in own1.items()), key=lambda kv: -kv[1])
                    print(f"        this process {100 * process:.1f} %; its threads, % of a core: " + ", ".join(
                        f"{name} {100 * cpu / dt:.1f}" for name, cpu in own[:6] if cpu / dt >= 0.001), flush=True)
            finally:
                monitor.stop()
                if collect is not None:
                    collect.terminate()
                    collect.wait(60)
    finally:
        if exporter is not None:
            exporter.kill()
        spark.stop()
        cluster.down()
    if args.json:
        print(json.dumps({"cases": results, "kafka_exporter": exporter_bin or why_not}))


def scrape_every(url: str, interval_s: float, stop: threading.Event) -> None:
    """Scrape kafka_exporter's /metrics every `interval_s` until `stop` (a slow scrape delays the next)."""
    while not stop.wait(interval_s):
        try:
            fetch(url, 30)
        except OSError:
            pass


if __name__ == "__main__":
    main()
