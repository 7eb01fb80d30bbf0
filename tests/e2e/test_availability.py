"""Before the controller knows: a SIGKILLed leader's partitions are unavailable on /metrics while Kafka
still lists the broker, then Kafka's election takes over; a short SIGSTOP raises nothing.

ZooKeeper mode (observations on the KRaft cluster). The broker's ZooKeeper session (6 s here) is the
controller's detection; the collector's TCP probe sees the closed port at the next poll.
"""

import time

import pytest

from foundation.config import load_config
from krm.runner import Monitor
from krm.scrape import scrape, series
from lab.harness import create_topic, krm_json, partition_states, wait_for, write_config

pytestmark = pytest.mark.e2e


def _unavailable(url, cluster, topic):
    return {(int(s.labels["partition"]), s.labels["cause"])
            for s in series(scrape(url), "krm_partition_unavailable", cluster=cluster) if s.labels["topic"] == topic}


def _broker_up(url, cluster, broker):
    (s,) = [s for s in series(scrape(url), "krm_broker_up", cluster=cluster) if s.labels["broker"] == str(broker)]
    return s.value


def _kept_home(url):
    return sum(s.value for s in series(scrape(url), "krm_collector_polls_kept_home_total"))


def _settled_leaders(cluster, topic):
    """partition -> leader, once every partition has a leader and its full replica set in the ISR."""
    states = partition_states(cluster, topic)
    if all(leader >= 0 and sorted(isr) == sorted(replicas) for leader, replicas, isr in states.values()):
        return {p: leader for p, (leader, _, _) in states.items()}
    return None


def _stable_leaders(cluster, topic):
    """The settled leaders, unchanged over two of krm's polls (so krm has seen them too)."""
    first = _settled_leaders(cluster, topic)
    if first is None:
        return None
    time.sleep(2.0)
    return first if _settled_leaders(cluster, topic) == first else None


def test_dead_leader_is_unavailable_before_the_controller_acts(zk_cluster, kraft_cluster, spark, tmp_path):
    cluster = zk_cluster
    topic = "avail-rf3"
    create_topic(cluster, topic, partitions=6, rf=3)
    config_path = write_config(cluster, tmp_path, observations_on=kraft_cluster)
    monitor = Monitor(load_config(config_path), spark=spark).start()
    url = monitor.metrics_url
    try:
        wait_for(lambda: series(scrape(url), "krm_cluster_offline_partitions", cluster=cluster.name), 90, "/metrics")
        assert _unavailable(url, cluster.name, topic) == set()
        # At rest, polls stay home (collectors/unchanged.py) and the view stays fresh without them: the kill
        # below is seen by a monitor that publishes only what changed.
        wait_for(lambda: _kept_home(url) >= 3, 90, "healthy, unchanged polls kept home")
        ages = []
        for _ in range(10):
            time.sleep(0.5)
            (age,) = series(scrape(url), "krm_observation_age_seconds", cluster=cluster.name)
            ages.append(age.value)
            assert series(scrape(url), "krm_cluster_view_stale", cluster=cluster.name)[0].value == 0, ages

        paused = cluster.broker_ids[-1]
        cluster.pause(paused)  # shorter than unreachable_after_s (4 s) and the session: no page
        time.sleep(2.5)
        cluster.resume(paused)
        time.sleep(2.0)
        assert not [i for i in krm_json("incidents", "--config", str(config_path))
                    if i["type"] == "PARTITION_UNAVAILABLE"], "a 2.5 s pause is not an outage"

        # The leaders as Kafka has them once the pause is over (every ISR complete again): a broker
        # that registered late on a loaded machine, or a session the pause let expire, moves leaders
        # away from the preferred replicas, and the partitions the kill makes unavailable are the
        # victim's at the moment of the kill.
        leaders = wait_for(lambda: _stable_leaders(cluster, topic), 60, f"{topic}: every ISR complete, leaders still")
        victim = next(leader for leader in leaders.values() if leader != paused)
        led = {p for p, leader in leaders.items() if leader == victim}
        cluster.kill(victim)
        t_kill = time.monotonic()
        seen = wait_for(lambda: (lambda u: u if {p for p, _ in u} >= led else None)(_unavailable(url, cluster.name, topic)),
                        30, f"partitions {sorted(led)} unavailable")
        print(f"\n[availability] SIGKILL -> krm_partition_unavailable: {time.monotonic() - t_kill:.1f}s")
        assert seen == {(p, "leader_unreachable") for p in led}
        assert _broker_up(url, cluster.name, victim) == 1.0, "seen before Kafka's controller dropped the broker"
        assert not series(scrape(url), "krm_partition_offline", cluster=cluster.name), "offline stays Kafka's verdict"

        # The session expires, the controller elects the live ISR members: available again.
        wait_for(lambda: _broker_up(url, cluster.name, victim) == 0.0, 60, "the controller to drop the broker")
        wait_for(lambda: _unavailable(url, cluster.name, topic) == set(), 60, "new leaders")
        # this topic's: the shared cluster's other topics (another test's) may have had the victim as leader too
        stored = [i for i in krm_json("incidents", "--config", str(config_path))
                  if i["type"] == "PARTITION_UNAVAILABLE" and i["topic"] == topic]
        assert {i["partition"] for i in stored} == led and all(i["status"] == "resolved" for i in stored)
        assert all(i["details"]["unreachable_brokers"] == [victim] for i in stored)
    finally:
        monitor.stop()
        state = cluster.status()["brokers"]
        for b, s in state.items():
            if s["state"] == "paused":
                cluster.resume(int(b))
            elif s["state"] == "dead":
                cluster.start(int(b))
