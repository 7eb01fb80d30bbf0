"""`krm check shutdown` on a real ZooKeeper-mode cluster: the docs/cases/rf1-outage-zk-chroot.md situation is flagged unsafe
before the broker is stopped, and the prediction matches what Kafka does when it is SIGKILLed."""

import json
import os
import subprocess

import pytest

from lab.harness import KRM, create_topic, kafka_admin, wait_for, write_config

pytestmark = pytest.mark.integration


def _leaders(cluster, topic):

    admin = kafka_admin(cluster)
    try:
        (t,) = admin.describe_topics([topic])
        return {p["partition"]: p["leader"] for p in t["partitions"]}
    finally:
        admin.close()


def test_prediction_then_reality(zk_cluster, tmp_path):
    cluster = zk_cluster
    rf1 = create_topic(cluster, "shutdown-rf1", partitions=3, rf=1)
    create_topic(cluster, "shutdown-rf3", partitions=3, rf=3)
    victim = rf1[0][0]
    config_path = write_config(cluster, tmp_path)
    out = subprocess.run([KRM, "check", "shutdown", "--broker", str(victim), "--config", str(config_path), "--json",
                          "--drain-plan", str(tmp_path / "drain.json")],
                         capture_output=True, text=True, timeout=120, env={**os.environ})
    assert out.returncode == 1, out.stderr  # unsafe
    report = json.loads(out.stdout)
    by = {(p["topic"], p["partition"]): p for p in report["partitions"]}
    lost = {p for p, replicas in rf1.items() if replicas == [victim]}
    assert {p for (t, p), v in by.items() if t == "shutdown-rf1" and v["verdict"] == "becomes_leaderless"} == lost
    moves = {p: v["new_leader"] for (t, p), v in by.items() if t == "shutdown-rf3" and v["verdict"] == "leadership_moves"}
    assert moves, "the victim leads some RF-3 partition"
    plan = json.loads((tmp_path / "drain.json").read_text())  # other tests' RF-1 topics may be on it too
    assert {m["partition"] for m in plan["partitions"] if m["topic"] == "shutdown-rf1"} == lost
    assert {(m["topic"], m["partition"]) for m in plan["partitions"]} == {
        k for k, v in by.items() if v["verdict"] in ("becomes_leaderless", "unclean_election_data_loss", "under_min_isr")}
    assert all(victim not in m["replicas"] for m in plan["partitions"])

    cluster.kill(victim)
    try:
        wait_for(lambda: all(_leaders(cluster, "shutdown-rf1")[p] == -1 for p in lost), 60, "RF-1 partitions offline")
        wait_for(lambda: all(_leaders(cluster, "shutdown-rf3")[p] == leader for p, leader in moves.items()), 60,
                 f"leaders moved as predicted {moves}")
    finally:
        cluster.start(victim)
