"""A dead broker against a slow one: which pauses make the collector call a leader unreachable.

The collector calls a registered broker unreachable (and the partitions it leads PARTITION_UNAVAILABLE)
when its port refuses connections (the process is gone: at once) or when it has been silent for
`[collector] unreachable_after_s` (default 4 s; a GC pause or SIGSTOP still accepts connections).
This runs the collector's own poll (collectors/admin.py, one poll a second, as the local config)
against a real cluster while one broker is SIGSTOPped for 1, 3 and 5 s, and SIGKILLed for
reference, and counts the rounds in which any poll named the broker in `unreachable_brokers`.

Usage: .venv/bin/python benchmarks/availability_pauses.py [--mode zk|kraft] [--rounds 10] [--pauses 1,3,5]
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from pathlib import Path


from collectors.admin import AdminSource
from foundation.config import ClusterConfig, CollectorConfig
from lab.local_cluster import LocalCluster
from lab.harness import create_topic


def flagged(records: list[dict], broker: int) -> bool:
    return any(broker in (r["topic_state"].get("unreachable_brokers") or ())
               for r in records if r["kind"] == "topic")


def watch(source: AdminSource, broker: int, seconds: float, t0: float) -> float | None:
    """Poll once a second for `seconds`; when the broker was first named unreachable (since t0)."""
    first = None
    end = time.monotonic() + seconds
    while time.monotonic() < end:
        started = time.monotonic()
        if flagged(source.poll(), broker) and first is None:
            first = time.monotonic() - t0
        time.sleep(max(0.0, 1.0 - (time.monotonic() - started)))
    return first


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--mode", choices=["zk", "kraft"], default="zk")
    ap.add_argument("--rounds", type=int, default=10)
    ap.add_argument("--pauses", default="1,3,5", help="SIGSTOP lengths in seconds")
    args = ap.parse_args()
    pauses = [float(p) for p in args.pauses.split(",")]
    settings = CollectorConfig(poll_interval_s=1.0)
    cluster = LocalCluster(root=Path(tempfile.mkdtemp(prefix="krm-bench-")) / "pauses", mode=args.mode, brokers=3).up()
    try:
        create_topic(cluster, "pauses-rf3", partitions=6, rf=3)
        source = AdminSource(ClusterConfig(name="bench", bootstrap_servers=cluster.bootstrap_servers), settings)
        source.poll()
        print(f"Kafka {cluster.kafka_version} {args.mode}, unreachable_after_s={settings.unreachable_after_s}, "
              f"poll 1 s, offsets deadline {settings.offsets_timeout_ms} ms", flush=True)
        results: dict[str, list[float | None]] = {}
        for pause in pauses:
            results[f"SIGSTOP {pause:g} s"] = got = []
            for rnd in range(args.rounds):
                victim = 1 + rnd % 3
                watch(source, victim, 2.0, time.monotonic())  # settle: everyone answering
                t0 = time.monotonic()
                cluster.pause(victim)
                first = watch(source, victim, pause, t0)
                cluster.resume(victim)
                after = watch(source, victim, 3.0, t0)
                got.append(first if first is not None else after)
            print(f"SIGSTOP {pause:g} s: flagged in {sum(g is not None for g in got)} of {len(got)} rounds"
                  + (f", first at {statistics.median([g for g in got if g is not None]):.1f} s (median)"
                     if any(g is not None for g in got) else ""), flush=True)
        results["SIGKILL"] = got = []
        for rnd in range(min(args.rounds, 3)):
            victim = 1 + rnd % 3
            watch(source, victim, 2.0, time.monotonic())
            t0 = time.monotonic()
            cluster.kill(victim)
            got.append(watch(source, victim, 3.0, t0))
            cluster.start(victim)
        print(f"SIGKILL: flagged in {sum(g is not None for g in got)} of {len(got)} rounds, first at "
              f"{', '.join(f'{g:.1f}' for g in got if g is not None)} s", flush=True)
        source.close()
    finally:
        cluster.down()
    return 0


if __name__ == "__main__":
    sys.exit(main())
