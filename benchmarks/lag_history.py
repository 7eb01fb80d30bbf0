"""`krm lag` on a generated week of history: process start to answer, wall clock.

Writes a `replica_lag` Delta table (the pipeline's schema, partitioned by date) holding a week of
samples every `--interval` seconds for `--topics` topics of `--partitions` partitions with RF 3
(two followers each), then times `krm lag --topic <one of them> --since 7d` (table output, JSON,
and a plot) as a user runs it: a new process each time, `--runs` times.

Usage: .venv/bin/python benchmarks/lag_history.py [--topics 5] [--partitions 6] [--interval 10] [--runs 5]
"""

from __future__ import annotations

import argparse
import datetime as dt
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path


KRM = str(Path(sys.executable).parent / "krm")


def generate(table: Path, topics: int, partitions: int, interval_s: int, now: dt.datetime) -> int:
    """One Delta append per day (as the history path's batches leave it before compaction), built
    with numpy: every (topic, partition, replica) sampled every `interval_s`."""
    import numpy as np
    import pyarrow as pa
    from deltalake import write_deltalake

    ts_type = pa.timestamp("us", tz="UTC")
    start = now - dt.timedelta(days=7)
    replicas = topics * partitions * 3
    topic_idx = np.repeat(np.arange(topics), partitions * 3)
    part_idx = np.tile(np.repeat(np.arange(partitions), 3), topics)
    broker = np.tile(np.array([1, 2, 3]), topics * partitions)
    total = 0
    day = start
    while day < now:
        end = min(now, (day + dt.timedelta(days=1)).replace(hour=0, minute=0, second=0, microsecond=0))
        n = int((end - day).total_seconds() // interval_s)
        if n > 0:
            t_us = int(day.timestamp() * 1e6) + np.arange(n, dtype=np.int64) * interval_s * 1_000_000
            step = np.arange(n, dtype=np.int64) + int((day - start).total_seconds() // interval_s)
            t_col = np.repeat(t_us, replicas)
            s_col = np.repeat(step, replicas)
            b_col = np.tile(broker, n)
            lag = np.where(b_col == 1, 0, (s_col * (5 + b_col) + np.tile(part_idx, n)) % (50 * b_col * b_col))
            leo = (s_col + 1) * 100
            names = np.array([f"topic-{i:03d}" for i in range(topics)])
            cols = {
                "cluster": pa.array(np.full(n * replicas, "c1")), "topic": pa.array(names[np.tile(topic_idx, n)]),
                "partition": pa.array(np.tile(part_idx, n).astype(np.int32)), "broker": pa.array(b_col.astype(np.int32)),
                "observed_at": pa.array(t_col, type=ts_type), "leader": pa.array(np.ones(n * replicas, np.int32)),
                "is_leader": pa.array(b_col == 1), "in_isr": pa.array(lag < 300),
                "log_end_offset": pa.array(leo - lag), "leader_leo": pa.array(leo), "lag_messages": pa.array(lag),
                "lag_seconds": pa.array(lag / 10.0),
                "date": pa.array(np.full(n * replicas, np.datetime64(day.date(), "D"))),
            }
            write_deltalake(str(table), pa.table(cols), mode="append", partition_by=["date"])
            total += n * replicas
        day = end
    return total


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--topics", type=int, default=5)
    ap.add_argument("--partitions", type=int, default=6)
    ap.add_argument("--interval", type=int, default=10, help="seconds between samples")
    ap.add_argument("--runs", type=int, default=5)
    args = ap.parse_args()

    root = Path(tempfile.mkdtemp(prefix="krm-lag-bench-"))
    table = root / "data" / "tables" / "replica_lag"
    t0 = time.perf_counter()
    rows = generate(table, args.topics, args.partitions, args.interval, dt.datetime.now(dt.timezone.utc))
    print(f"generated {rows:,} rows ({args.topics} topics x {args.partitions} partitions x 3 replicas, "
          f"every {args.interval}s for 7 days) in {time.perf_counter() - t0:.0f}s", flush=True)
    config = root / "krm.toml"
    config.write_text('[[clusters]]\nname = "c1"\nbootstrap_servers = "127.0.0.1:1"\n\n'
                      f'[pipeline]\ndata_dir = "{root / "data"}"\n')
    for label, extra in (("table", []), ("json", ["--json"]), ("plot", ["--plot", str(root / "lag.png")])):
        walls = []
        for _ in range(args.runs):
            t = time.perf_counter()
            out = subprocess.run([KRM, "lag", "--config", str(config), "--topic", "topic-001", "--since", "7d", *extra],
                                 capture_output=True, text=True)
            walls.append(time.perf_counter() - t)
            assert out.returncode == 0, out.stderr
        print(f"krm lag --since 7d ({label}): wall p50 {statistics.median(walls):.2f}s max {max(walls):.2f}s "
              f"over {args.runs} runs", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
