"""The canary on a real Kafka 4 cluster (observations on a separate cluster): a SIGKILLed broker's
canary partition stops taking acks=all writes at once (and so do the partitions it follows, until
the controller fences it and the ISR drops it), which krm_canary_produce_up, a PARTITION_UNAVAILABLE
incident (cause canary_failed) and krm_partition_unavailable show; when the controller has moved its
leadership the writes succeed again, while the broker is still down."""

import time

import pytest

from foundation.config import load_config
from krm.runner import Monitor
from krm.scrape import scrape, series
from lab.harness import krm_json, stored_incidents, wait_equal, wait_for, write_config

pytestmark = pytest.mark.e2e


def _up(url, cluster):
    return {int(s.labels["broker"]): s.value for s in series(scrape(url), "krm_canary_produce_up", cluster=cluster)}


def test_canary_sees_a_killed_leader_before_and_after_the_election(kraft4_cluster, zk_cluster, spark, tmp_path):
    cluster = kraft4_cluster
    victim = 3
    config_path = write_config(cluster, tmp_path, observations_on=zk_cluster, cluster_extra="canary = true\n",
                               collector_extra="canary_interval_s = 1.0\ncanary_timeout_ms = 2000\n")
    monitor = Monitor(load_config(config_path), spark=spark).start()
    url = monitor.metrics_url
    try:
        wait_for(lambda: _up(url, cluster.name) == {1: 1.0, 2: 1.0, 3: 1.0}, 120, "every broker's canary writing")

        def read_back_everywhere():  # settled: one round's read-back can miss a record on a loaded machine
            e2e = {s.labels["broker"]: s.value for s in series(scrape(url), "krm_canary_e2e_latency_seconds",
                                                                cluster=cluster.name)}
            return e2e if set(e2e) == {"1", "2", "3"} else None

        e2e = wait_for(read_back_everywhere, 60, "every broker's canary record read back")
        assert all(0 < v < 2 for v in e2e.values()), e2e

        cluster.kill(victim)
        t_kill = time.monotonic()
        wait_for(lambda: _up(url, cluster.name).get(victim) == 0.0, 30, f"broker {victim}'s canary failing")
        print(f"\nSIGKILL -> krm_canary_produce_up 0: {time.monotonic() - t_kill:.1f}s")
        unavailable = [s for s in series(scrape(url), "krm_partition_unavailable", cluster=cluster.name)
                       if s.labels["topic"] == "krm.canary"]
        assert any(s.labels["cause"] == "canary_failed" for s in unavailable) or \
            any(s.labels["cause"] == "leader_unreachable" for s in unavailable), unavailable
        # the controller fences the broker and elects new leaders: the canary writes again, broker still down
        wait_equal(lambda: _up(url, cluster.name), {1: 1.0, 2: 1.0, 3: 1.0}, 90, "writes after the election")
        print(f"SIGKILL -> canary writing everywhere again: {time.monotonic() - t_kill:.1f}s")
        assert cluster.status()["brokers"][str(victim)]["state"] == "dead"
        incidents = wait_for(lambda: [i for i in stored_incidents("--config", str(config_path))
                                      if i["cause"] == "canary_failed"], 30, "the canary incident stored")
        # the victim's own partition; with acks=all, the partitions it follows too until the ISR drops it
        assert {(i["type"], i["topic"]) for i in incidents} == {("PARTITION_UNAVAILABLE", "krm.canary")}
        assert victim in {i["broker"] for i in incidents}
        # each names the in-sync replicas its failed write waited on, as the canary's producer knew them
        assert all(i["details"].get("isr") and set(i["details"]["isr"]) <= {1, 2, 3} for i in incidents), incidents
        assert wait_for(lambda: all(i["status"] == "resolved" for i in krm_json(
            "incidents", "--config", str(config_path)) if i["cause"] == "canary_failed"), 30, "resolved")
    finally:
        monitor.stop()
        if cluster.status()["brokers"][str(victim)]["state"] == "dead":
            cluster.start(victim)
