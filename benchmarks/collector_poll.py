"""Collector poll cost against partition count: on a real local cluster, and above what one holds
on this machine (`--cluster-max`, default 10,000 partitions) against the protocol-level stand-in
broker of benchmarks/standin_broker.py (one port per broker, real wire protocol, real decode work).

For each partition count: create topics (RF 3 or `--replication-factor`, 100 partitions each) until the cluster holds that
many partitions, write a few messages to every partition, then run the Admin API source's poll
(one Metadata request, two ListOffsets requests per broker, records built and schema-checked) N
times. Reports per count: poll duration p50/p95/max, requests per poll, records and JSON bytes
per poll. Then pauses one broker (SIGSTOP) and polls again: the poll must cost at most the offsets
deadline more, never a request timeout per partition.

Side by side, in the same run and on the same cluster, what the peers cost for the same view:
- the brokers' own JMX exporter (the javaagent the local cluster runs with conf/jmx-exporter.yaml:
  per-partition log end/start offsets, the ReplicaManager gauges), all brokers scraped in parallel;
- kafka_exporter (danielqsj/kafka_exporter, an optional benchmark dependency, never vendored):
  `--kafka-exporter PATH`, or found on PATH / in ~/go/bin, or with `--install-kafka-exporter`
  installed by `go install github.com/danielqsj/kafka_exporter@latest`; one /metrics scrape = its
  metadata and offsets for every partition (started with --refresh.metadata=0s, so every scrape
  refreshes metadata as every collector poll does). When it cannot be had the column says why.
  Each scraper's line counts the per-partition samples it returned (`series=`), so a scrape that
  is fast because it covered less shows it. With a broker SIGSTOPped, one kafka_exporter scrape too.

In KRaft mode a second collector line, "metadata only", polls without the KRaft requests
(DescribeTopicPartitions for ELR, DescribeQuorum): what they cost.

With `--json`, each count's result is also printed as one JSON line, and the last line is one JSON
object: the largest count's `partitions`, `brokers`, `p50_s`, `p95_s`, `max_s`, `cpu_s` (the
collector's CPU per poll), `max_rss_mb` (this process, which runs the collector; the stand-in runs
in a child process), `source` (`cluster` or `stand-in`), `bytes_per_partition` (JSON published per
partition per steady poll), and on the stand-in `decode_floor_cpu_s` (the CPU of merely decoding that
poll's Metadata and ListOffsets answers, each dropped before the next, measured in the same run) and
`cpu_over_floor` (cpu_s over it), with `decode_floor_kept_cpu_s` / `cpu_over_floor_kept` the floor as
measured before 2026-11-28 (every answer held until all are decoded: see decode_floor), `written` (the
share of the stand-in's topics written between polls: `--written`) and `polls_rss_mb` (this process's
peak RSS after the measured polls, before the floor's measurement); plus `results` (every count).

Usage: .venv/bin/python benchmarks/collector_poll.py [--counts 1000,5000] [--polls 20] [--json]
       [--source auto|cluster|stand-in] [--cluster-max 10000] [--brokers B (stand-in)] [--written F (stand-in)]
       [--mode zk|kraft] [--kafka-version V] [--broker-heap-mb 1024]
       [--kafka-exporter PATH | --install-kafka-exporter]
"""

from __future__ import annotations

import argparse
import gc
import json
import logging
import os
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.request
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path


from collectors import gc_pause, wire
from collectors.admin import AdminSource
from collectors.publisher import Publisher
from foundation.config import ClusterConfig, CollectorConfig, ObservationsConfig
from lab.local_cluster import LocalCluster, free_port
from schemas.observation import check

from standin_broker import StandIn

TOPIC_PARTITIONS = 100
JMX_LEO = "kafka_log_log_logendoffset"  # one sample per replica (every broker reports its own logs)
EXPORTER_OFFSET = "kafka_topic_partition_current_offset"  # one sample per partition


def pct(values: list[float], q: float) -> float:
    s = sorted(values)
    return s[min(len(s) - 1, int(round(q * (len(s) - 1))))]


def grow(cluster: LocalCluster, target: int, have: int, replication_factor: int = 3) -> int:
    from kafka import KafkaProducer
    from kafka.admin import KafkaAdminClient, NewTopic

    admin = KafkaAdminClient(bootstrap_servers=cluster.bootstrap_servers, request_timeout_ms=120_000)
    new = [f"bench-{i:04d}" for i in range(have // TOPIC_PARTITIONS, target // TOPIC_PARTITIONS)]
    for i in range(0, len(new), 10):
        admin.create_topics([NewTopic(t, TOPIC_PARTITIONS, replication_factor) for t in new[i:i + 10]], timeout_ms=120_000)
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
    return measure_alternately([source], polls)[0]


def measure_alternately(sources: list[AdminSource], polls: int) -> list[dict[str, float]]:
    """Poll the sources in turn, `polls` times each: what the cluster does meanwhile (a topic still
    settling, a log roll) falls on all of them alike.

    Each poll as the collector daemon runs it: with the cyclic GC paused, the poll, then the
    publisher's schema check and JSON encoding. `p50_s`/`p95_s`: the poll and the check (the figure
    this file always reported); `encode_s`: the JSON encoding after it; `cpu_s`: the process's CPU
    for the whole cycle, including the garbage collection the pause deferred."""
    publisher = Publisher(ObservationsConfig(bootstrap_servers="unused:9092"), validate=False)  # encode() only (opens nothing)
    runs: list[dict[str, list[float]]] = [{"d": [], "e": [], "c": [], "q": [], "b": [], "r": []} for _ in sources]
    for _ in range(polls):
        for source, run in zip(sources, runs):
            c0 = time.process_time()
            with gc_pause.paused():
                t0 = time.perf_counter()
                recs = source.poll()
                for r in recs:
                    check(r)
                t1 = time.perf_counter()
                items = publisher.encode(recs)  # (checked above, inside the timed poll)
                t2 = time.perf_counter()
            n_recs, n_bytes = len(recs), sum(len(v) for _, v in items)
            del recs, items
            gc.collect(0)  # what the pause deferred, counted here rather than in the next poll
            run["c"].append(time.process_time() - c0)
            run["d"].append(t1 - t0)
            run["e"].append(t2 - t1)
            run["q"].append(1 + (source.last_offsets.requests if source.last_offsets else 0))
            run["b"].append(n_bytes)
            run["r"].append(n_recs)
            time.sleep(0.2)
    return [{"p50_s": statistics.median(run["d"]), "p95_s": pct(run["d"], 0.95), "max_s": max(run["d"]),
             "encode_s": statistics.median(run["e"]), "cpu_s": statistics.median(run["c"]),
             "requests": statistics.median(run["q"]), "records": statistics.median(run["r"]),
             "bytes": statistics.median(run["b"])} for run in runs]


def fetch(url: str, timeout_s: float = 600.0) -> bytes:
    with urllib.request.urlopen(url, timeout=timeout_s) as r:
        return r.read()


def measure_scrapes(urls: list[str], polls: int, series: str) -> dict[str, float]:
    """One "poll" = every URL fetched in parallel (as Prometheus scrapes its targets).

    `series` names the per-partition metric whose samples are counted, so a scrape that answered
    quickly because it covered fewer partitions shows as such."""
    durations, sizes, covered = [], [], []
    prefix = series.encode() + b"{"
    with ThreadPoolExecutor(max_workers=len(urls)) as pool:
        for _ in range(polls):
            t0 = time.perf_counter()
            bodies = list(pool.map(fetch, urls))
            durations.append(time.perf_counter() - t0)
            sizes.append(sum(len(b) for b in bodies))
            covered.append(sum(b.count(b"\n" + prefix) for b in bodies))
            time.sleep(0.2)
    return {"p50_s": statistics.median(durations), "p95_s": pct(durations, 0.95), "max_s": max(durations),
            "bytes": statistics.median(sizes), "series": statistics.median(covered)}


def find_kafka_exporter(path: str | None, install: bool) -> tuple[str | None, str]:
    """(binary, why not) — the binary to run, or the reason there is none."""
    if path:
        return (path, "") if os.access(path, os.X_OK) else (None, f"{path} is not executable")
    gopath = Path(os.environ.get("GOPATH", Path.home() / "go"))
    found = shutil.which("kafka_exporter") or next(
        (str(p) for p in [gopath / "bin" / "kafka_exporter"] if p.exists()), None)
    if found or not install:
        return found, "" if found else "not installed (pass --install-kafka-exporter or --kafka-exporter PATH)"
    if not shutil.which("go"):
        return None, "go is not installed"
    out = subprocess.run(["go", "install", "github.com/danielqsj/kafka_exporter@latest"], capture_output=True,
                         text=True, env={**os.environ, "GOPATH": str(gopath)}, timeout=900)
    if out.returncode != 0:
        return None, "go install failed: " + " ".join(out.stderr.split())[:300]
    return str(gopath / "bin" / "kafka_exporter"), ""


def start_kafka_exporter(binary: str, cluster: LocalCluster, log: Path) -> tuple[subprocess.Popen, str]:
    port = free_port()
    servers = [f"--kafka.server={s}" for s in cluster.bootstrap_servers.split(",")]
    # refresh.metadata=0s: every scrape refreshes metadata first, as every collector poll does.
    proc = subprocess.Popen([binary, *servers, f"--web.listen-address=127.0.0.1:{port}", "--refresh.metadata=0s"],
                            stdout=log.open("w"), stderr=subprocess.STDOUT)
    url = f"http://127.0.0.1:{port}/metrics"
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        try:
            fetch(url, 5)
            return proc, url
        except OSError:
            if proc.poll() is not None:
                raise RuntimeError(f"kafka_exporter exited with {proc.returncode}; see {log}") from None
            time.sleep(0.5)
    proc.kill()
    raise RuntimeError(f"kafka_exporter did not serve {url} within 60 s; see {log}")


def line(name: str, target: int, m: dict[str, float]) -> str:
    return (f"{name:<15} partitions={target:>6} p50={m['p50_s']:.3f}s p95={m['p95_s']:.3f}s max={m['max_s']:.3f}s "
            f"bytes={m['bytes'] / 1e6:.2f}MB series={m['series']:.0f}")


def rss_mb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024  # kB on Linux


def result(source: str, partitions: int, brokers: int, m: dict[str, float]) -> dict[str, object]:
    out = {"partitions": partitions, "brokers": brokers, "source": source,
           **{k: round(float(m[k]), 4) for k in ("p50_s", "p95_s", "max_s", "encode_s", "cpu_s")},
           "requests": m["requests"], "records": m["records"], "json_mb": round(m["bytes"] / 1e6, 2),
           "bytes_per_partition": round(m["bytes"] / partitions, 1), "max_rss_mb": round(rss_mb(), 1)}
    if "decode_floor_cpu_s" in m:
        out["decode_floor_cpu_s"] = round(m["decode_floor_cpu_s"], 4)
        out["cpu_over_floor"] = round(m["cpu_s"] / m["decode_floor_cpu_s"], 2)
        out["decode_floor_kept_cpu_s"] = round(m["decode_floor_kept_cpu_s"], 4)  # the earlier method (decode_floor)
        out["cpu_over_floor_kept"] = round(m["cpu_s"] / m["decode_floor_kept_cpu_s"], 2)
    return out


def decode_floor(source: AdminSource, repeats: int = 5) -> tuple[float, float]:
    """The CPU of merely decoding one poll's Metadata and ListOffsets answers (the median of `repeats`),
    the least any collector reading the same answers pays: the answers are captured at the decoders
    during one poll, then decoded again, and nothing else, with the cyclic GC paused as in a poll.
    Returns (each answer decoded and dropped before the next: the floor, as a steady decoder pays it;
    every answer kept until all are decoded: what this benchmark reported as the floor until
    2026-11-28). Holding them all makes the allocator take fresh memory each round and release it
    after, which the collector's own polls, reusing the memory the last poll freed, do not pay: their
    decoders cost about the first figure inside a poll (BENCHMARKS.md, "the decode floor, measured right")."""
    captured: list[tuple[object, bytes]] = []
    originals = wire.decode_metadata_v8, wire.decode_list_offsets_v4

    def capturing(decode):  # type: ignore[no-untyped-def]
        def run(data: bytes, *rest):  # type: ignore[no-untyped-def]
            captured.append((decode, bytes(data)))
            return decode(data, *rest)
        return run

    # every answer decoded in full for this poll, the unchanged ones too (the collector's own polls
    # hand those back undecoded: collectors/wire.py), so each is captured
    wire.decode_metadata_v8, wire.decode_list_offsets_v4 = (capturing(f) for f in originals)
    wire.reuse_unchanged = False
    try:
        source.poll()
    finally:
        wire.decode_metadata_v8, wire.decode_list_offsets_v4 = originals
        wire.reuse_unchanged = True
    dropped, kept = [], []
    for _ in range(repeats):
        c0 = time.process_time()
        with gc_pause.paused():
            for decode, data in captured:
                answer = decode(data)  # type: ignore[operator]
                del answer
        dropped.append(time.process_time() - c0)
        c0 = time.process_time()
        with gc_pause.paused():
            answers = [decode(data) for decode, data in captured]  # type: ignore[operator]
        del answers
        gc.collect(0)
        kept.append(time.process_time() - c0)
    return statistics.median(dropped), statistics.median(kept)


def run_standin(args: argparse.Namespace, counts: list[int], results: list[dict[str, object]]) -> None:
    """Each count against its own stand-in cluster (benchmarks/standin_broker.py). The first polls
    fill the stand-in's answer cache (it encodes each answer once), so they are not measured."""
    for target in counts:
        t0 = time.perf_counter()
        with StandIn(target, args.brokers or None, args.written) as standin:
            source = AdminSource(ClusterConfig(name="bench", bootstrap_servers=standin.bootstrap_servers), CollectorConfig())
            try:
                for _ in range(args.warmup):
                    source.poll()
                ready = time.perf_counter() - t0
                m = measure(source, args.polls)
                m["polls_rss_mb"] = rss_mb()  # the peak so far: the collector's polls (the floor below holds more)
                m["decode_floor_cpu_s"], m["decode_floor_kept_cpu_s"] = decode_floor(source)
            finally:
                source.close()
        r = result("stand-in", target, standin.brokers, m)
        r["written"] = args.written
        r["polls_rss_mb"] = round(m["polls_rss_mb"], 1)
        results.append(r)
        print(f"{'krm collector':<15} partitions={target:>6} brokers={standin.brokers} (stand-in, ready in {ready:.0f}s) "
              f"p50={m['p50_s']:.3f}s p95={m['p95_s']:.3f}s max={m['max_s']:.3f}s encode={m['encode_s']:.3f}s "
              f"cpu/poll={m['cpu_s']:.3f}s decode floor={m['decode_floor_cpu_s']:.3f}s ({r['cpu_over_floor']}x; "
              f"answers all kept {m['decode_floor_kept_cpu_s']:.3f}s, {r['cpu_over_floor_kept']}x) "
              f"requests/poll={m['requests']:.0f} json={m['bytes'] / 1e6:.2f}MB ({r['bytes_per_partition']} B/partition) "
              f"rss={r['max_rss_mb']}MB", flush=True)
        if args.json:
            print(json.dumps(r), flush=True)


def run_cluster(args: argparse.Namespace, counts: list[int], results: list[dict[str, object]]) -> None:
    exporter, why_not = find_kafka_exporter(args.kafka_exporter, args.install_kafka_exporter)
    if exporter is None:
        print(f"kafka_exporter: not measured: {why_not}", flush=True)
    work = Path(tempfile.mkdtemp(prefix="krm-bench-"))
    # 5k partitions are 5k replicas per broker, each with its JMX MBeans: the tests' 384 MB heap runs
    # out when the JMX exporter and kafka_exporter scrape them all.
    cluster = LocalCluster(root=work / "poll", mode=args.mode, brokers=3, heap_mb=args.broker_heap_mb,
                           kafka_version=args.kafka_version).up()
    print(f"Kafka {cluster.kafka_version}, {args.mode} mode", flush=True)
    source = AdminSource(ClusterConfig(name="bench", bootstrap_servers=cluster.bootstrap_servers), CollectorConfig())
    metadata_only = None
    if args.mode == "kraft":
        metadata_only = AdminSource(ClusterConfig(name="bench", bootstrap_servers=cluster.bootstrap_servers), CollectorConfig())
        metadata_only._kraft_view = lambda admin, topics: None  # type: ignore[method-assign]
    jmx_urls = [u.split("=", 1)[1] for u in cluster.jmx_exporter_urls]
    exporter_proc = exporter_url = None
    have = 0
    try:
        if exporter:
            exporter_proc, exporter_url = start_kafka_exporter(exporter, cluster, work / "kafka_exporter.log")
        for target in counts:
            t0 = time.perf_counter()
            try:
                have = grow(cluster, target, have, args.replication_factor)
            except Exception as e:  # noqa: BLE001 - e.g. the local controller too slow to create more
                print(f"could not grow the local cluster to {target} partitions ({type(e).__name__}: {e}); "
                      f"measured up to {have}", flush=True)
                break
            print(f"{target} partitions ready in {time.perf_counter() - t0:.0f}s", flush=True)
            sources = [source] + ([metadata_only] if metadata_only is not None else [])
            for src in sources:
                src.poll()  # connections and configs
            m, *rest = measure_alternately(sources, args.polls)
            results.append(result("cluster", target, len(cluster.status()["brokers"]), m))
            print(f"{'krm collector':<15} partitions={target:>6} p50={m['p50_s']:.3f}s p95={m['p95_s']:.3f}s "
                  f"max={m['max_s']:.3f}s requests/poll={m['requests']:.0f} records/poll={m['records']:.0f} "
                  f"json={m['bytes'] / 1e6:.2f}MB", flush=True)
            if args.json:
                print(json.dumps(results[-1]), flush=True)
            for m in rest:
                print(f"{'metadata only':<15} partitions={target:>6} p50={m['p50_s']:.3f}s p95={m['p95_s']:.3f}s "
                      f"max={m['max_s']:.3f}s", flush=True)
            print(line("jmx exporter", target, measure_scrapes(jmx_urls, args.polls, JMX_LEO)), flush=True)
            if exporter_url:
                print(line("kafka_exporter", target, measure_scrapes([exporter_url], args.polls, EXPORTER_OFFSET)),
                      flush=True)
        paused = max(int(b) for b in cluster.status()["brokers"])
        cluster.pause(paused)
        try:
            m = measure(source, 5)
            print(f"partitions={have:>6} broker {paused} SIGSTOPped: poll p50={m['p50_s']:.3f}s "
                  f"max={m['max_s']:.3f}s (offsets deadline {CollectorConfig().offsets_timeout_ms} ms)", flush=True)
            if exporter_url:  # one scrape: what Prometheus would wait for (its own scrape timeout aside)
                e = measure_scrapes([exporter_url], 1, EXPORTER_OFFSET)
                print(f"partitions={have:>6} broker {paused} SIGSTOPped: kafka_exporter scrape {e['p50_s']:.3f}s, "
                      f"series={e['series']:.0f}", flush=True)
        finally:
            cluster.resume(paused)
    finally:
        if exporter_proc is not None:
            exporter_proc.kill()
        source.close()
        if metadata_only is not None:
            metadata_only.close()
        cluster.down()


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--counts", default="1000,5000")
    ap.add_argument("--polls", type=int, default=20)
    ap.add_argument("--json", action="store_true", help="each count as a JSON line; the last line sums up the run")
    ap.add_argument("--source", choices=["auto", "cluster", "stand-in"], default="auto",
                    help="auto (default): a local cluster up to --cluster-max partitions, the stand-in above")
    ap.add_argument("--cluster-max", type=int, default=10_000, help="the most partitions asked of a local cluster")
    ap.add_argument("--brokers", type=int, default=0, help="stand-in brokers (default: ~10,000 replicas each, 3-60)")
    ap.add_argument("--written", type=float, default=0.0,
                    help="stand-in: the share of topics written between any two polls (default 0: an idle cluster)")
    ap.add_argument("--warmup", type=int, default=3, help="unmeasured stand-in polls (its answers get cached)")
    ap.add_argument("--mode", choices=["zk", "kraft"], default="zk")
    ap.add_argument("--kafka-version", default="", help="default: 3.9.1 in zk mode, the newest 4.x in KRaft mode")
    ap.add_argument("--broker-heap-mb", type=int, default=1024, help="each broker's -Xmx (default 1024)")
    ap.add_argument("--replication-factor", type=int, default=3,
                    help="local cluster topics' (default 3); 1 holds 3x the partitions in the same replicas per broker")
    ap.add_argument("--kafka-exporter", metavar="PATH", help="kafka_exporter binary to run beside the collector")
    ap.add_argument("--install-kafka-exporter", action="store_true", help="go install it when it is not found")
    args = ap.parse_args()
    logging.basicConfig(level=logging.ERROR)  # the stand-in's warm-up polls time out by design
    counts = sorted(int(c) for c in args.counts.split(","))
    on_cluster = [c for c in counts if args.source == "cluster" or (args.source == "auto" and c <= args.cluster_max)]
    on_standin = [c for c in counts if c not in on_cluster]
    results: list[dict[str, object]] = []
    if on_cluster:
        run_cluster(args, on_cluster, results)
    if on_standin:
        run_standin(args, on_standin, results)
    if args.json and results:
        largest = max(results, key=lambda r: int(r["partitions"]))  # type: ignore[call-overload]
        print(json.dumps({**largest, "results": results}), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
