"""The console's live pages against the number of open incidents.

The live pages (clusters, open incidents, a broker, an open incident) are rendered from the
pipeline's in-memory snapshot, the one /metrics serves; this renders them through the console's
WSGI app exactly as a request would (no table is read for them), with N open incidents spread over
clusters, types and partitions as a bad day looks: a third under-replicated, a fifth under min ISR,
the rest offline, at-min-ISR and follower lag, each with its details.

Usage: .venv/bin/python benchmarks/console_pages.py [--incidents 1000,10000] [--rounds 20] [--json]
Prints per page and count: p50 / p95 / max and the page's size; with --json the last line is one
JSON object with every figure.
"""

from __future__ import annotations

import argparse
import io
import json
import statistics
import sys
import tempfile
import time
from pathlib import Path


from krm.console import Console
from pipelines.incidents import Incident
from pipelines.tables import Tables
from pipelines.state import ClusterView, PipelineState

TYPES = [("UNDER_REPLICATED", "warning", None, {"out_of_sync": [3]}),
         ("UNDER_MIN_ISR", "critical", None, {"out_of_sync": [3, 4]}),
         ("OFFLINE_PARTITION", "critical", "all_isr_replicas_dead", {"must_return": [3, 4]}),
         ("AT_MIN_ISR", "warning", None, {"out_of_sync": [4]}),
         ("REPLICA_LAG", "warning", None, {"lag_messages": 25_000, "lag_seconds": 41.0})]
WEIGHTS = [33, 20, 17, 15, 15]


def incidents(n: int) -> tuple[Incident, ...]:
    kinds = [k for k, w in zip(TYPES, WEIGHTS) for _ in range(w)]
    now = int(time.time() * 1000)
    out = []
    for i in range(n):
        typ, sev, cause, details = kinds[i % len(kinds)]
        cluster = f"prod-{i % 4}"
        topic, partition = f"orders-{i // 100 % 500:03d}", i % 100
        broker = 3 if typ == "REPLICA_LAG" else None
        out.append(Incident(f"{i:020x}", cluster, f"topic:{topic}", typ, sev, topic, partition, broker, cause,
                            {**details, "replicas": [1, 3, 4], "isr": [1]}, now - 60_000 - i, now, None, "open"))
    return tuple(out)


def render(app: Console, path: str, query: str = "") -> bytes:
    status: list[str] = []
    body = app({"PATH_INFO": path, "QUERY_STRING": query, "wsgi.input": io.BytesIO()},
               lambda s, h: status.append(s))
    assert status and status[0].startswith("200"), (path, status)
    return b"".join(body)


def pct(values: list[float], q: float) -> float:
    s = sorted(values)
    return s[min(len(s) - 1, int(round(q * (len(s) - 1))))]


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--incidents", default="1000,10000")
    ap.add_argument("--rounds", type=int, default=20)
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args()
    results = []
    with tempfile.TemporaryDirectory() as tmp:
        for n in [int(x) for x in args.incidents.split(",")]:
            state = PipelineState(console_url="http://krm.example:9308")
            found = incidents(n)
            state.update(open_incidents=found, clusters={
                f"prod-{c}": ClusterView(tuple((b, b != 3) for b in range(1, 7)), 1, None, int(time.time() * 1000))
                for c in range(4)})
            app = Console(state, Tables(Path(tmp) / "data"))
            pages = {"open incidents": ("/incidents", ""), "open incidents, one cluster's critical":
                     ("/incidents", "cluster=prod-1&severity=critical"), "clusters": ("/", ""),
                     "broker": ("/brokers/prod-1/3", ""), "one open incident": (f"/incidents/{found[-1].incident_id}", "")}
            for name, (path, query) in pages.items():
                render(app, path, query)  # templates compiled
                times, size = [], 0
                for _ in range(args.rounds):
                    t0 = time.perf_counter()
                    size = len(render(app, path, query))
                    times.append(time.perf_counter() - t0)
                r = {"page": name, "open_incidents": n, "p50_s": round(statistics.median(times), 4),
                     "p95_s": round(pct(times, 0.95), 4), "max_s": round(max(times), 4), "bytes": size}
                results.append(r)
                print(f"{name:<40} open={n:>6} p50={r['p50_s'] * 1000:.1f}ms p95={r['p95_s'] * 1000:.1f}ms "
                      f"max={r['max_s'] * 1000:.1f}ms size={size / 1e3:.0f}KB", flush=True)
    if args.json:
        print(json.dumps({"results": results}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
