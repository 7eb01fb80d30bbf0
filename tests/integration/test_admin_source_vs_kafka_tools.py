"""What the Admin API source collects agrees with Kafka's own tools at the same moment, on a real
ZooKeeper-mode cluster: `kafka-topics --describe` (leader, replicas, ISR) and `GetOffsetShell
--time -1` (the latest offset a consumer can read: the leader's high watermark)."""

import re

import pytest

from collectors.admin import AdminSource
from foundation.config import ClusterConfig, CollectorConfig
from lab.harness import create_topic, kafka_tool as _tool

pytestmark = pytest.mark.integration


def test_metadata_and_high_watermarks_match_kafka_tools(zk_cluster):
    from kafka import KafkaProducer

    cluster = zk_cluster
    topic = "tools-agree"
    create_topic(cluster, topic, partitions=3, rf=3)
    producer = KafkaProducer(bootstrap_servers=cluster.bootstrap_servers, acks="all")
    for i in range(60):
        producer.send(topic, b"m", partition=i % 3)
    producer.send(topic, b"m", partition=0)
    producer.flush()
    producer.close()

    src = AdminSource(ClusterConfig(name=cluster.name, bootstrap_servers=cluster.bootstrap_servers), CollectorConfig())
    try:
        records = src.poll()
        ours = {p["partition"]: p for p in next(r for r in records if r["kind"] == "topic"
                                                and r["topic_state"]["topic"] == topic)["topic_state"]["partitions"]}
    finally:
        src.close()
    # Given no ZooKeeper address, krm asks this cluster as it asks a KRaft one: its ZooKeeper-mode 3.9
    # brokers answer ListPartitionReassignments and DescribeLogDirs v4 (the directories' sizes) but neither
    # DescribeTopicPartitions nor DescribeQuorum, and /metrics says so (krm_collector_capability 0 for elr
    # and quorum)
    (cs,) = [r["cluster_state"] for r in records if r["kind"] == "cluster"]
    assert (cs["capabilities"], cs["unsupported"]) == (["log_dir_sizes", "reassignments"], ["elr", "quorum"])

    described = _tool("org.apache.kafka.tools.TopicCommand", "--bootstrap-server", cluster.bootstrap_servers,
                      "--describe", "--topic", topic)
    theirs = {}
    for m in re.finditer(r"Partition: (\d+)\s+Leader: (-?\d+)\s+Replicas: ([\d,]+)\s+Isr: ([\d,]*)", described):
        theirs[int(m.group(1))] = (int(m.group(2)), [int(x) for x in m.group(3).split(",")],
                                   sorted(int(x) for x in m.group(4).split(",") if x))
    assert theirs == {p: (o["leader"], o["replicas"], sorted(o["isr"])) for p, o in ours.items()}

    offsets = _tool("org.apache.kafka.tools.GetOffsetShell", "--bootstrap-server", cluster.bootstrap_servers,
                    "--topic", topic, "--time", "-1")
    hw = {int(p): int(o) for _, p, o in (line.split(":") for line in offsets.split())}
    assert hw == {0: 21, 1: 20, 2: 20}
    assert hw == {p: o["high_watermark"] for p, o in ours.items()}
    # every replica (followers included, via replica id -2) at the leader's LEO once acks=all returned
    assert all({r["log_end_offset"] for r in o["replica_offsets"]} == {hw[p]} and len(o["replica_offsets"]) == 3
               for p, o in ours.items())
