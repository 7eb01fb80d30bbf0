"""Shared fixtures: one local SparkSession and one Kafka cluster per mode, per test session."""

from __future__ import annotations

import os

import pytest

from tests.helpers import local_cluster

os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")


@pytest.fixture(scope="session")
def spark(tmp_path_factory):
    from pipelines.session import build_session

    session = build_session(master="local[2,4]", app_name="krm-tests", log_dir=tmp_path_factory.mktemp("spark-logs"))
    yield session
    session.stop()


@pytest.fixture(scope="session")
def zk_cluster(tmp_path_factory):
    """A real 3-broker ZooKeeper-mode cluster under the chroot of seeds/002."""
    cluster = local_cluster(tmp_path_factory, "zk", "/kafka_cluster_01")
    yield cluster
    cluster.down()


@pytest.fixture(scope="session")
def kraft_cluster(tmp_path_factory):
    cluster = local_cluster(tmp_path_factory, "kraft")
    yield cluster
    cluster.down()
