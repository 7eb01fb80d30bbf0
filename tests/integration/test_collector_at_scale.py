"""The collector against benchmarks/standin_broker.py, the protocol-level stand-in its poll benchmark
uses above what a local cluster holds: every partition read whole, and a Metadata answer over 1 MB
(kafka-python's default limit on an answer, passed at about 20,000 partitions) read at all."""

import importlib.util
import sys
from pathlib import Path

import pytest

from collectors.admin import AdminSource
from foundation.config import ClusterConfig, CollectorConfig

pytestmark = pytest.mark.integration

ROOT = Path(__file__).resolve().parents[2]


def _standin_module():
    path = ROOT / "benchmarks" / "standin_broker.py"
    spec = importlib.util.spec_from_file_location("standin_broker", path)
    module = importlib.util.module_from_spec(spec)
    sys.modules.setdefault("standin_broker", module)
    spec.loader.exec_module(module)
    return module


def _partitions(records):
    return [(r["topic_state"]["topic"], p) for r in records if r["kind"] == "topic" for p in r["topic_state"]["partitions"]]


def test_a_cluster_past_one_megabyte_of_metadata_is_read_whole():
    standin = _standin_module()
    count = 25_000
    with standin.StandIn(count, brokers=4) as cluster:
        layout = standin.Layout(count, 4)
        src = AdminSource(ClusterConfig(name="scale", bootstrap_servers=cluster.bootstrap_servers),
                          CollectorConfig(offsets_timeout_ms=30_000, leave_out_quiet=False))  # every partition
        try:
            src.poll()  # the stand-in encodes each answer once
            records = src.poll()
        finally:
            src.close()
    cluster_record = next(r for r in records if r["kind"] == "cluster")
    assert cluster_record["cluster_state"]["error"] is None
    assert cluster_record["cluster_state"]["partition_count"] == count
    parts = _partitions(records)
    assert len(parts) == count
    for topic, p in parts[::997]:
        replicas = layout.topics[topic][p["partition"]]
        assert p["replicas"] == replicas and p["isr"] == replicas and p["leader"] == replicas[0]
        assert p["high_watermark"] == layout.offset(topic, p["partition"]) and p["log_start_offset"] == 0
        assert {r["broker"]: r["log_end_offset"] for r in p["replica_offsets"]} == {
            b: layout.offset(topic, p["partition"]) for b in replicas}
    assert all(p["high_watermark"] is not None for _, p in parts)
