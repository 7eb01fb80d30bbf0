"""Detection fidelity: the simulator's ground truth against the incidents the real pipeline finds.

A simulated cluster (default 200k partitions: 30 brokers, 2000 topics x 100, RF 3, plus an RF-2
topic with unclean election on and a small RF-1 topic to expand) runs this script of faults:

  60 s  a follower of sim-00001/0 stops fetching (HW_STALL, then UNDER_REPLICATED, REPLICA_LAG)
  60 s  the follower of sim-unclean/0 stops fetching (it leaves the ISR after 30 s)
 120 s  the leader's broker of sim-unclean/0 dies: ~20k partitions lose a replica, some leaders move,
        sim-unclean/0 elects its out-of-sync follower (UNCLEAN_LEADER_ELECTION, OFFSET_REGRESSION)
 200 s  sim-expand (RF 1, 20 partitions) is expanded to 40 with Kafka's rule
 240 s  3 brokers join (REPLICA_IMBALANCE broker_expansion each)

The pipeline runs in this process; /metrics is scraped every second to time detection from each
fault's injection (the simulator's clock is the wall clock; with --prebuild, the publication of
the first poll that shows the fault) to the first scrape that shows the
incident (per-partition series and krm_incidents_open); at the end, the incidents table is compared
with the truth: recall = expected incidents found; false = incidents found that no fault explains
(neither expected nor an allowed side effect, lab/simulate/faults.py).

Usage: .venv/bin/python benchmarks/detection_fidelity.py [--topics 2000] [--minutes 6] [--prebuild]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import tempfile
import threading
import time
from collections import defaultdict
from pathlib import Path

from collectors.publisher import ensure_topic
from foundation.config import load_config
from krm.runner import Monitor
from krm.scrape import scrape
from lab.local_cluster import LocalCluster, free_port
from pipelines.incident_store import IncidentStore
from pipelines.session import build_session
from pipelines.tables import Tables

ROOT = Path(__file__).resolve().parents[1]

SCRIPT = [
    {"at_s": 60, "kind": "stall_follower", "topic": "sim-00001", "partition": 0},
    {"at_s": 60, "kind": "stall_follower", "topic": "sim-unclean", "partition": 0},
    {"at_s": 120, "kind": "kill_broker", "broker": "leader:sim-unclean/0"},
    {"at_s": 200, "kind": "expand_partitions", "topic": "sim-expand", "total": 40},
    {"at_s": 240, "kind": "add_brokers", "count": 3},
]
PARTITION_SERIES = {"krm_partition_offline": "OFFLINE_PARTITION", "krm_partition_under_replicated": "UNDER_REPLICATED",
                    "krm_partition_under_min_isr": "UNDER_MIN_ISR", "krm_partition_at_min_isr": "AT_MIN_ISR",
                    "krm_partition_hw_stall_seconds": "HW_STALL"}


def pct(values, q):
    s = sorted(values)
    return s[min(len(s) - 1, int(round(q * (len(s) - 1))))] if s else float("nan")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--topics", type=int, default=2000)
    ap.add_argument("--minutes", type=float, default=6.0)
    ap.add_argument("--poll", type=float, default=10.0)
    ap.add_argument("--prebuild", action="store_true",
                    help="the simulator builds every poll before publishing (krm simulate --prebuild), so its CPU "
                         "does not compete with the pipeline and polls arrive every --poll seconds")
    args = ap.parse_args()
    work = Path(tempfile.mkdtemp(prefix="krm-fidelity-"))
    os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    obs = LocalCluster(root=work / "obs", mode="kraft", brokers=1).up()
    spark = build_session("local[2]", log_dir=work / "logs", extra={"spark.driver.memory": "4g"})
    cfg = work / "sim.toml"
    port = free_port()
    cfg.write_text(
        f'[[clusters]]\nname = "sim"\nbootstrap_servers = "{obs.bootstrap_servers}"\n\n'
        f'[observations]\nbootstrap_servers = "{obs.bootstrap_servers}"\ntopic = "krm.sim"\npartitions = 4\n\n'
        f'[pipeline]\ndata_dir = "{work / "data"}"\nmetrics_port = {port}\nspark_master = "local[2]"\n'
        f"history_trigger_s = 10.0\nhw_stall_window_s = 10.0\nreplica_lag_seconds = 20.0\n")
    (work / "faults.json").write_text(json.dumps(SCRIPT))
    truth_path = work / "truth.jsonl"
    ensure_topic(load_config(cfg).observations)  # before the pipeline subscribes
    monitor = Monitor(load_config(cfg), collect=False, spark=spark).start()
    sim = subprocess.Popen([str(ROOT / ".venv/bin/krm"), "simulate", "--config", str(cfg), "--topics", str(args.topics),
                            "--brokers", "30", "--poll-interval", str(args.poll), "--duration", str(args.minutes * 60),
                            "--faults", str(work / "faults.json"), "--truth", str(truth_path), "--unclean-topic",
                            "--expand-topic"] + (["--prebuild"] if args.prebuild else []),
                           stdout=subprocess.DEVNULL, stderr=open(work / "sim.log", "w"))
    first_seen: dict[tuple, float] = {}
    stop = threading.Event()

    def watch() -> None:
        while not stop.wait(1.0):
            try:
                samples = scrape(monitor.metrics_url)
            except Exception:  # noqa: BLE001 - a slow scrape is retried
                continue
            now = time.time()
            for s in samples:
                t = PARTITION_SERIES.get(s.name)
                if t is not None and s.value > 0:
                    first_seen.setdefault((t, s.labels["topic"], int(s.labels["partition"]), None), now)
                elif s.name == "krm_incidents_open" and s.value > 0:
                    first_seen.setdefault((s.labels["type"], "count", int(s.value)), now)

    watcher = threading.Thread(target=watch, daemon=True)
    watcher.start()
    try:
        sim.wait(timeout=args.minutes * 60 * 3 + 900)  # a prebuild first takes up to ~the duration
        time.sleep(3 * args.poll)
    finally:
        stop.set()
        monitor.stop()
        spark.stop()
        obs.down()
    truth = [json.loads(line) for line in truth_path.read_text().splitlines()]
    incidents = IncidentStore(Tables(work / "data").incidents).read()
    found = {(i.type, i.topic, i.partition, i.broker): i for i in incidents}
    expected: set[tuple] = set()
    allowed: set[tuple] = set()
    allowed_topics: set[str] = set()
    allowed_brokers: set[int] = set()
    print("| fault | expected | found | recall | time to /metrics p50 / max |")
    print("|---|---|---|---|---|")
    for f in truth:
        exp = {tuple(k) for k in f["expected"]}
        expected |= exp
        allowed |= {tuple(k) for k in f["allowed"]}
        allowed_topics |= set(f["allowed_topics"])
        allowed_brokers |= set(f["allowed_brokers"])
        hit = [k for k in exp if k in found]
        delays = [first_seen[k] - f["injected_at_ms"] / 1000 for k in hit if k in first_seen]
        by_type = defaultdict(int)
        for k in exp:
            by_type[k[0]] += 1
        shown = ", ".join(f"{n} {t}" for t, n in sorted(by_type.items()))
        timing = f"{statistics.median(delays):.1f} s / {max(delays):.1f} s" if delays else "n/a (not a per-partition series)"
        print(f"| {f['kind']} {f['params']} | {shown or '-'} | {len(hit)} | "
              f"{(len(hit) / len(exp) * 100 if exp else 100):.1f} % | {timing} |")
    false = [i for k, i in found.items() if k not in expected and k not in allowed
             and not (i.topic in allowed_topics and i.partition is None)
             and not (i.broker in allowed_brokers and i.topic is None)]
    missed = sorted(expected - set(found), key=str)
    print(f"\nexpected {len(expected)}, found {len(expected & set(found))} "
          f"(recall {len(expected & set(found)) / max(1, len(expected)) * 100:.2f} %), "
          f"false incidents {len(false)}")
    for k in missed[:20]:
        print(f"  missed: {k}")
    for i in false[:20]:
        print(f"  false: {i.type} {i.topic}/{i.partition} broker {i.broker} cause {i.cause}")
    print(f"(work dir {work})")


if __name__ == "__main__":
    main()
