"""Collectors on several hosts: two `krm collect` processes with the same config and `--shard 1/2`,
`--shard 2/2` each poll one of its two clusters and publish into one observations topic; one
pipeline judges both. A broker SIGKILLed in each cluster takes its RF-1 partitions offline: each
partition alerts once, in its own cluster, and resolves when the broker is back. Nothing duplicated,
nothing lost."""

import signal
import subprocess

import pytest

from foundation.config import load_config
from krm.runner import Monitor
from krm.scrape import scrape, series
from lab.harness import KRM, create_topic, stored_incidents, wait_equal, wait_for, write_config

pytestmark = pytest.mark.e2e

VICTIM = 3


def _offline(url, cluster, topic):
    return {int(s.labels["partition"]) for s in series(scrape(url), "krm_partition_offline", cluster=cluster)
            if s.labels["topic"] == topic}


def _incidents(config_path, cluster, topic, *flags):
    return [i for i in stored_incidents(*flags, "--config", str(config_path))
            if i["cluster"] == cluster and i["topic"] == topic and i["type"] == "OFFLINE_PARTITION"]


def test_two_sharded_collectors_feed_one_pipeline(zk_cluster, kraft_cluster, spark, tmp_path):
    clusters = {c.name: c for c in (zk_cluster, kraft_cluster)}
    topics, expected = {}, {}
    for name, cluster in clusters.items():
        topics[name] = f"rf1-shard-{cluster.mode}"
        assignment = create_topic(cluster, topics[name], partitions=6, rf=1)
        expected[name] = {p for p, replicas in assignment.items() if replicas == [VICTIM]}
        assert expected[name], f"nothing of {topics[name]} on broker {VICTIM}: the test would prove nothing"

    # one config for both hosts: the two clusters, the observations on the KRaft one, both collectors'
    # own /metrics on any free port (they share this host here)
    config_path = write_config(zk_cluster, tmp_path, observations_on=kraft_cluster, collector_extra="metrics_port = 0\n")
    config_path.write_text(config_path.read_text() + f'\n[[clusters]]\nname = "{kraft_cluster.name}"\n'
                                                      f'bootstrap_servers = "{kraft_cluster.bootstrap_servers}"\n')
    config = load_config(config_path)
    shares = [config.only(shard=(i, 2)).clusters for i in (1, 2)]
    assert sorted(c.name for share in shares for c in share) == sorted(clusters) and all(len(s) == 1 for s in shares)

    logs = [open(tmp_path / f"collect-{i}.log", "w") for i in (1, 2)]
    collectors = [subprocess.Popen([KRM, "collect", "--config", str(config_path), "--shard", f"{i}/2"],
                                   stdout=logs[i - 1], stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                   start_new_session=True) for i in (1, 2)]
    monitor = Monitor(config, collect=False, spark=spark).start()
    try:
        url = monitor.metrics_url
        for name in clusters:  # each cluster observed, by the one collector whose shard holds it
            wait_for(lambda name=name: len([s for s in series(scrape(url), "krm_broker_up", cluster=name)
                                            if s.value == 1]) == 3, 120, f"{name}: three brokers up")
        for cluster in clusters.values():
            cluster.kill(VICTIM)
        for name in clusters:
            wait_equal(lambda name=name: _offline(url, name, topics[name]), expected[name], 60, f"{name}: offline series")
        for name in clusters:
            def settled(name=name):  # exactly one open incident per offline partition (a duplicate never settles)
                found = _incidents(config_path, name, topics[name], "--open")
                return found if sorted(i["partition"] for i in found) == sorted(expected[name]) else None
            opened = wait_for(settled, 30, f"{name}: one stored incident per offline partition")
            assert all(i["details"]["must_return"] == [VICTIM] for i in opened)

        for cluster in clusters.values():
            cluster.start(VICTIM)
        for name in clusters:
            wait_for(lambda name=name: not _offline(url, name, topics[name]), 60, f"{name}: the offline series clear")
            wait_for(lambda name=name: not _incidents(config_path, name, topics[name], "--open"), 30, f"{name}: resolved")
            every = _incidents(config_path, name, topics[name])
            assert sorted(i["partition"] for i in every) == sorted(expected[name]), "none opened twice"
            assert all(i["status"] == "resolved" for i in every)
        assert all(c.poll() is None for c in collectors), "a collector exited"
    finally:
        monitor.stop()
        for c in collectors:
            if c.poll() is None:
                c.send_signal(signal.SIGTERM)
        for c in collectors:
            try:
                c.wait(timeout=30)
            except subprocess.TimeoutExpired:
                c.kill()
        for f in logs:
            f.close()
        for cluster in clusters.values():
            if cluster.status()["brokers"][str(VICTIM)]["state"] == "dead":
                cluster.start(VICTIM)
