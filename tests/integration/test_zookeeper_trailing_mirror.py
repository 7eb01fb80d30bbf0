"""ZooKeeper mode, a clean stop while krm's mirror trails ZooKeeper (its watches' callbacks held back, as on a loaded
machine): the poll that finds the stopped broker's port closed must not read the partitions it led as led by an
unreachable broker. The controller moved them before the broker closed its ports (KafkaController's controlled
shutdown); the poll reads them again from ZooKeeper itself (collectors/zookeeper.py, reread_led_by)."""

import json
import time

import pytest

from collectors.daemon import Collector
from collectors.zookeeper import ZkState
from foundation.config import load_config
from lab.harness import create_topic, wait_for, write_config

pytestmark = pytest.mark.integration

TRAIL_S = 1.0  # each state change of the topic reaches the mirror this much later than the one before


def test_a_clean_stop_is_not_read_leaderless_while_the_mirror_trails(zk_cluster, kraft_cluster, tmp_path, monkeypatch):
    from kafka import KafkaConsumer, TopicPartition

    cluster = zk_cluster
    topic = "zk-trailing"
    assignment = create_topic(cluster, topic, partitions=4, rf=3, configs={"min.insync.replicas": "2"})
    victim = assignment[0][0]  # partition 0's preferred leader, its leader after creation
    led = sorted(p for p, r in assignment.items() if r[0] == victim)

    watch_state = ZkState._state_watch

    def trailing(self: ZkState, t: str, p: int):
        watch, calls = watch_state(self, t, p), []

        def late(data, stat):
            if t == topic and calls:  # the first read sets the mirror up; the changes after it trail
                time.sleep(TRAIL_S)
            calls.append(1)
            return watch(data, stat)
        return late
    monkeypatch.setattr(ZkState, "_state_watch", trailing)

    config = load_config(write_config(cluster, tmp_path, poll_interval_s=0.5, observations_on=kraft_cluster))
    collector = Collector(config).start()
    consumer = KafkaConsumer(bootstrap_servers=kraft_cluster.bootstrap_servers, enable_auto_commit=False,
                             consumer_timeout_ms=500)
    stopped = False
    try:
        tp = TopicPartition(config.observations.topic, 0)
        wait_for(lambda: consumer.partitions_for_topic(config.observations.topic), 30, "observations topic")
        consumer.assign([tp])
        wait_for(lambda: collector.polls >= 2, 60, "two full polls")
        consumer.seek_to_end(tp)
        consumer.position(tp)

        cluster.stop(victim)  # SIGTERM: Kafka's controlled shutdown; returns once the process has exited
        stopped = True
        found_down, leaderless = [], []

        def settled() -> bool:
            """Polls' records of the topic until one no longer names the victim registered (its deregistration
            reached the trailing mirror) after one found it unreachable."""
            for msg in consumer:
                rec = json.loads(msg.value)
                if rec["kind"] != "topic" or rec["source"] != "admin" or rec["topic_state"]["topic"] != topic:
                    continue
                ts = rec["topic_state"]
                if victim in (ts.get("unreachable_brokers") or ()):
                    found_down.append(rec["poll_id"])
                    leaderless.extend((rec["poll_id"], p["partition"]) for p in ts["partitions"] if p["leader"] == victim)
                elif found_down and victim not in ts["live_brokers"]:
                    return True
            return False

        wait_for(settled, 90, "a poll finding the victim down, then one seeing it deregistered")
        print(f"\n[zk] broker {victim} (leading {led}) found down in polls {found_down[:3]}...; "
              f"partitions read as led by it then: {leaderless}")
        assert leaderless == [], "partitions read as led by a broker whose clean stop had moved them"
    finally:
        consumer.close()
        collector.stop()
        if stopped:
            cluster.start(victim)
