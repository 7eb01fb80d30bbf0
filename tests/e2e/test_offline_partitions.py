"""docs/cases/rf1-outage-zk-chroot.md end to end on real clusters: RF-1 partitions of a SIGKILLed broker alert and clear.

Collector -> observations topic -> Spark (Kafka source) -> incidents Delta table and /metrics, in
ZooKeeper mode (with the chroot of docs/cases/rf1-outage-zk-chroot.md) and in KRaft mode, on Kafka 3.9 and on Kafka 4.x. On
Kafka 4 the fenced broker's RF-1 partitions have an empty ISR, the broker in their ELR and last known
ELR; its restart after the SIGKILL is an unclean shutdown, so Kafka elects it as the last known leader
("using an unclean election", leader recovery): nothing was lost, and no critical incident may stay.
The `_secure` modes run the same on SASL_SSL clusters with ACLs enforced, krm connecting as its
least-privilege user (collector, publisher and Spark's Kafka source); `zk_mtls` with client
certificates instead, ZooKeeper over TLS included.
"""

import datetime as dt
import os
import signal
import subprocess
import time

import pytest

from foundation.config import load_config
from krm.runner import Monitor
from krm.scrape import scrape, series
from krm.timeline import read_states
from lab.harness import KRM, create_topic, krm_json, stored_incidents, wait_equal, wait_for, write_config
from pipelines.tables import Tables

pytestmark = pytest.mark.e2e

CAUSE = "single_replica_on_dead_broker"


def _offline(url, cluster, topic):
    return {(int(s.labels["partition"]), s.labels["cause"])
            for s in series(scrape(url), "krm_partition_offline", cluster=cluster) if s.labels["topic"] == topic}


def _open_incidents(config_path, topic):
    return {i["incident_id"]: i for i in stored_incidents("--open", "--config", str(config_path))
            if i["topic"] == topic}


def _only_offline_open(config_path, topic, expected):
    """The topic's open incidents once they are exactly one OFFLINE_PARTITION per expected partition:
    the PARTITION_UNAVAILABLE seen before the controller acted resolves once it confirms (a poll with
    offsets later than the ZooKeeper watch's record), and the store trails /metrics by a batch."""
    def settled():
        o = _open_incidents(config_path, topic)
        kinds = {(i["partition"], i["type"], i["cause"], i["status"]) for i in o.values()}
        return o if kinds == {(p, "OFFLINE_PARTITION", CAUSE, "open") for p in expected} else None
    return settled


def _healthy(url, cluster, brokers):
    s = scrape(url)
    up = series(s, "krm_broker_up", cluster=cluster)
    off = series(s, "krm_cluster_offline_partitions", cluster=cluster)
    return len([x for x in up if x.value == 1]) == brokers and off and off[0].value == 0


@pytest.mark.parametrize("mode", ["zk", "kraft", "kraft4", "zk_secure", "kraft4_secure", "zk_mtls"])
def test_killed_broker_takes_exactly_its_rf1_partitions_offline(mode, request, spark, tmp_path):
    cluster = request.getfixturevalue(f"{mode}_cluster")
    topic = f"rf1-{mode}"
    victim = 2
    assignment = create_topic(cluster, topic, partitions=6, rf=1)
    expected = {p for p, replicas in assignment.items() if replicas == [victim]}
    assert expected, "the assignment left nothing on the victim; the test would prove nothing"

    # the history's trigger never comes again after its first run: what it holds of the fault, the stop wrote
    config_path = write_config(cluster, tmp_path, history_trigger_s=3600.0, history_flush_on_stop_s=60.0)
    monitor = Monitor(load_config(config_path), spark=spark).start()
    try:
        url = monitor.metrics_url
        wait_for(lambda: _healthy(url, cluster.name, 3), 90, "a healthy first view")
        if cluster.mode == "zk":  # the ZooKeeper watch is up (over TLS in zk_mtls)
            wait_equal(lambda: [s.value for s in series(scrape(url), "krm_collector_zookeeper_connected",
                                                         cluster=cluster.name)], [1.0], 30, "the ZooKeeper session")

        cluster.kill(victim)
        t_kill = time.monotonic()
        want = {(p, CAUSE) for p in expected}
        wait_equal(lambda: _offline(url, cluster.name, topic), want, 60, f"offline series {sorted(want)}")
        print(f"\n[{mode}] SIGKILL -> krm_partition_offline on /metrics: {time.monotonic() - t_kill:.1f}s")
        # Partitions the victim led with live followers may show live_isr_but_no_leader until the
        # controller's election (a real, short outage); after it, only the RF-1 partitions stay offline.
        # (another test's RF-1 topic on the session cluster may sit on the victim too: offline for the same cause)
        wait_equal(lambda: [s for s in series(scrape(url), "krm_partition_offline", cluster=cluster.name)
                            if s.labels["topic"] != topic and s.labels.get("cause") != CAUSE], [], 30,
                   "the other partitions' new leaders")
        assert _offline(url, cluster.name, topic) == want
        broker_up = {s.labels["broker"]: s.value for s in series(scrape(url), "krm_broker_up", cluster=cluster.name)}
        assert broker_up == {"1": 1.0, "2": 0.0, "3": 1.0}

        incidents = wait_for(_only_offline_open(config_path, topic, expected), 30,
                             "exactly the offline incidents open in the Delta table")
        assert {(i["partition"], i["type"], i["cause"], i["status"]) for i in incidents.values()} == {
            (p, "OFFLINE_PARTITION", CAUSE, "open") for p in expected}
        assert all(i["details"]["must_return"] == [victim] for i in incidents.values())
        if mode.startswith("kraft4"):  # what Kafka 4 reports while the partition waits for its broker
            assert all((i["details"]["isr"], i["details"]["elr"], i["details"]["last_known_elr"]) == ([], [victim], [victim])
                       for i in incidents.values()), [i["details"] for i in incidents.values()]

        cluster.start(victim)
        wait_for(lambda: _offline(url, cluster.name, topic) == set(), 60, "the offline series to clear")
        offline_open = lambda: {k: i for k, i in _open_incidents(config_path, topic).items()  # noqa: E731
                                if i["type"] == "OFFLINE_PARTITION"}
        wait_for(lambda: offline_open() == {}, 30, "the incidents to resolve")
        resolved = [i for i in krm_json("incidents", "--config", str(config_path))
                    if i["topic"] == topic and i["type"] == "OFFLINE_PARTITION"]
        assert sorted(i["incident_id"] for i in resolved) == sorted(incidents)
        assert all(i["status"] == "resolved" and i["resolved_at"] for i in resolved)
        # a restart is no failed disk: the broker's replicas Metadata lists offline as it comes back are not
        # on a failed log directory (it reports none)
        causes = {c for i in krm_json("incidents", "--config", str(config_path)) if i["topic"] == topic
                  for c in (i["details"].get("cause_history") or [i["cause"]])}
        assert "log_dir_offline" not in causes, causes
        time.sleep(3)  # a few more polls: a false data-loss page would come now
        left = list(_open_incidents(config_path, topic).values())
        assert not [i for i in left if i["severity"] == "critical"], left
        # Kafka 4's recovery of the last known leader may show, as a warning; nothing else may
        assert all((i["type"], i["cause"], i["severity"]) == ("UNCLEAN_LEADER_ELECTION", "last_known_elr", "warning")
                   for i in left), left
        if not mode.startswith("kraft4"):
            assert left == []

        monitor.stop()  # the post-mortem is whole: the stop wrote the fault and the return to the history
        leaders = [r["leader"] for r in read_states(Tables(load_config(config_path).pipeline.data_dir).partition_state,
                                                    topic, min(expected), dt.timedelta(minutes=15))]
        assert -1 in leaders and victim in leaders[leaders.index(-1):], leaders
    finally:
        monitor.stop()
        if cluster.status()["brokers"][str(victim)]["state"] == "dead":
            cluster.start(victim)


def test_pipeline_killed_mid_incident_neither_loses_nor_duplicates(zk_cluster, tmp_path):
    """`krm run` SIGKILLed (driver and its JVM) while partitions are offline, then restarted."""
    cluster = zk_cluster
    topic = "rf1-restart"
    victim = 3
    assignment = create_topic(cluster, topic, partitions=6, rf=1)
    expected = {p for p, replicas in assignment.items() if replicas == [victim]}
    config_path = write_config(cluster, tmp_path, poll_interval_s=2.0)  # krm's default poll: no timing is checked
    url = load_config(config_path).pipeline
    url = f"http://{url.metrics_host}:{url.metrics_port}/metrics"
    env = {**os.environ, "SPARK_LOCAL_IP": "127.0.0.1"}

    def start_run():
        log = open(tmp_path / "krm-run.log", "a")
        return subprocess.Popen([KRM, "run", "--config", str(config_path)], stdout=log, stderr=subprocess.STDOUT,
                                stdin=subprocess.DEVNULL, start_new_session=True, env=env)

    run = start_run()
    try:
        wait_for(lambda: _healthy(url, cluster.name, 3), 120, "krm run to report a healthy cluster")
        cluster.kill(victim)
        want = {(p, CAUSE) for p in expected}
        wait_equal(lambda: _offline(url, cluster.name, topic), want, 60, "the offline alerts")
        before = wait_for(_only_offline_open(config_path, topic, expected), 30, "open incidents stored")

        os.killpg(run.pid, signal.SIGKILL)  # the Python driver and its Spark JVM, no goodbye
        run.wait(timeout=30)
        run = start_run()
        wait_equal(lambda: _offline(url, cluster.name, topic), want, 120, "the alerts after the restart")
        after = _open_incidents(config_path, topic)
        assert sorted(after) == sorted(before), "restart must keep the same incidents, not open new ones"
        assert {i["opened_at"] for i in after.values()} == {i["opened_at"] for i in before.values()}

        cluster.start(victim)
        wait_for(lambda: _open_incidents(config_path, topic) == {}, 60, "resolution after the restart")
        every = [i for i in krm_json("incidents", "--config", str(config_path)) if i["topic"] == topic]
        assert sorted(i["incident_id"] for i in every if i["type"] == "OFFLINE_PARTITION") == sorted(before)
        keys = [(i["type"], i["partition"]) for i in every]  # also the PARTITION_UNAVAILABLE before the controller
        assert len(keys) == len(set(keys)), f"an incident opened twice: {sorted(keys)}"
    finally:
        if run.poll() is None:
            os.killpg(run.pid, signal.SIGTERM)
            try:
                run.wait(timeout=60)
            except subprocess.TimeoutExpired:
                os.killpg(run.pid, signal.SIGKILL)
        if cluster.status()["brokers"][str(victim)]["state"] == "dead":
            cluster.start(victim)
