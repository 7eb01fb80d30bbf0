"""A fleet of clusters in one krm: does one cluster down, one hung and one slow delay the others' alerts?

Real local clusters, mixed: three in ZooKeeper mode (Kafka 3.9), two KRaft on 3.9, two KRaft on the
newest 4.x, each with 2 brokers and a topic of RF-1 partitions over both. Three broken ones beside them:
- down: a KRaft cluster whose every process was SIGKILLed (connections refused);
- hung: a KRaft cluster whose broker and controller are SIGSTOPped (connections accepted, nothing answered);
- slow: a ZooKeeper-mode cluster whose broker advertises a proxy adding `--delay-ms` each way
  (benchmarks/latency_proxy.py), so every request krm sends it waits twice that; configured with its
  own `request_timeout_ms` / `offsets_timeout_ms` (`--slow-timeout-ms`), as a far-away cluster is.
The observations topic lives on an eleventh cluster (1 broker), as in production.

Phases, alternated in blocks (A B A B ...) so drift of the machine falls on both: A = one krm (collector and
pipeline in this process, one Spark session) configured with the 7 healthy clusters; B = the same 7 plus
the 3 broken ones. Each round SIGKILLs broker 2 of every healthy cluster at once and reads /metrics every
0.1 s for each cluster's first sight of all of broker 2's partitions in
- `krm_partition_unavailable` (krm's own verdict: the leader refuses connections), and
- `krm_partition_offline` (Kafka's verdict, once the controller acted: the broker session, 6 s here);
then restarts the victims and waits until krm sees every cluster whole again. The first block starts
with one round that is not counted (the Spark session compiles its plans). At the end of each B block,
`krm_cluster_reachable` and the open CLUSTER_UNREACHABLE incidents per cluster are read.

Usage: .venv/bin/python benchmarks/fleet.py [--rounds 4] [--blocks 2] [--delay-ms 500] [--slow-timeout-ms 5000]
                                             [--poll 1.0] [--json F]
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
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any


from alert_latency import pct
from foundation.config import load_config
from krm.runner import Monitor
from krm.scrape import scrape, series
from lab.local_cluster import KRAFT_KAFKA_VERSION, ZK_KAFKA_VERSION, LocalCluster, free_port
from lab.harness import create_topic, stored_incidents, wait_for

TOPIC = "fleet-rf1"
VICTIM = 2
HEALTHY = [("zk", ZK_KAFKA_VERSION)] * 3 + [("kraft", ZK_KAFKA_VERSION)] * 2 + [("kraft", KRAFT_KAFKA_VERSION)] * 2


class Fleet:
    """Every cluster of the run, started in parallel (their JVMs compile with C1: they idle)."""

    def __init__(self, work: Path, delay_ms: float) -> None:
        self.work = work
        self.delay_ms = delay_ms
        self.healthy: list[LocalCluster] = []
        self.expected: dict[str, set[int]] = {}  # cluster -> partitions on the victim
        self.obs: LocalCluster | None = None
        self.down: LocalCluster | None = None
        self.hung: LocalCluster | None = None
        self.slow: LocalCluster | None = None
        self.proxy: subprocess.Popen | None = None
        self.proxy_port = 0

    def all(self) -> list[LocalCluster]:
        return [c for c in (*self.healthy, self.obs, self.down, self.hung, self.slow) if c is not None]

    def up(self) -> None:
        counts: dict[str, int] = {}

        def named(mode: str, version: str, brokers: int, tag: str = "") -> LocalCluster:
            label = f"{mode}{version.replace('.', '')[:2]}{tag}"
            counts[label] = counts.get(label, 0) + 1
            return LocalCluster(root=self.work / f"{label}-{counts[label]}", mode=mode, kafka_version=version,
                                brokers=brokers)

        self.healthy = [named(m, v, 2) for m, v in HEALTHY]
        self.obs = named("kraft", KRAFT_KAFKA_VERSION, 1, "obs")
        self.down = named("kraft", KRAFT_KAFKA_VERSION, 1, "down")
        self.hung = named("kraft", KRAFT_KAFKA_VERSION, 1, "hung")
        self.slow = named("zk", ZK_KAFKA_VERSION, 1, "slow")
        t0 = time.monotonic()
        with ThreadPoolExecutor(3) as pool:
            list(pool.map(lambda c: c.up(timeout_s=300), self.all()))
        print(f"{len(self.all())} clusters up in {time.monotonic() - t0:.0f}s", flush=True)
        for c in self.healthy:
            assignment = create_topic(c, TOPIC, partitions=6, rf=1)
            self.expected[c.name] = {p for p, r in assignment.items() if r == [VICTIM]}
            assert self.expected[c.name], f"{c.name}: nothing on broker {VICTIM}"
        self._make_slow()

    def _make_slow(self) -> None:
        """Restart the slow cluster's broker advertising the proxy's port, the proxy forwarding to it."""
        assert self.slow is not None
        node = self.slow.broker(1)
        self.slow.stop(1)
        props = self.slow.root / node.name / "server.properties"
        self.proxy_port = free_port()
        text = "".join(f"advertised.listeners=PLAINTEXT://127.0.0.1:{self.proxy_port}\n"
                       if line.startswith("advertised.listeners=") else line + "\n"
                       for line in props.read_text().splitlines())
        props.write_text(text)
        self.proxy = subprocess.Popen([sys.executable, str(Path(__file__).with_name("latency_proxy.py")),
                                       "--listen", str(self.proxy_port), "--to", f"127.0.0.1:{node.port}",
                                       "--delay-ms", str(self.delay_ms)])
        self.slow.start(1, timeout_s=120)

    def break_them(self) -> None:
        """down: every process SIGKILLed; hung: every process SIGSTOPped."""
        assert self.down is not None and self.hung is not None
        self.down.down()
        for node_id in [*self.hung.broker_ids, *self.hung.controller_ids]:
            self.hung.pause(node_id)

    def stop(self) -> None:
        if self.hung is not None:
            for node_id in [*self.hung.broker_ids, *self.hung.controller_ids]:
                try:
                    self.hung.resume(node_id)
                except Exception:  # noqa: BLE001 - tearing down
                    pass
        for c in self.all():
            c.down()
        if self.proxy is not None:
            self.proxy.kill()


def write_config(path: Path, clusters: list[LocalCluster], obs: LocalCluster, poll_s: float,
                 bootstrap: dict[str, str], own: dict[str, str]) -> Path:
    """One krm config over `clusters` (by name: `bootstrap` overrides, the slow cluster's proxy; `own`
    settings lines, its own timeouts)."""
    tag = os.urandom(4).hex()
    out = []
    for c in clusters:
        out.append(f'[[clusters]]\nname = "{c.name}"\nbootstrap_servers = "{bootstrap.get(c.name, c.bootstrap_servers)}"\n')
        if c.zookeeper:
            out.append(f'zookeeper = "{c.zookeeper}"\n')
        out.append(own.get(c.name, ""))
    out.append(f'\n[observations]\nbootstrap_servers = "{obs.bootstrap_servers}"\ntopic = "krm.fleet.{tag}"\n')
    out.append(f"\n[collector]\npoll_interval_s = {poll_s}\n")
    out.append(f'\n[pipeline]\ndata_dir = "{path.parent / ("data-" + tag)}"\nmetrics_port = {free_port()}\n'
               "history_trigger_s = 10.0\n")
    path.write_text("".join(out))
    return path


def _partitions(metrics: Any, name: str, cluster: str) -> set[int]:
    return {int(s.labels["partition"]) for s in series(metrics, name, cluster=cluster) if s.labels["topic"] == TOPIC}


def _whole(metrics: Any, c: LocalCluster) -> bool:
    up = series(metrics, "krm_broker_up", cluster=c.name)
    return (len([s for s in up if s.value == 1]) == 2 and not _partitions(metrics, "krm_partition_unavailable", c.name)
            and not _partitions(metrics, "krm_partition_offline", c.name))


def one_round(fleet: Fleet, url: str) -> dict[str, dict[str, float | None]]:
    """Kill broker 2 everywhere at once; per cluster, seconds to each signal (None: not within 90 s)."""
    seen: dict[str, dict[str, float | None]] = {c.name: {"unavailable": None, "offline": None} for c in fleet.healthy}
    killed: dict[str, float] = {}
    for c in fleet.healthy:
        c.kill(VICTIM)
        killed[c.name] = time.monotonic()
    deadline = time.monotonic() + 90
    while time.monotonic() < deadline and any(v is None for s in seen.values() for v in s.values()):
        m = scrape(url)
        now = time.monotonic()
        for c in fleet.healthy:
            for signal, metric in (("unavailable", "krm_partition_unavailable"), ("offline", "krm_partition_offline")):
                if seen[c.name][signal] is None and fleet.expected[c.name] <= _partitions(m, metric, c.name):
                    seen[c.name][signal] = now - killed[c.name]
        time.sleep(0.1)
    with ThreadPoolExecutor(len(fleet.healthy)) as pool:  # ZooKeeper mode waits out the killed one's session
        list(pool.map(lambda c: c.start(VICTIM, timeout_s=120), fleet.healthy))
    wait_for(lambda: all(_whole(scrape(url), c) for c in fleet.healthy), 180, "krm to see every cluster whole")
    return seen


def run_block(fleet: Fleet, spark: Any, phase: str, block: int, rounds: int, poll_s: float,
              slow_timeout_ms: int, warmup: int = 0) -> dict[str, Any]:
    """`warmup` rounds first, not counted (the first block compiles the session's plans)."""
    assert fleet.obs is not None and fleet.slow is not None
    broken = [fleet.down, fleet.hung, fleet.slow] if phase == "B" else []
    clusters = [*fleet.healthy, *[c for c in broken if c is not None]]
    path = write_config(fleet.work / f"krm-{phase}{block}.toml", clusters, fleet.obs, poll_s,
                        {fleet.slow.name: f"127.0.0.1:{fleet.proxy_port}"},
                        {fleet.slow.name: f"request_timeout_ms = {slow_timeout_ms}\noffsets_timeout_ms = {slow_timeout_ms}\n"
                                          f"poll_interval_s = {max(poll_s, 3 * slow_timeout_ms / 1000)}\n"}
                        if slow_timeout_ms else {})
    config = load_config(path)
    monitor = Monitor(config, spark=spark).start()
    out: dict[str, Any] = {"phase": phase, "block": block, "rounds": []}
    try:
        url = monitor.metrics_url
        wait_for(lambda: all(_whole(scrape(url), c) for c in fleet.healthy), 240, "a whole first view")
        time.sleep(5)  # a few polls of every cluster, broken ones included, before the first kill
        for r in range(-warmup, rounds):
            seen = one_round(fleet, url)
            if r >= 0:
                out["rounds"].append(seen)
            line = " ".join(f"{n}={s['unavailable'] or float('nan'):.2f}/{s['offline'] or float('nan'):.2f}"
                            for n, s in seen.items())
            print(f"[{phase}{block} {'warm-up' if r < 0 else f'round {r + 1}'}] unavailable/offline s: {line}",
                  flush=True)
        if broken:
            m = scrape(url)
            out["reachable"] = {s.labels["cluster"]: (s.value, s.labels.get("reason", ""))
                                for s in series(m, "krm_cluster_reachable")}
            out["last_poll_s"] = {s.labels["cluster"]: s.value for s in series(m, "krm_collector_last_poll_seconds")}

            def blind() -> dict[str, str] | None:
                found = {i["cluster"]: i["cause"] for i in stored_incidents("--open", "--config", str(path),
                                                                          "--type", "CLUSTER_UNREACHABLE")}
                return found if len(found) >= 2 else None
            try:
                out["cluster_unreachable_open"] = wait_for(blind, 60, "CLUSTER_UNREACHABLE stored")
            except AssertionError:
                out["cluster_unreachable_open"] = {i["cluster"]: i["cause"] for i in stored_incidents(
                    "--open", "--config", str(path), "--type", "CLUSTER_UNREACHABLE")}
            print(f"[{phase}{block}] krm_cluster_reachable: {out['reachable']}", flush=True)
            print(f"[{phase}{block}] last poll s: {out['last_poll_s']}", flush=True)
            print(f"[{phase}{block}] open CLUSTER_UNREACHABLE: {out['cluster_unreachable_open']}", flush=True)
    finally:
        monitor.stop()
    return out


def summary(blocks: list[dict[str, Any]]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for phase in ("A", "B"):
        for signal in ("unavailable", "offline"):
            xs = [s[signal] for b in blocks if b["phase"] == phase for r in b["rounds"] for s in r.values()]
            got = sorted(x for x in xs if x is not None)
            out[f"{phase}_{signal}"] = {"n": len(xs), "missed": len(xs) - len(got),
                                        "p50_s": round(statistics.median(got), 3) if got else None,
                                        "p95_s": round(pct(got, 0.95), 3) if got else None,
                                        "max_s": round(got[-1], 3) if got else None}
    for signal in ("unavailable", "offline"):
        a, b = out[f"A_{signal}"]["p50_s"], out[f"B_{signal}"]["p50_s"]
        out[f"{signal}_p50_ratio_B_over_A"] = round(b / a, 3) if a and b else None
    return out


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--rounds", type=int, default=4, help="kills per block (default 4)")
    ap.add_argument("--blocks", type=int, default=2, help="blocks per phase, alternated A B A B (default 2)")
    ap.add_argument("--delay-ms", type=float, default=500.0, help="the slow cluster's added latency each way "
                    "(default 500: each request waits 1 s, as long as a poll interval)")
    ap.add_argument("--slow-timeout-ms", type=int, default=5000,
                    help="the slow cluster's own request_timeout_ms and offsets_timeout_ms (its poll interval three "
                         "times that), as an operator sets them for a far-away cluster; 0: [collector]'s defaults")
    ap.add_argument("--poll", type=float, default=1.0, help="poll_interval_s of every cluster (default 1)")
    ap.add_argument("--json", type=Path, help="also write the results here")
    args = ap.parse_args()
    os.environ.setdefault("KRM_JVM_OPTS", "-XX:TieredStopAtLevel=1")  # idle brokers: C1 is enough
    os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    from pipelines.session import build_session

    work = Path(tempfile.mkdtemp(prefix="krm-fleet-"))
    fleet = Fleet(work, args.delay_ms)
    spark = None
    blocks: list[dict[str, Any]] = []
    try:
        fleet.up()
        fleet.break_them()
        spark = build_session(app_name="krm-fleet", log_dir=work / "spark-logs")
        for block in range(args.blocks):
            for phase in ("A", "B"):
                blocks.append(run_block(fleet, spark, phase, block + 1, args.rounds, args.poll, args.slow_timeout_ms,
                                        warmup=1 if not blocks else 0))
    finally:
        if spark is not None:
            spark.stop()
        fleet.stop()
    result = {"clusters_healthy": [c.name for c in fleet.healthy], "delay_ms": args.delay_ms, "poll_s": args.poll,
              "slow_timeout_ms": args.slow_timeout_ms,
              "rounds_per_block": args.rounds, "blocks_per_phase": args.blocks, **summary(blocks),
              "broken_view": [{k: b[k] for k in ("block", "reachable", "last_poll_s", "cluster_unreachable_open")}
                              for b in blocks if b["phase"] == "B"]}
    if args.json:
        args.json.write_text(json.dumps({"result": result, "blocks": blocks}, indent=1))
    print(json.dumps(result))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
