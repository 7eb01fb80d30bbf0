"""/metrics payload size and render time: a healthy cluster against ones with many unhealthy partitions.

The page is rendered by the pipeline's own prometheus-client collector (pipelines/metrics.py) from a
snapshot like the alert path builds: one cluster of 30 brokers (any partition count: a healthy
cluster has no per-partition series), then incidents as a broker death would open them.

Usage: .venv/bin/python benchmarks/metrics_payload.py [--brokers 30] [--renders 20]
"""

from __future__ import annotations

import argparse
import gzip
import statistics
import time


from prometheus_client import CollectorRegistry, generate_latest

from pipelines.incidents import Incident
from pipelines.metrics import KrmCollector
from pipelines.state import ClusterView, PipelineState


def incidents(kind: str, n: int, cause: str | None, severity: str) -> list[Incident]:
    now = int(time.time() * 1000)
    return [Incident(f"{kind}-{i}", "prod-1", "metadata", kind, severity, f"topic-{i // 100:05d}", i % 100, None,
                     cause, {}, now, now, None, "open") for i in range(n)]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--brokers", type=int, default=30)
    ap.add_argument("--renders", type=int, default=20)
    args = ap.parse_args()
    b = args.brokers
    per_broker = 200_000 * 3 // b
    scenarios = [
        ("healthy, 200k partitions RF3", []),
        ("1 broker dead: its RF-3 replicas under-replicated (200k/RF3)",
         incidents("UNDER_REPLICATED", per_broker, None, "warning")),
        ("1 broker dead: RF-1 topics offline (200k/RF1)", incidents("OFFLINE_PARTITION", 200_000 // b,
                                                                    "single_replica_on_dead_broker", "critical")),
        ("50k partitions unhealthy", incidents("UNDER_REPLICATED", 50_000, None, "warning")),
    ]
    print("| scenario | per-partition series | /metrics bytes | gzip bytes | render p50 |")
    print("|---|---|---|---|---|")
    for name, open_incidents in scenarios:
        state = PipelineState()
        brokers = tuple((i, True) for i in range(b))
        state.update(clusters={"prod-1": ClusterView(brokers, 0, None, int(time.time() * 1000), topic_count=2000)},
                     broker_load={"prod-1": {i: (200_000 // b, per_broker, 0, 0) for i in range(b)}},
                     open_incidents=tuple(open_incidents), batches=100)
        registry = CollectorRegistry(auto_describe=False)
        registry.register(KrmCollector(state))
        times = []
        for _ in range(args.renders):
            t0 = time.perf_counter()
            page = generate_latest(registry)
            times.append(time.perf_counter() - t0)
        print(f"| {name} | {len(open_incidents)} | {len(page):,} | {len(gzip.compress(page)):,} | "
              f"{statistics.median(times) * 1000:.1f} ms |")


if __name__ == "__main__":
    main()
