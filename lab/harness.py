"""Driving a local cluster and krm, shared by the tests and the benchmarks: configs for a local cluster,
topics, waits for a settled state, Kafka's own tools, the stored incidents."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path
from typing import Any, Callable

from lab.local_cluster import LocalCluster, free_port, free_port_pair  # noqa: F401 - re-exported for tests

KRM = str(Path(sys.executable).parent / "krm")


def wait_for(check: Callable[[], Any], timeout_s: float, what: str, interval_s: float = 0.2) -> Any:
    """Poll until check() returns something truthy; fail naming what never happened. A check that
    is itself costly (one of Kafka's tools: a JVM each time) rests as long as it ran: on two cores a
    check asked back to back takes a core from the cluster and the pipeline it waits for."""
    deadline = time.monotonic() + timeout_s
    last_exc: Exception | None = None
    while time.monotonic() < deadline:
        started = time.monotonic()
        try:
            result = check()
            if result:
                return result
        except Exception as e:  # noqa: BLE001 - e.g. /metrics not listening yet
            last_exc = e
        time.sleep(max(interval_s, time.monotonic() - started))
    raise AssertionError(f"timed out after {timeout_s}s waiting for {what} (last error: {last_exc})")


def kafka_admin(cluster: LocalCluster, timeout_s: float = 60.0, **kwargs: Any) -> Any:
    """A KafkaAdminClient of the cluster's super user, retried until the cluster answers: kafka-python's
    constructor asks the controller its API versions within 2 s by default, which a broker just started
    on a loaded two-core machine can miss (NodeNotReadyError) though it is registered and serving."""
    from kafka.admin import KafkaAdminClient
    from kafka.errors import KafkaConnectionError, NoBrokersAvailable, NodeNotReadyError

    kwargs = {"client_id": "krm-tests", "api_version_auto_timeout_ms": 10_000, **cluster.admin_kwargs(), **kwargs}
    deadline = time.monotonic() + timeout_s
    while True:
        try:
            return KafkaAdminClient(bootstrap_servers=cluster.bootstrap_servers, **kwargs)
        except (NodeNotReadyError, NoBrokersAvailable, KafkaConnectionError):
            if time.monotonic() > deadline:
                raise
            time.sleep(0.5)


def wait_equal(get: Callable[[], Any], want: Any, timeout_s: float, what: str) -> Any:
    """wait_for(get() == want), reporting the last value seen when it never happened."""
    seen: list[Any] = []

    def check() -> bool:
        seen.append(get())
        return seen[-1] == want

    try:
        wait_for(check, timeout_s, what)
    except AssertionError as e:
        raise AssertionError(f"{e}; last value: {seen[-1] if seen else None!r}") from None
    return seen[-1]


def slow_evidence_config(cluster: LocalCluster, tmp: Path, observations_on: LocalCluster) -> Path:
    """A krm config reading everything BROKER_SLOW judges from: the canary every second (a slow write's
    timeout 5 s) and each broker's JMX exporter every 2 s, beside the collector's own probes."""
    jmx = ", ".join(f'"{u}"' for u in cluster.jmx_exporter_urls)
    return write_config(cluster, tmp, observations_on=observations_on,
                        cluster_extra=f"canary = true\njmx_exporter_urls = [{jmx}]\n",
                        collector_extra="canary_interval_s = 1.0\ncanary_timeout_ms = 5000\njmx_interval_s = 2.0\n")


def write_config(cluster: LocalCluster, tmp: Path, poll_interval_s: float = 1.0,
                 observations_on: LocalCluster | None = None, pipeline_extra: str = "",
                 collector_extra: str = "", cluster_extra: str = "", history_trigger_s: float = 30.0,
                 history_flush_on_stop_s: float = 0.0) -> Path:
    """A krm config for `cluster` with its own data dir, metrics port and observations topic
    (on `observations_on`, a separate cluster as in production, or on the monitored one). The history
    path appends every 30 s unless a test reads the history tables: each append costs the Spark driver
    CPU seconds the machine's two cores otherwise give the brokers and the alert path. A stop writes no
    last history (a Spark query's start and end per stop) unless the test reads it after the stop."""
    obs_cluster = observations_on or cluster
    obs = obs_cluster.bootstrap_servers
    tag = uuid.uuid4().hex[:8]
    zk = f'zookeeper = "{cluster.zookeeper}"\n' if cluster.zookeeper else ""
    path = tmp / f"krm-{tag}.toml"
    path.write_text(
        f'[[clusters]]\nname = "{cluster.name}"\nbootstrap_servers = "{cluster.bootstrap_servers}"\n{zk}{cluster_extra}'
        f"{security_table('clusters', cluster)}\n"
        f'[observations]\nbootstrap_servers = "{obs}"\ntopic = "krm.obs.{tag}"\n'
        f"{security_table('observations', obs_cluster)}\n"
        f"[collector]\npoll_interval_s = {poll_interval_s}\n{collector_extra}\n"
        f'[pipeline]\ndata_dir = "{tmp / ("data-" + tag)}"\nmetrics_port = {free_port()}\n'
        f"history_trigger_s = {history_trigger_s}\nhistory_flush_on_stop_s = {history_flush_on_stop_s}\n"
        f"{pipeline_extra}"
    )
    return path


def security_table(section: str, cluster: LocalCluster) -> str:
    """`[<section>.security]` for a secured local cluster (krm's least-privilege user), else nothing."""
    if not cluster.secured:
        return ""
    from lab.local_security import LocalSecurity

    sec = LocalSecurity(cluster.root, cluster.security)
    zk = (f"\n[clusters.zookeeper_security]\n{sec.zookeeper_toml()}"
          if section == "clusters" and cluster.mode == "zk" else "")
    return f"\n[{section}.security]\n{sec.config_toml()}{zk}"


def krm_json(*args: str) -> Any:
    out = subprocess.run([KRM, *args, "--json"], capture_output=True, text=True, timeout=120,
                         env={**os.environ, "SPARK_LOCAL_IP": "127.0.0.1"})
    assert out.returncode == 0, f"krm {' '.join(args)} failed: {out.stderr}"
    return json.loads(out.stdout)


def create_topic(cluster: LocalCluster, name: str, partitions: int, rf: int,
                 configs: dict[str, str] | None = None) -> dict[int, list[int]]:
    """Create a topic and return its assignment (partition -> replicas)."""
    from kafka.admin import NewTopic

    admin = kafka_admin(cluster)
    try:
        admin.create_topics([NewTopic(name, partitions, rf, topic_configs=configs or {})])

        def described() -> dict[int, list[int]] | None:
            (t,) = admin.describe_topics([name])
            parts = {p["partition"]: list(p["replicas"]) for p in t["partitions"] if p["leader"] >= 0}
            return parts if len(parts) == partitions else None

        return wait_for(described, 30, f"topic {name} to have leaders")
    finally:
        admin.close()


def partition_states(cluster: LocalCluster, topic: str) -> dict[int, tuple[int, list[int], list[int]]]:
    """Kafka's own view of a topic (DescribeTopics): partition -> (leader, replicas, ISR)."""
    admin = kafka_admin(cluster)
    try:
        (t,) = admin.describe_topics([topic])
        return {p["partition"]: (p["leader"], list(p["replicas"]), list(p["isr"])) for p in t["partitions"]}
    finally:
        admin.close()


def partition_leaders(cluster: LocalCluster, topic: str, avoid: int = -1) -> dict[int, tuple[int, list[int]]]:
    """Kafka's own view (a Metadata request) asked of a broker other than `avoid`: one cut off would
    hold a client up (kafka-python's admin client may pick it for its version check or as its least
    loaded node). partition -> (leader, ISR)."""
    from kafka.client_async import KafkaClient

    from collectors import metadata

    others = [f"127.0.0.1:{cluster.broker(b).port}" for b in cluster.broker_ids if b != avoid]
    client = KafkaClient(bootstrap_servers=others, client_id="krm-tests", request_timeout_ms=5000,
                         **cluster.admin_kwargs())
    try:
        _node, md = metadata.metadata(client, None, {avoid}, 5000)
        (t,) = [t for t in md["topics"] if t["topic"] == topic]
        return {p["partition"]: (p["leader"], list(p["isr"])) for p in t["partitions"]}
    finally:
        client.close()


def settled_leaders(cluster: LocalCluster, topic: str, still_s: float) -> dict[int, int] | None:
    """partition -> leader once every partition of `topic` has a leader and a whole ISR, unchanged
    over `still_s` (a wait reads a settled state, not a first sight); None until then."""
    def leaders() -> dict[int, int] | None:
        view = partition_leaders(cluster, topic)
        whole = all(leader >= 0 and len(isr) == len(cluster.broker_ids) for leader, isr in view.values())
        return {p: leader for p, (leader, _) in view.items()} if whole else None
    first = leaders()
    if first is None:
        return None
    time.sleep(still_s)
    return first if leaders() == first else None


def every_isr_whole(cluster: LocalCluster) -> bool:
    """Every partition of every topic on the cluster has a leader and its whole replica set in the ISR
    (Kafka's own view): a shared cluster left as the next test expects it after a fault."""
    try:
        admin = kafka_admin(cluster, timeout_s=10, request_timeout_ms=5000)
    except Exception:  # noqa: BLE001 - the cluster not answering yet: not whole
        return False
    try:
        return all(p["leader"] >= 0 and sorted(p["isr"]) == sorted(p["replicas"])
                   for t in admin.describe_topics() for p in t["partitions"])
    except Exception:  # noqa: BLE001 - a broker still catching up: not yet
        return False
    finally:
        admin.close()


def every_broker_agrees(cluster: LocalCluster) -> bool:
    """Every broker's own Metadata answer names the same leader and ISR for every partition, and every
    ISR is whole: a cluster left as the next test expects it, asked of each cache, where `every_isr_whole`
    asks one broker. For a fault that held the ZooKeeper-mode controller's UpdateMetadata requests to the
    other brokers (a replication cut of the controller)."""
    from kafka.client_async import KafkaClient

    from collectors import metadata

    client = KafkaClient(bootstrap_servers=[f"127.0.0.1:{cluster.broker(b).port}" for b in cluster.broker_ids],
                         client_id="krm-tests", request_timeout_ms=5000, **cluster.admin_kwargs())
    try:
        metadata.metadata(client, None, set(), 5000)  # the client learns the brokers' ids (it knows addresses only)
        answers = []
        for b in cluster.broker_ids:
            node, md = metadata.metadata(client, b, set(), 5000)
            if node != b:
                return False
            answers.append({(t["topic"], p["partition"]): (p["leader"], sorted(p["isr"]), sorted(p["replicas"]))
                            for t in md["topics"] for p in t["partitions"]})
        return (all(a == answers[0] for a in answers)
                and all(leader >= 0 and isr == replicas for leader, isr, replicas in answers[0].values()))
    except Exception:  # noqa: BLE001 - a broker not answering yet: not agreed
        return False
    finally:
        client.close()


def local_cluster(tmp_path_factory: Any, mode: str, chroot: str | None = None, brokers: int = 3,
                  kafka_version: str = "", controllers: int = 1, security: str = "plaintext",
                  tiered_storage: bool = False, kerberos: bool = False, log_dirs: int = 1,
                  disk_layer: bool = False) -> LocalCluster:
    """A new real local cluster under the session's temp dir (the caller calls .down())."""
    root = Path(tempfile.mkdtemp(prefix=f"krm-{mode}{kafka_version}-", dir=tmp_path_factory.getbasetemp()))
    return LocalCluster(root=root / mode, mode=mode, brokers=brokers, chroot=chroot, kafka_version=kafka_version,
                        controllers=controllers, security=security, tiered_storage=tiered_storage,
                        kerberos=kerberos, log_dirs=log_dirs, disk_layer=disk_layer).up()


def kafka_tool(main: str, *args: str) -> str:
    """Run one of Kafka's own command-line tools (a class of the Kafka jars) and return its stdout."""
    from foundation.paths import jar_group
    from lab.local_cluster import JVM_OPTS

    cp = str(jar_group("kafka")[0].parent / "*")
    opts = [*JVM_OPTS, *os.environ.get("KRM_JVM_OPTS", "").split()]  # (tests/conftest.py)
    out = subprocess.run(["java", *opts, "-cp", cp, main, *args], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr[-2000:]
    return out.stdout


def stored_incidents(*args: str) -> list[dict[str, Any]]:
    """What `krm incidents <args> --json` prints, read in-process (no `krm` process per wait round).
    Takes the CLI's own arguments: --config P, --open, --type T (repeatable)."""
    import argparse

    from foundation.config import load_config
    from pipelines.incident_store import IncidentStore, to_json_obj
    from pipelines.tables import Tables

    ap = argparse.ArgumentParser()
    ap.add_argument("--config", required=True)
    ap.add_argument("--open", action="store_true")
    ap.add_argument("--type", action="append")
    a = ap.parse_args(args)
    store = IncidentStore(Tables(load_config(a.config).pipeline.data_dir).incidents)
    return [to_json_obj(i) for i in store.read(open_only=a.open, types=a.type)]


def delete_topic(cluster: LocalCluster, name: str) -> None:
    """Remove a test's topic from a shared cluster, so a later test's broker kill sees only its own
    single-replica partitions go offline."""
    admin = kafka_admin(cluster)
    try:
        admin.delete_topics([name], timeout_ms=30_000)
        # the controller accepts at once and deletes later (ZooKeeper mode: once every replica
        # acknowledged); until then the topic is in the metadata and its partitions can go offline
        wait_for(lambda: name not in admin.list_topics(), 90, f"topic {name} deleted")
    finally:
        admin.close()


def quorum_leader(cluster: LocalCluster) -> int:
    """The KRaft quorum's leader now (DescribeQuorum through a broker)."""
    from collectors import kraft_protocol
    from collectors.metadata import ask

    admin = kafka_admin(cluster)
    try:
        client = admin._client
        answer = ask(client, client.least_loaded_node(), kraft_protocol.describe_quorum_request(), 10_000).to_object()
        return int(answer["topics"][0]["partitions"][0]["leader_id"])
    finally:
        admin.close()


def observations_batch(spark: Any, records: list[dict[str, Any]]) -> Any:
    """Observation records as the Kafka source's rows (value, topic, partition, offset, timestamp): a
    static micro-batch for the Spark tests of the alert plan."""
    rows = [(json.dumps(r).encode(), "krm.observations", 0, i) for i, r in enumerate(records)]
    return spark.createDataFrame(rows, "value binary, topic string, partition int, offset long").selectExpr(
        "*", "current_timestamp() as timestamp")
