"""Per-broker latency: the JMX exporter's RequestMetrics lines as the collector's gauges (collectors/jmx.py),
and /metrics' krm_broker_request_latency_seconds and krm_broker_client_latency_seconds (pipelines/latency.py)."""

import pytest
from prometheus_client import CollectorRegistry

from collectors.jmx import parse_exposition
from pipelines.detectors.canary import CanarySample
from pipelines.jmx_view import JmxSample
from pipelines.metrics import KrmCollector
from pipelines.state import ClusterView, PipelineState

pytestmark = pytest.mark.unit

# as the 1.0.1 agent prints them with conf/jmx-exporter.yaml
TEXT = """\
kafka_network_requestmetrics_totaltimems{request="Produce",quantile="99th",} 412.0
kafka_network_requestmetrics_totaltimems{request="Produce",quantile="50th",} 3.0
kafka_network_requestmetrics_requestqueuetimems{request="Produce",quantile="99th",} 390.5
kafka_network_requestmetrics_localtimems{request="Produce",quantile="99th",} 2.0
kafka_network_requestmetrics_remotetimems{request="FetchFollower",quantile="99th",} 500.0
kafka_network_requestmetrics_totaltimems{request="FetchFollower",quantile="99th",} 502.0
kafka_network_requestmetrics_totaltimems{request="Metadata",quantile="99th",} 1.0
kafka_server_kafkarequesthandlerpool_requesthandleravgidlepercent 0.12
kafka_network_socketserver_networkprocessoravgidlepercent 0.97
kafka_log_logflushstats_logflushtimems_p99 8.5
"""


def test_request_times_and_idle_shares_become_gauges():
    gauges, _ = parse_exposition(TEXT)
    assert gauges == {"produce_total_p99_ms": 412.0, "produce_total_p50_ms": 3.0, "produce_queue_p99_ms": 390.5,
                      "produce_local_p99_ms": 2.0, "fetch_follower_remote_p99_ms": 500.0,
                      "fetch_follower_total_p99_ms": 502.0, "request_handler_idle": 0.12,
                      "network_processor_idle": 0.97, "log_flush_p99_ms": 8.5}  # Metadata's is not read


def _samples(reg, name):
    return {tuple(sorted(s.labels.items())): s.value for m in reg.collect() for s in m.samples if s.name == name}


def test_latency_series_per_broker():
    gauges, _ = parse_exposition(TEXT)
    state = PipelineState()
    state.update(clusters={"c1": ClusterView(((1, True), (2, True)), 1, None, 1)},
                 jmx={("c1", 1): JmxSample("c1", 1, 1, 1, None, gauges),
                      ("c1", 2): JmxSample("c1", 2, 1, 1, "URLError: timed out", {})},
                 canary={("c1", 0): CanarySample("c1", 1, 0, True, 40.0, 45.0, 1, leader=2),
                         ("c1", 1): CanarySample("c1", 2, 1, True, 1500.0, None, 1, leader=2),
                         ("c1", 2): CanarySample("c1", 3, 2, False, None, None, 1, leader=3)})
    reg = CollectorRegistry(auto_describe=False)
    reg.register(KrmCollector(state, clock=lambda: 5.0))
    request = _samples(reg, "krm_broker_request_latency_seconds")
    assert request[(("broker", "1"), ("cluster", "c1"), ("quantile", "0.99"), ("request", "Produce"))] == 0.412
    assert request[(("broker", "1"), ("cluster", "c1"), ("quantile", "0.99"), ("request", "FetchFollower"))] == 0.502
    assert not [k for k in request if ("broker", "2") in k]  # its scrape failed: no stale figure
    # broker 2 led both written partitions (one preferred elsewhere): the slower write; a failed write is no latency
    assert _samples(reg, "krm_broker_client_latency_seconds") == {(("broker", "2"), ("cluster", "c1")): 1.5}
