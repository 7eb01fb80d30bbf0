"""Soak: the real pipeline for a long run on a simulated 10k-partition cluster with periodic faults,
sampling what would grow if something leaked. Results go to RELIABILITY.md.

A `krm simulate` cluster (30 brokers, 100 topics x 100 partitions, RF 3, 10 s poll) publishes to a
real 1-broker KRaft observations cluster; the pipeline (`krm pipeline`'s Monitor, in this process)
reads it. Every 4 minutes a broker is killed and restarted 2 minutes later, and a follower stalls
for 2 minutes (the simulator's fault script). `krm maintain` runs every 10 minutes in a process of
its own, as a cron would.
Every 15 s: the driver JVM's used heap (after the last GC: MemoryMXBean, so garbage does not read
as growth), the RSS of this process and its JVM, their open file descriptors and threads, each
Delta table's active files (what compaction bounds), its Parquet files on disk (what vacuum bounds)
and its _delta_log size (commits, kept for `[pipeline] delta_log_retention_hours`).
Reported: first and last value and the slope per hour (least squares) after a warm-up, and whether
the run kept up (observation age).

    .venv/bin/python benchmarks/soak.py [--minutes 30] [--topics 100] [--full-gc] [--json out.json]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pyarrow as pa
from deltalake import DeltaTable

from pipeline_throughput import rss_mb, spark_driver
from collectors.publisher import ensure_topic
from foundation.config import load_config
from krm.runner import Monitor
from krm.scrape import scrape, series
from lab.local_cluster import LocalCluster, free_port
from pipelines.session import build_session
from pipelines.tables import Tables

ROOT = Path(__file__).resolve().parents[1]

TABLES = ("observations", "partition_state", "replica_lag", "assignments", "incidents", "data_quality")



def maintain_apart(root: Path) -> str:
    """`krm maintain`'s work in a process of its own, as a cron runs it: its memory (a compaction
    decodes and re-encodes a table) is not the pipeline's. In the monitor's process it showed as
    steps of the pipeline's RSS at each run (RELIABILITY.md, Soak)."""
    code = ("import sys; from krm.maintain import maintain\n"
            "for r in maintain(sys.argv[1], retention_days=30, vacuum_hours=1):\n"
            "    print(f'{r.table} {r.files_before}->{r.files_after}' + (f' ERROR {r.error}' if r.error else ''))")
    done = subprocess.run([sys.executable, "-c", code, str(root)], cwd=ROOT, capture_output=True, text=True)
    if done.returncode != 0:
        return f"ERROR exit {done.returncode}: {done.stderr.strip().splitlines()[-1:] or ''}"
    return ", ".join(done.stdout.split("\n")[:-1])

def fault_script(minutes: float) -> list[dict]:
    out, t, broker = [], 120.0, 1
    while t + 120 < minutes * 60:
        out += [{"at_s": t, "kind": "kill_broker", "broker": broker},
                {"at_s": t + 120, "kind": "restart_broker", "broker": broker},
                {"at_s": t + 60, "kind": "stall_follower", "topic": f"sim-{broker:05d}", "partition": 0},
                {"at_s": t + 180, "kind": "unstall_follower", "topic": f"sim-{broker:05d}", "partition": 0}]
        t, broker = t + 240, broker + 1
    return out


def status_field(pid: int, name: str) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith(name + ":"):
            return int(line.split()[1])
    return 0


def fds(pid: int) -> int:
    try:
        return len(os.listdir(f"/proc/{pid}/fd"))
    except OSError:
        return 0


def active_files(path: Path) -> int:
    try:
        return len(DeltaTable(str(path)).file_uris())
    except Exception:  # noqa: BLE001 - no table (or no commit) yet
        return 0


def folder_mb(folder: Path) -> float:
    """Size of a folder's files; a file Delta renames or removes while we look is skipped."""
    total = 0
    for f in folder.iterdir() if folder.is_dir() else ():
        try:
            total += f.stat().st_size
        except FileNotFoundError:
            pass
    return total / 2**20


def slope_per_hour(points: list[tuple[float, float]]) -> float:
    if len(points) < 3:
        return float("nan")
    xs, ys = [p[0] for p in points], [p[1] for p in points]
    mx, my = statistics.fmean(xs), statistics.fmean(ys)
    den = sum((x - mx) ** 2 for x in xs)
    return sum((x - mx) * (y - my) for x, y in zip(xs, ys)) / den * 3600 if den else float("nan")


def python_objects() -> dict[str, int]:
    """Live Python objects by type name (after a collection)."""
    import collections
    import gc

    gc.collect()
    return dict(collections.Counter(type(o).__name__ for o in gc.get_objects()))


def jvm_classes(javas: list[int]) -> dict[str, int]:
    """Bytes of live instances per class in the driver JVM (`jmap -histo:live` forces a full GC)."""
    out: dict[str, int] = {}
    for pid in javas:
        text = subprocess.run(["jmap", "-histo:live", str(pid)], capture_output=True, text=True, timeout=120).stdout
        for line in text.splitlines():
            parts = line.split()
            if len(parts) >= 4 and parts[0].endswith(":") and parts[2].isdigit():
                out[parts[3]] = out.get(parts[3], 0) + int(parts[2])
    return out


def top_growth(before: dict[str, int], after: dict[str, int], n: int = 15) -> list[tuple[str, int, int]]:
    """(name, before, after) of the n entries that grew most."""
    names = sorted(set(before) | set(after), key=lambda k: after.get(k, 0) - before.get(k, 0), reverse=True)
    return [(k, before.get(k, 0), after.get(k, 0)) for k in names[:n]]


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--minutes", type=float, default=30.0)
    ap.add_argument("--topics", type=int, default=100, help="x 100 partitions")
    ap.add_argument("--poll", type=float, default=10.0)
    ap.add_argument("--warmup-minutes", type=float, default=5.0)
    ap.add_argument("--full-gc", action="store_true", help="a full GC before each heap sample (slope of what is retained)")
    ap.add_argument("--histograms", action="store_true",
                    help="at the end of the warm-up and of the run: live Python objects by type and the driver "
                         "JVM's class histogram (jmap -histo:live); the report lists what grew most")
    ap.add_argument("--json", type=Path)
    args = ap.parse_args()
    work = Path(tempfile.mkdtemp(prefix="krm-soak-"))
    os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    obs = LocalCluster(root=work / "obs", mode="kraft", brokers=1).up()
    spark = build_session("local[2]", log_dir=work / "logs", extra={"spark.driver.memory": "2g"})
    cfg = work / "soak.toml"
    cfg.write_text(
        f'[[clusters]]\nname = "sim"\nbootstrap_servers = "{obs.bootstrap_servers}"\n\n'
        f'[observations]\nbootstrap_servers = "{obs.bootstrap_servers}"\ntopic = "krm.soak"\npartitions = 4\n\n'
        f'[pipeline]\ndata_dir = "{work / "data"}"\nmetrics_port = {free_port()}\nspark_master = "local[2]"\n'
        "hw_stall_window_s = 30.0\nquality_interval_s = 300.0\n")
    (work / "faults.json").write_text(json.dumps(fault_script(args.minutes)))
    config = load_config(cfg)
    ensure_topic(config.observations)
    tables = Tables(config.pipeline.data_dir)
    monitor = Monitor(config, collect=False, spark=spark).start()
    sim = subprocess.Popen([str(ROOT / ".venv/bin/krm"), "simulate", "--config", str(cfg), "--topics", str(args.topics),
                            "--brokers", "30", "--poll-interval", str(args.poll), "--duration", str(args.minutes * 60),
                            "--faults", str(work / "faults.json")],
                           stdout=subprocess.DEVNULL, stderr=open(work / "sim.log", "w"))
    jvm = spark._jvm
    memory = jvm.java.lang.management.ManagementFactory.getMemoryMXBean()
    pools = [p for p in jvm.java.lang.management.ManagementFactory.getMemoryPoolMXBeans()
             if p.getType().toString() == "Heap memory"]
    samples: list[dict] = []
    maintenance: list[str] = []
    histograms: list[tuple[dict, dict]] = []
    t0 = time.time()
    next_maintain = t0 + 600
    try:
        while sim.poll() is None:
            time.sleep(15)
            me, javas = os.getpid(), spark_driver(os.getpid())
            after_gc = sum(p.getCollectionUsage().getUsed() for p in pools if p.getCollectionUsage() is not None)
            row = {"t": time.time() - t0,
                   "heap_after_gc_mb": after_gc / 2**20,
                   "heap_used_mb": memory.getHeapMemoryUsage().getUsed() / 2**20}
            if args.full_gc:  # what is really retained: a full collection first (System.gc, G1: a full GC)
                jvm.java.lang.System.gc()
                row["heap_after_full_gc_mb"] = memory.getHeapMemoryUsage().getUsed() / 2**20
            # Arrow's buffers alive now (its pool may keep more from the system: `arrow_pool`)
            row["arrow_allocated_mb"] = pa.total_allocated_bytes() / 2**20
            row |= {"rss_python_mb": rss_mb(me), "rss_jvm_mb": sum(rss_mb(j) for j in javas),
                   "rss_mb": rss_mb(me) + sum(rss_mb(j) for j in javas),
                   "fds": fds(me) + sum(fds(j) for j in javas),
                   "threads": status_field(me, "Threads") + sum(status_field(j, "Threads") for j in javas)}
            for name in TABLES:
                path = getattr(tables, name).path
                log_dir = path / "_delta_log"
                row[f"{name}_log_mb"] = folder_mb(log_dir)
                row[f"{name}_files"] = active_files(path)
                row[f"{name}_disk_files"] = sum(1 for f in path.rglob("*.parquet")  # what vacuum bounds
                                                if "_delta_log" not in f.parts) if path.is_dir() else 0
            try:
                row["age_s"] = max(s.value for s in series(scrape(monitor.metrics_url, 5), "krm_observation_age_seconds"))
            except Exception:  # noqa: BLE001 - recorded as missing
                row["age_s"] = None
            samples.append(row)
            if args.histograms and (not histograms and row["t"] >= args.warmup_minutes * 60
                                    or sim.poll() is not None or row["t"] >= args.minutes * 60 - 20):
                if len(histograms) < 2:
                    histograms.append((python_objects(), jvm_classes(javas)))
            print(json.dumps({k: round(v, 1) if isinstance(v, float) else v for k, v in row.items()}),
                  file=sys.stderr, flush=True)
            if time.time() >= next_maintain:
                next_maintain += 600
                maintenance.append(maintain_apart(tables.root / "tables"))
                print("maintain: " + maintenance[-1], file=sys.stderr, flush=True)
    finally:
        monitor.stop()
        spark.stop()
        if sim.poll() is None:
            sim.kill()
        obs.down()
    steady = [s for s in samples if s["t"] >= args.warmup_minutes * 60]
    keys = [k for k in samples[0] if k not in ("t",)] if samples else []
    grew = {}
    if len(histograms) == 2:
        (py0, jv0), (py1, jv1) = histograms
        grew = {"python_objects": top_growth(py0, py1), "jvm_bytes": top_growth(jv0, jv1)}
    result = {"minutes": args.minutes, "partitions": args.topics * 100, "samples": len(samples), "grew": grew,
              "arrow_pool": pa.default_memory_pool().backend_name,
              "maintenance": maintenance, "work": str(work),
              "series": {k: {"first": steady[0][k] if steady else None, "last": steady[-1][k] if steady else None,
                             "max": max((s[k] for s in steady if s[k] is not None), default=None),
                             "slope_per_hour": slope_per_hour([(s["t"], s[k]) for s in steady if s[k] is not None])}
                         for k in keys}}
    print(json.dumps(result))
    if args.json:
        args.json.write_text(json.dumps(result, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
