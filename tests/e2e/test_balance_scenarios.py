"""Imbalance after expansion (issue 4, scenario 6) on a dedicated 3-broker ZooKeeper-mode cluster,
observations on the KRaft cluster. Its own cluster because a broker is added, which the shared
clusters' other tests must not see.

1. A topic of 2 single-replica partitions on brokers 1 and 2, expanded to 4 partitions that again go
   to 1 and 2 (the outcome docs/cases/partition-expansion.md explains): broker 3 holds none of the topic ->
   REPLICA_IMBALANCE on the topic, cause partition_expansion.
2. A fourth broker joins: Kafka moves nothing onto it -> REPLICA_IMBALANCE on the cluster for
   broker 4, cause broker_expansion; the topic's incident keeps its own cause.
3. The monitor restarts: both incidents keep their ids and causes (the assignment history is
   rebuilt from the `assignments` table and the incidents, not forgotten).
4. Broker 1 is killed beside the open imbalance: every reader (`krm incidents` grouped, ungrouped, --open
   --json, `krm incidents show` of each open incident, `krm timeline`, `krm sql`, the console's pages) works
   and shows the imbalance (the brokers with too few replicas) beside the crash.
"""

import subprocess

import pytest
import requests

from foundation.config import load_config
from krm.runner import Monitor
from krm.scrape import scrape, series
from lab.harness import KRM, kafka_admin, krm_json, local_cluster, stored_incidents, wait_for, write_config
from pipelines.assignment_history import topic_layouts
from pipelines.tables import Tables

pytestmark = pytest.mark.e2e


@pytest.fixture(scope="module")
def small_cluster(tmp_path_factory):
    cluster = local_cluster(tmp_path_factory, "zk")
    yield cluster
    cluster.down()


def _led_partitions(admin, topic) -> int:
    (t,) = admin.describe_topics([topic])
    return sum(1 for p in t["partitions"] if p["leader"] >= 0)


def _open(config_path, type_):
    return stored_incidents("--open", "--type", type_, "--config", str(config_path))


def test_partition_expansion_then_broker_expansion(small_cluster, kraft_cluster, spark, tmp_path):
    from kafka.admin import NewPartitions, NewTopic

    cluster = small_cluster
    config_path = write_config(cluster, tmp_path, observations_on=kraft_cluster)
    monitor = Monitor(load_config(config_path), spark=spark).start()
    url = monitor.metrics_url
    admin = kafka_admin(cluster)
    try:
        wait_for(lambda: series(scrape(url), "krm_cluster_offline_partitions", cluster=cluster.name), 90, "/metrics")
        admin.create_topics([NewTopic("expand", num_partitions=-1, replication_factor=-1,
                                      replica_assignments={0: [1], 1: [2]})])
        replicas = lambda: sum(s.value for s in series(scrape(url), "krm_broker_replicas", cluster=cluster.name))  # noqa: E731
        wait_for(lambda: replicas() == 2, 60, "the pipeline to see the topic with 2 partitions")
        assert _open(config_path, "REPLICA_IMBALANCE") == []  # 2 replicas cannot cover 3 brokers
        # The restart below restores the topic's growth from the assignments table: it must hold the
        # 2-partition layout first (in ZooKeeper mode it comes with the watch's quick record once every
        # partition's state is written, else with the next full poll; collectors/admin.py _mirror_topics).
        tables = Tables(load_config(config_path).pipeline.data_dir)
        wait_for(lambda: topic_layouts(tables.assignments).get((cluster.name, "expand")) is not None, 90,
                 "the assignments table to record the topic's first layout")

        admin.create_partitions({"expand": NewPartitions(total_count=4, new_assignments=[[1], [2]])})
        # Settled states only: Kafka lists the 4 partitions with leaders, the pipeline counts their 4
        # replicas, then the stored incident describes all 4 (a partition's state znode is written after
        # the assignment's, so a poll in between sees 3: the incident opens on that and is updated).
        wait_for(lambda: _led_partitions(admin, "expand") == 4, 60, "Kafka to lead the 4 partitions")
        wait_for(lambda: replicas() == 4, 60, "the pipeline to see the topic with 4 partitions")
        topic_level = wait_for(lambda: [i for i in _open(config_path, "REPLICA_IMBALANCE") if i["topic"] == "expand"
                                        and sum(i["details"]["replicas_by_broker"].values()) == 4],
                               60, "REPLICA_IMBALANCE on the topic, over its 4 partitions")
        (inc,) = topic_level
        assert inc["cause"] == "partition_expansion" and inc["details"]["uncovered_brokers"] == [3]
        assert inc["details"]["replicas_by_broker"] == {"1": 2, "2": 2, "3": 0}

        new = cluster.add_broker()
        joined = wait_for(lambda: [i for i in _open(config_path, "REPLICA_IMBALANCE") if i["broker"] == new],
                          90, "REPLICA_IMBALANCE for the new broker")
        assert joined[0]["cause"] == "broker_expansion" and joined[0]["details"]["replica_count"] == 0
        # the topic's own incident keeps its cause: broker 3 was left out by the expansion, not by joining late
        (still,) = [i for i in _open(config_path, "REPLICA_IMBALANCE") if i["topic"] == "expand"]
        assert still["cause"] == "partition_expansion" and still["incident_id"] == inc["incident_id"]

        # 3. restart once the history path recorded the grown topic
        wait_for(lambda: (cluster.name, "expand") in topic_layouts(tables.assignments)
                 and topic_layouts(tables.assignments)[(cluster.name, "expand")].partitions == 4, 60,
                 "the assignments table to record the expansion")
        monitor.stop()
        monitor = Monitor(load_config(config_path), spark=spark).start()
        # Settled: the restarted collector polled six times and the pipeline judged a whole poll of the
        # cluster, every topic counted: a poll stays home only once the pipeline processed the last one
        # published and this one found the same (collectors/unchanged.py)
        total = lambda name: sum(s.value for s in series(scrape(url), name))  # noqa: E731
        wait_for(lambda: total("krm_collector_polls_total") >= 6 and total("krm_collector_polls_kept_home_total") >= 1
                 and replicas() == 4, 90, "six polls, one kept home as judged already, after the restart")
        after = {(i["topic"], i["broker"]): i for i in _open(config_path, "REPLICA_IMBALANCE")}
        assert after[("expand", None)]["incident_id"] == inc["incident_id"]
        assert after[("expand", None)]["cause"] == "partition_expansion", (
            topic_layouts(tables.assignments).get((cluster.name, "expand")))
        assert after[(None, new)]["incident_id"] == joined[0]["incident_id"]
        assert after[(None, new)]["cause"] == "broker_expansion"

        # 4. a crash beside the open imbalance: every reader reads both. A replicated topic on the three first
        # brokers keeps broker 4's share below the mean once broker 1 is gone (else only `expand`'s two live
        # replicas would count, too few to judge a spread)
        admin.create_topics([NewTopic("spread", num_partitions=-1, replication_factor=-1, replica_assignments={
            p: list([(1, 2), (2, 3), (3, 1)][p % 3]) for p in range(6)})])
        wait_for(lambda: replicas() == 16, 60, "the pipeline to count spread's 12 replicas")
        cluster.kill(1)
        crash = wait_for(lambda: _crash_settled(config_path), 90,
                         "BROKER_DOWN for broker 1 and its two expand partitions offline, must_return [1]")
        _every_reader_shows(config_path, monitor.metrics_url.removesuffix("/metrics"), cluster.name, new, crash)
    finally:
        admin.close()
        monitor.stop()


def _crash_settled(config_path):
    """The settled state after broker 1's kill: its BROKER_DOWN and both of its expand partitions offline."""
    opened = stored_incidents("--open", "--config", str(config_path))
    down = [i for i in opened if i["type"] == "BROKER_DOWN" and i["broker"] == 1]
    offline = [i for i in opened if i["type"] == "OFFLINE_PARTITION" and i["topic"] == "expand"]
    settled = sorted(i["partition"] for i in offline) == [0, 2] and all(
        i["details"].get("must_return") == [1] for i in offline)
    return [*down, *offline] if down and settled else None


def _krm(*args):
    out = subprocess.run([KRM, *args], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, f"krm {' '.join(args)}: {out.stderr}"
    return out.stdout


def _every_reader_shows(config_path, console, cluster, new, expected):
    cfg = ["--config", str(config_path)]
    grouped, ungrouped = _krm("incidents", *cfg), _krm("incidents", "--ungrouped", *cfg)
    for text in (grouped, ungrouped):
        assert "REPLICA_IMBALANCE" in text and "BROKER_DOWN" in text and "OFFLINE_PARTITION" in text
    listed = {i["incident_id"]: i for i in krm_json("incidents", "--open", *cfg)}
    assert {i["incident_id"] for i in expected} <= set(listed)
    assert [i for i in listed.values() if i["type"] == "REPLICA_IMBALANCE" and i["broker"] == new]
    for incident_id, i in listed.items():
        shown = _krm("incidents", "show", incident_id, *cfg)
        assert i["type"] in shown
        if i["type"] == "REPLICA_IMBALANCE" and i["broker"] == new:
            assert f"too_few     [{new}]" in shown and f"too few on {new}" in shown
        page = requests.get(f"{console}/incidents/{incident_id}", timeout=30)
        assert page.status_code == 200 and i["type"] in page.text
        if i["type"] == "REPLICA_IMBALANCE" and i["broker"] == new:
            assert f"too few on {new}" in page.text
    events = krm_json("timeline", "--topic", "expand", "--partition", "0", "--since", "1h", *cfg)
    assert any(e.get("type") == "OFFLINE_PARTITION" for e in events), events
    rows = krm_json("sql", "select type, cause from incidents where status = 'open'", *cfg)
    assert {"REPLICA_IMBALANCE", "BROKER_DOWN", "OFFLINE_PARTITION"} <= {r["type"] for r in rows}
    for path in ("/", "/incidents", f"/clusters/{cluster}", f"/topics/{cluster}/expand",
                 f"/partitions/{cluster}/expand/0", f"/brokers/{cluster}/{new}", f"/brokers/{cluster}/1"):
        page = requests.get(f"{console}{path}", timeout=30)
        assert page.status_code == 200, (path, page.text[:300])
    assert "REPLICA_IMBALANCE" in requests.get(f"{console}/incidents", timeout=30).text
