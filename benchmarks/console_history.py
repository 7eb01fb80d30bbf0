"""The console's pages at 200k partitions with a day of history: each must answer within 1 s.

The history tables are benchmarks/history_queries.py's (partition_state with a row per partition at each
change and per keyframe, replica_lag while followers lag, incidents; `krm maintain` run as a daily cron
leaves them), written with `--keep DIR` and read here with `--tables DIR`. This adds what the pipeline
itself would hold for that cluster: the live snapshot (every topic's per-broker load, broker totals, a
few hundred open incidents) and a day of `broker_state` samples (one a minute, appended every 15
minutes, as the pipeline's defaults write them). Each page is rendered through the console's WSGI app
exactly as a request would be, `--rounds` times, in one process (a console serves many requests).

Usage: .venv/bin/python benchmarks/history_queries.py --partitions 200000 --days 2 --keep DIR --runs 1
       .venv/bin/python benchmarks/console_history.py --tables DIR [--rounds 5] [--json]
"""

from __future__ import annotations

import argparse
import datetime as dt
import io
import json
import statistics
import sys
import time
from pathlib import Path

BROKERS = 6  # as history_queries.py lays the partitions out
PER_TOPIC = 100
CLUSTER = "bench"


def snapshot(partitions: int, open_incidents: int) -> object:
    from pipelines.incidents import Incident
    from pipelines.load import TopicLoad
    from pipelines.state import ClusterView, PipelineState

    now_ms = int(time.time() * 1000)
    topics = (partitions + PER_TOPIC - 1) // PER_TOPIC
    per_broker = PER_TOPIC * 3 // BROKERS
    loads = {f"topic-{i:04d}": TopicLoad(CLUSTER, f"topic-{i:04d}", now_ms,
                                         {b: (PER_TOPIC // BROKERS, per_broker, PER_TOPIC // BROKERS, 0)
                                          for b in range(1, BROKERS + 1)}, PER_TOPIC) for i in range(topics)}
    totals = {b: (partitions // BROKERS, partitions * 3 // BROKERS, partitions // BROKERS, 0)
              for b in range(1, BROKERS + 1)}
    found = tuple(Incident(f"open-{n}", CLUSTER, "partition", "UNDER_REPLICATED", "warning", f"topic-{n * 7 % topics:04d}",
                           n % PER_TOPIC, None, None, {"out_of_sync": [n % BROKERS + 1], "replicas": [1, 2, 3]},
                           now_ms - 60_000, now_ms, None, "open") for n in range(open_incidents))
    state = PipelineState()
    state.update(clusters={CLUSTER: ClusterView(tuple((b, True) for b in range(1, BROKERS + 1)), 1, None, now_ms)},
                 open_incidents=found, topic_load={CLUSTER: loads}, broker_load={CLUSTER: totals}, batches=1)
    return state


def broker_day(table: Path, state: object, every_s: int = 60, write_s: int = 900) -> int:
    """A day of samples as the sampler writes them (pipelines/broker_history.py): one append per write_s."""
    from foundation.storage import as_location
    from pipelines import broker_history

    now = int(time.time())
    pending: list[dict] = []
    rows = 0
    loc = as_location(table)
    for t in range(now - 86400, now, every_s):
        pending += broker_history.samples(state.snapshot, set(), t * 1000)  # type: ignore[attr-defined]
        if (t - (now - 86400)) % write_s == write_s - every_s:
            broker_history.append(loc, pending)
            rows += len(pending)
            pending = []
    return rows


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--tables", required=True, help="the --keep folder of benchmarks/history_queries.py")
    ap.add_argument("--partitions", type=int, default=200_000, help="as the tables were written with")
    ap.add_argument("--open-incidents", type=int, default=500)
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args()

    from krm.console import Console
    from pipelines.incident_store import IncidentStore
    from pipelines.tables import Tables

    root = Path(args.tables) / "data"
    tables = Tables(root)
    state = snapshot(args.partitions, args.open_incidents)
    if not tables.broker_state.is_table():
        t0 = time.perf_counter()
        n = broker_day(tables.broker_state.path, state)
        print(f"broker_state: {n} rows in 96 appends, {time.perf_counter() - t0:.0f}s", flush=True)
    some = next(i for i in IncidentStore(tables.incidents).read() if i.status == "resolved")
    app = Console(state, tables)
    part = f"/partitions/{CLUSTER}/{some.topic}/{some.partition}"
    pages = {"fleet": ("/", ""), "cluster grid": (f"/clusters/{CLUSTER}", ""),
             "cluster grid, live part": (f"/clusters/{CLUSTER}", "fragment=1"),
             "cluster grid, every topic": (f"/clusters/{CLUSTER}", "all=1"),
             "open incidents": ("/incidents", ""),
             "incident (a day-old one, its chart)": (f"/incidents/{some.incident_id}", ""),
             "partition, 1h": (part, "since=1h"), "partition, 24h": (part, "since=24h"),
             "topic, 1h": (f"/topics/{CLUSTER}/{some.topic}", "since=1h"),
             "topic, 24h": (f"/topics/{CLUSTER}/{some.topic}", "since=24h"),
             "broker, 6h": (f"/brokers/{CLUSTER}/3", "since=6h"), "broker, 24h": (f"/brokers/{CLUSTER}/3", "since=24h")}
    results = []
    for name, (path, query) in pages.items():
        times, size = [], 0
        for _ in range(args.rounds + 1):  # the first: templates compiled, the Delta log read once
            status: list[str] = []
            t0 = time.perf_counter()
            body = b"".join(app({"PATH_INFO": path, "QUERY_STRING": query, "wsgi.input": io.BytesIO()},
                                lambda s, h, seen=status: seen.append(s)))
            times.append(time.perf_counter() - t0)
            size = len(body)
            if not status[0].startswith("200"):
                raise SystemExit(f"{path}?{query}: {status[0]}: {body[:500]!r}")
        first, rest = times[0], times[1:]
        r = {"page": name, "first_s": round(first, 3), "p50_s": round(statistics.median(rest), 3),
             "max_s": round(max(rest), 3), "kb": round(size / 1e3)}
        results.append(r)
        print(f"{name:<38} first {first:.3f}s  p50 {r['p50_s']:.3f}s  max {r['max_s']:.3f}s  {r['kb']} KB", flush=True)
    if args.json:
        print(json.dumps({"partitions": args.partitions, "open_incidents": args.open_incidents,
                          "when": dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds"), "results": results}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
