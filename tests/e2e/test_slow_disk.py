"""A slow disk, not a slow JVM, on a real Kafka 4 cluster whose brokers' log directories sit on the lab's delay layer
(`krm local-cluster up --disk-layer`, lab/slow_disk.py; observations on a separate cluster). Each write and sync of
broker 2's log directory waits 300 ms (`slow --disk-delay 300`): its appends, its Produce LocalTime, and the
acks=all writes through it are slow, while its JVM answers its metrics and krm's probes at its peers' pace. krm
opens one BROKER_SLOW naming broker 2 and the kind, slow_disk, a warning while the canary's writes stay within the
2 s objective; none for its peers, and no BROKER_DOWN; and it resolves once the disk is fast again."""

import pytest

from foundation.config import load_config
from krm.runner import Monitor
from krm.scrape import scrape, series
from lab.harness import krm_json, local_cluster, slow_evidence_config, stored_incidents, wait_equal, wait_for
from lab.local_cluster import KRAFT_KAFKA_VERSION

pytestmark = pytest.mark.e2e


@pytest.fixture()
def layered_cluster(tmp_path_factory):
    cluster = local_cluster(tmp_path_factory, "kraft", kafka_version=KRAFT_KAFKA_VERSION, disk_layer=True)
    yield cluster
    cluster.down()


def _slow(config_path):
    return sorted((i["broker"], i["cause"], i["severity"])
                  for i in stored_incidents("--open", "--type", "BROKER_SLOW", "--config", str(config_path)))


def test_a_slow_disk_is_named_slow_disk(layered_cluster, zk_cluster, spark, tmp_path):
    cluster, victim = layered_cluster, 2
    config_path = slow_evidence_config(cluster, tmp_path, observations_on=zk_cluster)
    monitor = Monitor(load_config(config_path), spark=spark).start()
    url = monitor.metrics_url
    try:
        wait_for(lambda: {s.labels["broker"] for s in series(scrape(url), "krm_broker_request_latency_seconds",
                                                            cluster=cluster.name)} == {"1", "2", "3"},
                 120, "every broker's request latency on /metrics")
        wait_equal(lambda: _slow(config_path), [], 60, "no broker slow at rest")

        assert "300 ms" in cluster.slow(victim, disk_delay_ms=300)
        assert cluster.status()["brokers"][str(victim)]["disk_delay_ms"] == 300
        # settled, not the first sight: its Produce histograms move as the slow appends come in
        wait_equal(lambda: _slow(config_path), [(victim, "slow_disk", "warning")], 150,
                   f"BROKER_SLOW slow_disk (a warning) for broker {victim}")
        # the broker's own time is its disk's, its JVM answering its metrics at its peers' pace: read once Kafka's
        # decaying LocalTime histogram has climbed to the slow appends (the incident's details follow each round)
        def disk_said() -> bool:
            (inc,) = krm_json("incidents", "--open", "--type", "BROKER_SLOW", "--config", str(config_path))
            d = inc["details"]
            print(f"\nBROKER_SLOW with a 300 ms disk: {inc['severity']}, {d}")
            return (d["own_latency_s"] >= 3 * d["peers_own_latency_s"] and d["produce_local_p50_ms"] >= 200
                    and "jmx_error" not in d)

        wait_for(disk_said, 90, f"broker {victim}'s own Produce time its disk's in BROKER_SLOW's details")
        downs = krm_json("incidents", "--type", "BROKER_DOWN", "--config", str(config_path))
        assert [x for x in downs if x["broker"] == victim] == [], downs

        cluster.fast(victim)
        assert cluster.status()["brokers"][str(victim)]["disk_delay_ms"] == 0
        wait_equal(lambda: _slow(config_path), [], 180, "BROKER_SLOW resolved once the disk is fast again")
    finally:
        cluster.fast(victim, missing_ok=True)
        monitor.stop()
