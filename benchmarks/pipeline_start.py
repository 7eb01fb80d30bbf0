"""How long a pipeline takes to start: `Monitor.start()` (tables, plans, both streaming queries) and
then its first healthy view on /metrics, on a quiet local cluster; each e2e test pays it once, and
a restarted query or `krm run` pays it again. The first start in a fresh JVM is cold (JIT, the first
plans); the later ones reuse the session, as the test suite and a restarted query do.

Usage: .venv/bin/python benchmarks/pipeline_start.py --starts 3
"""

from __future__ import annotations

import argparse
import tempfile
import time
from pathlib import Path


from foundation.config import load_config
from krm.runner import Monitor
from krm.scrape import scrape, series
from lab.local_cluster import LocalCluster
from pipelines.session import build_session
from lab.harness import create_topic, wait_for, write_config


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--starts", type=int, default=3, help="pipelines started one after another in one JVM")
    ap.add_argument("--hold", type=float, default=5.0, help="seconds each runs before it is stopped")
    args = ap.parse_args()
    work = Path(tempfile.mkdtemp(prefix="krm-pipeline-start-"))
    cluster = LocalCluster(root=work / "kraft", mode="kraft").up()
    spark = build_session(master="local[2,4]", app_name="krm-pipeline-start", log_dir=work / "spark-logs")
    try:
        for i in range(4):
            create_topic(cluster, f"t{i}", partitions=6, rf=3)
        print(f"{'start':>6} {'Monitor.start s':>16} {'first healthy view s':>21} {'stop s':>7}")
        for n in range(1, args.starts + 1):
            run = work / f"run-{n}"
            run.mkdir()
            config = load_config(write_config(cluster, run, history_trigger_s=10.0))
            t0 = time.monotonic()
            monitor = Monitor(config, spark=spark).start()
            t1 = time.monotonic()
            url = monitor.metrics_url

            def healthy(url: str = url) -> list:
                return [s for s in series(scrape(url), "krm_broker_up", cluster=cluster.name) if s.value == 1]

            wait_for(healthy, 180, "a healthy view", interval_s=0.1)
            t2 = time.monotonic()
            time.sleep(args.hold)
            t3 = time.monotonic()
            monitor.stop()
            print(f"{n:6d} {t1 - t0:16.1f} {t2 - t1:21.1f} {time.monotonic() - t3:7.1f}", flush=True)
    finally:
        spark.stop()
        cluster.down()


if __name__ == "__main__":
    main()
