"""A rule's series are declared on it and exported by /metrics with no code per type."""

import pytest
from prometheus_client import CollectorRegistry

from pipelines import metrics
from pipelines.detectors import registry
from pipelines.detectors.exports import Series
from pipelines.detectors.rule import Rule
from pipelines.incidents import Incident
from pipelines.metrics import KrmCollector
from pipelines.state import ClusterView, PipelineState

pytestmark = pytest.mark.unit


def _inc(type_, broker, cause, details=None):
    return Incident(f"id-{broker}", "c1", "cluster", type_, "warning", None, None, broker, cause, details or {},
                    1000, 2000, None, "open")


def _samples(incidents, rules, monkeypatch):
    monkeypatch.setattr(metrics, "RULES", rules)
    state = PipelineState()
    state.update(clusters={"c1": ClusterView(((1, True),), 1, None, 10_000), "c2": ClusterView((), 1, None, 10_000)},
                 open_incidents=tuple(incidents))
    reg = CollectorRegistry(auto_describe=False)
    reg.register(KrmCollector(state, clock=lambda: 12.0))
    return reg


def test_a_new_rules_series_is_exported_from_its_declaration(monkeypatch):
    rule = Rule("DISK_FULL", {"log_dir_full": "warning"}, "driver", "x", routine="none", series=(
        Series("krm_broker_disk_full", "A log dir is full.", ("broker", "cause"),
               value=lambda inc, now: inc.details.get("used")),
        Series("krm_cluster_disk_full_brokers", "Brokers with a full log dir.", (), kind="count")))
    reg = _samples([_inc("DISK_FULL", 3, "log_dir_full", {"used": 0.97}), _inc("DISK_FULL", 4, "log_dir_full")],
                   (*registry.RULES, rule), monkeypatch)
    assert reg.get_sample_value("krm_broker_disk_full", {"cluster": "c1", "broker": "3", "cause": "log_dir_full"}) == 0.97
    # a value of None leaves the incident out
    assert reg.get_sample_value("krm_broker_disk_full", {"cluster": "c1", "broker": "4", "cause": "log_dir_full"}) is None
    assert reg.get_sample_value("krm_cluster_disk_full_brokers", {"cluster": "c1"}) == 2
    assert reg.get_sample_value("krm_cluster_disk_full_brokers", {"cluster": "c2"}) == 0


def test_a_shared_series_keeps_one_sample_the_first_rule_winning(monkeypatch):
    shared = Series("krm_x", "x", ("broker", "cause"), one_per=("broker",))
    first = Rule("A", {"a": "warning"}, "driver", "x", routine="none", series=(shared,))
    second = Rule("B", {"b": "warning"}, "driver", "x", routine="none", series=(shared,))
    reg = _samples([_inc("B", 1, "b"), _inc("A", 1, "a"), _inc("B", 2, "b")], (first, second), monkeypatch)
    assert reg.get_sample_value("krm_x", {"cluster": "c1", "broker": "1", "cause": "a"}) == 1
    assert reg.get_sample_value("krm_x", {"cluster": "c1", "broker": "1", "cause": "b"}) is None
    assert reg.get_sample_value("krm_x", {"cluster": "c1", "broker": "2", "cause": "b"}) == 1


@pytest.mark.parametrize("kwargs, message", [
    ({"labels": ("topic", "leader")}, "incident attributes"),
    ({"labels": ("topic",), "kind": "count"}, "per cluster"),
    ({"kind": "gauge"}, "incident or count"),
    ({"labels": ("topic",), "one_per": ("broker",)}, "one_per"),
])
def test_a_malformed_series_is_refused(kwargs, message):
    with pytest.raises(ValueError, match=message):
        Series("krm_x", "x", **kwargs)


def test_rules_sharing_a_series_must_declare_it_alike(monkeypatch):
    a = Rule("A", {None: "warning"}, "driver", "x", routine="none", series=(Series("krm_x", "one", one_per=("topic",)),))
    b = Rule("B", {None: "warning"}, "driver", "x", routine="none", series=(Series("krm_x", "other", one_per=("topic",)),))
    monkeypatch.setattr(registry, "RULES", (a, b))
    with pytest.raises(ValueError, match="declared otherwise"):
        registry._series_by_name()
    c = Rule("C", {None: "warning"}, "driver", "x", routine="none", series=(Series("krm_y", "y"),))
    d = Rule("D", {None: "warning"}, "driver", "x", routine="none", series=(Series("krm_y", "y"),))
    monkeypatch.setattr(registry, "RULES", (c, d))
    with pytest.raises(ValueError, match="needs one_per"):
        registry._series_by_name()


def test_the_shipped_rules_export_the_contract_series():
    names = set(registry.SERIES)
    assert {"krm_partition_offline", "krm_partition_unavailable", "krm_partition_under_replicated",
            "krm_partition_under_min_isr", "krm_partition_at_min_isr", "krm_partition_reassigning",
            "krm_cluster_offline_partitions", "krm_cluster_under_replicated_partitions",
            "krm_cluster_under_min_isr_partitions", "krm_broker_down", "krm_partition_hw_stall_seconds",
            "krm_replica_lag_messages"} <= names
