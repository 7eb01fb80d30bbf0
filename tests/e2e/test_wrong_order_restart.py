"""Issue 4, scenario 5, on a real ZooKeeper-mode cluster: two of three brokers killed, then restarted
in the wrong order. RF 2 on brokers A and B (B leads). A dies first: the ISR shrinks to [B]. B dies:
no leader, ISR [B]. A comes back first: it is alive but was not in the ISR, and with unclean
election disabled Kafka keeps the partition offline until B returns. krm must keep reporting the
partition offline with cause all_isr_replicas_dead and name B as the broker that must come back.
"""

import time

import pytest

from foundation.config import load_config
from krm.runner import Monitor
from krm.scrape import scrape, series
from lab.harness import kafka_admin, stored_incidents, wait_for, write_config

pytestmark = pytest.mark.e2e


def _offline(config_path, topic):
    return [i for i in stored_incidents("--open", "--type", "OFFLINE_PARTITION", "--config", str(config_path))
            if i["topic"] == topic]


def test_two_brokers_restarted_in_the_wrong_order(zk_cluster, kraft_cluster, spark, tmp_path):
    from kafka.admin import NewTopic

    cluster = zk_cluster
    topic = "wrong-order"
    a, b = cluster.broker_ids[0], cluster.broker_ids[1]
    admin = kafka_admin(cluster)
    admin.create_topics([NewTopic(topic, num_partitions=-1, replication_factor=-1, replica_assignments={0: [b, a]})])
    admin.close()
    config_path = write_config(cluster, tmp_path, observations_on=kraft_cluster)
    monitor = Monitor(load_config(config_path), spark=spark).start()
    url = monitor.metrics_url
    try:
        wait_for(lambda: series(scrape(url), "krm_cluster_offline_partitions", cluster=cluster.name), 90, "/metrics")
        cluster.kill(a)
        wait_for(lambda: [i for i in stored_incidents("--open", "--type", "UNDER_REPLICATED",
                                              "--config", str(config_path))
                          if i["topic"] == topic and i["details"]["out_of_sync"] == [a]], 60, "ISR shrunk to [B]")
        cluster.kill(b)
        killed_at = time.time()
        (inc,) = wait_for(lambda: [i for i in _offline(config_path, topic) if i["cause"] == "all_isr_replicas_dead"],
                          60, "offline, ISR [B] dead")
        print(f"\n[wrong-order] second kill -> OFFLINE_PARTITION stored {time.time() - killed_at:.1f}s")
        assert inc["details"]["must_return"] == [b]

        cluster.start(a)  # the wrong one first
        wait_for(lambda: [s for s in series(scrape(url), "krm_broker_up", cluster=cluster.name)
                          if s.labels["broker"] == str(a) and s.value == 1], 60, f"broker {a} registered again")
        time.sleep(5)  # give the controller every chance to elect: it must not (A was not in the ISR)
        (still,) = _offline(config_path, topic)
        assert still["incident_id"] == inc["incident_id"] and still["cause"] == "all_isr_replicas_dead"
        assert still["details"]["must_return"] == [b] and a in still["details"]["live_brokers"]
        offline = [s for s in series(scrape(url), "krm_partition_offline", cluster=cluster.name)
                   if s.labels["topic"] == topic]
        assert [s.labels["cause"] for s in offline] == ["all_isr_replicas_dead"]

        cluster.start(b)
        started_at = time.time()
        wait_for(lambda: _offline(config_path, topic) == [], 60, "resolved once B is back")
        print(f"[wrong-order] B restarted -> resolved {time.time() - started_at:.1f}s")
    finally:
        monitor.stop()
        for broker in (a, b):
            if cluster.status()["brokers"][str(broker)]["state"] != "running":
                cluster.start(broker)
