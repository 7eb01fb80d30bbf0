"""Compatibility run: krm against every Kafka line an operator runs, beside that line's own TopicCommand.

For each release of lab/local_cluster.py COMPAT_VERSIONS (plus the suite's own 3.9.1 and 4.4.0) and
each mode it has (ZooKeeper mode up to 3.9, KRaft from 3.3), a real 3-broker local cluster and one krm
(collector and pipeline in this process, one Spark session for the whole run), then:

1. `rf1_killed_broker`: a topic of 6 RF-1 partitions; broker 2 SIGKILLed. krm's
   `krm_partition_offline` (cause `single_replica_on_dead_broker`) must name exactly the partitions
   that the version's own `kafka-topics --describe --unavailable-partitions` names, and the incident
   must name broker 2 as the one that must return; after its restart both views are empty again.
2. `isr_shrink_and_return`: a topic of 3 RF-3 partitions (min.insync.replicas 2); broker 3
   SIGKILLed. krm's `krm_partition_under_replicated` must equal `kafka-topics
   --under-replicated-partitions`; after the restart both are empty.
3. `unclean_election`: a 1-partition RF-2 topic with unclean.leader.election.enable; the follower
   paused until it leaves the ISR, 100 messages only the leader has, the leader SIGKILLed, the
   follower resumed. Whatever this release's controller does is the oracle: if `kafka-topics`
   shows the stale follower elected, krm must have opened UNCLEAN_LEADER_ELECTION (critical, the new
   leader named); if the release did not elect it within the wait, krm must not have.
4. `follower_lag`: a 1-partition RF-2 topic; replication throttled to 100 kB/s (Kafka's own
   `kafka-configs`: leader/follower.replication.throttled.rate on each broker, both .replicas = * on
   the topic; a throttle holds back only a replica out of the ISR), its follower stopped, 6 MB
   written, the follower started: it catches up slowly. The oracle is the follower's own fetcher lag
   (`kafka.server:type=FetcherLagMetrics,name=ConsumerLag` on that broker, through its JMX exporter:
   the leader's HW minus its next fetch offset): krm's REPLICA_LAG (`krm_replica_lag_messages` for
   that broker) must be open while Kafka's lag is above `replica_lag_messages` (1000 here), and
   gone once the throttle is lifted and Kafka's lag is back under it.
5. `shutdown_check`: before broker 2 is killed in (1), `krm check shutdown --broker 2` must name as
   `becomes_leaderless` exactly the RF-1 partitions that the release's own tool then lists as
   unavailable.
6. `capabilities`: what krm could ask this version (`krm_collector_capability`: DescribeTopicPartitions
   for ELR from 3.8, DescribeQuorum from 3.3 in KRaft mode, ListPartitionReassignments), so a gap is
   said, never silent.

Each comparison waits for a settled state: the two views equal at two reads in a row. The results go
to benchmarks/data/compat.json (a run of some releases replaces only their rows) and the version table of
docs/kafka-versions.md (`--readme` rewrites it from that file).

Usage: make compat-jars && .venv/bin/python benchmarks/compat.py [--versions 2.8.2,3.3.2] [--modes zk,kraft] [--readme]
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any, Callable


from foundation.config import load_config
from foundation.paths import jars_dir
from krm.runner import Monitor
from krm.scrape import scrape, series
from lab.local_cluster import (
    COMPAT_VERSIONS,
    JVM_OPTS,
    KAFKA_RUNTIMES,
    KRAFT_KAFKA_VERSION,
    KRAFT_SINCE,
    ZK_KAFKA_VERSION,
    LocalCluster,
    release_tuple,
)
from lab.harness import create_topic, stored_incidents, write_config

ROOT = Path(__file__).resolve().parents[1]
RESULTS = ROOT / "benchmarks" / "data" / "compat.json"
README = ROOT / "docs" / "kafka-versions.md"  # holds the version table
TABLE_START, TABLE_END = "<!-- compat-table:start -->", "<!-- compat-table:end -->"
TOPIC_COMMANDS = ("org.apache.kafka.tools.TopicCommand", "kafka.admin.TopicCommand")  # 3.7+, before
# 4.4.0's runtime folder holds kafka-tools 4.3.1's jar alone (jvm/kafka4-pom.xml), which misses classes
# of its own release: the 4.3.1 release's complete tools speak the same Admin API to a 4.4.0 cluster.
TOOLS_FROM = {"4.4.0": "4.3.1"}
SCENARIOS = ("rf1_killed_broker", "isr_shrink_and_return", "unclean_election", "follower_lag", "shutdown_check")
CONFIG_COMMANDS = ("org.apache.kafka.tools.ConfigCommand", "kafka.admin.ConfigCommand")  # 4.0+, before
LAG_MESSAGES = 1000  # [pipeline] replica_lag_messages of the compat runs
THROTTLE_BYTES_S = 100_000


def combos(versions: list[str], modes: list[str]) -> list[tuple[str, str]]:
    out = []
    for v in versions:
        for m in modes:
            if m == "zk" and release_tuple(v) >= (4, 0):
                continue
            if m == "kraft" and release_tuple(v) < release_tuple(KRAFT_SINCE):
                continue
            out.append((m, v))
    return out


def topic_command(version: str, bootstrap: str, *args: str, mains: tuple[str, ...] = TOPIC_COMMANDS) -> str:
    """The version's own kafka-topics (TopicCommand moved to the tools module in 3.7), or with `mains`
    another of its tools."""
    cp = str(jars_dir() / KAFKA_RUNTIMES[TOOLS_FROM.get(version, version)][0] / "*")
    for main in mains:
        out = subprocess.run(["java", *JVM_OPTS, "-XX:TieredStopAtLevel=1", "-cp", cp, main,
                              "--bootstrap-server", bootstrap, *args], capture_output=True, text=True, timeout=120)
        if "Could not find or load main class" in out.stderr:
            continue
        if out.returncode != 0:
            raise RuntimeError(f"{main} {' '.join(args)}: {out.stderr.strip()[-500:]}")
        return out.stdout
    raise RuntimeError(f"none of {', '.join(mains)} in Kafka {version}'s jars")


def kafka_flags(version: str, bootstrap: str, topic: str, flag: str, tolerant: bool = False) -> set[int] | None:
    """The partitions the release's own tool lists with `flag`; None when it failed and `tolerant`."""
    try:
        out = topic_command(version, bootstrap, "--describe", "--topic", topic, flag)
    except (RuntimeError, subprocess.TimeoutExpired):
        if tolerant:
            return None
        raise
    parts = set()
    for line in out.splitlines():
        fields = dict(f.split(": ", 1) for f in line.strip().split("\t") if ": " in f)
        if "Partition" in fields:
            parts.add(int(fields["Partition"]))
    return parts


def krm_partitions(url: str, metric: str, cluster: str, topic: str) -> set[int]:
    return {int(s.labels["partition"]) for s in series(scrape(url), metric, cluster=cluster)
            if s.labels["topic"] == topic}


def producer(bootstrap: str, topic: str, acks: Any) -> Any:
    """Connected, with the topic's metadata, before any broker is paused (bootstrapping through a
    SIGSTOPped broker would block until the fault is over)."""
    from kafka import KafkaProducer

    p = KafkaProducer(bootstrap_servers=bootstrap, acks=acks, linger_ms=0, request_timeout_ms=60_000,
                      max_block_ms=10_000)
    p.send(topic, b"warm-up", partition=0).get(timeout=30)
    return p


def send(p: Any, topic: str, n: int) -> None:
    for f in [p.send(topic, b"m", partition=0) for _ in range(n)]:
        f.get(timeout=60)


def describe(version: str, bootstrap: str, topic: str) -> dict[int, dict[str, str]]:
    """Partition -> the release's own `kafka-topics --describe` fields (Leader, Replicas, Isr, ...);
    {} when the tool failed (an old release's client may time out on a SIGSTOPped broker): a
    settled() read then simply tries again."""
    out: dict[int, dict[str, str]] = {}
    try:
        text = topic_command(version, bootstrap, "--describe", "--topic", topic)
    except (RuntimeError, subprocess.TimeoutExpired):
        return out
    for line in text.splitlines():
        fields = dict(f.split(": ", 1) for f in line.strip().split("\t") if ": " in f)
        if "Partition" in fields:
            out[int(fields["Partition"])] = fields
    return out


def shutdown_check(config: Path, broker: int, topic: str) -> list[int]:
    """`krm check shutdown --broker N --json`: the topic's partitions it says would become leaderless."""
    out = subprocess.run([str(Path(sys.executable).parent / "krm"), "check", "shutdown", "--broker", str(broker),
                          "--config", str(config), "--json"], capture_output=True, text=True, timeout=120)
    if out.returncode not in (0, 1):
        raise RuntimeError(f"krm check shutdown: {out.stderr.strip()[-500:]}")
    return sorted(p["partition"] for p in json.loads(out.stdout)["partitions"]
                  if p["topic"] == topic and p["verdict"] == "becomes_leaderless")


def unclean_election(version: str, cluster: LocalCluster, url: str, config: Path) -> dict[str, Any]:
    topic = "compat-unclean"
    (replicas,) = create_topic(cluster, topic, partitions=1, rf=2,
                               configs={"unclean.leader.election.enable": "true"}).values()
    leader, follower = replicas
    bootstrap = cluster.bootstrap_servers
    p = producer(bootstrap, topic, acks="all")
    try:
        send(p, topic, 49)
        cluster.pause(follower)
        settled(lambda: describe(version, bootstrap, topic).get(0, {}).get("Isr"), lambda isr: isr == str(leader), 90)
        send(p, topic, 100)  # only the leader has these
        p.close(timeout=5)
        time.sleep(3)  # the collector sees the leader's HW
        cluster.kill(leader)
        settled(lambda: describe(version, bootstrap, topic).get(0, {}).get("Leader"), lambda v: v in ("none", "-1"), 60)
        cluster.resume(follower)
        elected = settled(lambda: describe(version, bootstrap, topic).get(0, {}).get("Leader"),
                          lambda v: v == str(follower), 120)
        kafka_elected = elected == str(follower)

        def pages() -> list[dict[str, Any]]:
            return [i for i in stored_incidents("--open", "--config", str(config), "--type", "UNCLEAN_LEADER_ELECTION")
                    if i["topic"] == topic]
        found = settled(pages, lambda v: bool(v) == kafka_elected, 60)
        named = sorted({i["details"].get("leader") for i in found})
        severities = sorted({i["severity"] for i in found})
        ok = (bool(found) == kafka_elected) and (not found or (named == [follower] and severities == ["critical"]))
        return {"kafka_elected": kafka_elected, "krm_incidents": len(found), "leader_named": named,
                "severity": severities, "ok": ok}
    finally:
        state = cluster.status()["brokers"]
        if state[str(follower)]["state"] == "paused":
            cluster.resume(follower)
        if state[str(leader)]["state"] != "running":
            cluster.start(leader, timeout_s=120)


def throttle(version: str, cluster: LocalCluster, topic: str, on: bool) -> None:
    """Replication throttled (or not) with the release's own kafka-configs: the rates on each broker by
    its id (a ZooKeeper-mode broker before 3.x applies throttle rates set on the default entity to
    nothing: its BrokerConfigHandler updates the quota managers for its own id only), every replica
    of the topic throttled."""
    rates = f"leader.replication.throttled.rate={THROTTLE_BYTES_S},follower.replication.throttled.rate={THROTTLE_BYTES_S}"
    replicas = "leader.replication.throttled.replicas=*,follower.replication.throttled.replicas=*"
    for entity, settings in ([(["--entity-type", "brokers", "--entity-name", str(b)], rates) for b in cluster.broker_ids]
                             + [(["--entity-type", "topics", "--entity-name", topic], replicas)]):
        change = ["--add-config", settings] if on else ["--delete-config", ",".join(s.split("=")[0]
                                                                                     for s in settings.split(","))]
        topic_command(version, cluster.bootstrap_servers, "--alter", *entity, *change, mains=CONFIG_COMMANDS)


def fetcher_lag(cluster: LocalCluster, broker: int, topic: str) -> float | None:
    """Kafka's own lag of `broker`'s replica of topic-0 (its replica fetcher's ConsumerLag gauge)."""
    url = dict(u.split("=", 1) for u in cluster.jmx_exporter_urls)[str(broker)]
    try:
        found = series(scrape(url), "kafka_server_fetcherlagmetrics_consumerlag", topic=topic, partition="0")
    except OSError:
        return None
    return max((s.value for s in found), default=None)


def follower_lag(version: str, cluster: LocalCluster, url: str) -> dict[str, Any]:
    from kafka import KafkaProducer

    topic = "compat-lag"
    (replicas,) = create_topic(cluster, topic, partitions=1, rf=2, configs={"min.insync.replicas": "1"}).values()
    leader, follower = replicas
    try:
        # throttled first: a broker's own config is set through that broker (it must be up), and the
        # throttle holds back only a replica out of the ISR, so nothing slows until the follower returns
        throttle(version, cluster, topic, on=True)
        cluster.stop(follower)
        p = KafkaProducer(bootstrap_servers=cluster.bootstrap_servers, acks=1, linger_ms=20)
        for _ in range(6000):
            p.send(topic, b"x" * 1000, partition=0)
        p.flush(timeout=120)
        p.close(timeout=10)
        cluster.start(follower, timeout_s=120)

        lags: list[float | None] = []

        def both() -> tuple[bool, bool]:
            lags.append(fetcher_lag(cluster, follower, topic))
            krm = any(s.labels["topic"] == topic and s.labels["broker"] == str(follower)
                      for s in series(scrape(url), "krm_replica_lag_messages", cluster=cluster.name))
            return krm, lags[-1] is not None and lags[-1] > LAG_MESSAGES
        lagging = settled(both, lambda v: v[0] and v[1], 90)
        lag_then = lags[-1]
        throttle(version, cluster, topic, on=False)
        caught_up = settled(both, lambda v: not v[0] and not v[1], 120)
        return {"follower": follower, "lagging": {"krm": lagging[0], "kafka_lag": lag_then},
                "caught_up": {"krm": caught_up[0], "kafka_lag": lags[-1]},
                "ok": lagging == (True, True) and caught_up == (False, False)}
    finally:
        if cluster.status()["brokers"][str(follower)]["state"] != "running":
            cluster.start(follower, timeout_s=120)


def settled(read: Callable[[], Any], want: Callable[[Any], bool], timeout_s: float) -> Any:
    """The value once `want` holds at two reads in a row (or the last value at the timeout)."""
    deadline, last, held = time.monotonic() + timeout_s, None, 0
    while time.monotonic() < deadline:
        value = read()
        held = held + 1 if want(value) and value == last else (1 if want(value) else 0)
        last = value
        if held >= 2:
            return value
        time.sleep(0.5)
    return last


def compare(version: str, cluster: LocalCluster, url: str, topic: str, metric: str, flag: str,
            want_empty: bool, timeout_s: float = 90) -> dict[str, Any]:
    def both() -> tuple[list[int], list[int]]:
        return (sorted(krm_partitions(url, metric, cluster.name, topic)),
                sorted(kafka_flags(version, cluster.bootstrap_servers, topic, flag) or ()))
    k, kafka = settled(both, lambda v: v[0] == v[1] and (not v[0]) == want_empty, timeout_s)
    return {"krm": k, "kafka": kafka, "agree": k == kafka and (not k) == want_empty}


def run_combo(mode: str, version: str, spark: Any, work: Path) -> dict[str, Any]:
    root = Path(tempfile.mkdtemp(prefix=f"{mode}{version}-", dir=work))
    cluster = LocalCluster(root=root / f"{mode}-{version.replace('.', '')}", mode=mode, kafka_version=version, brokers=3)
    out: dict[str, Any] = {"mode": mode, "version": version}
    t0 = time.monotonic()
    monitor = None
    try:
        cluster.up(timeout_s=180)
        rf1 = create_topic(cluster, "compat-rf1", partitions=6, rf=1)
        create_topic(cluster, "compat-rf3", partitions=3, rf=3, configs={"min.insync.replicas": "2"})
        config = load_config(write_config(cluster, work, poll_interval_s=1.0, history_trigger_s=10.0,
                                          pipeline_extra=f"replica_lag_messages = {LAG_MESSAGES}\n"))
        assert config.source is not None
        source = config.source
        monitor = Monitor(config, spark=spark).start()
        url = monitor.metrics_url
        settled(lambda: len([s for s in series(scrape(url), "krm_broker_up", cluster=cluster.name) if s.value == 1]),
                lambda n: n == 3, 120)

        on_victim = sorted(p for p, r in rf1.items() if r == [2])
        predicted = shutdown_check(source, 2, "compat-rf1")
        cluster.kill(2)
        down = compare(version, cluster, url, "compat-rf1", "krm_partition_offline", "--unavailable-partitions",
                       want_empty=False)
        incidents = [i for i in stored_incidents("--open", "--config", str(config.source), "--type", "OFFLINE_PARTITION")
                     if i["topic"] == "compat-rf1"]
        must_return = sorted({b for i in incidents for b in i["details"].get("must_return") or []})
        causes = sorted({i["cause"] for i in incidents})
        out["shutdown_check"] = {"predicted": predicted, "kafka_unavailable": down["kafka"],
                                 "ok": predicted == down["kafka"] == on_victim}
        cluster.start(2, timeout_s=120)
        back = compare(version, cluster, url, "compat-rf1", "krm_partition_offline", "--unavailable-partitions",
                       want_empty=True)
        out["rf1_killed_broker"] = {"expected": on_victim, "down": down, "back": back, "causes": causes,
                                    "must_return": must_return,
                                    "ok": down["agree"] and down["krm"] == on_victim and back["agree"]
                                    and causes == ["single_replica_on_dead_broker"] and must_return == [2]}

        cluster.kill(3)
        shrunk = compare(version, cluster, url, "compat-rf3", "krm_partition_under_replicated",
                         "--under-replicated-partitions", want_empty=False)
        cluster.start(3, timeout_s=120)
        whole = compare(version, cluster, url, "compat-rf3", "krm_partition_under_replicated",
                        "--under-replicated-partitions", want_empty=True)
        out["isr_shrink_and_return"] = {"shrunk": shrunk, "whole": whole,
                                        "ok": shrunk["agree"] and shrunk["krm"] == [0, 1, 2] and whole["agree"]}
        try:
            out["unclean_election"] = unclean_election(version, cluster, url, source)
        except Exception as e:  # noqa: BLE001 - the scenario fails, the others still run
            out["unclean_election"] = {"ok": False, "error": f"{type(e).__name__}: {str(e)[:300]}"}
        try:
            out["follower_lag"] = follower_lag(version, cluster, url)
        except Exception as e:  # noqa: BLE001 - the scenario fails, the others still run
            out["follower_lag"] = {"ok": False, "error": f"{type(e).__name__}: {str(e)[:300]}"}
        out["capabilities"] = {s.labels["capability"]: int(s.value)
                               for s in series(scrape(url), "krm_collector_capability", cluster=cluster.name)}
    except Exception as e:  # noqa: BLE001 - one line per failed combination, the run goes on
        out["error"] = f"{type(e).__name__}: {str(e)[:400]}"
    finally:
        if monitor is not None:
            monitor.stop()
        cluster.down()
    out["seconds"] = round(time.monotonic() - t0, 1)
    out["ok"] = "error" not in out and all(out.get(k, {}).get("ok") for k in SCENARIOS)
    return out


def merged(previous: list[dict[str, Any]], new: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The last result of each (mode, version): a run of a few releases updates only their rows."""
    by_key = {(r["mode"], r["version"]): r for r in [*previous, *new]}
    return sorted(by_key.values(), key=lambda r: (release_tuple(r["version"]), r["version"], r["mode"]))


def table(results: list[dict[str, Any]]) -> str:
    rows = ["`make compat` (benchmarks/compat.py): each row a real 3-broker cluster of that release, with the "
            "date of its last run; \"—\": that scenario was not part of the row's run (added since).", "",
            "| Kafka | mode | RF-1 partitions of a killed broker (= `kafka-topics --unavailable-partitions`) "
            "| ISR shrink and return (= `--under-replicated-partitions`) "
            "| unclean election (page iff the release elected) "
            "| a follower's lag (REPLICA_LAG iff its own fetcher lag is over the threshold) "
            "| shutdown check (= what went unavailable) | what krm cannot ask it | run |",
            "|---|---|---|---|---|---|---|---|---|"]

    def mark(r: dict[str, Any], key: str) -> str:
        if key not in r:
            return "error: " + r["error"][:80] if "error" in r else "—"
        ok = "yes" if r[key].get("ok") else "no"
        if key == "unclean_election" and r[key].get("ok"):
            ok += " (elected)" if r[key].get("kafka_elected") else " (not elected)"
        lagging = r[key].get("lagging") or {}
        if key == "follower_lag" and not r[key].get("ok") and lagging.get("kafka_lag") == 0 and not lagging.get("krm"):
            ok = "— (no lag made: the throttle did not hold)"  # krm agreed with Kafka; nothing was exercised
        return ok

    for r in results:
        missing = ", ".join(sorted(c for c, v in r.get("capabilities", {}).items() if not v)) or "—"
        marks = " | ".join(mark(r, k) for k in SCENARIOS)
        rows.append(f"| {r['version']} | {'ZooKeeper' if r['mode'] == 'zk' else 'KRaft'} | {marks} "
                    f"| {missing} | {r.get('date', '')} |")
    return "\n".join(rows) + "\n"


def write_readme(text: str) -> None:
    readme = README.read_text()
    start, end = readme.index(TABLE_START) + len(TABLE_START), readme.index(TABLE_END)
    README.write_text(readme[:start] + "\n" + text + readme[end:])


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    every = sorted({*COMPAT_VERSIONS, ZK_KAFKA_VERSION, KRAFT_KAFKA_VERSION}, key=release_tuple)
    ap.add_argument("--versions", default=",".join(every), help="comma-separated (default: every line)")
    ap.add_argument("--modes", default="zk,kraft")
    ap.add_argument("--readme", action="store_true", help="rewrite README's version table from this run")
    ap.add_argument("--table-only", action="store_true", help="run nothing: rewrite README's table from "
                    "benchmarks/data/compat.json")
    args = ap.parse_args()
    if args.table_only:
        write_readme(table(json.loads(RESULTS.read_text())["results"]))
        return 0
    os.environ.setdefault("KRM_JVM_OPTS", "-XX:TieredStopAtLevel=1")
    os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    from pipelines.session import build_session

    work = Path(tempfile.mkdtemp(prefix="krm-compat-"))
    spark = build_session(app_name="krm-compat", log_dir=work / "spark-logs")
    results = []
    try:
        for mode, version in combos(args.versions.split(","), args.modes.split(",")):
            r = run_combo(mode, version, spark, work)
            results.append(r)
            print(json.dumps(r), flush=True)
    finally:
        spark.stop()
    date = datetime.date.today().isoformat()
    previous = json.loads(RESULTS.read_text())["results"] if RESULTS.exists() else []
    every_result = merged(previous, [{**r, "date": date} for r in results])
    RESULTS.parent.mkdir(parents=True, exist_ok=True)
    RESULTS.write_text(json.dumps({"results": every_result}, indent=1) + "\n")
    text = table(every_result)
    print(text)
    if args.readme:
        write_readme(text)
    return 0 if all(r["ok"] for r in results) else 1


if __name__ == "__main__":
    raise SystemExit(main())
