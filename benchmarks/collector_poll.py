"""Collector poll cost against partition count, on a real local cluster.

For each partition count: create topics (RF 3, 100 partitions each) until the cluster holds that
many partitions, write a few messages to every partition, then run the Admin API source's poll
(one Metadata request, two ListOffsets requests per broker, records built and schema-checked) N
times. Reports per count: poll duration p50/p95/max, requests per poll, records and JSON bytes
per poll. Then pauses one broker (SIGSTOP) and polls again: the poll must cost at most the offsets
deadline more, never a request timeout per partition.

Usage: .venv/bin/python benchmarks/collector_poll.py [--counts 1000,5000] [--polls 20] [--mode zk|kraft]
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from collectors.admin import AdminSource  # noqa: E402
from krm.config import ClusterConfig, CollectorConfig  # noqa: E402
from krm.local_cluster import LocalCluster  # noqa: E402
from schemas.observation import check  # noqa: E402

TOPIC_PARTITIONS = 100


def pct(values: list[float], q: float) -> float:
    s = sorted(values)
    return s[min(len(s) - 1, int(round(q * (len(s) - 1))))]


def grow(cluster: LocalCluster, target: int, have: int) -> int:
    from kafka import KafkaProducer
    from kafka.admin import KafkaAdminClient, NewTopic

    admin = KafkaAdminClient(bootstrap_servers=cluster.bootstrap_servers, request_timeout_ms=120_000)
    new = [f"bench-{i:04d}" for i in range(have // TOPIC_PARTITIONS, target // TOPIC_PARTITIONS)]
    for i in range(0, len(new), 10):
        admin.create_topics([NewTopic(t, TOPIC_PARTITIONS, 3) for t in new[i:i + 10]], timeout_ms=120_000)
    admin.close()
    time.sleep(5)
    producer = KafkaProducer(bootstrap_servers=cluster.bootstrap_servers, acks=1, linger_ms=20)
    for t in new:
        for p in range(TOPIC_PARTITIONS):
            producer.send(t, b"m", partition=p)
    producer.flush(timeout=300)
    producer.close()
    return target


def measure(source: AdminSource, polls: int) -> dict[str, float]:
    durations, requests, sizes, records = [], [], [], []
    for _ in range(polls):
        t0 = time.perf_counter()
        recs = source.poll()
        for r in recs:
            check(r)
        durations.append(time.perf_counter() - t0)
        requests.append(1 + (source.last_offsets.requests if source.last_offsets else 0))
        sizes.append(sum(len(json.dumps(r)) for r in recs))
        records.append(len(recs))
        time.sleep(0.2)
    return {"p50_s": statistics.median(durations), "p95_s": pct(durations, 0.95), "max_s": max(durations),
            "requests": statistics.median(requests), "records": statistics.median(records),
            "bytes": statistics.median(sizes)}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--counts", default="1000,5000")
    ap.add_argument("--polls", type=int, default=20)
    ap.add_argument("--mode", choices=["zk", "kraft"], default="zk")
    args = ap.parse_args()
    counts = sorted(int(c) for c in args.counts.split(","))

    cluster = LocalCluster(root=Path(tempfile.mkdtemp(prefix="krm-bench-")) / "poll", mode=args.mode, brokers=3).up()
    source = AdminSource(ClusterConfig("bench", cluster.bootstrap_servers), CollectorConfig())
    have = 0
    try:
        for target in counts:
            t0 = time.perf_counter()
            have = grow(cluster, target, have)
            print(f"{target} partitions ready in {time.perf_counter() - t0:.0f}s", flush=True)
            source.poll()  # connections and configs
            m = measure(source, args.polls)
            print(f"partitions={target:>6} poll p50={m['p50_s']:.3f}s p95={m['p95_s']:.3f}s max={m['max_s']:.3f}s "
                  f"requests/poll={m['requests']:.0f} records/poll={m['records']:.0f} "
                  f"json={m['bytes'] / 1e6:.2f}MB", flush=True)
        paused = max(int(b) for b in cluster.status()["brokers"])
        cluster.pause(paused)
        try:
            m = measure(source, 5)
            print(f"partitions={have:>6} broker {paused} SIGSTOPped: poll p50={m['p50_s']:.3f}s "
                  f"max={m['max_s']:.3f}s (offsets deadline {CollectorConfig().offsets_timeout_ms} ms)", flush=True)
        finally:
            cluster.resume(paused)
    finally:
        source.close()
        cluster.down()
    return 0


if __name__ == "__main__":
    sys.exit(main())
