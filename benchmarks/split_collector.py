"""One cluster split across collector processes (`krm collect --topic-share I/N`): does the pipeline
still see one whole cluster, at what cost per process, and is a dead share seen?

A stand-in cluster (benchmarks/standin_broker.py: 100-partition topics, RF 3) of `--partitions`
partitions; the pipeline (`krm pipeline`'s Monitor, in this process, Spark local[2]) reading a real
1-broker KRaft observations cluster. Three phases, one after the other in the same run:

1. `one`: a single `krm collect` polls the whole cluster (the reference);
2. `split`: `--shares` processes `krm collect --topic-share I/N` poll it together;
3. `dead share`: the last share is SIGKILLed: how long until the pipeline calls the cluster's view
   stale (krm_cluster_view_stale 1, KrmViewStale's input), and after its restart, fresh again.

Per phase: each collector process's CPU per poll (its /proc CPU over its polls) and poll duration
(krm_collector_last_poll_seconds), the observation age on the pipeline's /metrics p50 / p95, and
whether the pipeline sees the whole cluster: the sums of krm_broker_leaders and krm_broker_replicas
against the stand-in's partitions and replicas, and krm_cluster_view_stale.

Usage: .venv/bin/python benchmarks/split_collector.py [--partitions 200000] [--shares 2] [--minutes 2]
       [--poll-s 10] [--written F] [--json]   (with --json the last stdout line is one JSON object)
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from collectors.publisher import ensure_topic
from foundation.config import load_config
from krm.runner import Monitor
from krm.scrape import scrape, series
from lab.local_cluster import LocalCluster, free_port
from pipelines.session import build_session
from standin_broker import StandIn

ROOT = Path(__file__).resolve().parents[1]
KRM = str(ROOT / ".venv" / "bin" / "krm")
CLUSTER = "bench"


def pct(values: list[float], q: float) -> float:
    s = sorted(values)
    return s[min(len(s) - 1, int(round(q * (len(s) - 1))))] if s else float("nan")


def cpu_s(pid: int) -> float:
    """User + system CPU of a process and its reaped children, in seconds."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return sum(int(x) for x in fields[11:15]) / os.sysconf("SC_CLK_TCK")


def value(samples: Any, name: str, **labels: str) -> float | None:
    found = series(samples, name, **labels)
    return found[0].value if found else None


class Collector:
    """One `krm collect` process (a share, or the whole cluster) and its own /metrics."""

    def __init__(self, config: Path, port: int, share: str | None, log: Path) -> None:
        self.share, self.url = share, f"http://127.0.0.1:{port}/metrics"
        args = [KRM, "collect", "--config", str(config)] + (["--topic-share", share] if share else [])
        self.proc = subprocess.Popen(args, stdout=subprocess.DEVNULL, stderr=open(log, "w"), stdin=subprocess.DEVNULL)

    def polls(self) -> float:
        try:
            return value(scrape(self.url, timeout_s=5), "krm_collector_polls_total") or 0.0  # the process's, all clusters
        except Exception:  # noqa: BLE001 - not serving yet
            return 0.0

    def stop(self, sig: int = signal.SIGTERM) -> None:
        if self.proc.poll() is None:
            self.proc.send_signal(sig)
            try:
                self.proc.wait(30)
            except subprocess.TimeoutExpired:
                self.proc.kill()


def wait(check: Any, timeout_s: float, what: str) -> float:
    t0 = time.monotonic()
    while time.monotonic() - t0 < timeout_s:
        if check():
            return time.monotonic() - t0
        time.sleep(0.5)
    raise SystemExit(f"timed out after {timeout_s:.0f}s waiting for {what}")


def whole(metrics_url: str) -> tuple[float, float, float | None]:
    for attempt in range(3):  # a scrape can wait on the driver (counted in the phases as slow scrapes)
        try:
            text = scrape(metrics_url, timeout_s=60)
            break
        except OSError:
            if attempt == 2:
                raise
    leaders = sum(s.value for s in series(text, "krm_broker_leaders", cluster=CLUSTER))
    replicas = sum(s.value for s in series(text, "krm_broker_replicas", cluster=CLUSTER))
    return leaders, replicas, value(text, "krm_cluster_view_stale", cluster=CLUSTER)


def phase(name: str, collectors: list[Collector], metrics_url: str, minutes: float, poll_s: float,
          expected: tuple[int, int]) -> dict[str, Any]:
    """Warm up (two polls each, the stand-in caching its answers), then measure for `minutes`."""
    wait(lambda: all(c.polls() >= 2 for c in collectors), 600, f"{name}: two polls from each collector")
    wait(lambda: whole(metrics_url)[:2] == expected, 300, f"{name}: the pipeline counting the whole cluster")
    start = [(c.polls(), cpu_s(c.proc.pid)) for c in collectors]
    ages: list[float] = []
    durations: dict[int, list[float]] = {i: [] for i in range(len(collectors))}
    stale_seen = slow_scrapes = 0
    end = time.monotonic() + minutes * 60
    while time.monotonic() < end:
        time.sleep(1.0)
        try:
            text = scrape(metrics_url, timeout_s=10)
        except Exception:  # noqa: BLE001 - a slow scrape is skipped, and counted
            slow_scrapes += 1
            continue
        age = value(text, "krm_observation_age_seconds", cluster=CLUSTER)
        if age is not None:
            ages.append(age)
        stale_seen += int(value(text, "krm_cluster_view_stale", cluster=CLUSTER) == 1.0)
        for i, c in enumerate(collectors):
            try:
                d = value(scrape(c.url, timeout_s=5), "krm_collector_last_poll_seconds", cluster=CLUSTER)
            except Exception:  # noqa: BLE001
                continue
            if d is not None:
                durations[i].append(d)
    leaders, replicas, stale = whole(metrics_url)
    per_process = []
    for i, c in enumerate(collectors):
        polls0, cpu0 = start[i]
        polls = c.polls() - polls0
        per_process.append({"share": c.share or "all", "polls": polls,
                            "cpu_per_poll_s": round((cpu_s(c.proc.pid) - cpu0) / polls, 3) if polls else None,
                            "poll_p50_s": round(pct(durations[i], 0.5), 3)})
    out = {"phase": name, "processes": per_process, "age_p50_s": round(pct(ages, 0.5), 1),
           "age_p95_s": round(pct(ages, 0.95), 1), "samples": len(ages), "stale_samples": stale_seen,
           "scrapes_over_10s": slow_scrapes,
           "leaders": leaders, "replicas": replicas, "whole_cluster": (leaders, replicas) == expected,
           "view_stale_at_end": stale}
    print(json.dumps(out), file=sys.stderr, flush=True)
    return out


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--partitions", type=int, default=200_000)
    ap.add_argument("--shares", type=int, default=2)
    ap.add_argument("--minutes", type=float, default=2.0, help="measured minutes of each phase")
    ap.add_argument("--poll-s", type=float, default=10.0)
    ap.add_argument("--driver-memory", default="4g")
    ap.add_argument("--written", type=float, default=0.0,
                    help="the share of the stand-in's topics written between polls (benchmarks/standin_broker.py)")
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args()
    work = Path(tempfile.mkdtemp(prefix="krm-split-"))
    os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    expected = (args.partitions, args.partitions * 3)  # the stand-in's layout: RF 3, every partition led
    results: list[dict[str, Any]] = []
    with StandIn(args.partitions, None, args.written) as standin:
        obs = LocalCluster(root=work / "obs", mode="kraft", brokers=1).up()
        spark = build_session("local[2]", log_dir=work / "logs", extra={"spark.driver.memory": args.driver_memory})
        monitor = None
        collectors: list[Collector] = []
        try:
            metrics_port = free_port()
            while metrics_port + args.shares + 1 > 65535:
                metrics_port = free_port()
            config = work / "krm.toml"
            config.write_text(
                f'[[clusters]]\nname = "{CLUSTER}"\nbootstrap_servers = "{standin.bootstrap_servers}"\n\n'
                f'[observations]\nbootstrap_servers = "{obs.bootstrap_servers}"\ntopic = "krm.split"\npartitions = 4\n\n'
                f'[collector]\npoll_interval_s = {args.poll_s}\n\n'
                f'[pipeline]\ndata_dir = "{work / "data"}"\nmetrics_port = {metrics_port}\nspark_master = "local[2]"\n')
            ensure_topic(load_config(config).observations)
            monitor = Monitor(load_config(config), collect=False, spark=spark).start()
            print(f"stand-in of {args.partitions:,} partitions on {standin.brokers} brokers; pipeline up", file=sys.stderr)

            collectors = [Collector(config, metrics_port + 1, None, work / "collect-all.log")]
            results.append(phase("one", collectors, monitor.metrics_url, args.minutes, args.poll_s, expected))
            collectors[0].stop()

            collectors = [Collector(config, metrics_port + i, f"{i}/{args.shares}", work / f"collect-{i}.log")
                          for i in range(1, args.shares + 1)]
            results.append(phase("split", collectors, monitor.metrics_url, args.minutes, args.poll_s, expected))

            last = collectors[-1]
            last.stop(signal.SIGKILL)
            seen_stale = wait(lambda: whole(monitor.metrics_url)[2] == 1.0, 300, "the view stale after a share died")
            restarted = Collector(config, metrics_port + args.shares, last.share, work / "collect-restarted.log")
            collectors[-1] = restarted
            fresh_again = wait(lambda: whole(monitor.metrics_url)[2] == 0.0, 600, "the view fresh after its restart")
            dead = {"phase": "dead share", "share": last.share, "stale_after_kill_s": round(seen_stale, 1),
                    "fresh_after_restart_s": round(fresh_again, 1),
                    "whole_cluster_after": whole(monitor.metrics_url)[:2] == expected}
            print(json.dumps(dead), file=sys.stderr, flush=True)
            results.append(dead)
        finally:
            for c in collectors:
                c.stop()
            if monitor is not None:
                monitor.stop()
            spark.stop()
            obs.down()
    one, split = results[0], results[1]
    print("| phase | processes | CPU per poll per process | poll p50 | age p50 / p95 | whole cluster |")
    print("|---|---|---|---|---|---|")
    for r in (one, split):
        print(f"| {r['phase']} | {len(r['processes'])} | "
              + " / ".join(f"{p['cpu_per_poll_s']} s" for p in r["processes"]) + " | "
              + " / ".join(f"{p['poll_p50_s']} s" for p in r["processes"])
              + f" | {r['age_p50_s']} / {r['age_p95_s']} s | {r['whole_cluster']} ({r['leaders']:.0f} leaders, "
              f"{r['replicas']:.0f} replicas) |")
    d = results[2]
    print(f"\nshare {d['share']} SIGKILLed: view stale after {d['stale_after_kill_s']} s; restarted: fresh after "
          f"{d['fresh_after_restart_s']} s; whole cluster after: {d['whole_cluster_after']}")
    if args.json:
        print(json.dumps({"partitions": args.partitions, "shares": args.shares, "poll_s": args.poll_s, "written": args.written,
                          "phases": results}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
