"""ISR shrinkage on real KRaft clusters (Kafka 3.9 and 4.x): followers SIGSTOPped one after the
other, then resumed.

RF 3, min.insync.replicas 2. The first paused follower leaves the ISR (fenced after the 6 s broker
session): UNDER_REPLICATED and AT_MIN_ISR. The second: UNDER_MIN_ISR (acks=all producers are now
refused); on Kafka 4 it moves to the ELR, which the incident's details show. Both resumed: everything
resolves.
"""

import pytest

from foundation.config import load_config
from krm.runner import Monitor
from krm.scrape import scrape, series
from lab.harness import create_topic, krm_json, stored_incidents, wait_equal, wait_for, write_config

pytestmark = pytest.mark.e2e


def _partition_series(url, cluster, topic):
    out = set()
    for name in ("krm_partition_under_replicated", "krm_partition_at_min_isr", "krm_partition_under_min_isr",
                 "krm_partition_offline"):
        out |= {name for s in series(scrape(url), name, cluster=cluster) if s.labels.get("topic") == topic}
    return out


@pytest.mark.parametrize("mode", ["kraft", "kraft4", "kraft4_secure"])
def test_followers_paused_one_by_one(mode, request, zk_cluster, spark, tmp_path):
    """Observations travel through the ZooKeeper-mode cluster: a separate cluster, as recommended,
    because with two of three brokers paused the monitored cluster cannot carry them reliably."""
    cluster = request.getfixturevalue(f"{mode}_cluster")
    topic = f"isr-rf3-{mode}"
    (replicas,) = create_topic(cluster, topic, partitions=1, rf=3, configs={"min.insync.replicas": "2"}).values()
    leader, f1, f2 = replicas
    config_path = write_config(cluster, tmp_path, observations_on=zk_cluster)
    monitor = Monitor(load_config(config_path), spark=spark).start()
    url = monitor.metrics_url
    try:
        wait_for(lambda: series(scrape(url), "krm_cluster_offline_partitions", cluster=cluster.name), 90, "/metrics")
        assert _partition_series(url, cluster.name, topic) == set()

        cluster.pause(f1)
        view = lambda: _partition_series(url, cluster.name, topic)  # noqa: E731
        wait_equal(view, {"krm_partition_under_replicated", "krm_partition_at_min_isr"}, 60, "URP + AT_MIN_ISR")

        cluster.pause(f2)
        wait_equal(view, {"krm_partition_under_replicated", "krm_partition_under_min_isr"}, 60, "UNDER_MIN_ISR")
        incidents = wait_for(lambda: (lambda xs: xs if {i["type"] for i in xs} >= {"UNDER_REPLICATED", "UNDER_MIN_ISR"}
                                      else None)([i for i in stored_incidents("--open", "--config", str(config_path))
                                                  if i["topic"] == topic]), 30, "incidents stored")
        urp = next(i for i in incidents if i["type"] == "UNDER_REPLICATED")
        assert urp["details"]["out_of_sync"] == [f1, f2] and urp["details"]["isr"] == [leader]
        under = next(i for i in incidents if i["type"] == "UNDER_MIN_ISR")
        assert under["details"]["effective_min_isr"] == 2 and under["severity"] == "critical"
        # Kafka 4: f2 left an ISR already at min ISR, so it holds every committed message (ELR);
        # f1 left while two remained and does not. Kafka 3.9 KRaft keeps no ELR (reported empty).
        assert under["details"]["elr"] == ([f2] if mode.startswith("kraft4") else [])
        downs = {i["broker"] for i in krm_json("incidents", "--open", "--type", "BROKER_DOWN", "--config", str(config_path))}
        assert downs == {f1, f2}, "fenced brokers are reported down"

        cluster.resume(f1)
        cluster.resume(f2)
        wait_equal(view, set(), 90, "full ISR again")
        wait_for(lambda: not [i for i in stored_incidents("--open", "--config", str(config_path))
                              if i["topic"] == topic or i["type"] == "BROKER_DOWN"], 30, "all resolved")
    finally:
        monitor.stop()
        for b in (f1, f2):
            if cluster.status()["brokers"][str(b)]["state"] == "paused":
                cluster.resume(b)
