"""/metrics rendered once over 20k UNDER_REPLICATED incidents that are new objects (as after a broker death):
the typed details are parsed on that first render, then carried by each incident.

Usage: .venv/bin/python benchmarks/metrics_first_render.py LABEL
"""

import sys
import time

from prometheus_client import CollectorRegistry, generate_latest

from pipelines.incidents import Incident
from pipelines.metrics import KrmCollector
from pipelines.state import ClusterView, PipelineState


def first_render_s(n: int = 20_000) -> float:
    now = int(time.time() * 1000)
    details = {"leader": 1, "replicas": [1, 2, 3], "isr": [1, 2], "out_of_sync": [3]}
    incs = tuple(Incident(f"u-{i}", "prod-1", "metadata", "UNDER_REPLICATED", "warning", f"topic-{i // 100:05d}",
                          i % 100, None, None, dict(details), now, now, None, "open") for i in range(n))
    state = PipelineState()
    state.update(clusters={"prod-1": ClusterView(tuple((b, True) for b in range(30)), 1, None, now)},
                 open_incidents=incs)
    reg = CollectorRegistry(auto_describe=False)
    reg.register(KrmCollector(state))
    t0 = time.perf_counter()
    generate_latest(reg)
    return time.perf_counter() - t0


if __name__ == "__main__":
    label = sys.argv[1] if len(sys.argv) > 1 else ""
    print(label, "first render of 20k fresh UNDER_REPLICATED incidents:",
          [f"{first_render_s() * 1000:.0f} ms" for _ in range(3)])
