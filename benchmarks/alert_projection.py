"""The alert projection alone: one simulated poll, parsed and judged by the alert plan, no Kafka.

A simulated cluster (30 brokers, RF 3, 100 partitions per topic) runs two polls, a broker is killed
(its partitions shrink their ISR or lose their leader) and one more poll is built: those records,
encoded as the collector publishes them, sit in a cached DataFrame shaped like the Kafka source's.
Each run is `alert_rows(valid(parse(df)))` collected on the driver, the alert path's Spark job minus
the Kafka fetch. Reported: p50 / min of the warm runs, the rows collected, the records judged.

    .venv/bin/python benchmarks/alert_projection.py --partitions 200000 --runs 5
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def poll_records(partitions: int) -> list[str]:
    from lab.simulate.emit import Emitter
    from lab.simulate.model import SimCluster, SimSettings

    sim = SimCluster("bench", SimSettings(topics=partitions // 100), start_ms=1_700_000_000_000)
    emitter = Emitter(sim)
    for i in range(2):
        sim.step(1_700_000_000_000 + 10_000 * (i + 1))
        emitter.poll()
    sim.kill_broker(1)
    sim.step(1_700_000_000_000 + 30_000)
    return [json.dumps(r, separators=(",", ":")) for r in emitter.poll()]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--partitions", type=int, default=200_000)
    ap.add_argument("--runs", type=int, default=5, help="warm runs after one untimed run")
    args = ap.parse_args()
    os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")

    from pipelines.findings import alert_rows
    from pipelines.ingest import parse, valid
    from pipelines.session import build_session

    records = poll_records(args.partitions)
    spark = build_session("local[2]", log_dir=Path("/tmp/krm-bench-logs"))
    from pyspark.sql import functions as F

    df = spark.createDataFrame([(r,) for r in records], "value string") \
        .select(F.col("value").cast("binary").alias("value"), F.lit("krm.observations").alias("topic"),
                F.lit(0).alias("partition"), F.lit(0).cast("long").alias("offset"),
                F.current_timestamp().alias("timestamp")).cache()
    df.count()
    plan = alert_rows(valid(parse(df)))
    plan.collect()
    took, rows = [], 0
    for _ in range(args.runs):
        t0 = time.perf_counter()
        rows = len(plan.collect())
        took.append(time.perf_counter() - t0)
    print(json.dumps({"partitions": args.partitions, "records": len(records),
                      "mb": round(sum(map(len, records)) / 1e6, 1), "rows": rows,
                      "p50_s": round(statistics.median(took), 2), "min_s": round(min(took), 2),
                      "runs": [round(t, 2) for t in took]}))
    spark.stop()


if __name__ == "__main__":
    main()
