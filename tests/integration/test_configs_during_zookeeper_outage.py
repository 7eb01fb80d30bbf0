"""krm must not take a broker down while ZooKeeper is: found by the fault loops
(benchmarks/fault_loops.py --fault zookeeper, RELIABILITY.md).

A ZooKeeper-mode broker serves DescribeConfigs for a topic from ZooKeeper; with ZooKeeper gone the
request holds one of its request handler threads until ZooKeeper is back. The collector used to send
it at every poll once the refresh was due, so after a few polls (two, with the lab's num.io.threads 2)
the broker answered nobody, and krm paged PARTITION_UNAVAILABLE for the partitions it led. Now a
failed DescribeConfigs backs off (collectors/topic_configs.py, config_backoff) and none is sent while krm's
own ZooKeeper session is down."""

import tempfile
import time
from pathlib import Path

import pytest

from collectors.admin import AdminSource
from collectors.topic_configs import config_backoff
from foundation.config import ClusterConfig, CollectorConfig
from lab.local_cluster import LocalCluster
from lab.harness import create_topic

pytestmark = pytest.mark.integration


def _metadata_answers(cluster):
    """A fresh client's Metadata request: what any producer or consumer needs first."""
    from kafka.admin import KafkaAdminClient

    try:
        admin = KafkaAdminClient(bootstrap_servers=cluster.bootstrap_servers, request_timeout_ms=3000,
                                 api_version_auto_timeout_ms=3000)
    except Exception:  # noqa: BLE001 - NoBrokersAvailable: the broker answered nothing
        return False
    try:
        return bool(admin.list_topics())
    except Exception:  # noqa: BLE001
        return False
    finally:
        admin.close()


def test_polls_during_a_zookeeper_outage_leave_the_broker_serving(tmp_path_factory):
    cluster = LocalCluster(root=Path(tempfile.mkdtemp(dir=tmp_path_factory.getbasetemp())) / "zk",
                           mode="zk", brokers=1).up()
    src = AdminSource(ClusterConfig(name=cluster.name, bootstrap_servers=cluster.bootstrap_servers),
                      CollectorConfig(config_refresh_s=0.0, request_timeout_ms=2000))
    try:
        create_topic(cluster, "configs-outage", partitions=2, rf=1)
        src.poll()
        cluster.kill_zookeeper()
        polls = []
        for _ in range(5):  # every one would ask for the topic configs again (refresh due at once)
            polls.append(src.poll())
            time.sleep(0.5)
        assert _metadata_answers(cluster), "the broker stopped answering while ZooKeeper was down"
        unreachable = [r["topic_state"].get("unreachable_brokers") for batch in polls for r in batch
                       if r["kind"] == "topic"]
        assert not any(unreachable), unreachable
    finally:
        src.close()
        cluster.down()


def test_config_backoff_doubles_to_an_hour():
    assert [config_backoff(30.0).delay(n) for n in (1, 2, 3)] == [30.0, 60.0, 120.0]
    assert config_backoff(0.0).delay(1) == 30.0 and config_backoff(30.0).delay(20) == 3600.0
