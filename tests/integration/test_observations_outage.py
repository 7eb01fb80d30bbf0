"""The observations topic's cluster SIGKILLed for a while: the collector keeps polling into its
spool, exposes the backlog, and replays it in order when the cluster returns: nothing is lost."""

import json

import pytest

from collectors.daemon import Collector
from collectors.stats import CollectorMetrics
from foundation.config import load_config
from lab.harness import local_cluster, wait_for, write_config

pytestmark = pytest.mark.integration


@pytest.fixture()
def obs_cluster(tmp_path_factory):
    cluster = local_cluster(tmp_path_factory, "kraft", brokers=1)
    yield cluster
    cluster.down()


def _gauge(collector, name):
    for fam in CollectorMetrics(collector).collect():
        for s in fam.samples:
            if s.name == name:
                return s.value
    raise AssertionError(name)


def test_spool_rides_out_an_observations_outage(kraft_cluster, obs_cluster, tmp_path):
    from kafka import KafkaConsumer

    # every poll published (none kept home as unchanged: collectors/unchanged.py), so a poll missing from the
    # topic afterwards is one the spool lost
    config = load_config(write_config(kraft_cluster, tmp_path, poll_interval_s=0.5, observations_on=obs_cluster,
                                      collector_extra="unchanged_publish_s = 0\n"))
    collector = Collector(config).start()
    try:
        wait_for(lambda: collector.publisher.sent > 0, 60, "first records sent")
        (broker,) = obs_cluster.broker_ids
        obs_cluster.kill(broker)
        polls_at_kill = collector.polls
        wait_for(lambda: collector.polls >= polls_at_kill + 10, 60, "polls during the outage")
        backlog = _gauge(collector, "krm_collector_spool_records")
        assert backlog > 0, "records of the polls during the outage must wait in the spool"
        obs_cluster.start(broker)
        wait_for(lambda: collector.publisher.spool.depth == 0, 90, "spool replayed")
        assert collector.publisher.dropped == 0
    finally:
        collector.stop()

    consumer = KafkaConsumer(config.observations.topic, bootstrap_servers=obs_cluster.bootstrap_servers,
                             auto_offset_reset="earliest", enable_auto_commit=False, consumer_timeout_ms=3000)
    polls = [json.loads(m.value)["poll_id"] for m in consumer if json.loads(m.value)["kind"] == "cluster"]
    consumer.close()
    first_seen = list(dict.fromkeys(polls))  # a batch cut by the outage may be sent twice: order of first sight
    assert first_seen == sorted(first_seen), "replayed out of order"
    assert first_seen == list(range(first_seen[0], first_seen[-1] + 1)), "a poll's cluster record is missing"
    assert len(first_seen) >= collector.polls - 1
