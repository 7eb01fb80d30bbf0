"""The slow-broker round's cost on the alert path: SlowView.judge for a healthy 4-broker cluster, per round, with
each broker's JMX scrape, its answers to krm and a canary write to the partition it leads.

Usage: .venv/bin/python benchmarks/slow_view_round.py (before/after: PYTHONPATH=<worktree> for the before)
"""

import time
from pipelines.slow_view import SlowView
from pipelines.jmx_view import JmxSample
from pipelines.detectors.canary import CanarySample
v = SlowView({"c": 2.0})
g = {"produce_queue_p50_ms": 0.0, "produce_local_p50_ms": 2.0, "produce_local_p99_ms": 8.0, "produce_remote_p50_ms": 4.0}
n, t0 = 20000, time.perf_counter()
for i in range(n):
    at = 1000 + i * 250
    jmx = {("c", b): JmxSample("c", b, 1, at, None, g, 30.0) for b in (1, 2, 3, 4)}
    canary = {("c", b - 1): CanarySample("c", b, b - 1, True, 20.0, 25.0, at, b, (1, 2, 3, 4)) for b in (1, 2, 3, 4)}
    v.judge(["c"], {"c": [1, 2, 3, 4]}, jmx, canary, answers={"c": (at, {1: 1.2, 2: 1.4, 3: 1.1, 4: 1.3})})
print(f"{(time.perf_counter() - t0) / n * 1e6:.1f} us per round (4 brokers, healthy)")
