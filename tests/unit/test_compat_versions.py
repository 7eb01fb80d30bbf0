"""The compatibility lines: one list in lab/local_cluster.py and the Makefile's, the modes each release
has, and the hint when a release's jars were not fetched."""

import re
from pathlib import Path

import pytest

from benchmarks.compat import combos
from foundation.errors import ClusterError
from lab.local_cluster import COMPAT_VERSIONS, KAFKA_RUNTIMES, LocalCluster

pytestmark = pytest.mark.unit

ROOT = Path(__file__).resolve().parents[2]


def test_the_makefile_fetches_exactly_the_compatibility_lines():
    line = re.search(r"^COMPAT_VERSIONS := (.*)$", (ROOT / "Makefile").read_text(), re.M)
    assert line and tuple(line.group(1).split()) == COMPAT_VERSIONS
    assert all(v in KAFKA_RUNTIMES for v in COMPAT_VERSIONS)


def test_each_release_runs_in_the_modes_it_has():
    got = combos(["2.8.2", "3.2.3", "3.3.2", "3.9.2", "4.0.2"], ["zk", "kraft"])
    assert got == [("zk", "2.8.2"), ("zk", "3.2.3"), ("zk", "3.3.2"), ("kraft", "3.3.2"), ("zk", "3.9.2"),
                   ("kraft", "3.9.2"), ("kraft", "4.0.2")]


def test_kraft_before_3_3_and_zookeeper_from_4_are_refused(tmp_path):
    with pytest.raises(ClusterError, match="KRaft only as a preview"):
        LocalCluster(root=tmp_path, mode="kraft", kafka_version="3.2.3")
    with pytest.raises(ClusterError, match="no ZooKeeper mode"):
        LocalCluster(root=tmp_path, mode="zk", kafka_version="4.0.2")


def test_a_release_not_fetched_says_how_to_fetch_it(tmp_path, monkeypatch):
    monkeypatch.setenv("KRM_JARS_DIR", str(tmp_path / "jars"))
    cluster = LocalCluster(root=tmp_path / "c", mode="zk", kafka_version="3.5.2")
    with pytest.raises(ClusterError, match=r"Kafka 3\.5\.2's jars are not fetched: run `make compat-jars`"):
        cluster.up()
