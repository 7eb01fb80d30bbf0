"""Offsets-based incidents on a real ZooKeeper-mode cluster (observations on the KRaft cluster).

1. HW stall (issue 4, scenario 3): an acks=all producer while an ISR follower is SIGSTOPped: the
   leader's LEO moves, its HW does not; HW_STALL names the paused follower before the ISR shrinks,
   and resolves once the controller drops the follower from the ISR (the HW moves again). Here the
   shrink comes from the paused broker's 6 s ZooKeeper session ending, before replica.lag.time.max.ms.
2. Unclean election (docs/cases/restart-order-truncation.md, scenario 4): RF 2 with unclean.leader.election.enable; the follower
   paused until out of the ISR; more writes; the leader SIGKILLed; the follower resumed and elected
   out of sync -> UNCLEAN_LEADER_ELECTION and OFFSET_REGRESSION; the old leader restarted truncates
   its log below the old HW -> LOG_TRUNCATION on it.
Times to detect are printed (pytest -s) for the issue notes.
"""

import time

import pytest

from foundation.config import load_config
from krm.runner import Monitor
from krm.scrape import scrape, series
from lab.harness import create_topic, kafka_admin, krm_json, stored_incidents, wait_for, write_config

pytestmark = pytest.mark.e2e


def _open(config_path, topic, type_):
    return [i for i in stored_incidents("--open", "--type", type_, "--config", str(config_path))
            if i["topic"] == topic]


def _producer(cluster, topic, acks):
    """A producer connected and with metadata *before* any broker is paused: bootstrapping through a
    SIGSTOPped broker would block it until the fault is over."""
    from kafka import KafkaProducer

    producer = KafkaProducer(bootstrap_servers=cluster.bootstrap_servers, acks=acks, linger_ms=0,
                             request_timeout_ms=60_000, max_block_ms=10_000)
    producer.send(topic, b"warm-up", partition=0).get(timeout=30)
    return producer


def _send(producer, topic, n):
    return [producer.send(topic, b"m", partition=0) for _ in range(n)]


def test_hw_stall_names_the_paused_follower_before_the_isr_shrinks(zk_cluster, kraft_cluster, spark, tmp_path):
    cluster = zk_cluster
    topic = "hw-stall"
    (replicas,) = create_topic(cluster, topic, partitions=1, rf=3).values()
    follower = replicas[1]
    # the paused follower's ZooKeeper session (6 s here) ends its ISR membership: poll fast, short window
    config_path = write_config(cluster, tmp_path, poll_interval_s=0.5, observations_on=kraft_cluster,
                               pipeline_extra="hw_stall_window_s = 1.0\n",
                               collector_extra="offsets_timeout_ms = 300\nrequest_timeout_ms = 500\n")
    monitor = Monitor(load_config(config_path), spark=spark).start()
    url = monitor.metrics_url
    producer = None
    try:
        wait_for(lambda: series(scrape(url), "krm_cluster_offline_partitions", cluster=cluster.name), 90, "/metrics")
        producer = _producer(cluster, topic, acks="all")
        cluster.pause(follower)
        paused_at = time.time()
        _send(producer, topic, 20)  # held in the leader's purgatory: the HW cannot pass the paused follower
        stall = wait_for(lambda: (_open(config_path, topic, "HW_STALL") or [None])[0], 60, "HW_STALL")
        print(f"\n[hw-stall] pause -> HW_STALL incident stored {time.time() - paused_at:.1f}s")
        assert stall["partition"] == 0 and stall["cause"] == "isr_follower_unreachable"
        assert stall["details"]["holding_back"] == [follower]
        assert stall["details"]["leader_leo"] > stall["details"]["high_watermark"]
        stalled = [s for s in series(scrape(url), "krm_partition_hw_stall_seconds", cluster=cluster.name)
                   if s.labels["topic"] == topic]
        assert stalled and stalled[0].value >= 1.0

        # the controller drops the follower (its session ends): the HW moves, the stall ends
        urp = wait_for(lambda: (_open(config_path, topic, "UNDER_REPLICATED") or [None])[0], 60, "ISR shrink")
        assert urp["details"]["out_of_sync"] == [follower]
        assert stall["opened_at"] < urp["opened_at"], "HW_STALL must come before the ISR shrinks"
        wait_for(lambda: _open(config_path, topic, "HW_STALL") == [], 30, "HW_STALL resolved after the shrink")
        cluster.resume(follower)
        wait_for(lambda: _open(config_path, topic, "UNDER_REPLICATED") == [], 60, "follower back in the ISR")
    finally:
        if producer is not None:
            producer.close(timeout=5)
        monitor.stop()
        if cluster.status()["brokers"][str(follower)]["state"] == "paused":
            cluster.resume(follower)


@pytest.mark.parametrize("mode,carrier,leaderless", [
    ("zk", "kraft", "all_isr_replicas_dead"),  # ZooKeeper keeps the dead leader in the ISR
    ("kraft4", "zk", "elr_replicas_down"),  # Kafka 4 empties the ISR into the ELR
])
def test_unclean_election_regression_and_truncation(mode, carrier, leaderless, request, spark, tmp_path):
    cluster, observations = request.getfixturevalue(f"{mode}_cluster"), request.getfixturevalue(f"{carrier}_cluster")
    topic = f"unclean-{mode}"
    (replicas,) = create_topic(cluster, topic, partitions=1, rf=2,
                               configs={"unclean.leader.election.enable": "true"}).values()
    leader, follower = replicas
    config_path = write_config(cluster, tmp_path, observations_on=observations)
    monitor = Monitor(load_config(config_path), spark=spark).start()
    url = monitor.metrics_url
    try:
        wait_for(lambda: series(scrape(url), "krm_cluster_offline_partitions", cluster=cluster.name), 90, "/metrics")
        producer = _producer(cluster, topic, acks="all")  # acked = on both replicas while both are in the ISR
        for f in _send(producer, topic, 49):
            f.get(timeout=30)
        cluster.pause(follower)
        wait_for(lambda: _open(config_path, topic, "UNDER_REPLICATED"), 60, "follower out of the ISR")
        for f in _send(producer, topic, 100):  # the ISR is [leader]: only the leader has these
            f.get(timeout=30)
        producer.close(timeout=5)
        time.sleep(3)  # let the collector see HW 150 on the leader
        cluster.kill(leader)
        down = wait_for(lambda: [i for i in _open(config_path, topic, "OFFLINE_PARTITION") if i["cause"] == leaderless],
                        60, f"leaderless ({leaderless})")
        assert down[0]["details"]["must_return"] == [leader], "only the old leader holds everything"
        cluster.resume(follower)
        resumed_at = time.time()
        unclean = wait_for(lambda: (_open(config_path, topic, "UNCLEAN_LEADER_ELECTION") or [None])[0], 90,
                           "UNCLEAN_LEADER_ELECTION")
        print(f"\n[unclean] follower resumed -> UNCLEAN_LEADER_ELECTION stored {time.time() - resumed_at:.1f}s")
        assert unclean["details"]["leader"] == follower
        assert (unclean["cause"], unclean["severity"]) == ("not_in_isr_or_elr", "critical")
        assert leader in unclean["details"]["previous_isr"] + unclean["details"].get("previous_elr", [])
        regression = wait_for(lambda: (_open(config_path, topic, "OFFSET_REGRESSION") or [None])[0], 30,
                              "OFFSET_REGRESSION")
        assert regression["details"]["previous_high_watermark"] == 150
        assert regression["details"]["high_watermark"] == 50 and regression["details"]["hw_lost"] == 100

        cluster.start(leader)
        started_at = time.time()
        trunc = wait_for(lambda: (_open(config_path, topic, "LOG_TRUNCATION") or [None])[0], 90, "LOG_TRUNCATION")
        print(f"[unclean] old leader restarted -> LOG_TRUNCATION stored {time.time() - started_at:.1f}s")
        assert trunc["broker"] == leader and trunc["cause"] == "below_high_watermark"
        assert (trunc["details"]["log_end_offset_before"], trunc["details"]["log_end_offset_after"]) == (150, 50)
    finally:
        monitor.stop()
        state = cluster.status()["brokers"]
        if state[str(follower)]["state"] == "paused":
            cluster.resume(follower)
        if state[str(leader)]["state"] != "running":
            cluster.start(leader)


def test_throttled_follower_lags_and_krm_lag_shows_its_history(zk_cluster, kraft_cluster, spark, tmp_path):
    """A follower that fell out of the ISR catches up under a replication throttle (Kafka throttles
    only out-of-sync replicas, ReplicationQuotaManager): it answers, so its lag is measured ->
    REPLICA_LAG on that follower, then `krm lag` shows the history from the replica_lag table."""
    from kafka.admin import ConfigResource, ConfigResourceType

    cluster = zk_cluster
    topic = "lagging"
    (replicas,) = create_topic(cluster, topic, partitions=1, rf=2).values()
    leader, follower = replicas
    admin = kafka_admin(cluster)
    throttles = {"leader.replication.throttled.rate": "20000", "follower.replication.throttled.rate": "20000"}
    admin.alter_configs([ConfigResource(ConfigResourceType.TOPIC, topic, configs={
        "leader.replication.throttled.replicas": f"0:{leader}", "follower.replication.throttled.replicas": f"0:{follower}"})])
    admin.alter_configs([ConfigResource(ConfigResourceType.BROKER, "", configs=throttles)])  # every broker's default
    config_path = write_config(cluster, tmp_path, observations_on=kraft_cluster,
                               pipeline_extra="replica_lag_messages = 1000\nquality_interval_s = 5\n",
                               history_trigger_s=10.0)
    monitor = Monitor(load_config(config_path), spark=spark).start()
    url = monitor.metrics_url
    try:
        wait_for(lambda: series(scrape(url), "krm_cluster_offline_partitions", cluster=cluster.name), 90, "/metrics")
        producer = _producer(cluster, topic, acks=1)
        cluster.pause(follower)
        for f in [producer.send(topic, b"x" * 200, partition=0) for _ in range(20_000)]:  # 4 MB: 200 s at 20 kB/s
            f.get(timeout=60)
        producer.close(timeout=5)
        wait_for(lambda: _open(config_path, topic, "UNDER_REPLICATED"), 60, "follower out of the ISR")
        cluster.resume(follower)
        resumed_at = time.time()
        lag = wait_for(lambda: (_open(config_path, topic, "REPLICA_LAG") or [None])[0], 60, "REPLICA_LAG")
        print(f"\n[lag] throttled follower resumed -> REPLICA_LAG stored {time.time() - resumed_at:.1f}s")
        assert lag["broker"] == follower and lag["details"]["in_isr"] is False
        assert lag["details"]["lag_messages"] >= 1000
        lagged = [s for s in series(scrape(url), "krm_replica_lag_messages", cluster=cluster.name)
                  if s.labels["topic"] == topic]
        assert [s.labels["broker"] for s in lagged] == [str(follower)] and lagged[0].value >= 1000

        plot = tmp_path / "lag.png"
        rows = wait_for(lambda: [r for r in krm_json("lag", "--topic", topic, "--since", "10m", "--plot", str(plot),
                                                     "--config", str(config_path))
                                 if r["broker"] == follower and r["lag_messages"] >= 1000], 60, "replica_lag history")
        assert all(r["leader"] == leader and r["in_isr"] is False for r in rows)
        assert plot.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"

        # the data-quality suite ran beside the alert path on this busy cluster's real observations,
        # and what Kafka guarantees held (log start <= HW <= the leader's LEO under 20k writes)
        validated = lambda: sum(s.value for s in series(scrape(url), "krm_data_quality_rows_validated_total"))  # noqa: E731
        wait_for(lambda: validated() > 0, 60, "a data-quality run over the observations")
        failing = {s.labels["column"] for s in series(scrape(url), "krm_data_quality_expectation_failing")}
        assert not failing & {"leader_in_replicas", "isr_in_replicas", "high_watermark >= log_start_offset",
                              "leader_leo >= high_watermark", "partition", "replica_count"}, failing
    finally:
        admin.alter_configs([ConfigResource(ConfigResourceType.BROKER, "", configs={})])  # throttles off
        admin.close()
        monitor.stop()
        if cluster.status()["brokers"][str(follower)]["state"] == "paused":
            cluster.resume(follower)
