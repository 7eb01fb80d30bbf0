"""How fast each broker answers, as series: the broker's own request times (its RequestMetrics, from the JMX
exporter: collectors/jmx.py), what a client writing to the partitions it leads waits (the canary's acks=all
writes, per leader) and how late it answers the collector's probes. Pure: built from the pipeline's snapshot on
each scrape."""

from __future__ import annotations

from typing import Any, Iterable, Iterator, Mapping

from prometheus_client.metrics_core import Metric

from pipelines.detectors.canary import CanarySample
from pipelines.jmx_view import JmxSample

# the request names Kafka's RequestMetrics uses, by the prefix of the record's gauge names (collectors/jmx.py)
REQUESTS = {"produce": "Produce", "fetch_follower": "FetchFollower"}
QUANTILES = {"p50": "0.5", "p99": "0.99"}


def request_latencies(gauges: Mapping[str, float]) -> list[tuple[str, str, float]]:
    """(request, quantile, seconds) of a broker's total request times, from one scrape's gauges."""
    out = []
    for prefix, request in REQUESTS.items():
        for q, quantile in QUANTILES.items():
            ms = gauges.get(f"{prefix}_total_{q}_ms")
            if ms is not None:
                out.append((request, quantile, ms / 1000))
    return out


def led_by(s: CanarySample) -> tuple[str, int]:
    """(cluster, broker) the write went through: the leader the round wrote to, else the partition's preferred leader."""
    return s.cluster, s.leader if s.leader is not None and s.leader >= 0 else s.broker


def client_latencies(samples: Iterable[CanarySample]) -> dict[tuple[str, int], float]:
    """(cluster, broker) -> the slowest acknowledgement, in seconds, of the newest canary writes to partitions
    the broker led (the leader the round wrote to; the preferred leader where the round did not say)."""
    out: dict[tuple[str, int], float] = {}
    for s in samples:
        if s.produce_ms is None or not s.produced or s.waiting_ms is not None:
            continue
        key = led_by(s)
        out[key] = max(out.get(key, 0.0), s.produce_ms / 1000)
    return out


def waiting_leaders(samples: Iterable[CanarySample]) -> dict[tuple[str, int], float]:
    """(cluster, broker) -> the longest wait, in seconds, of canary writes not answered yet (a round's early record)
    to partitions the broker led (the preferred leader where the round did not say)."""
    out: dict[tuple[str, int], float] = {}
    for s in samples:
        if s.waiting_ms is not None:
            key = led_by(s)
            out[key] = max(out.get(key, 0.0), s.waiting_ms / 1000)
    return out


def failed_leaders(samples: Iterable[CanarySample]) -> set[tuple[str, int]]:
    """(cluster, broker) of the newest canary writes not acknowledged within the canary's timeout, by the broker
    that led the partition (the preferred leader where the round did not say)."""
    return {led_by(s) for s in samples if not s.produced and s.waiting_ms is None}


def series(jmx: Mapping[tuple[str, int], JmxSample], canary: Mapping[tuple[str, int], CanarySample],
           clusters: Mapping[str, Any] | None = None) -> Iterator[Metric]:
    """krm_broker_request_latency_seconds{cluster,broker,request,quantile},
    krm_broker_client_latency_seconds{cluster,broker} and krm_broker_answer_seconds{cluster,broker}."""
    from prometheus_client.core import GaugeMetricFamily

    request = GaugeMetricFamily("krm_broker_request_latency_seconds",
                                "The broker's own total request time (Kafka's RequestMetrics TotalTimeMs) at a quantile, "
                                "Produce and FetchFollower, as its last JMX scrape said.",
                                labels=["cluster", "broker", "request", "quantile"])
    for (cluster, broker), sample in sorted(jmx.items()):
        if sample.error is None:
            for name, quantile, seconds in request_latencies(sample.gauges):
                request.add_metric([cluster, str(broker), name, quantile], seconds)
    client = GaugeMetricFamily("krm_broker_client_latency_seconds",
                               "What a client writing to partitions this broker leads waits now: the slowest "
                               "acknowledgement of the newest canary round's acks=all writes to them.",
                               labels=["cluster", "broker"])
    for (cluster, broker), seconds in sorted(client_latencies(canary.values()).items()):
        client.add_metric([cluster, str(broker)], seconds)
    answer = GaugeMetricFamily("krm_broker_answer_seconds",
                               "How late the broker answers the collector's smallest question now: the median round "
                               "trip of its reachability probes (a brokers-only Metadata request) over the last "
                               "seconds, as the cluster's last published poll said.", labels=["cluster", "broker"])
    for name, view in sorted((clusters or {}).items()):
        for broker, ms in sorted(view.answers):
            answer.add_metric([name, str(broker)], ms / 1000)
    yield from (request, client, answer)
