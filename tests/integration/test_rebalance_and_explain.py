"""Placement tools against Kafka itself, on the shared ZooKeeper-mode cluster:

- `krm assign explain --next N` predicts where Kafka's controller puts the next partitions, and the
  prediction matches what Kafka does when the topic is then expanded.
- a `krm plan rebalance` plan is accepted and executed by Kafka's own `kafka-reassign-partitions`,
  and after the preferred election the topic is even in replicas and leaders.
"""

import json
import re
from collections import Counter

import pytest

from lab.harness import kafka_admin, kafka_tool, krm_json, wait_for, write_config

pytestmark = pytest.mark.integration


def _describe(cluster, topic):

    admin = kafka_admin(cluster)
    try:
        (t,) = admin.describe_topics([topic])
        return {p["partition"]: (list(p["replicas"]), p["leader"]) for p in t["partitions"]}
    finally:
        admin.close()


def test_explain_predicts_kafkas_next_expansion(zk_cluster, tmp_path):
    from kafka.admin import NewPartitions, NewTopic

    cluster = zk_cluster
    a, b, c = sorted(int(x) for x in cluster.status()["brokers"])[:3]
    config = write_config(cluster, tmp_path)
    admin = kafka_admin(cluster)
    try:  # laid out by hand, so that partition 1 is not what Kafka's rule would give
        admin.create_topics([NewTopic("explain-grow", num_partitions=-1, replication_factor=-1,
                                      replica_assignments={0: [c, a], 1: [b, c]})])
        wait_for(lambda: len(_describe(cluster, "explain-grow")) == 2, 30, "topic created")
        report = krm_json("assign", "explain", "--topic", "explain-grow", "--next", "4", "--config", str(config))
        predicted = {int(p): r for p, r in report["next_partitions"].items()}
        assert sorted(predicted) == [2, 3, 4, 5]
        admin.create_partitions({"explain-grow": NewPartitions(total_count=6)})  # Kafka's controller places them
        actual = wait_for(lambda: (d := _describe(cluster, "explain-grow")) and len(d) == 6 and d, 30, "expansion")
        assert {p: actual[p][0] for p in range(2, 6)} == predicted
        again = krm_json("assign", "explain", "--topic", "explain-grow", "--next", "0", "--config", str(config))
        assert [(s["first"], s["last"], s["origin"]) for s in again["segments"]] == [(0, 1, "creation"),
                                                                                    (2, 5, "expansion")]
    finally:
        admin.close()


def test_plan_executed_by_kafkas_reassign_tool(zk_cluster, tmp_path):
    from kafka import KafkaProducer
    from kafka.admin import NewTopic

    cluster = zk_cluster
    brokers = sorted(int(b) for b in cluster.status()["brokers"])
    a, b, c = brokers[:3]
    admin = kafka_admin(cluster)
    try:  # everything on two brokers, all preferred leaders on one: what an old, grown cluster looks like
        admin.create_topics([NewTopic("rebal", num_partitions=-1, replication_factor=-1,
                                      replica_assignments={p: [a, b] for p in range(6)})])
    finally:
        admin.close()
    wait_for(lambda: all(leader >= 0 for _, leader in _describe(cluster, "rebal").values()), 30, "leaders")
    producer = KafkaProducer(bootstrap_servers=cluster.bootstrap_servers, acks="all")
    for i in range(600):
        producer.send("rebal", value=b"x" * 100, partition=i % 6)
    producer.flush()
    producer.close()

    config = write_config(cluster, tmp_path)
    plan_file = tmp_path / "plan.json"
    summary = krm_json("plan", "rebalance", "--topic", "rebal", "--output", str(plan_file), "--config", str(config))
    assert summary["replica_moves"] == summary["minimum_moves"] == 4  # 12 replicas, 4 per broker: 4 go to the third
    assert summary["bytes_moved"] > 4 * 100 * 100  # four partitions of ~100 records of 100 bytes
    plan = json.loads(plan_file.read_text())
    assert plan == summary["plan"] and all(m["topic"] == "rebal" for m in plan["partitions"])

    kafka_tool("org.apache.kafka.tools.reassign.ReassignPartitionsCommand", "--bootstrap-server",
               cluster.bootstrap_servers, "--reassignment-json-file", str(plan_file), "--execute")
    wait_for(lambda: "is still in progress" not in kafka_tool(
        "org.apache.kafka.tools.reassign.ReassignPartitionsCommand", "--bootstrap-server", cluster.bootstrap_servers,
        "--reassignment-json-file", str(plan_file), "--verify"), 120, "reassignment to complete")
    elect = tmp_path / "elect.json"
    elect.write_text(json.dumps({"partitions": [{"topic": "rebal", "partition": p} for p in range(6)]}))
    out = kafka_tool("org.apache.kafka.tools.LeaderElectionCommand", "--bootstrap-server", cluster.bootstrap_servers,
                     "--election-type", "PREFERRED", "--path-to-json-file", str(elect))
    assert not re.search(r"(?i)failed", out), out

    def even():
        d = _describe(cluster, "rebal")
        replicas = Counter(x for r, _ in d.values() for x in r)
        leaders = Counter(leader for _, leader in d.values())
        return (replicas == Counter({a: 4, b: 4, c: 4}) and leaders == Counter({a: 2, b: 2, c: 2})) and d

    final = wait_for(even, 60, "an even topic after the plan and the preferred election")
    assert {p: r for p, (r, _) in final.items()} == {m["partition"]: m["replicas"] for m in plan["partitions"]} | {
        p: r for p, (r, _) in final.items() if p not in {m["partition"] for m in plan["partitions"]}}
    again = krm_json("plan", "rebalance", "--topic", "rebal", "--config", str(config))
    assert again["replica_moves"] == 0 and again["plan"]["partitions"] == []
