"""`/metrics`: a custom prometheus-client collector rebuilt from the latest snapshot on every scrape.

The alert path swaps in a new immutable Snapshot after each micro-batch; a scrape reads whichever
snapshot is current, never waits on Spark, and keeps no state of its own. Per-partition series
exist only for unhealthy partitions; cluster and broker aggregates always exist.
"""

from __future__ import annotations

import threading
import time
from collections import Counter
from dataclasses import dataclass, field, replace
from typing import Any, Callable, Iterator

from foundation.web_config import load_web_config, serve_wsgi
from pipelines import broker_history, disks, replication_links
from pipelines.detectors import hw_stall, offline, quorum
from pipelines.detectors.registry import RULES
from pipelines.disks import LogDirState
from pipelines.incidents import Incident
from schemas.observation import AUTHORIZATION_FAILED, UNREACHABLE

@dataclass(frozen=True)
class ClusterView:
    brokers: tuple[tuple[int, bool], ...]  # (broker id, live)
    controller_id: int | None
    error: str | None
    newest_observed_ms: int
    topic_count: int | None = None
    poll_id: int = -1  # of the cluster record this view is from (a poll kept home vouches for it: `vouch`)
    leader_imbalance_percentage: int | None = None  # the cluster's leader.imbalance.per.broker.percentage
    reassigning: bool = False  # a partition reassignment is running (ZooKeeper mode)
    quorum: dict[str, Any] | None = None  # KRaft: the cluster record's DescribeQuorum state
    error_reason: str | None = None  # why `error` (collectors/access.py)
    denied: tuple[str, ...] = ()  # ACLs the poll found missing
    capabilities: tuple[tuple[str, bool], ...] = ()  # (capability, usable): collectors/capabilities.py
    # a cluster split across collector processes (collectors/topic_share.py): how many shares, and the
    # newest observation of each share but the first (whose records are the rest of this view)
    share_count: int = 1
    share_newest: tuple[tuple[int, int], ...] = ()  # (share index >= 2, newest observed_at_ms)
    # polls kept home (collectors/unchanged.py) move newest_observed_ms past the time of the record the
    # view is from (record_ms)
    record_ms: int | None = None
    # a collector apart from the pipeline keeps polls repeating this record home for up to this long
    # (its `holds_s`): the clock vouches for it meanwhile (pipelines/alert_path.py `tick`)
    holds_ms: int | None = None
    log_dirs: tuple[LogDirState, ...] = ()  # the brokers' log directories as last sampled (pipelines/disks.py)

    @property
    def vouched(self) -> tuple[int, int] | None:
        """(record_ms, newest_observed_ms) when polls kept home vouch that what the record observed was
        still so at newest_observed_ms; else None."""
        if self.record_ms is None or self.newest_observed_ms <= self.record_ms:
            return None
        return self.record_ms, self.newest_observed_ms

    @property
    def fresh_ms(self) -> int:
        """Observation time of the view as a whole: the newest observation, or for a split cluster the
        stalest share's newest (a share never seen counts as 0): the view is as fresh as its least
        fresh part, so a dead share ages the cluster's view instead of hiding its topics."""
        if self.share_count <= 1:
            return self.newest_observed_ms
        seen = dict(self.share_newest)
        return min([self.newest_observed_ms] + [seen.get(i, 0) for i in range(2, self.share_count + 1)])

    @property
    def unreachable_reason(self) -> str | None:
        """None when krm can use the cluster fully; else authentication_failed, tls_failed, ..."""
        if self.error:
            return self.error_reason or UNREACHABLE
        return AUTHORIZATION_FAILED if self.denied else None


@dataclass(frozen=True)
class QualityStats:
    """What the data-quality runs (pipelines/quality.py) said so far."""

    runs: int = 0
    run_errors: int = 0
    last_run_ts: float = 0.0
    last_run_s: float = 0.0
    rows_validated: int = 0
    failing: tuple[tuple[str, str], ...] = ()  # (expectation, column) failing at the last run
    unexpected_total: tuple[tuple[tuple[str, str], int], ...] = ()  # cumulative unexpected rows


@dataclass(frozen=True)
class Snapshot:
    clusters: dict[str, ClusterView] = field(default_factory=dict)
    open_incidents: tuple[Incident, ...] = ()
    broker_load: dict[str, dict[int, tuple[int, int, int, int]]] = field(default_factory=dict)
    topic_load: dict[str, dict[str, Any]] = field(default_factory=dict)  # cluster -> topic -> load.TopicLoad
    batches: int = 0
    last_batch_s: float = 0.0
    last_batch_at: float = 0.0  # time.time() when the last alert-path micro-batch finished (0: none yet)
    pipeline_error: str | None = None  # why the pipeline cannot run (e.g. no Spark executors)
    canary: dict[tuple[str, int], Any] = field(default_factory=dict)  # (cluster, partition) -> CanarySample
    records_quarantined: int = 0
    query_restarts: dict[str, int] = field(default_factory=dict)  # streaming query -> restarts after a failure
    jmx: dict[tuple[str, int], Any] = field(default_factory=dict)  # (cluster, broker) -> jmx_view.JmxSample
    quality: QualityStats | None = None  # None until the first data-quality run
    tiered: dict[tuple[str, str], Any] = field(default_factory=dict)  # (cluster, topic) -> tiered_view.TieredTopic


STALE_DEFAULT_S = 6.0  # a view older than this is stale when the config gives no poll interval


class PipelineState:
    """The one mutable thing shared by the alert path (writer) and the scrape thread (reader)."""

    def __init__(self, ready_window_s: float = 30.0, console_url: str = "",
                 stale_after_s: dict[str, float] | None = None,
                 log_dir_within_s: tuple[float, float] = (disks.PAGE_WITHIN_S, disks.WARN_WITHIN_S)) -> None:
        self._lock = threading.Lock()
        self._snapshot = Snapshot()
        self.ready_window_s = ready_window_s  # a batch at least this recent makes the pipeline "up"
        self.console_url = console_url.rstrip("/")  # where the console's pages are (alerts link to them)
        self.stale_after_s = stale_after_s or {}  # cluster -> its view is stale past this age (krm/runner.py)
        self.log_dir_within_s = log_dir_within_s  # a fill forecast pages / warns within these (pipelines/disks.py)
        self.broker_samples = broker_history.Unwritten()  # broker_state rows not appended yet (the console reads them)
        self._vouches: dict[str, tuple[int, int]] = {}  # cluster -> (poll_id, observed_at_ms) vouched before its batch

    def stale(self, now: float | None = None) -> dict[str, float]:
        """cluster -> the age of its view (seconds since the newest observation processed was taken),
        for each cluster whose view is older than its `stale_after_s` (default STALE_DEFAULT_S): krm
        is blind to it now, whatever its pages and series still say."""
        now = time.time() if now is None else now
        ages = {name: max(0.0, now - view.fresh_ms / 1000) for name, view in self._snapshot.clusters.items()}
        return {name: age for name, age in sorted(ages.items())
                if age > self.stale_after_s.get(name, STALE_DEFAULT_S)}

    def vouch(self, cluster: str, poll_id: int, observed_at_ms: int) -> None:
        """The collector in this process kept home a poll that found what its poll `poll_id` did
        (collectors/unchanged.py): once the alert path has processed that poll, the cluster's view holds at
        `observed_at_ms` too. A vouch for a poll still on its way waits for its batch (`update`)."""
        with self._lock:
            cur = self._snapshot
            view = cur.clusters.get(cluster)
            if view is None or view.poll_id < poll_id:
                self._vouches[cluster] = (poll_id, observed_at_ms)
            elif observed_at_ms > view.newest_observed_ms:
                clusters = {**cur.clusters, cluster: replace(view, newest_observed_ms=observed_at_ms)}
                self._snapshot = Snapshot(**{**cur.__dict__, "clusters": clusters})

    def _vouched(self, clusters: dict[str, ClusterView]) -> dict[str, ClusterView]:
        """`clusters` moved on by the vouches that waited for their poll's batch (under the lock)."""
        for name, (poll_id, at_ms) in list(self._vouches.items()):
            view = clusters.get(name)
            if view is not None and view.poll_id >= poll_id:
                del self._vouches[name]
                if at_ms > view.newest_observed_ms:
                    clusters = {**clusters, name: replace(view, newest_observed_ms=at_ms)}
        return clusters

    def readiness(self, now: float | None = None) -> tuple[bool, str]:
        """(ready, why): a micro-batch finished within ready_window_s and nothing stops the pipeline."""
        snap = self._snapshot
        if snap.pipeline_error:
            return False, snap.pipeline_error
        if not snap.last_batch_at:
            return False, "no micro-batch processed yet"
        age = (time.time() if now is None else now) - snap.last_batch_at
        if age > self.ready_window_s:
            return False, f"last micro-batch {age:.0f}s ago (more than {self.ready_window_s:.0f}s)"
        return True, f"last micro-batch {age:.1f}s ago"

    @property
    def snapshot(self) -> Snapshot:
        return self._snapshot

    def update(self, **changes: Any) -> None:
        with self._lock:
            cur = self._snapshot
            if self._vouches and "clusters" in changes:
                changes["clusters"] = self._vouched(changes["clusters"])
            self._snapshot = Snapshot(**{**cur.__dict__, **changes})

    def record_quality(self, report: Any, seconds: float, error: str | None) -> None:
        """After each data-quality run (`report`: quality.Report, None when the run itself failed)."""
        with self._lock:
            cur = self._snapshot
            q = cur.quality or QualityStats()
            totals = dict(q.unexpected_total)
            failing = q.failing
            rows = q.rows_validated
            if report is not None and report.rows:  # a run with nothing new to validate changes nothing
                for o in report.outcomes:
                    key = (o.expectation, o.column)
                    totals[key] = totals.get(key, 0) + o.unexpected_count
                failing = tuple((o.expectation, o.column) for o in report.failed)
                rows += report.rows
            new = QualityStats(q.runs + 1, q.run_errors + (1 if error else 0), time.time(), seconds, rows, failing,
                               tuple(sorted(totals.items())))
            self._snapshot = Snapshot(**{**cur.__dict__, "quality": new})

    def add_quarantined(self, n: int) -> None:
        with self._lock:
            cur = self._snapshot
            self._snapshot = Snapshot(**{**cur.__dict__, "records_quarantined": cur.records_quarantined + n})


    def add_query_restart(self, query: str) -> None:
        with self._lock:
            cur = self._snapshot
            restarts = {**cur.query_restarts, query: cur.query_restarts.get(query, 0) + 1}
            self._snapshot = Snapshot(**{**cur.__dict__, "query_restarts": restarts})


class KrmCollector:
    def __init__(self, state: PipelineState, clock: Callable[[], float] = time.time) -> None:
        self.state = state
        self.clock = clock

    def describe(self) -> list[Any]:
        return []  # families vary with the findings; prometheus-client then calls collect() lazily

    def collect(self) -> Iterator[Any]:
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


def _quality_series(q: QualityStats) -> Iterator[Any]:
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


def _rule_series(incidents: tuple[Incident, ...], clusters: list[str], now: float) -> Iterator[Any]:
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


def _incident_info_series(incidents: tuple[Incident, ...], console_url: str) -> Iterator[Any]:
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
        must_return = offline.OfflineDetails.of(inc.details).must_return if inc.type == offline.TYPE else ()
        holding_back = hw_stall.StallDetails.of(inc.details).holding_back if inc.type == hw_stall.TYPE else ()
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


def _canary_series(samples: dict[tuple[str, int], Any]) -> Iterator[Any]:
    """krm_canary_*: per broker, from the newest round of the canary partition(s) it is meant to lead
    (a broker with several counts as up only if every one took the write; latencies: the slowest)."""
    from prometheus_client.core import GaugeMetricFamily

    up = GaugeMetricFamily("krm_canary_produce_up", "1 if the last canary round's acks=all write to the partition(s) "
                           "the broker should lead was acknowledged.", labels=["cluster", "broker"])
    produce = GaugeMetricFamily("krm_canary_produce_latency_seconds", "The last canary write's acknowledgement time.",
                                labels=["cluster", "broker"])
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


def _kraft_series(clusters: dict[str, ClusterView]) -> Iterator[Any]:
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
        if q.get("leader_epoch") is not None:
            epoch.add_metric([name], q["leader_epoch"])
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


def _tiered_series(tiered: dict[tuple[str, str], Any]) -> Iterator[Any]:
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


def serve(state: PipelineState | None, host: str, port: int, extra: tuple[Any, ...] = (),
          web_config_file: Any = None, readiness: Any = None, pages: Any = None) -> Any:
    """Start the /metrics HTTP server on a daemon thread; returns the server (call .shutdown()).
    `extra`: more prometheus-client collectors (the collector daemon's own health). `web_config_file`:
    TLS and basic auth as Prometheus exporters take them (foundation/web_config.py). `readiness`: what /readyz
    answers (default: the pipeline state's). `pages`: a WSGI app with a `handles(path)` method served
    beside /metrics under the same TLS and basic auth (the console, krm/console.py)."""
    from prometheus_client import CollectorRegistry, make_wsgi_app

    registry = CollectorRegistry(auto_describe=False)
    if state is not None:
        registry.register(KrmCollector(state))
        readiness = readiness or state.readiness
    for c in extra:
        registry.register(c)
    web = load_web_config(web_config_file) if web_config_file is not None else None
    return serve_wsgi(with_probes(make_wsgi_app(registry), readiness, pages), host, port, web)


def with_probes(metrics_app: Any, readiness: Any = None, pages: Any = None) -> Any:
    """/healthz (the process answers) and /readyz (`readiness()` -> (ready, why): 200 or 503 with the
    why) beside /metrics. Probes carry no data, so a web config's basic auth does not apply to them."""
    def app(environ: dict, start_response: Any) -> Any:
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
