"""Shared fixtures: one local SparkSession and one Kafka cluster per mode and version, per test session.

The Kafka matrix: `zk_cluster` (3.9.1, ZooKeeper), `kraft_cluster` (3.9.1, KRaft) and `kraft4_cluster`
(the newest 4.x, KRaft with Eligible Leader Replicas on by default); `zk_secure_cluster` and
`kraft4_secure_cluster` are the same with SASL_SSL and ACLs, krm connecting as its least-privilege
user; `zk_mtls_cluster` takes client certificates instead (ZooKeeper over TLS too). Each starts on
first use only.
"""

from __future__ import annotations

import os

import pytest

from krm.local_cluster import KRAFT_KAFKA_VERSION, ZK_KAFKA_VERSION
from tests.helpers import local_cluster

os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
# The suite's Kafka JVMs (brokers, controllers, ZooKeeper, Kafka's command-line tools) compile with C1
# only: they live minutes and carry little load, and the C2 compiler's work was a third of their CPU
# on a machine the suite already keeps busy (benchmarks keep the default: their brokers work hard).
os.environ.setdefault("KRM_JVM_OPTS", "-XX:TieredStopAtLevel=1")

TIERS = ("unit", "spark", "integration", "e2e")  # one folder each under tests/
# unit first (seconds), then spark, then e2e while few of the session's Kafka clusters run yet (their
# timing checks against a 6 s broker session need the CPU), then integration (the secured clusters)
RUN_ORDER = ("unit", "spark", "e2e", "integration")


def _tier(item) -> str | None:
    parts = item.path.parts
    return next((t for t in TIERS if t in parts[parts.index("tests") + 1:][:1]), None) if "tests" in parts else None


@pytest.hookimpl(tryfirst=True)
def pytest_collection_modifyitems(items):
    """The tier marker follows the folder, so `-m unit` selects every pure test without relying on
    each module's own `pytestmark` (first: before `-m` deselects). And the tiers run in RUN_ORDER, so
    a broken rule fails the run before any cluster starts; stable: file order within a tier."""
    rank = {t: n for n, t in enumerate(RUN_ORDER)}
    for item in items:
        tier = _tier(item)
        if tier is not None and not item.get_closest_marker(tier):
            item.add_marker(getattr(pytest.mark, tier))
    items.sort(key=lambda item: rank.get(_tier(item), len(TIERS)))


@pytest.fixture(scope="session")
def spark(tmp_path_factory):
    from pipelines.session import ALERT_PLAN_CONF, build_session

    # with the alert query's settings (pipelines/session.alert_session), so the golden tables check the
    # alert plan as the pipeline plans it
    session = build_session(master="local[2,4]", app_name="krm-tests", log_dir=tmp_path_factory.mktemp("spark-logs"),
                            extra=ALERT_PLAN_CONF)
    yield session
    session.stop()


@pytest.fixture(scope="session")
def zk_cluster(tmp_path_factory):
    """A real 3-broker ZooKeeper-mode cluster under the chroot of docs/cases/rf1-outage-zk-chroot.md."""
    cluster = local_cluster(tmp_path_factory, "zk", "/kafka_cluster_01")
    yield cluster
    cluster.down()


@pytest.fixture(scope="session")
def kraft_cluster(tmp_path_factory):
    """KRaft on Kafka 3.9.1 (no ELR)."""
    cluster = local_cluster(tmp_path_factory, "kraft", kafka_version=ZK_KAFKA_VERSION)
    yield cluster
    cluster.down()


@pytest.fixture(scope="session")
def zk_secure_cluster(tmp_path_factory):
    """ZooKeeper mode (3.9.1) with SASL_SSL listeners (SCRAM-SHA-512), AclAuthorizer, krm's minimum ACLs."""
    cluster = local_cluster(tmp_path_factory, "zk", security="sasl_ssl")
    yield cluster
    cluster.down()


@pytest.fixture(scope="session")
def zk_mtls_cluster(tmp_path_factory):
    """ZooKeeper mode (3.9.1), mutual TLS: SSL listeners requiring a client certificate (CN=krm is
    User:krm), ZooKeeper serving TLS only with client certificates, AclAuthorizer, krm's minimum ACLs."""
    cluster = local_cluster(tmp_path_factory, "zk", security="mtls")
    yield cluster
    cluster.down()


@pytest.fixture(scope="session")
def kraft4_secure_cluster(tmp_path_factory):
    """The newest Kafka 4.x, KRaft, SASL_SSL listeners (SCRAM-SHA-512, PLAIN, OAUTHBEARER, and GSSAPI with a
    KDC of its own), StandardAuthorizer, krm's minimum ACLs."""
    cluster = local_cluster(tmp_path_factory, "kraft", kafka_version=KRAFT_KAFKA_VERSION, security="sasl_ssl",
                            kerberos=True)
    yield cluster
    cluster.down()


@pytest.fixture(scope="session")
def kraft4_cluster(tmp_path_factory):
    """KRaft on the newest Kafka 4.x: ELR, last known ELR, unclean-shutdown detection."""
    cluster = local_cluster(tmp_path_factory, "kraft", kafka_version=KRAFT_KAFKA_VERSION)
    yield cluster
    cluster.down()
