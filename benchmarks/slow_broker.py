"""What a CPU-capped broker or a slow disk does to its clients and to the signals BROKER_SLOW reads, per step.

A local 3-broker cluster (`--mode kraft`: the newest Kafka 4; `zk`: 3.9), a 3-partition RF-3 topic (one partition
led by each broker). For each `--cpu` cap, one broker's JVM is capped (`krm local-cluster slow --cpu`,
lab/cpu_cap.py), and for each `--disk-delay`, each write and sync of its log directory waits that long
(`slow --disk-delay`, lab/slow_disk.py: the cluster's brokers then run on the lab's disk layer), for `--seconds`
while a producer (acks=all, request timeout 3 s, one write at a time to each partition in turn) writes; then
the broker is made fast again and the next step runs. Measured per cap and partition (by its leader): the
writes' p50, p99 and max; and per broker, each JMX exporter scrape's time (or its timeout) during the cap and its
Produce queue / local / remote time at the median as the exporter said last (collectors/jmx.py).

Usage: .venv/bin/python benchmarks/slow_broker.py --cpu 2,5 [--disk-delay 50,200] [--mode zk] --seconds 30 [--json]
With --json the last stdout line is one JSON object: per step (`caps`; `cpu_pct` or `disk_delay_ms`), `writes`
(leader -> p50_s, p99_s, max_s, failed) and `jmx` (broker -> scrape_p50_ms, scrape_timeouts, produce phases).
"""

from __future__ import annotations

import argparse
import json
import statistics
import tempfile
import threading
import time
import urllib.request
from pathlib import Path
from typing import Any

from collectors.jmx import parse_exposition
from lab.harness import create_topic, settled_leaders
from lab.local_cluster import LocalCluster

TOPIC = "slow-bench"
SCRAPE_TIMEOUT_S = 2.0  # the collector's own (collectors/jmx.py JmxSource)
PROBE_EVERY_S = 0.25  # the collector's default reach_probe_s
PROBE_TIMEOUT_MS = 4000  # its probes' timeout: max(request_timeout_ms, unreachable_after_s), by default


def _quantile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


def _scrape(url: str) -> tuple[float | None, dict[str, float]]:
    t0 = time.perf_counter()
    try:
        text = urllib.request.urlopen(url, timeout=SCRAPE_TIMEOUT_S).read().decode()  # noqa: S310 - local
    except OSError:
        return None, {}
    return (time.perf_counter() - t0) * 1000, parse_exposition(text)[0]


class ProbeTimes:
    """The collector's reachability probe (a brokers-only Metadata request, collectors/reachability.py Probes), sent
    to each broker every `PROBE_EVERY_S` with its timeout: per broker, how long each answered probe took and how
    many were left unanswered. Runs on its own thread and client, beside the writes."""

    def __init__(self, cluster: LocalCluster, brokers: set[int]) -> None:
        self.cluster, self.brokers = cluster, brokers
        self.took: dict[int, list[float]] = {}
        self.unanswered: dict[int, int] = {}
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def __enter__(self) -> "ProbeTimes":
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join(timeout=10)

    def _run(self) -> None:
        from kafka.client_async import KafkaClient

        from collectors.metadata import brokers_request

        client = KafkaClient(bootstrap_servers=self.cluster.bootstrap_servers, **self.cluster.admin_kwargs())
        brokers = set(self.brokers)
        out: dict[int, tuple[Any, float]] = {}
        while not self._stop.is_set():
            client.poll(timeout_ms=int(PROBE_EVERY_S * 1000))
            for b, (future, sent) in list(out.items()):
                if future.is_done:
                    del out[b]
                    if future.succeeded():
                        self.took.setdefault(b, []).append(time.monotonic() - sent)
                    else:
                        self.unanswered[b] = self.unanswered.get(b, 0) + 1
            for b in brokers - set(out):
                if client.ready(b):
                    out[b] = (client.send(b, brokers_request(client), request_timeout_ms=PROBE_TIMEOUT_MS),
                              time.monotonic())
        client.close()

    def summary(self) -> dict[str, Any]:
        return {str(b): {"p50_ms": round(1000 * _quantile(v, 0.5), 1) if v else None,
                         "max_ms": round(1000 * max(v), 1) if v else None, "answered": len(v),
                         "unanswered": self.unanswered.get(b, 0)}
                for b, v in sorted({**{b: [] for b in self.unanswered}, **self.took}.items())}


def run_cap(cluster: LocalCluster, victim: int, pct: float | None, seconds: float, leaders: dict[int, int],
            disk_ms: int | None = None) -> dict[str, Any]:
    from kafka import KafkaProducer

    producer = KafkaProducer(bootstrap_servers=cluster.bootstrap_servers, acks="all", request_timeout_ms=3000,
                             linger_ms=0, **cluster.admin_kwargs())
    urls = dict(u.split("=", 1) for u in cluster.jmx_exporter_urls)
    writes: dict[int, list[float]] = {p: [] for p in leaders}
    failed: dict[int, int] = {p: 0 for p in leaders}
    scrapes: dict[str, list[float | None]] = {b: [] for b in urls}
    gauges: dict[str, dict[str, float]] = {}
    probes = ProbeTimes(cluster, set(leaders.values())).__enter__()
    cluster.slow(victim, cpu_pct=pct, disk_delay_ms=disk_ms)
    try:
        end, next_scrape = time.monotonic() + seconds, 0.0
        while time.monotonic() < end:
            for p in leaders:
                t0 = time.perf_counter()
                try:
                    producer.send(TOPIC, b"x" * 100, partition=p).get(timeout=5)
                    writes[p].append(time.perf_counter() - t0)
                except Exception:  # noqa: BLE001 - a failed write is counted, not raised
                    failed[p] += 1
            if time.monotonic() >= next_scrape:
                next_scrape = time.monotonic() + 2.0
                for b, url in urls.items():
                    took, g = _scrape(url)
                    scrapes[b].append(took)
                    if g:
                        gauges[b] = g
    finally:
        cluster.fast(victim)
        probes.__exit__()
        producer.close()
    return {
        **({"cpu_pct": pct} if pct is not None else {"disk_delay_ms": disk_ms}), "victim": victim,
        "writes": {str(leaders[p]): {"p50_s": round(_quantile(v, 0.5), 3) if v else None,
                                     "p99_s": round(_quantile(v, 0.99), 3) if v else None,
                                     "max_s": round(max(v), 3) if v else None, "failed": failed[p]}
                   for p, v in writes.items()},
        "jmx": {b: {"scrape_p50_ms": round(statistics.median([s for s in ss if s is not None]), 1)
                    if any(s is not None for s in ss) else None,
                    "scrape_timeouts": sum(1 for s in ss if s is None), "scrapes": len(ss),
                    **{k: gauges.get(b, {}).get(k) for k in ("produce_queue_p50_ms", "produce_local_p50_ms",
                                                             "produce_remote_p50_ms")}}
                for b, ss in scrapes.items()},
        "probes": probes.summary(),
    }


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--cpu", default="2,5", help="caps in %% of one core, comma separated ('' for none)")
    ap.add_argument("--disk-delay", default="", metavar="MS,...", help="disk delays in ms, comma separated")
    ap.add_argument("--mode", choices=["kraft", "zk"], default="kraft")
    ap.add_argument("--seconds", type=float, default=30.0)
    ap.add_argument("--victim", type=int, default=2)
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args()
    root = Path(tempfile.mkdtemp(prefix="krm-slow-bench-"))
    delays = [int(x) for x in args.disk_delay.split(",") if x]
    cluster = LocalCluster(root=root / args.mode, mode=args.mode, brokers=3, disk_layer=bool(delays)).up()
    results = []
    try:
        create_topic(cluster, TOPIC, partitions=3, rf=3)
        leaders, deadline = None, time.monotonic() + 120
        while leaders is None:
            if time.monotonic() > deadline:
                raise SystemExit(f"{TOPIC}: no settled leaders within 120 s")
            time.sleep(0.5)
            leaders = settled_leaders(cluster, TOPIC, 3.0)
        steps = [(float(x), None) for x in args.cpu.split(",") if x] + [(None, ms) for ms in delays]
        for pct, ms in steps:
            r = run_cap(cluster, args.victim, pct, args.seconds, leaders, ms)
            results.append(r)
            said = f"cap {pct:g} %" if pct is not None else f"disk delay {ms} ms"
            print(json.dumps(r) if not args.json else f"{said}: {r['writes']}", flush=True)
            time.sleep(10)  # the capped broker catches up before the next cap
    finally:
        cluster.down()
    if args.json:
        print(json.dumps({"caps": results}))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
