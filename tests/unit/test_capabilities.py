"""What krm can ask a cluster, said on /metrics rather than left as a silent gap (collectors/capabilities.py)."""

import json

import pytest

from collectors import capabilities
from collectors.records import cluster_record
from pipelines.alert_path import split_rows
from pipelines.findings import ROW_FIELDS
from pipelines.metrics import KrmCollector
from pipelines.state import PipelineState

pytestmark = pytest.mark.unit

KAFKA_39_KRAFT = {0: (0, 11), 3: (0, 12), 46: (0, 0), 55: (0, 2), 75: (0, 0)}
KAFKA_37_KRAFT = {0: (0, 11), 3: (0, 12), 46: (0, 0), 55: (0, 1)}  # before DescribeTopicPartitions
KAFKA_23_ZK = {0: (0, 8), 3: (0, 8)}  # before ListPartitionReassignments


def test_capabilities_follow_the_announced_requests_and_the_mode():
    assert capabilities.of(KAFKA_39_KRAFT, kraft=True) == {"elr": True, "quorum": True, "reassignments": True}
    assert capabilities.of(KAFKA_37_KRAFT, kraft=True) == {"elr": False, "quorum": True, "reassignments": True}
    assert capabilities.of(KAFKA_39_KRAFT, kraft=False) == {"reassignments": True}  # ZooKeeper: no ELR, no quorum
    assert capabilities.of(KAFKA_23_ZK, kraft=False) == {"reassignments": False}
    assert capabilities.of(None, kraft=True) == {}


def _row(**fields):
    from pyspark.sql import Row

    names = ["cluster", "poll_id", "observed_at_ms"] + [n for n, _ in ROW_FIELDS]
    return Row(*names)(*[fields.get(n) for n in names])


def test_a_missing_request_reaches_metrics_as_zero():
    rec = cluster_record("c", "admin", 1, 1_000, controller_id=1, brokers=[{"id": 1, "live": True}], topic_count=0,
                         partition_count=0, capabilities=capabilities.of(KAFKA_37_KRAFT, kraft=True))
    assert (rec["cluster_state"]["capabilities"], rec["cluster_state"]["unsupported"]) == (["quorum", "reassignments"],
                                                                                           ["elr"])
    _, _, clusters, _, _ = split_rows([_row(cluster="c", poll_id=1, observed_at_ms=1_000, row_type="cluster",
                                            scope="cluster", details=json.dumps(rec["cluster_state"]))])
    state = PipelineState()
    state.update(clusters=clusters)
    from prometheus_client import CollectorRegistry

    reg = CollectorRegistry()
    reg.register(KrmCollector(state))
    got = {s.labels["capability"]: s.value for m in reg.collect() for s in m.samples
           if s.name == "krm_collector_capability"}
    assert got == {"elr": 0.0, "quorum": 1.0, "reassignments": 1.0}
