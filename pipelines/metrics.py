"""`/metrics`: a custom prometheus-client collector rebuilt from the latest snapshot on every scrape.

The alert path swaps in a new immutable Snapshot after each micro-batch; a scrape reads whichever
snapshot is current, never waits on Spark, and keeps no state of its own. Per-partition series
exist only for unhealthy partitions; cluster and broker aggregates always exist.
"""

from __future__ import annotations

import time
from collections import Counter
from pathlib import Path
from typing import Any, Callable, Iterable, Iterator, Protocol
from wsgiref.simple_server import WSGIServer
from wsgiref.types import StartResponse, WSGIApplication, WSGIEnvironment

from prometheus_client.metrics_core import Metric
from prometheus_client.registry import Collector

from foundation.web_config import load_web_config, serve_wsgi
from pipelines import broker_history, disks, latency, replication_links, slowed
from pipelines.detectors import hw_stall, offline, quorum
from pipelines.detectors.canary import CanarySample
from pipelines.detectors.registry import RULES
from pipelines.incidents import Incident
from pipelines.state import ClusterView, PipelineState, QualityStats
from pipelines.tiered_view import TieredTopic



class KrmCollector:
    def __init__(self, state: PipelineState, clock: Callable[[], float] = time.time) -> None:
        self.state = state
        self.clock = clock

    def describe(self) -> list[Metric]:
        return []  # families vary with the findings; prometheus-client then calls collect() lazily

    def collect(self) -> Iterator[Metric]:
        from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily

        snap = self.state.snapshot
        now = self.clock()

        open_count: Counter[tuple[str, str, str]] = Counter(
            (inc.cluster, inc.type, inc.severity) for inc in snap.open_incidents)
        yield from _rule_series(snap.open_incidents, sorted(snap.clusters), now)
        yield from _incident_info_series(snap.open_incidents, self.state.console_url)
        yield from _tiered_series(snap.tiered)

        age = GaugeMetricFamily("krm_observation_age_seconds",
                                "Seconds since the newest observation the pipeline processed was taken, or the newest "
                                "steady, unchanged poll the collector in this process kept home (a cluster split "
                                "across collector processes: its stalest share's).",
                                labels=["cluster"])
        reachable = GaugeMetricFamily("krm_cluster_reachable",
                                      "1 if the last poll of the cluster succeeded with every ACL krm needs; 0 with "
                                      "the reason (unreachable, authentication_failed, tls_failed, protocol_mismatch, "
                                      "authorization_failed).", labels=["cluster", "reason"])
        broker_up = GaugeMetricFamily("krm_broker_up", "1 if the broker is registered with the cluster.",
                                      labels=["cluster", "broker"])
        leaders = GaugeMetricFamily("krm_broker_leaders", "Partitions led by the broker.", labels=["cluster", "broker"])
        replicas = GaugeMetricFamily("krm_broker_replicas", "Replicas assigned to the broker.", labels=["cluster", "broker"])
        out_of_sync = GaugeMetricFamily("krm_broker_out_of_sync_partitions",
                                        "Partitions whose replica on the broker is out of the ISR, as krm's open incidents "
                                        "name them.", labels=["cluster", "broker"])
        must_return = GaugeMetricFamily("krm_broker_must_return_partitions",
                                        "Offline partitions that need the broker back (must_return of open "
                                        "OFFLINE_PARTITION incidents).", labels=["cluster", "broker"])
        troubled = broker_history.trouble(snap.open_incidents)
        capability = GaugeMetricFamily("krm_collector_capability",
                                       "1 if the cluster's brokers answer the request a detection needs (elr: "
                                       "DescribeTopicPartitions, quorum: DescribeQuorum, reassignments: "
                                       "ListPartitionReassignments); 0: krm cannot see it on this Kafka version.",
                                       labels=["cluster", "capability"])
        for name, view in sorted(snap.clusters.items()):
            for what, usable in view.capabilities:
                capability.add_metric([name, what], 1 if usable else 0)
            age.add_metric([name], max(0.0, now - view.fresh_ms / 1000))
            reason = view.unreachable_reason
            reachable.add_metric([name, reason or ""], 0 if reason else 1)
            load = snap.broker_load.get(name, {})
            for bid in sorted({b for b, _ in view.brokers} | set(load)):
                live = dict(view.brokers).get(bid, False)
                broker_up.add_metric([name, str(bid)], 1 if live else 0)
                lead, rep, _, _ = load.get(bid, (0, 0, 0, 0))
                leaders.add_metric([name, str(bid)], lead)
                replicas.add_metric([name, str(bid)], rep)
                oos, awaited = troubled.get((name, bid), (0, 0))
                out_of_sync.add_metric([name, str(bid)], oos)
                must_return.add_metric([name, str(bid)], awaited)
        share_age = GaugeMetricFamily("krm_cluster_share_age_seconds",
                                      "A cluster split across collector processes (--topic-share I/N): seconds since "
                                      "each share's newest observation. The view is as fresh as its stalest share: "
                                      "the one that names which collector is late or gone.", labels=["cluster", "share"])
        for name, view in sorted(snap.clusters.items()):
            if view.share_count > 1:
                seen = {1: view.newest_observed_ms, **dict(view.share_newest)}
                for share in range(1, view.share_count + 1):
                    if share in seen:
                        share_age.add_metric([name, str(share)], max(0.0, now - seen[share] / 1000))
        yield share_age
        stale = GaugeMetricFamily("krm_cluster_view_stale",
                                  "1 while krm's view of the cluster is older than three of its polls (at least 6 s): "
                                  "the observations stopped arriving, and krm is blind to it.", labels=["cluster"])
        stale_now = self.state.stale(now)
        for name in sorted(snap.clusters):
            stale.add_metric([name], 1 if name in stale_now else 0)
        yield from (age, reachable, broker_up, leaders, replicas, out_of_sync, must_return, capability, stale)
        yield from _kraft_series(snap.clusters)
        yield from disks.series(((name, view.log_dirs) for name, view in sorted(snap.clusters.items())),
                                *self.state.log_dir_within_s)
        yield from replication_links.series(snap.open_incidents)
        yield from _canary_series(snap.canary)
        yield from latency.series(snap.jmx, snap.canary, snap.clusters)
        yield from slowed.series(snap.open_incidents, snap.canary.values(), snap.slow_ended, int(now * 1000))

        jmx_up = GaugeMetricFamily("krm_broker_jmx_up", "1 if the broker's JMX exporter answered the last scrape.",
                                   labels=["cluster", "broker"])
        jmx_values = GaugeMetricFamily("krm_broker_jmx", "The broker's own replication gauges (JMX exporter).",
                                       labels=["cluster", "broker", "metric"])
        for (cluster, broker), sample in sorted(snap.jmx.items()):
            jmx_up.add_metric([cluster, str(broker)], 0 if sample.error else 1)
            for metric, value in sorted(sample.gauges.items()):
                jmx_values.add_metric([cluster, str(broker), metric], value)
        yield jmx_up
        yield jmx_values

        incidents = GaugeMetricFamily("krm_incidents_open", "Open incidents.", labels=["cluster", "type", "severity"])
        for (c, t, s), n in sorted(open_count.items()):
            incidents.add_metric([c, t, s], n)
        yield incidents

        yield GaugeMetricFamily("krm_pipeline_last_batch_seconds", "Duration of the last alert-path micro-batch.",
                                value=snap.last_batch_s)
        yield GaugeMetricFamily("krm_pipeline_up", "1 while the pipeline processes micro-batches (one within the "
                                "readiness window, the same as /readyz); 0 before the first, when they stop, or "
                                "when Spark cannot run it.", value=1 if self.state.readiness(now)[0] else 0)
        yield CounterMetricFamily("krm_pipeline_batches", "Alert-path micro-batches processed.", value=snap.batches)
        yield CounterMetricFamily("krm_pipeline_records_quarantined", "Observation records sent to quarantine.",
                                  value=snap.records_quarantined)
        restarts = CounterMetricFamily("krm_pipeline_query_restarts", "Streaming queries restarted from their "
                                       "checkpoint after a failure (the log names the cause).", labels=["query"])
        for query in ("krm-alerts", "krm-history"):  # both from the start: increase() sees the first restart
            restarts.add_metric([query], snap.query_restarts.get(query, 0))
        yield restarts
        if snap.quality is not None:
            yield from _quality_series(snap.quality)


def _quality_series(q: QualityStats) -> Iterator[Metric]:
    """krm_data_quality_*: the suite beside the alert path (pipelines/quality.py)."""
    from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily

    yield CounterMetricFamily("krm_data_quality_runs", "Data-quality suite runs.", value=q.runs)
    yield CounterMetricFamily("krm_data_quality_run_errors", "Data-quality runs that failed to run.", value=q.run_errors)
    yield CounterMetricFamily("krm_data_quality_rows_validated", "Partition rows the suite validated.",
                              value=q.rows_validated)
    yield GaugeMetricFamily("krm_data_quality_last_run_timestamp_seconds", "When the suite last ran.",
                            value=q.last_run_ts)
    yield GaugeMetricFamily("krm_data_quality_last_run_seconds", "How long the last run took.", value=q.last_run_s)
    failing = GaugeMetricFamily("krm_data_quality_expectation_failing",
                                "1 for each expectation that failed at the last run.", labels=["expectation", "column"])
    for exp, col in q.failing:
        failing.add_metric([exp, col], 1)
    yield failing
    unexpected = CounterMetricFamily("krm_data_quality_unexpected_rows",
                                     "Rows that failed an expectation, over all runs.", labels=["expectation", "column"])
    for (exp, col), n in q.unexpected_total:
        unexpected.add_metric([exp, col], n)
    yield unexpected


def _rule_series(incidents: tuple[Incident, ...], clusters: list[str], now: float) -> Iterator[Metric]:
    """Every series the rules declare (`Rule.series`, pipelines/detectors/exports.py), in registry
    order: one sample per open incident of the rule's type, or a per-cluster count (0 included)."""
    from prometheus_client.core import GaugeMetricFamily

    by_type: dict[str, list[Incident]] = {}
    for inc in incidents:
        by_type.setdefault(inc.type, []).append(inc)
    families: dict[str, Any] = {}
    taken: dict[str, set[tuple[str, ...]]] = {}
    for rule in RULES:
        mine = by_type.get(rule.type, [])
        for s in rule.series:
            fam = families.get(s.name)
            if fam is None:
                fam = families[s.name] = GaugeMetricFamily(s.name, s.help, labels=["cluster", *s.labels])
            if s.kind == "count":
                n = Counter(inc.cluster for inc in mine)
                for cluster in clusters:
                    fam.add_metric([cluster], n[cluster])
                continue
            seen = taken.setdefault(s.name, set())
            for inc in mine:
                sample = s.sample(inc, now)
                if sample is None:
                    continue
                labels, value = sample
                if s.one_per is not None:
                    key = (inc.cluster, *(labels[s.labels.index(name)] for name in s.one_per))
                    if key in seen:
                        continue
                    seen.add(key)
                fam.add_metric([inc.cluster, *labels], value)
    yield from families.values()


def _brokers_label(value: Any) -> str:
    return ",".join(str(b) for b in value) if isinstance(value, (list, tuple)) else ""


def _incident_info_series(incidents: tuple[Incident, ...], console_url: str) -> Iterator[Metric]:
    """krm_incident_info: 1 per open incident, its labels what the operator acts on (the broker that
    must return, the followers holding a HW back, the incident's console page). Alert rules read it
    in their annotations (a template `query`), so a page carries the answer while the alert's own
    labels, and so its identity, stay those of the series it fires on. krm_console_info{url}: the
    console's address, for the rules whose alert names no single incident."""
    from prometheus_client.core import GaugeMetricFamily

    fam = GaugeMetricFamily("krm_incident_info", "1 per open incident: its id, subject, cause, the brokers that must "
                            "return (must_return), the followers holding the HW back (holding_back), its console page.",
                            labels=["cluster", "type", "severity", "topic", "partition", "broker", "cause",
                                    "incident_id", "must_return", "holding_back", "url"])
    for inc in incidents:
        # only the types whose brokers the label names are parsed: a scrape after a broker's death reads
        # tens of thousands of new incidents
        facts = inc.facts if inc.type in (offline.TYPE, hw_stall.TYPE) else None
        must_return = facts.must_return if isinstance(facts, offline.OfflineDetails) else ()
        holding_back = facts.holding_back if isinstance(facts, hw_stall.StallDetails) else ()
        fam.add_metric([inc.cluster, inc.type, inc.severity, inc.topic or "",
                        "" if inc.partition is None else str(inc.partition), "" if inc.broker is None else str(inc.broker),
                        inc.cause or "", inc.incident_id, _brokers_label(must_return), _brokers_label(holding_back),
                        f"{console_url}/incidents/{inc.incident_id}" if console_url else ""], 1)
    yield fam
    if console_url:
        console = GaugeMetricFamily("krm_console_info", "The console's address (`[pipeline] console_url`).",
                                    labels=["url"])
        console.add_metric([console_url], 1)
        yield console


def _canary_series(samples: dict[tuple[str, int], CanarySample]) -> Iterator[Metric]:
    """krm_canary_*: per broker, from the newest round of the canary partition(s) it is meant to lead
    (a broker with several counts as up only if every one took the write; latencies: the slowest)."""
    from prometheus_client.core import GaugeMetricFamily

    up = GaugeMetricFamily("krm_canary_produce_up", "1 if the last canary round's acks=all write to the partition(s) "
                           "the broker should lead was acknowledged.", labels=["cluster", "broker"])
    produce = GaugeMetricFamily("krm_canary_produce_latency_seconds",
                                "The last canary round's slowest write's acknowledgement time.", labels=["cluster", "broker"])
    e2e = GaugeMetricFamily("krm_canary_e2e_latency_seconds", "The last canary record's produce -> consume time.",
                            labels=["cluster", "broker"])
    by_broker: dict[tuple[str, int], list[Any]] = {}
    for s in samples.values():
        by_broker.setdefault((s.cluster, s.broker), []).append(s)
    for (cluster, broker), ss in sorted(by_broker.items()):
        labels = [cluster, str(broker)]
        up.add_metric(labels, 1 if all(s.produced for s in ss) else 0)
        if all(s.produce_ms is not None for s in ss):
            produce.add_metric(labels, max(s.produce_ms for s in ss) / 1000)
        if all(s.e2e_ms is not None for s in ss):
            e2e.add_metric(labels, max(s.e2e_ms for s in ss) / 1000)
    yield from (up, produce, e2e)


def _kraft_series(clusters: dict[str, ClusterView]) -> Iterator[Metric]:
    """krm_kraft_*: the controller quorum of each KRaft cluster, from its newest DescribeQuorum."""
    from prometheus_client.core import GaugeMetricFamily

    leader = GaugeMetricFamily("krm_kraft_quorum_leader", "Node id of the metadata quorum leader (-1: none).",
                               labels=["cluster"])
    epoch = GaugeMetricFamily("krm_kraft_quorum_leader_epoch", "Epoch of the metadata quorum leader.", labels=["cluster"])
    voters = GaugeMetricFamily("krm_kraft_quorum_voters", "Voters of the controller quorum.", labels=["cluster"])
    healthy = GaugeMetricFamily("krm_kraft_quorum_voters_caught_up",
                                "Voters leading or fetching and caught up; a majority must be.", labels=["cluster"])
    behind = GaugeMetricFamily("krm_kraft_voter_records_behind", "Quorum leader's log end offset minus the voter's.",
                               labels=["cluster", "voter"])
    fetch_age = GaugeMetricFamily("krm_kraft_voter_fetch_age_seconds",
                                  "Seconds since the voter last fetched from the quorum leader (leader's clock).",
                                  labels=["cluster", "voter"])
    caught_up = GaugeMetricFamily("krm_kraft_voter_caught_up", "1 if the voter leads or is caught up.",
                                  labels=["cluster", "voter"])
    for name, view in sorted(clusters.items()):
        q = view.quorum
        if q is None:
            continue
        leader_id = q.get("leader_id")
        leader.add_metric([name], float(leader_id) if leader_id is not None else -1.0)
        if (leader_epoch := q.get("leader_epoch")) is not None:
            epoch.add_metric([name], leader_epoch)
        leader_id = q.get("leader_id")
        states = quorum.voter_states(q) if leader_id is not None and leader_id >= 0 else []
        voters.add_metric([name], len(q.get("voters") or []))
        healthy.add_metric([name], sum(1 for v in states if v.state in (quorum.LEADER, quorum.CAUGHT_UP)))
        for v in states:
            if v.records_behind is not None:
                behind.add_metric([name, str(v.id)], v.records_behind)
            if v.fetch_age_ms is not None and v.state != quorum.LEADER:
                fetch_age.add_metric([name, str(v.id)], v.fetch_age_ms / 1000)
            caught_up.add_metric([name, str(v.id)], 1 if v.state in (quorum.LEADER, quorum.CAUGHT_UP) else 0)
    yield from (leader, epoch, voters, healthy, behind, fetch_age, caught_up)


def _tiered_series(tiered: dict[tuple[str, str], TieredTopic]) -> Iterator[Metric]:
    """Per partition of a tiered topic (pipelines/tiered_view.py), healthy or not: an operator opted
    these topics in, and a copy falling behind is seen before the disk fills."""
    from prometheus_client.core import GaugeMetricFamily

    labels = ["cluster", "topic", "partition"]
    local = GaugeMetricFamily("krm_partition_local_log_start_offset",
                              "Tiered topics: the leader's local log start offset (older offsets are read from "
                              "remote storage).", labels=labels)
    remote = GaugeMetricFamily("krm_partition_highest_remote_offset",
                               "Tiered topics: the highest offset copied to remote storage (-1: none yet).",
                               labels=labels)
    lag = GaugeMetricFamily("krm_partition_remote_copy_lag_messages",
                            "Tiered topics: committed messages not yet copied to remote storage (the active "
                            "segment is copied only once rolled).", labels=labels)
    for (cluster, topic), t in sorted(tiered.items()):
        for p in t.partitions:
            key = [cluster, topic, str(p.partition)]
            if p.local_log_start_offset is not None:
                local.add_metric(key, p.local_log_start_offset)
            if p.highest_remote_offset is not None:
                remote.add_metric(key, p.highest_remote_offset)
            if (behind := p.remote_copy_lag) is not None:
                lag.add_metric(key, behind)
    yield from (local, remote, lag)


Readiness = Callable[[], tuple[bool, str]]  # what /readyz answers: (ready, why)


class Pages(Protocol):
    """A WSGI app served beside /metrics for the paths it handles (the console, krm/console.py)."""

    def handles(self, path: str) -> bool: ...

    def __call__(self, environ: WSGIEnvironment, start_response: StartResponse) -> Iterable[bytes]: ...


def serve(state: PipelineState | None, host: str, port: int, extra: tuple[Collector, ...] = (),
          web_config_file: Path | None = None, readiness: Readiness | None = None,
          pages: Pages | None = None) -> WSGIServer:
    """Start the /metrics HTTP server on a daemon thread; returns the server (call .shutdown()).
    `extra`: more prometheus-client collectors (the collector daemon's own health). `web_config_file`:
    TLS and basic auth as Prometheus exporters take them (foundation/web_config.py). `readiness`: what /readyz
    answers (default: the pipeline state's). `pages`: a WSGI app with a `handles(path)` method served
    beside /metrics under the same TLS and basic auth (the console, krm/console.py)."""
    from prometheus_client import CollectorRegistry, make_wsgi_app

    # our collectors describe nothing (their families vary with the findings): without names, `?name[]=` would
    # filter every family out instead of keeping the ones asked for
    registry = CollectorRegistry(auto_describe=False, support_collectors_without_names=True)
    if state is not None:
        registry.register(KrmCollector(state))
        readiness = readiness or state.readiness
    for c in extra:
        registry.register(c)
    web = load_web_config(web_config_file) if web_config_file is not None else None
    return serve_wsgi(with_probes(make_wsgi_app(registry), readiness, pages), host, port, web)


def with_probes(metrics_app: WSGIApplication, readiness: Readiness | None = None,
                pages: Pages | None = None) -> WSGIApplication:
    """/healthz (the process answers) and /readyz (`readiness()` -> (ready, why): 200 or 503 with the
    why) beside /metrics. Probes carry no data, so a web config's basic auth does not apply to them."""
    def app(environ: WSGIEnvironment, start_response: StartResponse) -> Iterable[bytes]:
        path = environ.get("PATH_INFO", "")
        if path == "/healthz":
            start_response("200 OK", [("Content-Type", "text/plain")])
            return [b"ok\n"]
        if path == "/readyz":
            ready, why = readiness() if readiness is not None else (True, "no readiness check")
            start_response("200 OK" if ready else "503 Service Unavailable", [("Content-Type", "text/plain")])
            return [f"{'ready' if ready else 'not ready'}: {why}\n".encode()]
        if pages is not None and pages.handles(path):
            return pages(environ, start_response)
        return metrics_app(environ, start_response)
    return app
