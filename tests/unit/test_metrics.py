"""/metrics built from a snapshot: per-partition series only while unhealthy, aggregates always."""

import pytest
from prometheus_client import CollectorRegistry

from pipelines.incidents import Incident
from pipelines.metrics import KrmCollector
from pipelines.state import ClusterView, PipelineState

pytestmark = pytest.mark.unit


def _inc(type_, partition, cause=None, severity="critical"):
    return Incident(f"id-{type_}-{partition}", "c1", "topic:t", type_, severity, "t", partition, None, cause, {},
                    1000, 2000, None, "open")


def _registry(state, now=12.5):
    reg = CollectorRegistry(auto_describe=False)
    reg.register(KrmCollector(state, clock=lambda: now))
    return reg


def test_healthy_cluster_has_aggregates_and_no_partition_series():
    state = PipelineState()
    state.update(clusters={"c1": ClusterView(((1, True), (2, True)), 1, None, 10_000)})
    reg = _registry(state)
    assert reg.get_sample_value("krm_cluster_offline_partitions", {"cluster": "c1"}) == 0
    assert reg.get_sample_value("krm_cluster_under_min_isr_partitions", {"cluster": "c1"}) == 0
    assert reg.get_sample_value("krm_broker_up", {"cluster": "c1", "broker": "2"}) == 1
    assert reg.get_sample_value("krm_observation_age_seconds", {"cluster": "c1"}) == pytest.approx(2.5)
    names = {m.name for m in reg.collect() for s in m.samples}
    assert not any(n.startswith("krm_partition_") for n in names)


def test_open_incidents_become_series_and_counts():
    state = PipelineState()
    state.update(clusters={"c1": ClusterView(((1, True), (2, False)), 1, None, 10_000)},
                 open_incidents=(_inc("OFFLINE_PARTITION", 0, "single_replica_on_dead_broker"),
                                 _inc("UNDER_REPLICATED", 1, severity="warning"), _inc("UNDER_MIN_ISR", 1)))
    reg = _registry(state)
    assert reg.get_sample_value("krm_partition_offline", {"cluster": "c1", "topic": "t", "partition": "0",
                                                          "cause": "single_replica_on_dead_broker"}) == 1
    assert reg.get_sample_value("krm_partition_under_replicated", {"cluster": "c1", "topic": "t", "partition": "1"}) == 1
    assert reg.get_sample_value("krm_partition_under_min_isr", {"cluster": "c1", "topic": "t", "partition": "1"}) == 1
    assert reg.get_sample_value("krm_cluster_offline_partitions", {"cluster": "c1"}) == 1
    assert reg.get_sample_value("krm_incidents_open", {"cluster": "c1", "type": "UNDER_REPLICATED",
                                                       "severity": "warning"}) == 1
    assert reg.get_sample_value("krm_broker_up", {"cluster": "c1", "broker": "2"}) == 0


def test_unreachable_cluster_is_visible():
    state = PipelineState()
    state.update(clusters={"c1": ClusterView((), None, "NoBrokersAvailable", 10_000)})
    assert _registry(state).get_sample_value("krm_cluster_reachable", {"cluster": "c1", "reason": "unreachable"}) == 0


def test_reachable_says_why_not():
    state = PipelineState()
    state.update(clusters={
        "ok": ClusterView(((1, True),), 1, None, 10_000),
        "login": ClusterView((), None, "authentication failed for cluster login (SCRAM-SHA-512, user krm)", 10_000,
                             error_reason="authentication_failed"),
        "acl": ClusterView(((1, True),), 1, None, 10_000, denied=("DESCRIBE_CONFIGS on TOPIC t",)),
    })
    reg = _registry(state)
    assert reg.get_sample_value("krm_cluster_reachable", {"cluster": "ok", "reason": ""}) == 1
    assert reg.get_sample_value("krm_cluster_reachable", {"cluster": "login", "reason": "authentication_failed"}) == 0
    assert reg.get_sample_value("krm_cluster_reachable", {"cluster": "acl", "reason": "authorization_failed"}) == 0


def test_broker_leaders_and_replicas_always_present():
    state = PipelineState()
    state.update(clusters={"c1": ClusterView(((1, True), (2, True)), 1, None, 10_000)},
                 broker_load={"c1": {1: (3, 5, 2, 0)}})
    reg = _registry(state)
    assert reg.get_sample_value("krm_broker_leaders", {"cluster": "c1", "broker": "1"}) == 3
    assert reg.get_sample_value("krm_broker_replicas", {"cluster": "c1", "broker": "1"}) == 5
    assert reg.get_sample_value("krm_broker_leaders", {"cluster": "c1", "broker": "2"}) == 0


def test_hw_stall_keeps_counting_and_lag_is_per_follower():
    stall = Incident("s", "c1", "topic:t", "HW_STALL", "critical", "t", 3, None, "isr_follower_unreachable",
                     {"hw_stalled_since_ms": 4_500}, 1000, 2000, None, "open")
    lagging = Incident("l", "c1", "topic:t", "REPLICA_LAG", "warning", "t", 3, 2, None, {"lag_messages": 1234},
                       1000, 2000, None, "open")
    state = PipelineState()
    state.update(clusters={"c1": ClusterView(((1, True),), 1, None, 10_000)}, open_incidents=(stall, lagging))
    reg = _registry(state, now=12.5)
    labels = {"cluster": "c1", "topic": "t", "partition": "3"}
    assert reg.get_sample_value("krm_partition_hw_stall_seconds", labels) == pytest.approx(8.0)
    assert reg.get_sample_value("krm_replica_lag_messages", {**labels, "broker": "2"}) == 1234


def test_unavailable_covers_every_offline_cause_and_unreachable_leaders_once_per_partition():
    state = PipelineState()
    state.update(clusters={"c1": ClusterView(((1, True), (2, True)), 1, None, 10_000)},
                 open_incidents=(_inc("OFFLINE_PARTITION", 0, "elr_replicas_down"),
                                 _inc("PARTITION_UNAVAILABLE", 1, "leader_unreachable"),
                                 _inc("PARTITION_UNAVAILABLE", 0, "leader_unreachable"),  # controller confirmed
                                 _inc("UNDER_REPLICATED", 2, severity="warning")))
    reg = _registry(state)
    got = {(s.labels["partition"], s.labels["cause"]) for m in reg.collect() for s in m.samples
           if s.name == "krm_partition_unavailable"}
    assert got == {("0", "elr_replicas_down"), ("1", "leader_unreachable")}
    assert reg.get_sample_value("krm_partition_offline", {"cluster": "c1", "topic": "t", "partition": "1",
                                                          "cause": "leader_unreachable"}) is None, \
        "offline stays Kafka's own verdict"


def test_kraft_series_with_a_controller_whose_node_id_is_zero():
    quorum = {"leader_id": 0, "leader_epoch": 3, "voters": [
        {"id": 0, "log_end_offset": 50, "last_fetch_ms": 10_000, "last_caught_up_ms": 10_000},
        {"id": 1, "log_end_offset": 40, "last_fetch_ms": 9_900, "last_caught_up_ms": 9_900},
        {"id": 2, "log_end_offset": 10, "last_fetch_ms": 1_000, "last_caught_up_ms": 1_000}]}
    state = PipelineState()
    state.update(clusters={"k": ClusterView(((5, True),), 5, None, 10_000, quorum=quorum)})
    reg = _registry(state)
    assert reg.get_sample_value("krm_kraft_quorum_leader", {"cluster": "k"}) == 0
    assert reg.get_sample_value("krm_kraft_quorum_voters_caught_up", {"cluster": "k"}) == 2
    assert reg.get_sample_value("krm_kraft_voter_caught_up", {"cluster": "k", "voter": "2"}) == 0
    assert reg.get_sample_value("krm_kraft_voter_records_behind", {"cluster": "k", "voter": "2"}) == 40


def test_each_open_incident_has_an_info_series_with_what_to_act_on():
    offline = Incident("abc123", "c1", "topic:t", "OFFLINE_PARTITION", "critical", "t", 0, None, "all_isr_replicas_dead",
                       {"must_return": [3, 1], "live_brokers": [2]}, 1000, 2000, None, "open")
    stall = Incident("def456", "c1", "topic:t", "HW_STALL", "critical", "t", 4, None, "isr_follower_unreachable",
                     {"holding_back": [2]}, 1000, 2000, None, "open")
    down = Incident("b0", "c1", "cluster", "BROKER_DOWN", "warning", None, None, 3, "stopped", {}, 1000, 2000, None,
                    "open")
    state = PipelineState(console_url="https://krm.example:9308/")
    state.update(open_incidents=(offline, stall, down))
    reg = _registry(state)
    common = {"cluster": "c1", "holding_back": "", "must_return": ""}
    assert reg.get_sample_value("krm_incident_info", {
        **common, "type": "OFFLINE_PARTITION", "severity": "critical", "topic": "t", "partition": "0", "broker": "",
        "cause": "all_isr_replicas_dead", "incident_id": "abc123", "must_return": "3,1",
        "url": "https://krm.example:9308/incidents/abc123"}) == 1
    assert reg.get_sample_value("krm_incident_info", {
        **common, "type": "HW_STALL", "severity": "critical", "topic": "t", "partition": "4", "broker": "",
        "cause": "isr_follower_unreachable", "incident_id": "def456", "holding_back": "2",
        "url": "https://krm.example:9308/incidents/def456"}) == 1
    assert reg.get_sample_value("krm_incident_info", {
        **common, "type": "BROKER_DOWN", "severity": "warning", "topic": "", "partition": "", "broker": "3",
        "cause": "stopped", "incident_id": "b0", "url": "https://krm.example:9308/incidents/b0"}) == 1
    assert reg.get_sample_value("krm_console_info", {"url": "https://krm.example:9308"}) == 1


def test_no_incident_no_info_series():
    reg = _registry(PipelineState())
    assert not [s for m in reg.collect() for s in m.samples if s.name in ("krm_incident_info", "krm_console_info")]
