"""Where a quiet alert micro-batch's wall time goes: Spark's own account of each batch (the query's
progress phases) and of the Spark job inside it (wall time, the task's run time, the task's CPU time).

A task whose run time far exceeds its CPU time is waiting, not working: that is how the Kafka source's
half-second wait at the end of the log was found (pipelines/ingest.py, FETCH_MAX_WAIT_MS). Each case
runs a pipeline with the source's `fetch.max.wait.ms` at the given value, one after the other on one
driver (the first case also warms the JVM: put the value to compare first and last, e.g. 10,500,10).

A quiet 3-broker KRaft cluster, 4 topics x 6 partitions, krm polling every `--poll` s, history every
30 s; the driver's Spark UI on (its REST API is read), nothing else changed.

    .venv/bin/python benchmarks/alert_batch_anatomy.py --fetch-max-wait-ms 10,500,10 --window 40 [--json]
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import statistics
import tempfile
import time
import urllib.request
from pathlib import Path
from typing import Any

from foundation.config import load_config
from krm.runner import Monitor
from krm.scrape import scrape, series
from lab.harness import create_topic, wait_for, write_config
from lab.local_cluster import LocalCluster
from pipelines import ingest
from pipelines.session import build_session


def _ms(stamp: str) -> float:
    """Milliseconds since the epoch of a Spark REST time stamp ("2026-11-28T13:26:17.123GMT")."""
    return dt.datetime.strptime(stamp.replace("GMT", "+0000"), "%Y-%m-%dT%H:%M:%S.%f%z").timestamp() * 1000


def alert_jobs(ui: str, app: str, since_ms: float) -> list[dict[str, float]]:
    """The alert query's Spark jobs submitted after `since_ms`: wall time, the tasks' run and CPU time."""
    def get(path: str) -> Any:
        with urllib.request.urlopen(f"{ui}/api/v1/applications/{app}/{path}", timeout=30) as r:
            return json.load(r)

    out = []
    for job in get("jobs?status=succeeded"):
        if "krm-alerts" not in (job.get("description") or "") or _ms(job["submissionTime"]) < since_ms:
            continue
        stages = [get(f"stages/{s}")[0] for s in job["stageIds"]]
        out.append({"wall_ms": _ms(job["completionTime"]) - _ms(job["submissionTime"]),
                    "run_ms": sum(s.get("executorRunTime", 0) for s in stages),
                    "cpu_ms": sum(s.get("executorCpuTime", 0) for s in stages) / 1e6})
    return out


def median_phases(progress: list[Any]) -> dict[str, float]:
    """Median of each phase Spark reports (durationMs) over the batches that read rows."""
    with_rows = [p.durationMs for p in progress if p.numInputRows]
    keys = sorted({k for d in with_rows for k in d})
    return {k: statistics.median(d.get(k, 0) for d in with_rows) for k in keys}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--fetch-max-wait-ms", default="10,500,10", help="the Kafka source's fetch.max.wait.ms per case")
    ap.add_argument("--poll", type=float, default=2.0, help="collector poll interval, s")
    ap.add_argument("--warmup", type=float, default=20.0)
    ap.add_argument("--window", type=float, default=40.0, help="seconds measured per case")
    ap.add_argument("--json", action="store_true", help="the last stdout line: every case's figures as JSON")
    args = ap.parse_args()
    work = Path(tempfile.mkdtemp(prefix="krm-anatomy-"))
    cluster = LocalCluster(root=work / "kraft", mode="kraft").up()
    spark = build_session(master="local[2,4]", app_name="krm-alert-anatomy", log_dir=work / "spark-logs",
                          extra={"spark.ui.enabled": "true", "spark.ui.retainedJobs": "1000",
                                 "spark.ui.retainedStages": "1000"})
    ui, app = spark.sparkContext.uiWebUrl, spark.sparkContext.applicationId
    results = []
    try:
        for i in range(4):
            create_topic(cluster, f"t{i}", partitions=6, rf=3)
        print(f"{'fetch.max.wait.ms':>18} {'batch ms':>9} {'addBatch':>9} {'job wall':>9} {'task run':>9}"
              f" {'task CPU':>9} {'jobs':>5}", flush=True)
        for wait_ms in (int(x) for x in args.fetch_max_wait_ms.split(",")):
            ingest.FETCH_MAX_WAIT_MS = wait_ms  # read when the queries start
            path = write_config(cluster, work, poll_interval_s=args.poll, history_trigger_s=30.0)
            monitor = Monitor(load_config(path), spark=spark).start()
            try:
                wait_for(lambda m=monitor: series(scrape(m.metrics_url), "krm_broker_up", cluster=cluster.name),
                         120, "krm up")
                time.sleep(args.warmup)
                since = time.time() * 1000
                time.sleep(args.window)
                jobs = alert_jobs(ui, app, since)
                alerts = next(q for q in monitor.pipeline.queries if q.name == "krm-alerts")
                phases = median_phases(alerts.recentProgress)
            finally:
                monitor.stop()
            row = {"fetch_max_wait_ms": wait_ms, "jobs": len(jobs),
                   "batch_ms": phases.get("triggerExecution"), "add_batch_ms": phases.get("addBatch"),
                   **{f"job_{k}_p50": round(statistics.median(j[k] for j in jobs), 1) if jobs else None
                      for k in ("wall_ms", "run_ms", "cpu_ms")}}
            results.append(row)
            print(f"{wait_ms:18d} {row['batch_ms'] or 0:9.0f} {row['add_batch_ms'] or 0:9.0f}"
                  f" {row['job_wall_ms_p50'] or 0:9.0f} {row['job_run_ms_p50'] or 0:9.0f}"
                  f" {row['job_cpu_ms_p50'] or 0:9.0f} {len(jobs):5d}", flush=True)
    finally:
        spark.stop()
        cluster.down()
    if args.json:
        print(json.dumps({"cases": results}))


if __name__ == "__main__":
    main()
