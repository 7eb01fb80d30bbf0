"""The alert path: the streaming query's micro-batch, from the detectors' rows to the incident book,
/metrics and the incidents table, in that order (the alert is visible before it is written).

Its Spark plan (`findings.alert_rows`) is built once on the stream in pipelines/job.py; each batch here
collects the rows, advances the incident book with them and the driver-side judges (balance, JMX,
canary, quorum), and publishes the new /metrics snapshot. Between batches `tick` advances what time
alone changes (pipelines/clock.py); the two never run at once.
"""

from __future__ import annotations

import json
import logging
import threading
import time
from dataclasses import replace
from typing import TYPE_CHECKING

from foundation.config import Config
from pipelines import clock, disks, replication_links, slowed, tiered_view
from pipelines.assignment_history import broker_join_ms, topic_layouts
from pipelines.balance import BalanceCheck
from pipelines.detectors import canary, isr_flapping, quorum
from pipelines.detectors.balance import REPLICA_IMBALANCE, AssignmentHistory
from pipelines.detectors.brokers import BROKER_DOWN
from pipelines.detectors.canary import CanarySample
from pipelines.detectors.registry import EVENT_TYPES
from pipelines.detectors.slow import TYPE as BROKER_SLOW
from pipelines.detectors.settings import DetectorSettings
from pipelines.incident_store import IncidentStore
from pipelines.incidents import Finding, Incident, IncidentBook, ScopePoll
from pipelines.jmx_view import JmxSample, JmxView
from pipelines.load import BrokerLoad, TopicLoad
from pipelines.slow_view import SlowView, came_back
from pipelines.state import ClusterView, PipelineState
from pipelines.tables import Tables
from pipelines.tiered_view import TieredTopic
from schemas.typed import ClusterState

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, Row

log = logging.getLogger(__name__)

LEASE_MARGIN_MS = 2_000  # beyond a batch's time: how long a poll published takes to reach the alert path


def event_hold_ms(config: Config) -> dict[str, int]:
    """Incident types that are events (seen by one poll) and how long they stay open."""
    hold = int(config.pipeline.event_hold_s * 1000)
    return {t: hold for t in EVENT_TYPES}


def restored_history(tables: Tables, store: IncidentStore) -> AssignmentHistory:
    """The balance detectors' assignment history as the tables left it: a restarted pipeline keeps
    knowing which brokers joined and which topics grew while it watched (their incidents keep their
    causes). Unreadable tables cost the history, not the pipeline."""
    t0 = time.perf_counter()
    try:
        layouts = topic_layouts(tables.assignments)
        joins = broker_join_ms(store.read(types=[REPLICA_IMBALANCE]) if store.exists() else [])
    except Exception as e:  # noqa: BLE001 - e.g. a table being vacuumed; the history then starts afresh
        log.warning("assignment history not restored from %s (%s: %s): expansions seen before this start "
                    "will read as uneven_assignment", tables.assignments, type(e).__name__, e)
        return AssignmentHistory()
    if layouts or joins:
        log.info("assignment history restored: %d topics, %d broker joins (%.1fs)", len(layouts), len(joins),
                 time.perf_counter() - t0)
    return AssignmentHistory.restore(layouts, joins)


class AlertPath:
    """foreachBatch handler of the alert query; its input is already `findings.alert_rows`.

    The plan is built once on the stream, not per batch: building a DataFrame from Python costs many
    py4j calls, far more than executing the prepared plan on a small batch (benchmarks/BENCHMARKS.md).
    """

    def __init__(self, state: PipelineState, book: IncidentBook, store: IncidentStore,
                 balance: BalanceCheck | None = None, deleted_after_ms: int = 30_000, settings: DetectorSettings | None = None,
                 slow: SlowView | None = None) -> None:
        self.state = state
        self.settings = settings  # findings.DetectorSettings: what the escalations by time read (None: none)
        self._lock = threading.Lock()  # a batch and a tick never interleave
        self._unwritten: list[Incident] = []  # changes by time whose write failed (retried at each tick)
        self._forgot_through: dict[str, int] = {}  # cluster -> the time its vanished topics were last looked for at
        self.deleted_after_ms = deleted_after_ms  # a topic no successful poll observed this long was deleted
        self.book = book
        self.store = store
        self.counts = BrokerLoad()
        self.balance = balance or BalanceCheck()
        self.jmx = JmxView()
        self.slow = slow or SlowView()  # BROKER_SLOW, with each cluster's latency objective
        # (cluster, partition) -> a canary write not answered yet, from its round's early record (canary.still_waiting)
        self.canary_waiting: dict[tuple[str, int], CanarySample] = {}
        self._critical_spells = slowed.CriticalSpells()  # when each BROKER_SLOW was last critical
        self._shrinks = isr_flapping.Shrinks()  # ISR_FLAPPING: the partitions' recent ISR shrinks, by follower
        self._flap_rounds: dict[str, int] = {}  # ... each cluster's rounds judged
        # ... and the clusters with a flapping partition at the last (a restarted pipeline's, from its book)
        self._flapping_open = {i.cluster for i in self.book.open_incidents() if i.type == isr_flapping.TYPE}
        self.shares: dict[str, dict[int, int]] = {}  # split clusters: share index (>= 2) -> newest observation
        self.batch_started_at: float | None = None  # time.monotonic() a batch entered the handler; None between

    def _flapping(self, changed: list[Incident], clusters: dict[str, ClusterView]) -> tuple[list[ScopePoll], list[Finding]]:
        """ISR_FLAPPING (pipelines/detectors/isr_flapping.py), judged for the clusters whose under-replicated
        incidents this batch changed or that have a flapping partition: a round of their scope each."""
        shrank = [i for i in changed if i.type == isr_flapping.UNDER_REPLICATED]
        names = {i.cluster for i in shrank} | self._flapping_open
        if not names:
            return [], []
        self._shrinks.note(shrank)
        views = {**self.state.snapshot.clusters, **clusters}
        polls, found = [], []
        for name in sorted(names):
            at = max([i.last_seen_at_ms for i in shrank if i.cluster == name]
                     + ([views[name].newest_observed_ms] if name in views else []))
            round_id = self._flap_rounds[name] = self._flap_rounds.get(name, 0) + 1
            polls.append(ScopePoll(name, isr_flapping.SCOPE, round_id, at))
            found += [Finding(name, isr_flapping.SCOPE, isr_flapping.TYPE, "warning", f.topic, f.partition, f.follower,
                              isr_flapping.SHRINK_EXPAND, f.details, at, round_id)
                      for f in self._shrinks.flapping(name, at, self.book.flap_window_ms)]
        self._flapping_open = {f.cluster for f in found}
        return polls, found

    def _incidents(self) -> dict[str, tuple[Incident, ...]]:
        """The open incidents for the snapshot, and the BROKER_SLOW incidents no longer critical (their spell's
        pages stay held a while: pipelines/slowed.py)."""
        open_incidents = tuple(self.book.open_incidents())
        return {"open_incidents": open_incidents,
                "slow_ended": self._critical_spells.ended(open_incidents, self.book.resolved(BROKER_SLOW))}

    def _with_shares(self, view: ClusterView, name: str) -> ClusterView:
        """`view` with what the other shares of a split cluster said last (collectors/topic_share.py)."""
        seen = self.shares.get(name)
        if view.share_count <= 1 and not seen:
            return view
        return replace(view, share_newest=tuple(sorted((seen or {}).items())))

    def __call__(self, batch: DataFrame, batch_id: int) -> None:
        self.batch_started_at = time.monotonic()
        try:
            t0 = time.perf_counter()
            rows = batch.collect()  # the Spark job: Kafka fetch, parse, detect
            t_collect = time.perf_counter() - t0
            with self._lock:
                self._judge(rows, batch_id, t0, t_collect)
        finally:
            self.batch_started_at = None

    def batch_running_s(self) -> float | None:
        """How long the batch in this handler has run (None: none is): a blind moment's side."""
        started = self.batch_started_at
        return None if started is None else time.monotonic() - started

    def tick(self, now_ms: int | None = None) -> list[Incident]:
        """What time alone changed since the last batch or tick, up to each cluster's known time:
        held events ended, escalations due, vanished topics forgotten; /metrics and the table told.
        Returns the incidents changed."""
        with self._lock:
            self._hold_leases(int(time.time() * 1000) if now_ms is None else now_ms)
            snap = self.state.snapshot
            through = {name: view.fresh_ms for name, view in snap.clusters.items() if view.error is None}
            if not through:
                return []
            changed = self.book.end_holds(through)
            if self.settings is not None:
                changed += self.book.revise(clock.escalations_due(self.book.open_incidents(), through, self.settings))
            opened = [f for name, view in snap.clusters.items() if view.opens and name in through
                      for f in clock.openings_due(name, view.opens, through[name], view.poll_id, self.book.is_open)]
            if opened:
                changed += self.book.apply([], opened)
            forgot = False
            for name, view in snap.clusters.items():  # only polls kept home move a view between batches
                if name in through and view.vouched is not None and self._forgot_through.get(name) != through[name]:
                    self._forgot_through[name] = through[name]
                    forgot |= bool(self.counts.forget_stale(name, through[name] - self.deleted_after_ms, view.vouched))
            if not changed and not forgot and not self._unwritten:
                return []
            if forgot:
                self.state.update(**self._incidents(), broker_load=self.counts.totals(),
                                  topic_load=self.counts.by_topic())
            else:
                self.state.update(**self._incidents())
            if changed:
                log.info("clock: %d incident(s) changed by time alone", len(changed))
            pending, self._unwritten = self._unwritten + changed, []
            try:
                self.store.upsert(pending)
            except Exception:
                self._unwritten = pending  # written at the next tick: a change by time is never lost
                raise
            return changed

    def _hold_leases(self, now_ms: int) -> None:
        """A record whose collector keeps repeating polls home (`holds_ms`, a collector apart from the
        pipeline) vouches for its cluster until then, up to a margin ago: a change polled since may still
        be on its way (a batch's time, and LEASE_MARGIN_MS more)."""
        snap = self.state.snapshot
        margin = LEASE_MARGIN_MS + int(snap.last_batch_s * 1000)
        for name, view in snap.clusters.items():
            if view.holds_ms is not None and view.record_ms is not None:
                self.state.vouch(name, view.poll_id, min(now_ms - margin, view.record_ms + view.holds_ms))

    def _judge(self, rows: list[Row], batch_id: int, t0: float, t_collect: float) -> None:
        canaries: list[CanarySample] = []
        tiered: list[TieredTopic] = []
        shares: dict[str, dict[int, int]] = {}
        polls, found, clusters, counts, jmx = split_rows(rows, canaries, tiered, shares, self.settings)
        for name, newest in shares.items():
            mine = self.shares.setdefault(name, {})
            for i, at in newest.items():
                mine[i] = max(at, mine.get(i, at))
        changed = self.book.apply(polls, replication_links.annotate(found, self.book.open_incidents))
        self.counts.update(counts)
        snap = self.state.snapshot
        forgot = False
        for name, view in clusters.items():  # deleted topics leave the per-broker totals
            if view.error is None:  # (a split cluster's topics: only once every share has polled since)
                held = snap.clusters.get(name)
                forgot |= bool(self.counts.forget_stale(name, self._with_shares(view, name).fresh_ms
                                                        - self.deleted_after_ms, held.vouched if held is not None else None))
        changed += self.book.apply(*self.balance.evaluate(self.counts, counts, clusters))
        changed += self.book.apply(*self._flapping(changed, clusters))
        if jmx:
            changed += self.book.apply(*self.jmx.update(jmx))
        canary_rounds = self.state.snapshot.canary  # the newest round of each canary partition
        if canaries:
            canary_rounds = dict(canary_rounds) | {(c.cluster, c.partition): c for c in canaries if c.waiting_ms is None}
            self.canary_waiting = canary.still_waiting(self.canary_waiting, canaries)
        answered = {n for n, v in clusters.items() if v.answers}
        if jmx or canaries or answered:  # BROKER_SLOW: a round of each cluster that said how fast its brokers answer
            views = {**self.state.snapshot.clusters, **clusters}
            live = {n: [b for b, up in v.brokers if up] for n, v in views.items()}
            back = came_back(self.book.resolved(BROKER_DOWN))
            answers = {n: (v.record_ms or v.newest_observed_ms, dict(v.answers)) for n, v in views.items() if v.answers}
            changed += self.book.apply(*self.slow.judge({s.cluster for s in jmx} | {c.cluster for c in canaries} | answered,
                                                        live, self.jmx.latest, canary_rounds, back, answers,
                                                        lambda name: slowed.hurting(self.book.open_incidents(), name),
                                                        self.canary_waiting,
                                                        {n: dict(v.steady_answers) for n, v in views.items()}))
        touched = [i for i in changed if i.status == "open" and i.type in clock.TIMED]
        if touched and self.settings is not None:
            # an escalation already due stays raised, though a restarted collector's finding counts from its
            # start (only incidents this batch changed: the others are the clock's)
            through = {name: self._with_shares(view, name).fresh_ms for name, view in clusters.items() if view.error is None}
            raised = self.book.revise(clock.escalations_due(touched, through, self.settings))
            if raised:
                changed = list({i.incident_id: i for i in [*changed, *raised]}.values())
        snap = self.state.snapshot
        views = dict(snap.clusters)
        for name, view in clusters.items():
            if name not in views or view.newest_observed_ms >= views[name].newest_observed_ms:
                views[name] = view
        for name, view in views.items():  # a split cluster's view: its other shares as last seen
            if view.share_count > 1 or name in self.shares:
                views[name] = self._with_shares(view, name)
        tiered_topics = snap.tiered
        if tiered or snap.tiered:  # a cluster without tiered topics pays nothing here
            stale = {name: view.fresh_ms - self.deleted_after_ms for name, view in views.items()
                     if view.error is None}
            tiered_topics = tiered_view.newest(snap.tiered, tiered, stale)
        self.state.update(clusters=views, **self._incidents(), batches=snap.batches + 1,
                          last_batch_at=time.time(), canary=canary_rounds,
                          broker_load=self.counts.totals(), last_batch_s=time.perf_counter() - t0,
                          jmx=self.jmx.snapshot(), tiered=tiered_topics)
        t_metrics = time.perf_counter() - t0
        if counts or forgot:  # the console's grid: a copy per topic, after /metrics (no alert waits for it)
            self.state.update(topic_load=self.counts.by_topic())
        self.store.upsert(changed)  # after /metrics: the alert is already visible
        log.debug("alert batch %d: %d rows, collect %.3fs, %.3fs to /metrics, %.3fs total", batch_id, len(rows),
                  t_collect, t_metrics, time.perf_counter() - t0)


def split_rows(rows: list[Row], canaries: list[CanarySample] | None = None, tiered: list[TieredTopic] | None = None,
               shares: dict[str, dict[int, int]] | None = None, settings: DetectorSettings | None = None) -> tuple[
        list[ScopePoll], list[Finding], dict[str, ClusterView], list[TopicLoad], list[JmxSample]]:
    """The collected alert rows sorted by kind. Fields are read by position: a pyspark Row's
    attribute access searches its field names each time, and a broker death at 200k partitions
    brings 40k findings here in one batch. Canary samples are appended to `canaries`, tiered topics'
    offsets to `tiered`, a split cluster's other shares' newest observations to `shares` (cluster ->
    share index -> observed_at_ms)."""
    canaries = [] if canaries is None else canaries
    tiered = [] if tiered is None else tiered
    shares = {} if shares is None else shares
    polls: list[ScopePoll] = []
    found: list[Finding] = []
    clusters: dict[str, ClusterView] = {}
    counts: list[TopicLoad] = []
    jmx: list[JmxSample] = []
    if not rows:
        return polls, found, clusters, counts, jmx
    i = {name: n for n, name in enumerate(rows[0].__fields__)}
    (cluster, poll_id, at, row_type, scope, type_, severity, topic, partition, broker, cause, details) = (
        i["cluster"], i["poll_id"], i["observed_at_ms"], i["row_type"], i["scope"], i["type"], i["severity"],
        i["topic"], i["partition"], i["broker"], i["cause"], i["details"])
    loads = json.loads
    for r in rows:
        kind = r[row_type]
        if kind == "finding":
            found.append(Finding(r[cluster], r[scope], r[type_], r[severity], r[topic], r[partition], r[broker],
                                 r[cause], loads(r[details]), r[at], r[poll_id]))
        elif kind == "poll" or kind == "view":  # a view counts brokers' leaders, and resolves nothing
            if kind == "poll":
                polls.append(ScopePoll(r[cluster], r[scope], r[poll_id], r[at]))
            if r[topic] is not None and r[details]:
                d = loads(r[details])
                counts.append(TopicLoad(r[cluster], r[topic], r[at],
                                        {b: (lead, rep, pref, npref) for b, lead, rep, pref, npref in d["brokers"]},
                                        d["partitions"]))
        elif kind == "tiered":
            tiered.append(tiered_view.parse(r[cluster], r[topic], r[at], loads(r[details])))
        elif kind == "jmx":
            d = loads(r[details])
            jmx.append(JmxSample(r[cluster], r[broker], r[poll_id], r[at], d.get("error"),
                                 {g["name"]: g["value"] for g in d.get("gauges") or []}, d.get("scrape_ms")))
        elif kind == "canary":  # judged here: one record per round and cluster
            d = loads(r[details])
            if not d.get("waiting"):  # a round's early record only says how long its writes wait so far
                polls.append(ScopePoll(r[cluster], canary.SCOPE, r[poll_id], r[at]))
                found.extend(Finding(r[cluster], canary.SCOPE, canary.TYPE, canary.SEVERITY, d["topic"], c.partition,
                                     c.broker, canary.CAUSE, c.details, r[at], r[poll_id]) for c in canary.judge(d))
            canaries.extend(canary.samples(r[cluster], d, r[at]))
        else:
            cs: ClusterState = loads(r[details])
            share = cs.get("topic_share")
            if share is not None and share["index"] > 1:  # another share of a split cluster: alive, nothing more
                newest = shares.setdefault(r[cluster], {})
                if cs.get("error") is None:  # a share whose polls fail sees nothing: it stays as stale as it is
                    newest[share["index"]] = max(r[at], newest.get(share["index"], r[at]))
                continue
            if cs.get("quorum") is not None and cs.get("error") is None:  # KRaft: judged on every record
                polls.append(ScopePoll(r[cluster], quorum.SCOPE, r[poll_id], r[at]))
                found.extend(Finding(r[cluster], quorum.SCOPE, quorum.TYPE, q.severity, quorum.TOPIC, 0, q.voter,
                                     q.cause, q.details, r[at], r[poll_id]) for q in quorum.judge(cs["quorum"]))
            prev = clusters.get(r[cluster])
            if prev is None or r[at] >= prev.newest_observed_ms:
                clusters[r[cluster]] = ClusterView(
                    brokers=tuple((b["id"], bool(b["live"])) for b in cs.get("brokers", [])),
                    controller_id=cs.get("controller_id"), error=cs.get("error"), newest_observed_ms=r[at],
                    record_ms=r[at],
                    topic_count=cs.get("topic_count"), poll_id=r[poll_id],
                    leader_imbalance_percentage=cs.get("leader_imbalance_per_broker_percentage"),
                    reassigning=bool(cs.get("reassignment_in_progress")), quorum=cs.get("quorum"),
                    error_reason=cs.get("error_reason"), denied=tuple(cs.get("denied") or ()),
                    capabilities=tuple([(c, True) for c in cs.get("capabilities") or ()]
                                       + [(c, False) for c in cs.get("unsupported") or ()]),
                    share_count=share["count"] if share is not None else 1,
                    holds_ms=None if (holds_s := cs.get("holds_s")) is None else int(holds_s * 1000),
                    log_dirs=disks.of_brokers(cs.get("brokers") or ()),
                    answers=tuple((b["id"], ms) for b in cs.get("brokers") or () if (ms := b.get("answer_ms")) is not None),
                    steady_answers=tuple((b["id"], ms) for b in cs.get("brokers") or ()
                                         if (ms := b.get("answer_steady_ms")) is not None),
                    opens=clock.openings(cs, settings) if settings is not None else ())
    return polls, found, clusters, counts, jmx
