"""`krm local-cluster` as a user runs it: the --json contract and broker control, on a real cluster."""

import os
import subprocess

import pytest

from lab.harness import KRM

pytestmark = pytest.mark.integration


def _krm(home, *args):
    return subprocess.run([KRM, "local-cluster", *args], capture_output=True, text=True, timeout=180,
                          env={**os.environ, "KRM_HOME": str(home)})


def test_up_json_status_and_broker_control(tmp_path):
    import json

    from kazoo.client import KazooClient

    up = _krm(tmp_path, "up", "--mode", "zk", "--brokers", "1", "--chroot", "/kafka_cluster_01", "--json",
              "--name", "cli")
    assert up.returncode == 0, up.stderr
    try:
        info = json.loads(up.stdout)
        assert info["bootstrap_servers"].startswith("127.0.0.1:")
        assert info["zookeeper"].endswith("/kafka_cluster_01")
        assert set(info["brokers"]) == {"1"} and info["brokers"]["1"]["pid"] > 0
        assert os.path.exists(info["config"]) and "metrics_port" in open(info["config"]).read()

        # The broker registered under the chroot, exactly where docs/cases/rf1-outage-zk-chroot.md looked.
        zk_hosts = info["zookeeper"].split("/")[0]
        zk = KazooClient(hosts=zk_hosts)
        zk.start(timeout=10)
        try:
            assert zk.get_children("/kafka_cluster_01/brokers/ids") == ["1"]
        finally:
            zk.stop()

        def state():
            st = _krm(tmp_path, "status", "--json", "--name", "cli")
            assert st.returncode == 0, st.stderr
            return json.loads(st.stdout)["brokers"]["1"]["state"]

        assert state() == "running"
        assert _krm(tmp_path, "pause", "1", "--name", "cli").returncode == 0
        assert state() == "paused"
        assert _krm(tmp_path, "resume", "1", "--name", "cli").returncode == 0
        assert state() == "running"
        # slow: capped at 5 % of a core, still running and registered; fast undoes it; a second fast says so
        slow = _krm(tmp_path, "slow", "1", "--cpu", "5", "--name", "cli")
        assert slow.returncode == 0 and "5 % of one core" in slow.stdout, slow.stderr

        def cap():
            return json.loads(_krm(tmp_path, "status", "--json", "--name", "cli").stdout)["brokers"]["1"]["cpu_cap_pct"]
        assert state() == "running" and cap() == 5.0
        assert _krm(tmp_path, "fast", "1", "--name", "cli").returncode == 0 and cap() is None
        again = _krm(tmp_path, "fast", "1", "--name", "cli")
        assert again.returncode != 0 and "broker 1 is not slowed" in again.stderr
        no_how = _krm(tmp_path, "slow", "1", "--name", "cli")
        assert no_how.returncode != 0 and "--cpu PCT" in no_how.stderr
        assert _krm(tmp_path, "kill", "1", "--name", "cli").returncode == 0
        assert state() == "dead"
        assert _krm(tmp_path, "start", "1", "--name", "cli").returncode == 0
        assert state() == "running"
    finally:
        down = _krm(tmp_path, "down", "--name", "cli")
    assert down.returncode == 0, down.stderr


def test_unknown_cluster_is_a_clear_error(tmp_path):
    out = _krm(tmp_path, "status", "--name", "nope")
    assert out.returncode == 2
    assert "no local cluster" in out.stderr and "krm local-cluster up" in out.stderr


def test_kraft_defaults_to_the_newest_kafka_4_and_stops_cleanly(tmp_path):
    import json

    from lab.local_cluster import KRAFT_KAFKA_VERSION

    up = _krm(tmp_path, "up", "--mode", "kraft", "--brokers", "1", "--json", "--name", "k4")
    assert up.returncode == 0, up.stderr
    try:
        info = json.loads(up.stdout)
        assert info["kafka_version"] == KRAFT_KAFKA_VERSION and KRAFT_KAFKA_VERSION.startswith("4.")
        assert set(info["controllers"]) == {"1000"} and info["zookeeper"] is None
        stop = _krm(tmp_path, "stop", "1", "--name", "k4")
        assert stop.returncode == 0, stop.stderr
        log = open(info["brokers"]["1"]["log"]).read()
        assert "shut down completed" in log.lower() or "shutdown completed" in log.lower(), "a controlled shutdown"
        assert _krm(tmp_path, "start", "1", "--name", "k4").returncode == 0
    finally:
        assert _krm(tmp_path, "down", "--name", "k4").returncode == 0


def test_versions_are_checked_before_anything_starts(tmp_path):
    zk4 = _krm(tmp_path, "up", "--mode", "zk", "--kafka-version", "4.4.0", "--name", "bad")
    assert zk4.returncode == 2 and "no ZooKeeper mode" in zk4.stderr and "3.9.1" in zk4.stderr
    unknown = _krm(tmp_path, "up", "--mode", "kraft", "--kafka-version", "9.9.9", "--name", "bad")
    assert unknown.returncode == 2 and "9.9.9 is not installed" in unknown.stderr and "4.4.0" in unknown.stderr
    assert not (tmp_path / "clusters" / "bad").exists()
