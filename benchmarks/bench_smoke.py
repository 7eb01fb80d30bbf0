"""`make bench-smoke`: the alert and history paths' cost at small sizes against recorded budgets, in
under five minutes. Run it before and after a change to the alert or history path (BENCHMARKS.md).

Two runs, each the real benchmark at a small size:
- benchmarks/pipeline_throughput.py --sizes 20000 --minutes 1.5 --prebuild --json: the alert batch's
  p95, poll stamp -> /metrics p95, every published record reaching the history, bytes per partition;
- benchmarks/driver_cpu.py --cases 2:10 --window 30 --warmup 20 --json: the Spark driver and the
  collector at rest on a small quiet cluster.

Each figure is compared with its budget in benchmarks/data/smoke_budgets.json (the figure recorded on
this project's machine, and when): a figure more than the file's `margin` above its budget fails the
run (the margin is wide because this machine's speed varies by up to 2x between days; a regression
worth catching is larger). Exit status 1 on a failure, with each figure, its budget and the verdict.

Usage: .venv/bin/python benchmarks/bench_smoke.py [--budgets FILE] [--record]
  --record writes the figures of this run as the new budgets (after a deliberate change; say why in
  BENCHMARKS.md).
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import subprocess
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
PYTHON = str(HERE.parent / ".venv" / "bin" / "python")
BUDGETS = HERE / "data" / "smoke_budgets.json"

PIPELINE_SIZE = 20_000
RUNS = {
    "pipeline": [PYTHON, str(HERE / "pipeline_throughput.py"), "--sizes", str(PIPELINE_SIZE), "--minutes", "1.5",
                 "--prebuild", "--json"],
    "driver": [PYTHON, str(HERE / "driver_cpu.py"), "--cases", "2:10", "--window", "30", "--warmup", "20", "--json"],
}


def last_json(out: str) -> dict:
    for line in reversed(out.strip().splitlines()):
        if line.startswith("{"):
            return json.loads(line)
    raise RuntimeError("no JSON line in the benchmark's output")


def figures() -> dict[str, float]:
    """Run both benchmarks; their figures by name."""
    got: dict[str, float] = {}
    for name, cmd in RUNS.items():
        t0 = time.monotonic()
        print(f"bench-smoke: {' '.join(Path(c).name if c.startswith('/') else c for c in cmd[1:])} ...", flush=True)
        run = subprocess.run(cmd, capture_output=True, text=True, timeout=900)
        if run.returncode != 0:
            sys.stderr.write(run.stdout[-3000:] + run.stderr[-3000:])
            raise RuntimeError(f"{name} benchmark failed with exit status {run.returncode}")
        data = last_json(run.stdout)
        if name == "pipeline":
            p = next(size for size in data["sizes"] if size["partitions"] == PIPELINE_SIZE)
            got["alert_p95_s"] = p["alert_p95_s"]
            got["poll_to_metrics_p95_s"] = p["poll_to_metrics_p95_s"]
            got["bytes_per_partition"] = p["bytes_per_partition"]
            got["history_records_missing"] = p["records_published"] - p["history_records_reached"]
        else:
            case = data["cases"][0]
            got["driver_pct"] = case["driver_cpu_pct"]
            got["collector_pct"] = case["collector_cpu_pct"]
        print(f"bench-smoke: {name} done in {time.monotonic() - t0:.0f} s", flush=True)
    return got


def judge(got: dict[str, float], budgets: dict) -> list[str]:
    """The failures: a figure over budget x (1 + margin); a count that must be zero and is not."""
    margin = budgets["margin"]
    failures = []
    for name, budget in budgets["figures"].items():
        value = got.get(name)
        limit = budget * (1 + margin) if budget else 0
        ok = value is not None and value <= limit
        print(f"  {name:<26} {value!s:>10}  budget {budget:>8} (limit {limit:.3g})  {'ok' if ok else 'OVER'}")
        if not ok:
            failures.append(name)
    return failures


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--budgets", type=Path, default=BUDGETS)
    ap.add_argument("--record", action="store_true", help="write this run's figures as the budgets")
    args = ap.parse_args()
    got = figures()
    if args.record:
        old = json.loads(args.budgets.read_text()) if args.budgets.exists() else {"margin": 0.5}
        args.budgets.write_text(json.dumps({"margin": old["margin"], "recorded": dt.date.today().isoformat(),
                                            "note": "recorded by bench_smoke.py --record", "figures": got},
                                           indent=2) + "\n")
        print(f"bench-smoke: budgets recorded in {args.budgets}")
        return 0
    budgets = json.loads(args.budgets.read_text())
    print(f"bench-smoke: figures against the budgets of {budgets['recorded']} (margin {budgets['margin']:.0%}):")
    failures = judge(got, budgets)
    if failures:
        print(f"bench-smoke: FAILED: {', '.join(failures)} past budget by more than the margin")
        return 1
    print("bench-smoke: every figure within its budget")
    return 0


if __name__ == "__main__":
    sys.exit(main())
