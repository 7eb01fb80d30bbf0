"""A gray failure: a leader nobody can reach while Kafka still counts it alive.

The broker's listener drops every packet (nftables, lab/packet_filter.py); its process, its ZooKeeper
session and its KRaft heartbeats live on, so Kafka's own view keeps it registered and leading — no
offline partition, ever — while clients of the partitions it leads fail. An acks=all producer per
partition is the judge: krm names exactly the partitions whose writes fail, while Kafka's view stays
green, and clears them once the path is back. The detection and clearing times are printed (their
goals, `unreachable_after_s` + one poll and two polls, are figures for RELIABILITY.md, not
assertions: the suite runs on a loaded machine).
"""

from __future__ import annotations

import time

import pytest

from foundation.config import load_config
from krm.runner import Monitor
from krm.scrape import scrape, series
from lab.client_judge import ClientJudge
from lab.harness import (create_topic, every_isr_whole, partition_leaders, settled_leaders, stored_incidents,
                         wait_for, write_config)

pytestmark = pytest.mark.e2e

POLL_S = 1.0
SLOW_S = 2.0  # an acknowledgement later than this is harm, as a failure is


def _unavailable(url: str, cluster: str, topic: str) -> dict[int, str]:
    return {int(s.labels["partition"]): s.labels["cause"]
            for s in series(scrape(url), "krm_partition_unavailable", cluster=cluster) if s.labels["topic"] == topic}


@pytest.mark.parametrize("mode", ["zk", "kraft4"])
def test_a_leader_nobody_can_reach_is_named_and_cleared(mode, request, zk_cluster, kraft_cluster, spark, tmp_path):
    cluster = zk_cluster if mode == "zk" else request.getfixturevalue("kraft4_cluster")
    observations = kraft_cluster if mode == "zk" else zk_cluster  # not on the watched cluster (docs/deploying.md)
    topic = f"gray-{mode}"
    create_topic(cluster, topic, partitions=6, rf=3, configs={"min.insync.replicas": "2"})
    config_path = write_config(cluster, tmp_path, poll_interval_s=POLL_S, observations_on=observations)
    config = load_config(config_path)
    after_s = config.collector.unreachable_after_s
    monitor = Monitor(config, spark=spark).start()
    url = monitor.metrics_url
    writes = None
    victim = None
    try:
        wait_for(lambda: series(scrape(url), "krm_cluster_offline_partitions", cluster=cluster.name), 90, "/metrics")
        leaders = wait_for(lambda: settled_leaders(cluster, topic, 2 * POLL_S), 90, f"{topic}: every ISR whole, leaders still")
        victim = leaders[0]
        led = {p for p, leader in leaders.items() if leader == victim}
        writes = ClientJudge(cluster.bootstrap_servers, topic, set(leaders), slow_s=SLOW_S, **cluster.admin_kwargs())
        wait_for(lambda: writes.all_ok_since(time.monotonic() - 1.0), 30, "the producer's writes acknowledged")
        assert _unavailable(url, cluster.name, topic) == {}

        cluster.cut(victim)
        t_cut = time.monotonic()
        named = wait_for(lambda: (lambda u: u if set(u) >= led else None)(_unavailable(url, cluster.name, topic)),
                         60, f"partitions {sorted(led)} unavailable")
        detected_s = time.monotonic() - t_cut
        assert named == {p: "leader_unreachable" for p in led}
        # Kafka's own view stays green: the broker is registered and still leads them
        up = {s.labels["broker"]: s.value for s in series(scrape(url), "krm_broker_up", cluster=cluster.name)}
        assert up[str(victim)] == 1.0, "Kafka still counts it alive"
        view = partition_leaders(cluster, topic, avoid=victim)
        assert {p for p, (leader, _) in view.items() if leader == victim} == led, view
        assert not series(scrape(url), "krm_partition_offline", cluster=cluster.name), "offline stays Kafka's verdict"
        time.sleep(max(0.0, 12.0 - detected_s))  # a cut of ~12 s in all

        cluster.heal(victim)
        t_heal = time.monotonic()
        wait_for(lambda: _unavailable(url, cluster.name, topic) == {}, 120, "the partitions available again")
        cleared_s = time.monotonic() - t_heal
        wait_for(lambda: writes.all_ok_since(t_heal + cleared_s), 60, "the producer's writes acknowledged again")
        hurt = writes.hurt_between(t_cut + 1.0, t_heal - 1.0)
        first_failure = min((t for p in led for t in writes.failed[p] if t >= t_cut), default=t_cut) - t_cut
        last_failure = max((t for p in led for t in writes.failed[p] if t >= t_cut), default=t_heal) - t_heal
        print(f"\n[gray {mode}] cut -> krm_partition_unavailable {detected_s:.1f}s (goal: unreachable_after_s "
              f"{after_s:.0f} + one poll {POLL_S:.0f}); heal -> cleared {cleared_s:.1f}s (goal: two polls); "
              f"producer: first failed write {first_failure:+.1f}s after the cut, last {last_failure:+.1f}s "
              f"after the heal")
        assert hurt == led, f"krm named {sorted(led)}, the producer failed on {sorted(hurt)}"
        stored = [i for i in stored_incidents("--config", str(config_path))
                  if i["type"] == "PARTITION_UNAVAILABLE" and i["topic"] == topic]
        assert {i["partition"] for i in stored} == led and all(i["status"] == "resolved" for i in stored), stored
    finally:
        if victim is not None:
            cluster.heal(victim, missing_ok=True)  # healed above unless the test failed first
        if writes is not None:
            writes.stop()
        monitor.stop()
        # the pooled cluster whole again for the next tests: the cut followers rejoin every ISR
        wait_for(lambda: every_isr_whole(cluster), 120, "every ISR of the cluster whole after the heal")
