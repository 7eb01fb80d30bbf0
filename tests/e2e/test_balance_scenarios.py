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
"""

import pytest

from foundation.config import load_config
from krm.runner import Monitor
from krm.scrape import scrape, series
from lab.harness import kafka_admin, local_cluster, stored_incidents, wait_for, write_config
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
    finally:
        admin.close()
        monitor.stop()
