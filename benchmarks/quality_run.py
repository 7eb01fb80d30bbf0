"""One data-quality run over a compacted day of observations: its time and the memory it takes.

The data-quality thread (pipelines/quality.py) runs inside the pipeline's process every
`quality_interval_s` and validates the observations written since its last run. What it costs is
paid by that process: the memory a run takes is memory the process keeps. This builds an
observations table from the simulator (10k partitions by default, one append per poll as the
history stream writes them), compacts it with `krm maintain`, then times `QualityRunner.run_once`
over the newest `--window` seconds, each measurement in a fresh process so that its peak RSS
(VmHWM) is its own. `--row-group-rows 0` compacts with delta-rs's default row groups instead of
krm's.

    .venv/bin/python benchmarks/quality_run.py --partitions 10000 --minutes 30 --windows 60,300
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def status() -> dict[str, float]:
    out = {}
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith(("VmRSS", "VmHWM")):
            out[line.split(":")[0]] = int(line.split()[1]) / 1024
    return out


def arrow_type(t):
    """schemas/observation.py's tree as Arrow types, as the history stream stores them."""
    import pyarrow as pa

    from schemas.observation import Array, Scalar

    if isinstance(t, Scalar):
        return {"string": pa.string(), "int": pa.int32(), "long": pa.int64(), "bool": pa.bool_(),
                "double": pa.float64()}[t.name]
    if isinstance(t, Array):
        return pa.list_(arrow_type(t.element))
    return pa.struct([(n, arrow_type(ft)) for n, ft, _ in t.fields])


def build(tables: Path, partitions: int, minutes: float, poll_s: float, row_group_rows: int | None) -> dict:
    import pyarrow as pa
    from deltalake import write_deltalake

    import krm.maintain as maintain
    from lab.simulate.emit import Emitter
    from lab.simulate.model import SimCluster, SimSettings
    from schemas.observation import TOPIC_STATE

    schema = pa.schema([("cluster", pa.string()), ("kind", pa.string()), ("observed_at_ms", pa.int64()),
                        ("kafka_timestamp", pa.timestamp("us", tz="UTC")), ("topic_state", arrow_type(TOPIC_STATE)),
                        ("date", pa.date32())])
    polls = int(minutes * 60 / poll_s)
    now_ms = int(time.time() * 1000)
    start_ms = now_ms - polls * int(poll_s * 1000)
    sim = SimCluster("bench", SimSettings(topics=partitions // 100), start_ms=start_ms)
    emitter = Emitter(sim)
    path = tables / "observations"
    t0 = time.perf_counter()
    for i in range(polls):
        at = start_ms + (i + 1) * int(poll_s * 1000)
        sim.step(at)
        records = [{"cluster": r["cluster"], "kind": r["kind"], "observed_at_ms": r["observed_at_ms"],
                    "kafka_timestamp": dt.datetime.fromtimestamp((r["observed_at_ms"] + 50) / 1000, dt.timezone.utc),
                    "topic_state": r["topic_state"],
                    "date": dt.datetime.fromtimestamp(r["observed_at_ms"] / 1000, dt.timezone.utc).date()}
                   for r in emitter.poll() if r["kind"] == "topic"]
        write_deltalake(str(path), pa.Table.from_pylist(records, schema=schema), mode="append", partition_by=["date", "cluster"])
        if (i + 1) % 30 == 0:
            print(f"  {i + 1}/{polls} polls written", file=sys.stderr, flush=True)
    written = time.perf_counter() - t0
    if row_group_rows is not None and hasattr(maintain, "ROW_GROUP_ROWS"):
        maintain.ROW_GROUP_ROWS = {"observations": row_group_rows} if row_group_rows else {}
    reports = maintain.maintain(tables, retention_days=30, vacuum_hours=0)
    return {"polls": polls, "newest_ms": start_ms + polls * int(poll_s * 1000), "write_s": round(written, 1),
            "compaction": [f"{r.table} {r.files_before}->{r.files_after} {r.seconds:.1f}s" for r in reports]}


def measure(tables: Path, since_ms: int, max_rows: int) -> dict:
    """In its own process: one warm-up run, then the measured one over the same rows."""
    from foundation.storage import as_location
    from pipelines.state import PipelineState
    from pipelines.quality import QualityRunner, Suite

    runner = QualityRunner(as_location(tables / "observations"), as_location(tables / "data_quality"),
                           PipelineState(), interval_s=60, max_rows=max_rows)
    runner._suite = Suite()
    runner._since_ms = since_ms
    runner.run_once()  # great-expectations' first validation builds its caches
    before = status()
    runner._since_ms = since_ms
    t0 = time.perf_counter()
    report = runner.run_once()
    seconds = time.perf_counter() - t0
    after = status()
    return {"rows": report.rows if report else None, "seconds": round(seconds, 2),
            "rss_before_mb": round(before["VmRSS"]), "peak_rss_mb": round(after["VmHWM"]),
            "rss_after_mb": round(after["VmRSS"])}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--partitions", type=int, default=10_000)
    ap.add_argument("--minutes", type=float, default=30.0, help="of observations in the table")
    ap.add_argument("--poll", type=float, default=10.0)
    ap.add_argument("--windows", default="60,300", help="seconds of newest observations each run validates")
    ap.add_argument("--max-rows", type=int, default=100_000, help="[pipeline] quality_max_rows")
    ap.add_argument("--row-group-rows", type=int, default=None,
                    help="compact the observations in row groups of this many records (0: delta-rs's default)")
    ap.add_argument("--json")
    ap.add_argument("--measure", nargs=2, metavar=("TABLES", "SINCE_MS"), help=argparse.SUPPRESS)
    args = ap.parse_args()

    if args.measure:
        print(json.dumps(measure(Path(args.measure[0]), int(args.measure[1]), args.max_rows)))
        return
    work = Path(tempfile.mkdtemp(prefix="krm-quality-bench-"))
    try:
        built = build(work / "tables", args.partitions, args.minutes, args.poll, args.row_group_rows)
        print(json.dumps(built), file=sys.stderr)
        runs = {}
        for window in (float(w) for w in args.windows.split(",")):
            since = built["newest_ms"] - int(window * 1000)
            out = subprocess.run([sys.executable, __file__, "--max-rows", str(args.max_rows),
                                  "--measure", str(work / "tables"), str(since)],
                                 capture_output=True, text=True, check=True)
            runs[f"{window:g}s"] = json.loads(out.stdout.strip().splitlines()[-1])
            print(f"window {window:g}s: {runs[f'{window:g}s']}", flush=True)
        result = {"partitions": args.partitions, "minutes": args.minutes, "poll_s": args.poll,
                  "row_group_rows": args.row_group_rows, **built, "runs": runs}
        if args.json:
            Path(args.json).write_text(json.dumps(result, indent=2))
    finally:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
