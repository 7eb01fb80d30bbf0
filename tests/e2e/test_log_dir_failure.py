"""A failed log directory (JBOD, KIP-112) on a live broker, end to end: the partitions whose only
in-sync copy sat on it are offline with cause `log_dir_offline`, the broker stays up, and they come
back when the broker restarts on a new disk.

Kafka leaves a replica on an offline directory out of every election (ZooKeeper mode:
ControllerContext.isReplicaOnline; KRaft: ReplicationControlManager.handleDirectoriesOffline) and lists
it in Metadata's offline replicas. Before this cause krm said `live_isr_but_no_leader` ("the
controller has not elected yet"), whose runbook sends the on-call to the controller instead of the disk.
"""

import time

import pytest

from foundation.config import load_config
from krm.runner import Monitor
from krm.scrape import scrape, series
from lab.harness import kafka_admin, local_cluster, partition_states, stored_incidents, wait_equal, wait_for, write_config
from lab.local_cluster import KRAFT_KAFKA_VERSION, ZK_KAFKA_VERSION

pytestmark = pytest.mark.e2e

VICTIM = 2
FAILED_DIR = 1  # the broker's second log directory


def _create_on(cluster, topic, assignment):
    from kafka.admin import NewTopic

    admin = kafka_admin(cluster)
    try:
        admin.create_topics([NewTopic(topic, -1, -1, replica_assignments=assignment)])
    finally:
        admin.close()
    wait_for(lambda: all(s[0] >= 0 for s in partition_states(cluster, topic).values())
             and len(partition_states(cluster, topic)) == len(assignment), 30, f"{topic} to have leaders")


def _elect_unclean(cluster, topic, partitions):
    """An unclean leader election for these partitions (Admin API ElectLeaders, type 1)."""
    admin = kafka_admin(cluster)
    try:
        admin.perform_leader_election(1, {topic: sorted(partitions)}, timeout_ms=30_000)
        print(f"unclean election of {topic} {sorted(partitions)} asked")
    except Exception as e:  # noqa: BLE001 - e.g. ELECTION_NOT_NEEDED for one Kafka elected meanwhile: the wait decides
        print(f"unclean election of {topic} {sorted(partitions)}: {type(e).__name__}: {e}")
    finally:
        admin.close()


def _offline(url, cluster, topic):
    return {(int(s.labels["partition"]), s.labels["cause"])
            for s in series(scrape(url), "krm_partition_offline", cluster=cluster) if s.labels["topic"] == topic}


@pytest.mark.parametrize("mode, version", [("zk", ZK_KAFKA_VERSION), ("kraft", KRAFT_KAFKA_VERSION)],
                         ids=["zk", "kraft4"])
def test_a_failed_log_dir_takes_its_partitions_offline_with_that_cause(mode, version, spark, tmp_path,
                                                                       tmp_path_factory):
    cluster = local_cluster(tmp_path_factory, mode, kafka_version=version, log_dirs=2)
    monitor = None
    try:
        topic = "jbod"
        # single-replica partitions on the victim (Kafka spreads them over its two directories) and one
        # elsewhere that nothing touches
        assignment = {p: [VICTIM] for p in range(6)} | {6: [1]}
        _create_on(cluster, topic, assignment)
        # the broker creates a log when it applies the metadata, which other brokers may serve first
        on_disk = wait_for(lambda: (d if None not in (d := {p: cluster.log_dir_of(VICTIM, topic, p) for p in range(6)}
                                                          ).values() else None), 30, "the victim's logs on disk")
        doomed = {p for p, d in on_disk.items() if d == FAILED_DIR}
        assert doomed and len(doomed) < 6, f"Kafka put {on_disk} (partition -> dir): the test would prove nothing"

        config_path = write_config(cluster, tmp_path)
        monitor = Monitor(load_config(config_path), spark=spark).start()
        url = monitor.metrics_url
        wait_for(lambda: [s.value for s in series(scrape(url), "krm_cluster_offline_partitions", cluster=cluster.name)]
                 == [0.0], 90, "a healthy first view")

        cluster.fail_log_dir(VICTIM, FAILED_DIR)
        t_fail = time.monotonic()
        # Kafka's own view first: exactly the partitions on the failed directory lose their leader
        wait_equal(lambda: {p for p, (leader, _, _) in partition_states(cluster, topic).items() if leader < 0},
                   doomed, 60, "Kafka to take the failed directory's partitions offline")
        want = {(p, "log_dir_offline") for p in doomed}
        wait_equal(lambda: _offline(url, cluster.name, topic), want, 60, f"krm_partition_offline {sorted(want)}")
        print(f"\n[{mode}] log dir removed -> krm_partition_offline(log_dir_offline): {time.monotonic() - t_fail:.1f}s")
        up = {s.labels["broker"]: s.value for s in series(scrape(url), "krm_broker_up", cluster=cluster.name)}
        assert up[str(VICTIM)] == 1.0, "the broker lives on: only its disk failed"

        def settled():
            found = [i for i in stored_incidents("--open", "--config", str(config_path))
                     if i["topic"] == topic and i["type"] == "OFFLINE_PARTITION"]
            return found if {(i["partition"], i["cause"]) for i in found} == want else None
        incidents = wait_for(settled, 30, "the incidents in the Delta table")
        assert all(i["severity"] == "critical" and i["details"]["must_return"] == [VICTIM] for i in incidents)
        history = {tuple(i["details"].get("cause_history") or [i["cause"]]) for i in incidents}
        print(f"[{mode}] cause history: {sorted(history)}")
        # KRaft: one cause throughout. ZooKeeper mode: the mirror's record of the controller's write
        # (leader -1, the ISR kept) may come before any Metadata answer lists the offline replicas: one
        # poll of `live_isr_but_no_leader` (its alert waits 30 s), then the cause for good
        allowed = {("log_dir_offline",)} | ({("live_isr_but_no_leader", "log_dir_offline")} if mode == "zk" else set())
        assert history <= allowed, history
        # never judged a departure (a loaded machine may still show a moment of `unreachable`)
        assert not [i for i in stored_incidents("--open", "--config", str(config_path))
                    if i["type"] == "BROKER_DOWN" and i["cause"] != "unreachable"], "no broker is down"

        # a new disk and a restart bring them back
        cluster.stop(VICTIM)
        cluster.restore_log_dir(VICTIM, FAILED_DIR)
        cluster.start(VICTIM)
        leaderless = lambda: {p for p, (leader, _, _) in partition_states(cluster, topic).items() if leader < 0}  # noqa: E731
        # KRaft 4.4 can leave a partition whose only replica's directory was replaced without a leader
        # (the controller elected the other directory's partitions at the restart, not these, in four
        # runs on 2026-11-28); the operator's step after replacing the only replica's disk (its data is
        # gone) is an unclean election (kafka-leader-election --election-type unclean), asked again
        # while the restarted broker may still be registering
        for attempt in range(4):
            try:
                wait_equal(leaderless, set(), 30, "Kafka to bring the partitions back")
                break
            except AssertionError:
                if attempt == 3:
                    raise
                _elect_unclean(cluster, topic, leaderless())
        wait_equal(lambda: _offline(url, cluster.name, topic), set(), 60, "the offline series to clear")
        wait_for(lambda: not [i for i in stored_incidents("--open", "--config", str(config_path))
                              if i["topic"] == topic and i["type"] == "OFFLINE_PARTITION"], 30, "the incidents to resolve")
    finally:
        if monitor is not None:
            monitor.stop()
        cluster.down()
