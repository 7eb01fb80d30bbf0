"""The ZooKeeper source on a real ZooKeeper-mode cluster under a chroot: a partition turning
leaderless is published from the state znode's watch within a second of Kafka's write (the znode's
mtime), before the next scheduled poll, and carries that mtime."""

import json
import time

import pytest

from collectors.daemon import Collector
from foundation.config import load_config
from lab.harness import create_topic, wait_for, write_config

pytestmark = pytest.mark.integration


def test_leaderless_state_published_within_a_second_of_the_znode_write(zk_cluster, kraft_cluster, tmp_path):
    from kafka import KafkaConsumer, TopicPartition

    cluster = zk_cluster
    topic = "zk-watch"
    assignment = create_topic(cluster, topic, partitions=3, rf=1)
    victim = assignment[0][0]
    lost = sorted(p for p, r in assignment.items() if r == [victim])
    # a long poll interval: anything seen within a second can only come from the watch
    config = load_config(write_config(cluster, tmp_path, poll_interval_s=30.0, observations_on=kraft_cluster))
    collector = Collector(config).start()
    consumer = KafkaConsumer(bootstrap_servers=kraft_cluster.bootstrap_servers, enable_auto_commit=False,
                             consumer_timeout_ms=500)
    try:
        tp = TopicPartition(config.observations.topic, 0)
        wait_for(lambda: consumer.partitions_for_topic(config.observations.topic), 30, "observations topic")
        consumer.assign([tp])
        wait_for(lambda: collector.polls >= 1, 60, "first full poll")
        consumer.seek_to_end(tp)
        consumer.position(tp)

        cluster.kill(victim)

        def leaderless() -> list | None:
            for msg in consumer:
                rec = json.loads(msg.value)
                if rec["kind"] != "topic" or rec["source"] != "zookeeper" or rec["topic_state"]["topic"] != topic:
                    continue
                gone = [p for p in rec["topic_state"]["partitions"] if p["leader"] == -1]
                if sorted(p["partition"] for p in gone) == lost:
                    return [(msg.timestamp, rec, p) for p in gone]
            return None

        found = wait_for(leaderless, 60, "a ZooKeeper-sourced record with the partitions leaderless")
        for published_ms, rec, p in found:
            delay = published_ms - p["zk_mtime_ms"]
            print(f"\n[zk] partition {p['partition']}: znode write -> published {delay} ms")
            assert 0 <= delay <= 1000, f"published {delay} ms after the state znode was written"
            assert rec["topic_state"]["has_offsets"] is False and victim not in rec["topic_state"]["live_brokers"]
        assert collector.quick_publishes >= 1
    finally:
        consumer.close()
        collector.stop()
        cluster.start(victim)
        time.sleep(1)
