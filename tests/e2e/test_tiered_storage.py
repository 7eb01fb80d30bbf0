"""Tiered storage (KIP-405) end to end on Kafka 4.x: a topic with remote.storage.enable=true whose old
segments move to the remote tier (a folder, jvm/tiered/), then a follower's disk wiped while it is
stopped, so that on its return it rebuilds from the leader's local log start offset.

What the operator must see: the local log start and highest remote offset per partition, equal to
what Kafka's own GetOffsetShell says (--time -4 / -5), and the remote copy lag; the wiped follower's
rebuild raises no data-loss incident (no OFFSET_REGRESSION, no LOG_TRUNCATION, no unclean election):
its absence is UNDER_REPLICATED, a warning, resolved once it is back in the ISR."""

import shutil

import pytest

from foundation.config import load_config
from krm.runner import Monitor
from krm.scrape import scrape, series
from lab.harness import create_topic, kafka_admin, kafka_tool, local_cluster, stored_incidents, wait_for, write_config

pytestmark = pytest.mark.e2e

TOPIC = "tiered"
SEGMENT = 1 << 20  # the smallest segment.bytes Kafka 4 accepts
DATA_LOSS = {"OFFSET_REGRESSION", "LOG_TRUNCATION", "UNCLEAN_LEADER_ELECTION"}


@pytest.fixture(scope="module")
def tiered_cluster(tmp_path_factory):
    cluster = local_cluster(tmp_path_factory, "kraft", tiered_storage=True)
    yield cluster
    cluster.down()


def _produce(cluster, messages):
    from kafka import KafkaProducer

    producer = KafkaProducer(bootstrap_servers=cluster.bootstrap_servers, acks="all", linger_ms=20)
    for i in range(messages):
        producer.send(TOPIC, b"x" * 1000, partition=i % 2)
    producer.flush(timeout=120)
    producer.close(timeout=10)


def _krm_offsets(url, cluster):
    """partition -> (local log start, highest remote offset, remote copy lag) from krm's /metrics."""
    text = scrape(url)
    out = {}
    for i, name in enumerate(("krm_partition_local_log_start_offset", "krm_partition_highest_remote_offset",
                              "krm_partition_remote_copy_lag_messages")):
        for s in series(text, name, cluster=cluster):
            if s.labels["topic"] == TOPIC:
                out.setdefault(int(s.labels["partition"]), [None] * 3)[i] = int(s.value)
    return {p: tuple(v) for p, v in out.items()}


def _kafka_offsets(cluster, time):
    """partition -> offset, from Kafka's own GetOffsetShell (-4 earliest-local, -5 latest-tiered, -1 latest)."""
    out = kafka_tool("org.apache.kafka.tools.GetOffsetShell", "--bootstrap-server", cluster.bootstrap_servers,
                     "--topic", TOPIC, "--time", str(time))
    return {int(line.split(":")[1]): int(line.split(":")[2]) for line in out.splitlines() if line.startswith(TOPIC)}


def _agrees_with_kafka(url, cluster, last=None):
    """(agree, krm's, Kafka's); `last` keeps the latest pair so a timeout can say what differed."""
    ours = _krm_offsets(url, cluster.name)
    local, remote, end = (_kafka_offsets(cluster, t) for t in (-4, -5, -1))
    theirs = {p: (local[p], remote[p], end[p] - remote[p] - 1) for p in end}
    if last is not None:
        last[:] = [ours, theirs]
    return ours == theirs and all(r >= 0 and lls > 0 for lls, r, _ in ours.values()), ours, theirs


def _wait_agreement(url, cluster, timeout_s, what):
    """krm's offsets once they equal Kafka's; on a timeout, what each side last said."""
    last: list = []
    try:
        wait_for(lambda: _agrees_with_kafka(url, cluster, last)[0], timeout_s, what)
    except AssertionError as e:
        raise AssertionError(f"{e}; last seen (local log start, highest remote, copy lag) krm {last[:1]} "
                             f"Kafka {last[1:]}") from None
    return last[0]


def _in_sync(cluster):

    admin = kafka_admin(cluster)
    try:
        (t,) = admin.describe_topics([TOPIC])
        return all(sorted(p["isr"]) == sorted(p["replicas"]) and p["leader"] >= 0 for p in t["partitions"])
    finally:
        admin.close()


def test_a_wiped_follower_of_a_tiered_topic_rebuilds_without_a_data_loss_incident(
        tiered_cluster, zk_cluster, spark, tmp_path):
    cluster = tiered_cluster
    assignment = create_topic(cluster, TOPIC, partitions=2, rf=3, configs={
        "remote.storage.enable": "true", "segment.bytes": str(SEGMENT), "local.retention.bytes": str(SEGMENT),
        "retention.ms": "-1", "min.insync.replicas": "2"})
    _produce(cluster, 8000)  # ~8 segments per partition: most go remote, then leave the local disks
    # frequent polls: the wiped follower shows its empty log (LEO 0) only briefly before it rebuilds;
    # the golden cases (tests/golden_offsets.py EMPTIED) pin the rule whatever a poll catches
    config_path = write_config(cluster, tmp_path, poll_interval_s=0.5, observations_on=zk_cluster)
    monitor = Monitor(load_config(config_path), spark=spark).start()
    try:
        url = monitor.metrics_url
        # settled: krm's series equal Kafka's own answers once the copies and local deletions are done
        ours = _wait_agreement(url, cluster, 120, "krm's tiered offsets to equal GetOffsetShell's")
        print(f"\ntiered offsets (local log start, highest remote, remote copy lag) per partition: {ours}")

        # a broker that leads neither partition follows both: stopped, wiped, and more written meanwhile
        victim = min(set(cluster.broker_ids) - _leaders(cluster))
        cluster.stop(victim)
        data = cluster.root / f"broker-{victim}" / "data"
        for p in assignment:
            shutil.rmtree(data / f"{TOPIC}-{p}")
        _produce(cluster, 3000)
        local_start = _kafka_offsets(cluster, -4)
        cluster.start(victim)
        wait_for(lambda: _in_sync(cluster), 120, f"broker {victim} back in every ISR of {TOPIC}")
        # the follower rebuilt from the leader's local log start (KIP-405), not from offset 0
        for p in assignment:
            first = min(int(f.name.split(".")[0]) for f in (data / f"{TOPIC}-{p}").glob("*.log"))
            assert first >= local_start[p] > 0, (p, first, local_start[p])

        def settled():
            mine = [i for i in stored_incidents("--config", str(config_path)) if i.get("topic") == TOPIC]
            return (not [i for i in mine if i["status"] == "open"]), mine

        wait_for(lambda: settled()[0], 90, f"every incident of {TOPIC} resolved")
        _, mine = settled()
        assert not [i for i in mine if i["type"] in DATA_LOSS], mine
        assert not [i for i in mine if i["severity"] == "critical"], mine
        assert {i["type"] for i in mine} >= {"UNDER_REPLICATED"}, "krm saw the follower away"
        _wait_agreement(url, cluster, 120, "the series to agree with Kafka again")
    finally:
        monitor.stop()


def _leaders(cluster):

    admin = kafka_admin(cluster)
    try:
        (t,) = admin.describe_topics([TOPIC])
        return {p["leader"] for p in t["partitions"]}
    finally:
        admin.close()
