"""A gray failure's detection, the collector's part and the pipeline's apart, per `reach_probe_s`.

A leader of a 6-partition RF-3 topic is cut off (nftables drops what arrives on its listener,
lab/packet_filter.py: its process, sessions and heartbeats live on, so Kafka keeps it registered and
leading). Measured from the cut: the collector's own verdict (the broker unreachable in its view,
what `krm_collector_broker_reachable` serves) and /metrics naming every partition it leads
(`krm_partition_unavailable`); then from the heal, /metrics clear again. The cut falls at a random
moment of the poll interval (seeded).

Each `--probe` value ([collector] reach_probe_s; 0: no probes between polls) runs `--rounds` cuts
with one pipeline, the values one after the other and the whole list `--repeat` times, against one
cluster (3 brokers, 1 s polls, `unreachable_after_s` 4), the observations on a second cluster, one
Spark session: a before/after pair on the same machine in one run.

Usage: .venv/bin/python benchmarks/gray_failure.py --mode zk|kraft --probe 0,0.25 --rounds 4 --repeat 2 [--json]
With --json the last stdout line is a JSON object: per probe value, each round's `verdict_s`,
`metrics_s` and `cleared_s`, and their medians.
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import random
import statistics
import tempfile
import time
from pathlib import Path

from foundation.config import load_config
from krm.runner import Monitor
from krm.scrape import scrape, series
from lab.harness import create_topic, every_isr_whole, settled_leaders, wait_for, write_config
from lab.local_cluster import LocalCluster
from pipelines.session import build_session

TOPIC = "gray-bench"
POLL_S = 1.0


def unavailable(url: str, cluster: str) -> set[int]:
    return {int(s.labels["partition"]) for s in series(scrape(url), "krm_partition_unavailable", cluster=cluster)
            if s.labels["topic"] == TOPIC}


def one_cut(monitor: Monitor, cluster: LocalCluster, victim_of: int, rng: random.Random) -> dict[str, float]:
    url, name = monitor.metrics_url, cluster.name
    leaders = wait_for(lambda: settled_leaders(cluster, TOPIC, 2 * POLL_S), 120, "every ISR whole, leaders still")
    victims = sorted(set(leaders.values()))
    victim = victims[victim_of % len(victims)]
    led = {p for p, b in leaders.items() if b == victim}
    source = next(s for s in monitor.collector.sources if s.cluster.name == name)
    time.sleep(rng.uniform(0.0, POLL_S))  # anywhere in the poll interval
    cluster.cut(victim)
    t_cut = time.monotonic()
    verdict = named = None
    try:
        while named is None and time.monotonic() - t_cut < 60:
            if verdict is None and not source.broker_view.get(victim, (True, 0))[0]:
                verdict = time.monotonic() - t_cut
            if unavailable(url, name) >= led:
                named = time.monotonic() - t_cut
            time.sleep(0.02)
    finally:
        cluster.heal(victim)
    t_heal = time.monotonic()
    wait_for(lambda: not unavailable(url, name), 120, "the partitions available again", interval_s=0.05)
    cleared = time.monotonic() - t_heal
    wait_for(lambda: every_isr_whole(cluster), 120, "every ISR whole after the heal")
    if verdict is None or named is None:
        raise SystemExit(f"broker {victim} cut for 60 s: collector verdict {verdict}, /metrics {named}")
    return {"victim": victim, "verdict_s": round(verdict, 2), "metrics_s": round(named, 2), "cleared_s": round(cleared, 2)}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--mode", choices=["zk", "kraft"], default="zk")
    ap.add_argument("--probe", default="0,0.25",
                    help="reach_probe_s values, comma separated (0: off; 'default': none written, the code's own)")
    ap.add_argument("--rounds", type=int, default=4, help="cuts per value and repeat")
    ap.add_argument("--repeat", type=int, default=2, help="times the whole list of values runs")
    ap.add_argument("--seed", type=int, default=7)
    ap.add_argument("--json", action="store_true", help="the last stdout line: every round's figures as JSON")
    args = ap.parse_args()
    logging.basicConfig(level=logging.WARNING)
    os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    rng = random.Random(args.seed)
    probes = args.probe.split(",")
    work = Path(tempfile.mkdtemp(prefix="krm-gray-"))
    cluster = LocalCluster(root=work / "monitored", mode=args.mode, brokers=3).up()
    obs = LocalCluster(root=work / "observations", mode="kraft", brokers=1).up()
    spark = build_session(master="local[2,4]", app_name="krm-gray-failure", log_dir=work / "spark-logs")
    results: dict[str, list[dict[str, float]]] = {p: [] for p in probes}
    print(f"{'reach_probe_s':>13} {'victim':>6} {'collector verdict s':>19} {'/metrics s':>10} {'cleared s':>9}",
          flush=True)
    try:
        create_topic(cluster, TOPIC, partitions=6, rf=3, configs={"min.insync.replicas": "2"})
        n = 0
        for _ in range(args.repeat):
            for probe in probes:
                path = write_config(cluster, work, poll_interval_s=POLL_S, observations_on=obs,
                                    collector_extra="" if probe == "default" else f"reach_probe_s = {float(probe)}\n")
                monitor = Monitor(load_config(path), spark=spark).start()
                try:
                    url = monitor.metrics_url
                    wait_for(lambda u=url: series(scrape(u), "krm_broker_up", cluster=cluster.name), 120, "krm up")
                    for _ in range(args.rounds):
                        r = one_cut(monitor, cluster, n, rng)
                        n += 1
                        results[probe].append(r)
                        print(f"{probe:>13} {r['victim']:6d} {r['verdict_s']:19.2f} {r['metrics_s']:10.2f}"
                              f" {r['cleared_s']:9.2f}", flush=True)
                finally:
                    monitor.stop()
    finally:
        spark.stop()
        cluster.down()
        obs.down()
    summary = {p: {"rounds": rs, **{f"{k}_median": round(statistics.median(r[k] for r in rs), 2)
                                          for k in ("verdict_s", "metrics_s", "cleared_s")},
                        "metrics_s_max": max(r["metrics_s"] for r in rs)}
               for p, rs in results.items() if rs}
    for p, s in summary.items():
        print(f"reach_probe_s {p}: median collector verdict {s['verdict_s_median']} s, /metrics {s['metrics_s_median']} s"
              f" (max {s['metrics_s_max']} s), cleared {s['cleared_s_median']} s", flush=True)
    if args.json:
        print(json.dumps({"mode": args.mode, "probe": summary}))


if __name__ == "__main__":
    main()
