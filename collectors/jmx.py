"""JMX exporter source: each broker's own replication gauges, scraped from its Prometheus endpoint.

The brokers run the Prometheus JMX exporter agent with conf/jmx-exporter.yaml, which keeps only
the MBeans read here. Every broker is scraped in parallel under one timeout; an endpoint that does
not answer is itself an observation (a record with `error`, and krm_broker_jmx_up 0), never a
crash; it is logged at INFO, once per outage.

What a broker says about itself complements the Admin API: its UnderReplicatedPartitions and
UnderMinIsr/AtMinIsr counts (the broker's own judgement, kafka.server:type=ReplicaManager), whether
it thinks it is the active controller (two brokers saying so is a split brain the metadata cannot
show), ISR shrink/expand and unclean election counters, and per partition the follower fetchers'
ConsumerLag and each replica's LogEndOffset.
"""

from __future__ import annotations

import base64
import logging
import time
import urllib.request
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from schemas.observation import SCHEMA_VERSION
from schemas.typed import BrokerMetricsObservation, PartitionMetric

log = logging.getLogger(__name__)

# exporter metric name (conf/jmx-exporter.yaml, lowercased) -> name in the record
BROKER_GAUGES = {
    "kafka_server_replicamanager_underreplicatedpartitions": "under_replicated_partitions",
    "kafka_server_replicamanager_underminisrpartitioncount": "under_min_isr_partitions",
    "kafka_server_replicamanager_atminisrpartitioncount": "at_min_isr_partitions",
    "kafka_server_replicamanager_offlinereplicacount": "offline_replicas",
    "kafka_server_replicamanager_leadercount": "leaders",
    "kafka_server_replicamanager_partitioncount": "partitions",
    "kafka_controller_kafkacontroller_offlinepartitionscount": "offline_partitions",
    "kafka_controller_kafkacontroller_activecontrollercount": "active_controller_count",
    "kafka_server_replicamanager_isrshrinkspersec": "isr_shrinks_total",
    "kafka_server_replicamanager_isrexpandspersec": "isr_expands_total",
    "kafka_controller_controllerstats_uncleanleaderelectionspersec": "unclean_leader_elections_total",
}
# how fast the broker answers: kafka_network_requestmetrics_<phase>{request, quantile} -> a gauge named
# <request>_<phase>_<quantile>_ms (e.g. produce_queue_p99_ms), and the broker's idle shares and log flushes
REQUEST_PHASES = {"totaltimems": "total", "requestqueuetimems": "queue", "localtimems": "local",
                  "remotetimems": "remote"}
REQUESTS = {"Produce": "produce", "FetchFollower": "fetch_follower"}
QUANTILES = {"50th": "p50", "99th": "p99"}
LOAD_GAUGES = {
    "kafka_server_kafkarequesthandlerpool_requesthandleravgidlepercent": "request_handler_idle",
    "kafka_network_socketserver_networkprocessoravgidlepercent": "network_processor_idle",
    "kafka_log_logflushstats_logflushtimems_p99": "log_flush_p99_ms",
}
REQUEST_METRIC = "kafka_network_requestmetrics_"
PARTITION_METRICS = {
    "kafka_server_fetcherlagmetrics_consumerlag": "consumer_lag",
    "kafka_log_log_logendoffset": "log_end_offset",
}


def parse_exposition(text: str) -> tuple[dict[str, float], list[PartitionMetric]]:
    """Prometheus text -> (broker gauges by record name, per-partition values). Pure."""
    from prometheus_client.parser import text_string_to_metric_families

    gauges: dict[str, float] = {}
    partitions: dict[tuple[str, str, int], float] = {}
    for family in text_string_to_metric_families(text):
        for s in family.samples:
            name = s.name[:-len("_total")] if s.name.endswith("_total") else s.name
            if name in BROKER_GAUGES:
                gauges[BROKER_GAUGES[name]] = float(s.value)
            elif name in LOAD_GAUGES:
                gauges[LOAD_GAUGES[name]] = float(s.value)
            elif name.startswith(REQUEST_METRIC):
                phase = REQUEST_PHASES.get(name[len(REQUEST_METRIC):])
                request, quantile = REQUESTS.get(s.labels.get("request", "")), QUANTILES.get(s.labels.get("quantile", ""))
                if phase and request and quantile:
                    gauges[f"{request}_{phase}_{quantile}_ms"] = float(s.value)
            elif name in PARTITION_METRICS and "topic" in s.labels and "partition" in s.labels:
                key = (PARTITION_METRICS[name], s.labels["topic"], int(s.labels["partition"]))
                # a follower has one fetcher per leader broker: keep the largest lag
                partitions[key] = max(partitions.get(key, float("-inf")), float(s.value))
    parts: list[PartitionMetric] = [{"metric": m, "topic": t, "partition": p, "value": v}
                                    for (m, t, p), v in sorted(partitions.items())]
    return gauges, parts


def broker_metrics_record(cluster: str, poll_id: int, observed_at_ms: int, broker: int, endpoint: str,
                          gauges: dict[str, float], partitions: list[PartitionMetric], error: str | None,
                          scrape_ms: float | None) -> BrokerMetricsObservation:
    return {"v": SCHEMA_VERSION, "kind": "broker_metrics", "cluster": cluster, "source": "jmx", "poll_id": poll_id,
            "observed_at_ms": observed_at_ms, "broker_metrics_state": {
                "broker": broker, "endpoint": endpoint, "error": error, "scrape_ms": scrape_ms,
                "gauges": [{"name": k, "value": v} for k, v in sorted(gauges.items())], "partitions": partitions}}


class JmxSource:
    """Scrapes every broker's exporter endpoint of one cluster; `endpoints`: broker id -> URL."""

    source = "jmx"

    def __init__(self, cluster: str, endpoints: dict[int, str], timeout_s: float = 2.0, security: Any = None) -> None:
        """`security`: foundation.security.HttpSecurity (basic auth, TLS) for exporters behind either."""
        self.cluster = cluster
        self.security = security
        self.endpoints = dict(endpoints)
        self.timeout_s = timeout_s
        self._poll_id = 0
        self._pool = ThreadPoolExecutor(max_workers=min(16, max(1, len(endpoints))), thread_name_prefix="krm-jmx")
        self._down: set[int] = set()
        self._context: Any = None

    def poll(self) -> list[BrokerMetricsObservation]:
        self._poll_id += 1
        results = list(self._pool.map(self._scrape, sorted(self.endpoints.items())))
        return [broker_metrics_record(self.cluster, self._poll_id, at, b, url, g, p, err, ms)
                for b, url, at, g, p, err, ms in results]

    def close(self) -> None:
        self._pool.shutdown(wait=False, cancel_futures=True)

    def _request(self, url: str) -> urllib.request.Request:
        req = urllib.request.Request(url)
        sec = self.security
        if sec is not None and sec.username:
            token = base64.b64encode(f"{sec.username}:{sec.password.read()}".encode()).decode()
            req.add_header("Authorization", f"Basic {token}")
        return req

    def _tls_context(self) -> Any:
        if self.security is None or self.security.tls is None:
            return None
        if self._context is None:
            self._context = self.security.tls.context()
        return self._context

    def _scrape(self, item: tuple[int, str]) -> tuple[Any, ...]:
        broker, url = item
        t0 = time.perf_counter()
        try:
            with urllib.request.urlopen(self._request(url), timeout=self.timeout_s,  # noqa: S310 - configured URLs
                                        context=self._tls_context()) as resp:
                text = resp.read().decode("utf-8", "replace")
            gauges, parts = parse_exposition(text)
        except Exception as e:  # noqa: BLE001 - an unreachable endpoint is the observation
            if broker not in self._down:
                log.info("cluster %s broker %d: JMX exporter %s unreachable: %s", self.cluster, broker, url, e)
                self._down.add(broker)
            return broker, url, int(time.time() * 1000), {}, [], f"{type(e).__name__}: {e}", None
        if broker in self._down:
            log.info("cluster %s broker %d: JMX exporter reachable again", self.cluster, broker)
            self._down.discard(broker)
        return broker, url, int(time.time() * 1000), gauges, parts, None, round((time.perf_counter() - t0) * 1000, 1)
