"""/metrics rendered once over 20k UNDER_REPLICATED incidents that are new objects (as after a broker death):
the typed details are parsed on that first render, then carried by each incident.

Usage: .venv/bin/python benchmarks/metrics_first_render.py LABEL
"""
import time
import sys
from prometheus_client import CollectorRegistry, generate_latest
from pipelines.incidents import Incident
from pipelines.metrics import KrmCollector
from pipelines.state import ClusterView, PipelineState
now = int(time.time() * 1000)
out = []
for _ in range(3):
    incs = tuple(Incident(f"u-{i}", "prod-1", "metadata", "UNDER_REPLICATED", "warning", f"topic-{i // 100:05d}", i % 100, None,
                          None, {"leader": 1, "replicas": [1, 2, 3], "isr": [1, 2], "out_of_sync": [3]}, now, now, None, "open")
                 for i in range(20000))
    st = PipelineState()
    st.update(clusters={"prod-1": ClusterView(tuple((b, True) for b in range(30)), 1, None, now)}, open_incidents=incs)
    reg = CollectorRegistry(auto_describe=False); reg.register(KrmCollector(st))
    t0 = time.perf_counter(); generate_latest(reg); out.append(time.perf_counter() - t0)
print(sys.argv[1], "first render of 20k fresh UNDER_REPLICATED incidents:", [f"{x*1000:.0f} ms" for x in out])
