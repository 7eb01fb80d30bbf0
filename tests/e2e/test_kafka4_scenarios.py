"""Kafka 4 only: Eligible Leader Replicas and the KRaft controller quorum, end to end.

One module-scoped Kafka 4.x cluster of 4 brokers and a 3-voter controller quorum; observations travel
through the ZooKeeper-mode cluster, since this one is taken apart.

1. ELR (KIP-966): RF 3, min.insync.replicas 2. Follower f1 stopped cleanly leaves the ISR while it
   still has 2 members (no ELR); follower f2 stopped cleanly moves to the ELR (the ISR fell below min
   ISR); the leader SIGKILLed joins it (ISR empty). krm: OFFLINE_PARTITION `elr_replicas_down`,
   must_return = the ELR, not f1. f2 restarted (clean shutdown: still in the ELR) is elected "using
   ELR": the partition is back and no UNCLEAN_LEADER_ELECTION / OFFSET_REGRESSION ever opens.
2. Quorum: a follower voter SIGKILLed -> CONTROLLER_ANOMALY voter_lagging + quorum_at_risk; a second
   one -> no_quorum_leader (critical); both back -> everything resolves. krm_kraft_* on /metrics.
"""

import time

import pytest

from foundation.config import load_config
from krm.runner import Monitor
from krm.scrape import scrape, series
from lab.local_cluster import KRAFT_KAFKA_VERSION
from lab.harness import create_topic, local_cluster, quorum_leader, stored_incidents, wait_for, write_config

pytestmark = pytest.mark.e2e


@pytest.fixture(scope="module")
def kafka4(tmp_path_factory):
    cluster = local_cluster(tmp_path_factory, "kraft", brokers=4, kafka_version=KRAFT_KAFKA_VERSION, controllers=3)
    yield cluster
    cluster.down()


def _incidents(config_path, **match):
    return [i for i in stored_incidents("--config", str(config_path))
            if all(i.get(k) == v for k, v in match.items())]


def _open(config_path, **match):
    return [i for i in _incidents(config_path, **match) if i["status"] == "open"]


def test_elr_members_bring_the_partition_back_cleanly(kafka4, zk_cluster, spark, tmp_path):
    from kafka import KafkaProducer

    cluster = kafka4
    topic = "elr-rf3"
    (replicas,) = create_topic(cluster, topic, partitions=1, rf=3, configs={"min.insync.replicas": "2"}).values()
    leader, f1, f2 = replicas
    config_path = write_config(cluster, tmp_path, observations_on=zk_cluster)
    monitor = Monitor(load_config(config_path), spark=spark).start()
    url = monitor.metrics_url
    try:
        wait_for(lambda: series(scrape(url), "krm_cluster_offline_partitions", cluster=cluster.name), 90, "/metrics")
        producer = KafkaProducer(bootstrap_servers=cluster.bootstrap_servers, acks="all", linger_ms=0)
        for i in range(20):
            producer.send(topic, f"m{i}".encode(), partition=0).get(timeout=30)
        producer.close(timeout=5)

        cluster.stop(f1)  # ISR [leader, f2]: still min ISR, f1 does not enter the ELR
        cluster.stop(f2)  # ISR [leader]: below min ISR, f2 moves to the ELR
        under = wait_for(lambda: _open(config_path, topic=topic, type="UNDER_MIN_ISR"), 60, "UNDER_MIN_ISR")
        wait_for(lambda: (_open(config_path, topic=topic, type="UNDER_MIN_ISR") or [{}])[0].get("details", {}).get("elr")
                 == [f2], 30, f"UNDER_MIN_ISR details naming ELR [{f2}]")
        assert under[0]["details"]["isr"] == [leader]

        cluster.kill(leader)
        offline = wait_for(lambda: [i for i in _open(config_path, topic=topic, type="OFFLINE_PARTITION")
                                    if i["cause"] == "elr_replicas_down"], 60, "OFFLINE_PARTITION elr_replicas_down")
        d = offline[0]["details"]
        assert (d["isr"], sorted(d["elr"]), sorted(d["must_return"])) == ([], sorted([leader, f2]), sorted([leader, f2]))
        assert f1 not in d["must_return"], "f1 left the ISR before it fell below min ISR: it may lack committed data"
        causes = {s.labels["cause"] for s in series(scrape(url), "krm_partition_offline", cluster=cluster.name)
                  if s.labels["topic"] == topic}
        assert causes == {"elr_replicas_down"}

        cluster.start(f2)  # stopped cleanly: keeps its ELR membership and is elected from it
        wait_for(lambda: not _open(config_path, topic=topic, type="OFFLINE_PARTITION"), 60, "the partition back")
        now_under = wait_for(lambda: [i for i in _open(config_path, topic=topic, type="UNDER_MIN_ISR")
                                      if i["details"]["isr"] == [f2]], 30, f"ISR [{f2}] after the ELR election")
        assert now_under[0]["details"]["elr"] == [leader]
        time.sleep(3)  # a few more polls: a false data-loss page would come now
        assert _incidents(config_path, topic=topic, type="UNCLEAN_LEADER_ELECTION") == []
        assert _incidents(config_path, topic=topic, type="OFFSET_REGRESSION") == []
    finally:
        monitor.stop()
        for b in (leader, f1, f2):
            if cluster.status()["brokers"][str(b)]["state"] == "dead":
                cluster.start(b)


def _gauge(url, name, cluster, **labels):
    return {tuple(s.labels[k] for k in sorted(labels)): s.value for s in series(scrape(url), name, cluster=cluster)
            if all(s.labels.get(k) == v for k, v in labels.items())}


def test_controller_quorum_losing_voters(kafka4, zk_cluster, spark, tmp_path):
    cluster = kafka4
    config_path = write_config(cluster, tmp_path, observations_on=zk_cluster)
    monitor = Monitor(load_config(config_path), spark=spark).start()
    url = monitor.metrics_url
    killed = []
    try:
        wait_for(lambda: _gauge(url, "krm_kraft_quorum_voters_caught_up", cluster.name) == {(): 3.0}, 90,
                 "three caught-up voters on /metrics")
        # Kafka 4.4 answers every request krm asks of a KRaft cluster
        assert {s.labels["capability"]: s.value for s in series(scrape(url), "krm_collector_capability",
                                                                 cluster=cluster.name)} == {
            "elr": 1.0, "quorum": 1.0, "reassignments": 1.0, "log_dir_sizes": 1.0}
        leader = quorum_leader(cluster)
        followers = [c for c in cluster.controller_ids if c != leader]

        killed.append(followers[0])
        cluster.kill(followers[0])
        risk = wait_for(lambda: [i for i in _open(config_path, type="CONTROLLER_ANOMALY")
                                 if i["cause"] == "quorum_at_risk"], 60, "quorum_at_risk")
        assert (risk[0]["details"]["healthy"], risk[0]["details"]["can_lose"]) == (2, 0)
        lagging = _open(config_path, type="CONTROLLER_ANOMALY", cause="voter_lagging")
        assert [i["broker"] for i in lagging] == [followers[0]]
        assert _gauge(url, "krm_kraft_voter_caught_up", cluster.name, voter=str(followers[0])) == {(str(followers[0]),): 0.0}

        killed.append(followers[1])
        cluster.kill(followers[1])
        lost = wait_for(lambda: [i for i in _open(config_path, type="CONTROLLER_ANOMALY")
                                 if i["cause"] == "no_quorum_leader"], 60, "no_quorum_leader")
        assert lost[0]["severity"] == "critical"

        for c in killed:
            cluster.start(c)
        killed.clear()
        wait_for(lambda: not _open(config_path, type="CONTROLLER_ANOMALY"), 90, "the quorum whole again")
        assert _gauge(url, "krm_kraft_quorum_voters_caught_up", cluster.name) == {(): 3.0}
    finally:
        monitor.stop()
        for c in killed:
            cluster.start(c)
