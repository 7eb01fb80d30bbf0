"""The pipeline's state: what the alert path (the one writer) last made of the clusters, swapped in whole as
an immutable Snapshot, and read by /metrics (pipelines/metrics.py), the console and the broker sampler.
"""

from __future__ import annotations

import threading
import time
from dataclasses import dataclass, field, replace
from typing import Any

from pipelines import broker_history, disks
from pipelines.detectors.canary import CanarySample
from pipelines.disks import LogDirState
from pipelines.incidents import Incident
from pipelines.jmx_view import JmxSample
from pipelines.load import TopicLoad
from pipelines.tiered_view import TieredTopic
from schemas.observation import AUTHORIZATION_FAILED, UNREACHABLE
from schemas.typed import Quorum
from foundation.cadence import STALE_MIN_S


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
    quorum: Quorum | None = None  # KRaft: the cluster record's DescribeQuorum state
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
    # findings time alone opens on the cluster as its record says (pipelines/clock.py `openings`)
    opens: tuple[tuple[str, str, int, dict[str, Any]], ...] = ()
    log_dirs: tuple[LogDirState, ...] = ()  # the brokers' log directories as last sampled (pipelines/disks.py)
    answers: tuple[tuple[int, float], ...] = ()  # (broker, ms): how late each answers the collector's probes now
    steady_answers: tuple[tuple[int, float], ...] = ()  # (broker, ms): ... over the last few seconds

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

    def stalest_share(self) -> tuple[int, int] | None:
        """A split cluster's share whose newest observation is oldest, and that observation's time (a share never
        seen: 0); None for a cluster polled whole."""
        if self.share_count <= 1:
            return None
        seen = {1: self.newest_observed_ms, **dict(self.share_newest)}
        return min(((i, seen.get(i, 0)) for i in range(1, self.share_count + 1)), key=lambda s: (s[1], s[0]))

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
    # BROKER_SLOW incidents resolved within the flap window: their spell's pages stay held a while (pipelines/slowed.py)
    slow_ended: tuple[Incident, ...] = ()
    broker_load: dict[str, dict[int, tuple[int, int, int, int]]] = field(default_factory=dict)
    topic_load: dict[str, dict[str, TopicLoad]] = field(default_factory=dict)  # cluster -> topic -> its load
    batches: int = 0
    last_batch_s: float = 0.0
    last_batch_at: float = 0.0  # time.time() when the last alert-path micro-batch finished (0: none yet)
    pipeline_error: str | None = None  # why the pipeline cannot run (e.g. no Spark executors)
    canary: dict[tuple[str, int], CanarySample] = field(default_factory=dict)  # (cluster, partition) -> its sample
    records_quarantined: int = 0
    query_restarts: dict[str, int] = field(default_factory=dict)  # streaming query -> restarts after a failure
    jmx: dict[tuple[str, int], JmxSample] = field(default_factory=dict)  # (cluster, broker) -> its gauges
    quality: QualityStats | None = None  # None until the first data-quality run
    tiered: dict[tuple[str, str], TieredTopic] = field(default_factory=dict)  # (cluster, topic) -> its offsets




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
        for each cluster whose view is older than its `stale_after_s` (default STALE_MIN_S): krm
        is blind to it now, whatever its pages and series still say."""
        now = time.time() if now is None else now
        ages = {name: max(0.0, now - view.fresh_ms / 1000) for name, view in self._snapshot.clusters.items()}
        return {name: age for name, age in sorted(ages.items())
                if age > self.stale_after_s.get(name, STALE_MIN_S)}

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


def blindness_said(was_stale: set[str], stale: dict[str, float], snap: Snapshot, now: float,
                   alert_query: tuple[bool, str] | None = None,
                   collector: dict[str, str] | None = None) -> list[str]:
    """Log lines for clusters whose view turned stale or fresh since the last look (`was_stale`): which side
    fell behind, so a blind moment's cause is in the log. `alert_query`: (busy, what it is doing) as the
    alert query says at that moment (`alert_query_said`): busy asking for the topic's offsets, the
    observations topic does not answer; busy otherwise, the pipeline is behind; waiting for data,
    nothing newer reached it (the collector's polls or the observations topic). The last micro-batch's
    time alone cannot tell: the batch that brought the view's newest observation always came after it.
    `collector`: cluster -> what a collector in this process says of it (collectors/daemon.py `said`): its
    polls and the observations topic's acknowledgements, the other side of the same moment."""
    out = []
    for name in sorted(stale.keys() - was_stale):
        view = snap.clusters.get(name)
        since_batch = now - snap.last_batch_at if snap.last_batch_at else float("inf")
        if alert_query is None:
            side = "the alert query's state unknown"
        elif alert_query[0] and alert_query[1].startswith("Getting offsets"):
            side = (f"the alert query is busy ({alert_query[1]}): the observations topic does not answer the "
                    "pipeline's reads")
        elif alert_query[0]:
            side = f"the alert query is busy ({alert_query[1]}): the pipeline is behind"
        else:
            side = (f"the alert query is idle ({alert_query[1]}): nothing newer reached the pipeline (the collector's "
                    "polls or the observations topic)")
        said = f"; {collector[name]}" if collector and name in collector else ""
        if view is not None and (stalest := view.stalest_share()) is not None:
            share, at_ms = stalest
            said += (f"; its stalest share is {share} of {view.share_count} (krm collect --topic-share {share}/"
                     f"{view.share_count}), " + (f"newest observation {now - at_ms / 1000:.1f} s old" if at_ms else
                                                 "never heard from"))
        out.append(f"cluster {name}: krm's view is {stale[name]:.1f} s old (poll {view.poll_id if view else '?'}); "
                   f"the last micro-batch finished {since_batch:.1f} s ago after {snap.last_batch_s:.2f} s; {side}{said}")
    for name in sorted(was_stale - stale.keys()):
        view = snap.clusters.get(name)
        out.append(f"cluster {name}: krm's view is fresh again (poll {view.poll_id if view else '?'})")
    return out


def alert_query_said(status: dict[str, Any] | None, batch_running_s: float | None) -> tuple[bool, str] | None:
    """(busy, what) from the alert query's Spark status (StreamingQuery.status: message, isTriggerActive)
    and how long the batch handler has been running (None: no batch in the handler)."""
    if batch_running_s is not None:
        return True, f"a micro-batch in its handler for {batch_running_s:.1f} s"
    if status is None:
        return None
    return bool(status.get("isTriggerActive")), str(status.get("message", ""))
