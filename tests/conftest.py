"""Shared fixtures: one local SparkSession and one Kafka cluster per mode and version, per test session.

The Kafka matrix: `zk_cluster` (3.9.1, ZooKeeper), `kraft_cluster` (3.9.1, KRaft) and `kraft4_cluster`
(the newest 4.x, KRaft with Eligible Leader Replicas on by default); `zk_secure_cluster` and
`kraft4_secure_cluster` are the same with SASL_SSL and ACLs, krm connecting as its least-privilege
user; `zk_mtls_cluster` takes client certificates instead (ZooKeeper over TLS too). Each starts on
first use only; `zk_cluster` and `kraft_cluster` (most tests' observations carriers) then run to the
end of the session, the others (ClusterPool) stop after their last test.
"""

from __future__ import annotations

import os
from typing import Any

import pytest

from lab.local_cluster import KRAFT_KAFKA_VERSION, ZK_KAFKA_VERSION
from lab.harness import local_cluster

os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
# The suite's Kafka JVMs (brokers, controllers, ZooKeeper, Kafka's command-line tools) compile with C1
# only: they live minutes and carry little load, and the C2 compiler's work was a third of their CPU
# on a machine the suite already keeps busy (benchmarks keep the default: their brokers work hard).
os.environ.setdefault("KRM_JVM_OPTS", "-XX:TieredStopAtLevel=1")

TIERS = ("unit", "spark", "integration", "e2e")  # one folder each under tests/
# unit first (seconds), then spark, then e2e (their timing checks against a 6 s broker session need
# the CPU), then integration; then the tests of the pooled clusters, one cluster at a time (run_order)
RUN_ORDER = ("unit", "spark", "e2e", "integration")


def _tier(item) -> str | None:
    parts = item.path.parts
    return next((t for t in TIERS if t in parts[parts.index("tests") + 1:][:1]), None) if "tests" in parts else None


@pytest.hookimpl(tryfirst=True)
def pytest_collection_modifyitems(items):
    """The tier marker follows the folder, so `-m unit` selects every pure test without relying on
    each module's own `pytestmark` (first: before `-m` deselects). And the tiers run in RUN_ORDER, so
    a broken rule fails the run before any cluster starts; stable: file order within a tier."""
    for item in items:
        tier = _tier(item)
        if tier is not None and not item.get_closest_marker(tier):
            item.add_marker(getattr(pytest.mark, tier))
    items.sort(key=run_order)


def run_order(item) -> tuple[int, int, int]:
    """Tier by tier in RUN_ORDER, except that the e2e and integration tests of a pooled cluster
    (ClusterPool) run together after all others, cluster by cluster: each pooled cluster then runs
    only while its own tests do."""
    rank = {t: n for n, t in enumerate(RUN_ORDER)}
    tier = rank.get(_tier(item), len(TIERS))
    pooled = pooled_clusters(item)
    if pooled and tier >= rank["e2e"]:
        return len(TIERS) + 1, list(ClusterPool.SPECS).index(pooled[0]), tier
    return tier, 0, 0


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


class ClusterPool:
    """The clusters only a few tests use. Each starts on its first user and stops after its last one
    (the run order puts each one's users together, see `run_order`), so the cores are not shared
    with idle brokers for the rest of the session. A cluster asked for after its stop starts again."""

    SPECS = {
        # KRaft on the newest Kafka 4.x: ELR, last known ELR, unclean-shutdown detection
        "kraft4": dict(mode="kraft", kafka_version=KRAFT_KAFKA_VERSION),
        # ZooKeeper mode (3.9.1) with SASL_SSL listeners (SCRAM-SHA-512), AclAuthorizer, krm's minimum ACLs
        "zk_secure": dict(mode="zk", security="sasl_ssl"),
        # ZooKeeper mode (3.9.1), mutual TLS: SSL listeners requiring a client certificate (CN=krm is
        # User:krm), ZooKeeper serving TLS only with client certificates, AclAuthorizer, krm's minimum ACLs
        "zk_mtls": dict(mode="zk", security="mtls"),
        # the newest Kafka 4.x, KRaft, SASL_SSL listeners (SCRAM-SHA-512, PLAIN, OAUTHBEARER, and GSSAPI
        # with a KDC of its own), StandardAuthorizer, krm's minimum ACLs
        "kraft4_secure": dict(mode="kraft", kafka_version=KRAFT_KAFKA_VERSION, security="sasl_ssl", kerberos=True),
    }

    def __init__(self, tmp_path_factory) -> None:
        self.tmp_path_factory = tmp_path_factory
        self.running: dict[str, Any] = {}
        self.last_user: dict[str, str] = {}  # cluster -> node id of the last test that uses it

    def get(self, name: str) -> Any:
        if name not in self.running:
            self.running[name] = local_cluster(self.tmp_path_factory, **self.SPECS[name])
        return self.running[name]

    def after(self, item) -> None:
        for name in pooled_clusters(item):
            if self.last_user.get(name) == item.nodeid and name in self.running:
                self.running.pop(name).down()

    def close(self) -> None:
        while self.running:
            self.running.popitem()[1].down()


def pooled_clusters(item) -> list[str]:
    """The pooled clusters a test uses: as fixtures, or named by a parameter (`mode="kraft4"` ->
    request.getfixturevalue("kraft4_cluster"))."""
    names = {f.removesuffix("_cluster") for f in getattr(item, "fixturenames", ()) if f.endswith("_cluster")}
    spec = getattr(item, "callspec", None)
    if spec is not None:
        names |= {v for v in spec.params.values() if isinstance(v, str)}
    return [n for n in ClusterPool.SPECS if n in names]


_POOL = pytest.StashKey[ClusterPool]()


@pytest.fixture(scope="session")
def cluster_pool(request, tmp_path_factory):
    pool = ClusterPool(tmp_path_factory)
    for item in request.session.items:
        for name in pooled_clusters(item):
            pool.last_user[name] = item.nodeid
    request.config.stash[_POOL] = pool
    yield pool
    pool.close()


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_teardown(item, nextitem):
    yield  # the test's own fixtures first: they may still use the cluster
    pool = item.config.stash.get(_POOL, None)
    if pool is not None:
        pool.after(item)


@pytest.fixture()
def kraft4_cluster(cluster_pool):
    """KRaft on the newest Kafka 4.x: ELR, last known ELR, unclean-shutdown detection."""
    return cluster_pool.get("kraft4")


@pytest.fixture()
def zk_secure_cluster(cluster_pool):
    """ZooKeeper mode (3.9.1) with SASL_SSL listeners, AclAuthorizer, krm's minimum ACLs."""
    return cluster_pool.get("zk_secure")


@pytest.fixture()
def zk_mtls_cluster(cluster_pool):
    """ZooKeeper mode (3.9.1), mutual TLS, ZooKeeper over TLS with client certificates."""
    return cluster_pool.get("zk_mtls")


@pytest.fixture()
def kraft4_secure_cluster(cluster_pool):
    """The newest Kafka 4.x, KRaft, SASL_SSL (SCRAM, PLAIN, OAUTHBEARER, GSSAPI), StandardAuthorizer."""
    return cluster_pool.get("kraft4_secure")
