"""The CLI's live commands on a SASL_SSL + ACL cluster, as krm's least-privilege user: the same
answers as on a plaintext cluster, from the config `krm local-cluster up --security sasl_ssl` wrote."""

import json
import os
import subprocess

import pytest

from lab.local_security import LocalSecurity
from lab.harness import KRM, create_topic

pytestmark = pytest.mark.integration


def _krm(*args):
    out = subprocess.run([KRM, *args], capture_output=True, text=True, timeout=120,
                         env={**os.environ, "SPARK_LOCAL_IP": "127.0.0.1"})
    return out


def test_check_shutdown_explain_and_plan_as_krm(kraft4_secure_cluster, tmp_path):
    cluster = kraft4_secure_cluster
    config = str(cluster.config_path)
    text = cluster.config_path.read_text()
    assert all(LocalSecurity(cluster.root).password(u) not in text for u in ("krm", "admin", "jmx", "zk-krm"))
    rf1 = create_topic(cluster, "secured-cli-rf1", partitions=3, rf=1)
    victim = rf1[0][0]

    shutdown = _krm("check", "shutdown", "--broker", str(victim), "--config", config, "--json")
    assert shutdown.returncode == 1, shutdown.stderr  # unsafe: it holds the only copy of an RF-1 partition
    verdicts = json.loads(shutdown.stdout)
    leaderless = {(p["topic"], p["partition"]) for p in verdicts["partitions"] if p["verdict"] == "becomes_leaderless"}
    assert {("secured-cli-rf1", p) for p, r in rf1.items() if r == [victim]} <= leaderless

    explain = _krm("assign", "explain", "--topic", "secured-cli-rf1", "--config", config, "--json")
    assert explain.returncode == 0, explain.stderr
    e = json.loads(explain.stdout)
    assert (e["topic"], e["partitions"], e["replication_factor"]) == ("secured-cli-rf1", 3, 1)

    plan = _krm("plan", "rebalance", "--config", config, "--topic", "secured-cli-rf1", "--output", str(tmp_path / "p.json"))
    assert plan.returncode == 0, plan.stderr  # DescribeLogDirs (sizes) needs DESCRIBE on the cluster: granted
    assert json.loads((tmp_path / "p.json").read_text())["version"] == 1
