"""Wiring only: observations topic -> (alert path, history path) -> incidents, Delta tables, /metrics.

Two streaming queries read the same topic:
- the alert path (trigger: as soon as data arrives) parses, detects, advances the incident book,
  publishes the new /metrics snapshot, and only then upserts the changed incidents to Delta;
- the history path (trigger: every `history_trigger_s`) appends every observation to the
  `observations` table, the rows derived from it to `partition_state` and `replica_lag`
  (pipelines/history.py), and every refused record to `quarantine`. Heavy writes never delay alerts.
Both checkpoint under `<data_dir>/checkpoints`; a restart resumes where each left off.
"""

from __future__ import annotations

import json
import logging
import os
import threading
import time
from pathlib import Path
from typing import Any

from foundation.config import Config
from foundation.paths import krm_home
from foundation.storage import Location, as_location
from pipelines import findings as F_
from pipelines import history, log_retention
from pipelines.assignment_history import broker_join_ms, topic_layouts
from pipelines.balance import BalanceCheck, BalanceSettings
from pipelines.checkpoints import repair, writer_id
from pipelines.detectors import canary, quorum
from pipelines.detectors.balance import REPLICA_IMBALANCE, AssignmentHistory
from pipelines.detectors.registry import EVENT_TYPES
from pipelines.incident_store import IncidentStore
from pipelines.incidents import Finding, IncidentBook, ScopePoll
from pipelines.ingest import parse, read_observations, rejected, valid
from pipelines.jmx_view import JmxSample, JmxView
from pipelines.load import BrokerLoad, TopicLoad
from pipelines.metrics import ClusterView, PipelineState
from pipelines.quality import QualityRunner

log = logging.getLogger(__name__)


_STOPPED = ("py4j.protocol.Py4JJavaError: An error occurred while calling krm.foreachBatch.\n"
            ": java.lang.InterruptedException")


def interruptible(handler: Any) -> Any:
    """Wrap a foreachBatch handler so that a query stop mid-batch ends quietly.

    Stopping interrupts the running Spark job; the handler then fails with a Py4JJavaError whose
    text (a Python traceback around a Java stack) is long enough to overflow the stack of the regex
    Spark uses to recognise an interruption (StreamExecution.PROXY_ERROR). Re-raising a short error
    in the shape that regex expects lets Spark classify it as a stop: the batch is not committed
    and is replayed on restart.
    """

    def run(batch: Any, batch_id: int) -> None:
        try:
            handler(batch, batch_id)
        except Exception as e:
            if "java.lang.InterruptedException" in str(e)[:4000]:
                raise RuntimeError(_STOPPED) from None
            raise

    return run


def detector_settings(config: Config) -> F_.DetectorSettings:
    p = config.pipeline
    return F_.DetectorSettings(
        hw_stall_window_ms=None if p.hw_stall_window_s is None else int(p.hw_stall_window_s * 1000),
        lag_messages=p.replica_lag_messages, lag_seconds=p.replica_lag_seconds,
        planned_stop_max_ms=int(p.planned_stop_max_s * 1000),
        reassignment_stall_ms=int(p.reassignment_stall_s * 1000))


def event_hold_ms(config: Config) -> dict[str, int]:
    """Incident types that are events (seen by one poll) and how long they stay open."""
    hold = int(config.pipeline.event_hold_s * 1000)
    return {t: hold for t in EVENT_TYPES}


def history_tasks(configured: int, master: str) -> int | None:
    """How many tasks a history batch may run at once. Spark does not preempt: an alert batch waits
    for a core held by a history task. In local mode the history path therefore keeps one core free
    (local[N] -> N-1 tasks); on a cluster the executors are not the driver's cores and nothing is
    capped. `configured` > 0 wins."""
    import re

    if configured > 0:
        return configured
    m = re.fullmatch(r"local\[(\d+|\*)(?:,\d+)?\]", master.strip())
    if not m:
        return None
    cores = (os.cpu_count() or 2) if m.group(1) == "*" else int(m.group(1))
    return max(1, cores - 1)


def restored_history(tables: Tables, store: IncidentStore) -> Any:
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


class Tables:
    """Paths of the Delta tables and checkpoints under one data dir."""

    def __init__(self, data_dir: Location | Path | str) -> None:
        self.root = as_location(data_dir)
        self.incidents = self.root / "tables" / "incidents"
        self.observations = self.root / "tables" / "observations"
        self.quarantine = self.root / "tables" / "quarantine"
        self.partition_state = self.root / "tables" / "partition_state"
        self.replica_lag = self.root / "tables" / "replica_lag"
        self.assignments = self.root / "tables" / "assignments"
        self.data_quality = self.root / "tables" / "data_quality"
        self.checkpoints = self.root / "checkpoints"

    def all(self) -> list[Location]:
        """Every Delta table krm writes."""
        return [self.incidents, self.observations, self.quarantine, self.partition_state, self.replica_lag,
                self.assignments, self.data_quality]

    @property
    def logs(self) -> Path:
        """Spark's own log file is local: beside the tables, or under KRM_HOME for a remote data_dir."""
        if self.root.is_local:
            return self.root.path / "logs"
        return krm_home() / "logs"


class AlertPath:
    """foreachBatch handler of the alert query; its input is already `findings.alert_rows`.

    The plan is built once on the stream, not per batch: building a DataFrame from Python costs many
    py4j calls, far more than executing the prepared plan on a small batch (benchmarks/BENCHMARKS.md).
    """

    def __init__(self, state: PipelineState, book: IncidentBook, store: IncidentStore,
                 balance: BalanceCheck | None = None, deleted_after_ms: int = 30_000) -> None:
        self.state = state
        self.deleted_after_ms = deleted_after_ms  # a topic no successful poll observed this long was deleted
        self.book = book
        self.store = store
        self.counts = BrokerLoad()
        self.balance = balance or BalanceCheck()
        self.jmx = JmxView()

    def __call__(self, batch: Any, batch_id: int) -> None:
        t0 = time.perf_counter()
        rows = batch.collect()  # the Spark job: Kafka fetch, parse, detect
        t_collect = time.perf_counter() - t0
        polls, found, clusters, counts, jmx = split_rows(rows, canaries := [])
        changed = self.book.apply(polls, found)
        self.counts.update(counts)
        for name, view in clusters.items():  # deleted topics leave the per-broker totals
            if view.error is None:
                self.counts.forget_stale(name, view.newest_observed_ms - self.deleted_after_ms)
        changed += self.book.apply(*self.balance.evaluate(self.counts, counts, clusters))
        if jmx:
            changed += self.book.apply(*self.jmx.update(jmx))
        snap = self.state.snapshot
        views = dict(snap.clusters)
        for name, view in clusters.items():
            if name not in views or view.newest_observed_ms >= views[name].newest_observed_ms:
                views[name] = view
        latest = snap.canary
        if canaries:  # the newest round of each canary partition
            latest = dict(latest) | {(c.cluster, c.partition): c for c in canaries}
        self.state.update(clusters=views, open_incidents=tuple(self.book.open_incidents()), batches=snap.batches + 1,
                          last_batch_at=time.time(), canary=latest,
                          broker_load=self.counts.totals(), last_batch_s=time.perf_counter() - t0,
                          jmx=self.jmx.snapshot())
        t_metrics = time.perf_counter() - t0
        self.store.upsert(changed)  # after /metrics: the alert is already visible
        log.debug("alert batch %d: %d rows, collect %.3fs, %.3fs to /metrics, %.3fs total", batch_id, len(rows),
                  t_collect, t_metrics, time.perf_counter() - t0)


def split_rows(rows: list[Any], canaries: list[Any] | None = None) -> tuple[
        list[ScopePoll], list[Finding], dict[str, ClusterView], list[TopicLoad], list[JmxSample]]:
    """The collected alert rows sorted by kind. Fields are read by position: a pyspark Row's
    attribute access searches its field names each time, and a broker death at 200k partitions
    brings 40k findings here in one batch. Canary samples are appended to `canaries`."""
    canaries = [] if canaries is None else canaries
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
        elif kind == "jmx":
            d = loads(r[details])
            jmx.append(JmxSample(r[cluster], r[broker], r[poll_id], r[at], d.get("error"),
                                 {g["name"]: g["value"] for g in d.get("gauges") or []}))
        elif kind == "canary":  # judged here: one record per round and cluster
            d = loads(r[details])
            polls.append(ScopePoll(r[cluster], canary.SCOPE, r[poll_id], r[at]))
            found.extend(Finding(r[cluster], canary.SCOPE, canary.TYPE, canary.SEVERITY, d["topic"], c.partition,
                                 c.broker, canary.CAUSE, c.details, r[at], r[poll_id]) for c in canary.judge(d))
            canaries.extend(canary.samples(r[cluster], d, r[at]))
        else:
            cs = loads(r[details])
            if cs.get("quorum") is not None and cs.get("error") is None:  # KRaft: judged on every record
                polls.append(ScopePoll(r[cluster], quorum.SCOPE, r[poll_id], r[at]))
                found.extend(Finding(r[cluster], quorum.SCOPE, quorum.TYPE, q.severity, quorum.TOPIC, 0, q.voter,
                                     q.cause, q.details, r[at], r[poll_id]) for q in quorum.judge(cs["quorum"]))
            prev = clusters.get(r[cluster])
            if prev is None or r[at] >= prev.newest_observed_ms:
                clusters[r[cluster]] = ClusterView(
                    brokers=tuple((b["id"], bool(b["live"])) for b in cs.get("brokers", [])),
                    controller_id=cs.get("controller_id"), error=cs.get("error"), newest_observed_ms=r[at],
                    topic_count=cs.get("topic_count"),
                    leader_imbalance_percentage=cs.get("leader_imbalance_per_broker_percentage"),
                    reassigning=bool(cs.get("reassignment_in_progress")), quorum=cs.get("quorum"),
                    error_reason=cs.get("error_reason"), denied=tuple(cs.get("denied") or ()))
    return polls, found, clusters, counts, jmx


class HistoryPath:
    """foreachBatch handler of the history query (input: `ingest.parse` of the stream): idempotent
    Delta appends (txnAppId/txnVersion), so a replayed batch is not written twice."""

    def __init__(self, state: PipelineState, tables: Tables, app_id: str, tasks: int | None = None) -> None:
        self.state = state
        self.tables = tables
        self.app_id = app_id
        self.tasks = tasks  # at most this many tasks at once (None: one per Kafka partition)
        self._layouts: dict[str, tuple[str, ...]] = {}

    def _layout(self, path: Location) -> tuple[str, ...]:
        """Partition columns: (date, cluster) — retention drops whole days, and a query for one
        cluster reads only its files. A table created by an earlier release keeps its own layout
        (Delta refuses appends with different partition columns)."""
        if path.uri not in self._layouts:
            cols: tuple[str, ...] = history.PARTITION_COLUMNS
            if path.is_table():
                cols = tuple(path.table().metadata().partition_columns)
            self._layouts[path.uri] = cols
        return self._layouts[path.uri]

    def __call__(self, batch: Any, batch_id: int) -> None:
        from pyspark.sql import functions as F

        parsed = (batch.coalesce(self.tasks) if self.tasks else batch).persist()
        took: list[str] = []
        try:
            good = valid(parsed).withColumn("date", F.to_date(F.timestamp_millis("observed_at_ms")))
            for name, frame, path in (("observations", good, self.tables.observations),
                                      ("partition_state", history.partition_state(good), self.tables.partition_state),
                                      ("replica_lag", history.replica_lag(good), self.tables.replica_lag),
                                      ("assignments", history.assignments(good), self.tables.assignments)):
                t0 = time.perf_counter()
                # Most batches change no assignment: an empty Delta commit is not free.
                if name == "assignments" and frame.isEmpty():
                    continue
                (frame.write.format("delta").mode("append").partitionBy(*self._layout(path))
                 .option("mergeSchema", "true")
                 .option("txnAppId", f"{self.app_id}-{name}").option("txnVersion", batch_id)
                 .save(str(path)))
                took.append(f"{name} {time.perf_counter() - t0:.2f}s")
            bad = rejected(parsed).persist()
            n_bad = bad.count()
            if n_bad:
                (bad.write.format("delta").mode("append")
                 .option("txnAppId", f"{self.app_id}-quarantine").option("txnVersion", batch_id)
                 .save(str(self.tables.quarantine)))
                log.warning("quarantined %d observation records (see the quarantine table)", n_bad)
                self.state.add_quarantined(n_bad)
            bad.unpersist()
            log.debug("history batch %d: %s", batch_id, ", ".join(took))
        finally:
            parsed.unpersist()


class Pipeline:
    """Construct validates paths only; start() opens Spark queries and the incident table."""

    def __init__(self, config: Config, spark: Any, state: PipelineState | None = None) -> None:
        self.config = config
        self.spark = spark
        self.state = state or PipelineState()
        self.tables = Tables(config.pipeline.data_dir)
        self.queries: list[Any] = []
        self._starters: dict[str, Any] = {}
        self._stopping = threading.Event()
        self._watchdog: threading.Thread | None = None
        self._quality: Any = None  # pipelines.quality.QualityRunner, beside the alert path

    def start(self) -> Pipeline:
        flap_ms = int(self.config.pipeline.flap_window_s * 1000)
        properties = self.prepare_tables()
        store = IncidentStore(self.tables.incidents, properties)
        recent = store.load_recent(since_ms=int(time.time() * 1000) - flap_ms - 3_600_000)
        book = IncidentBook.from_incidents(flap_ms, recent, hold_ms=event_hold_ms(self.config),
                                           touch_ms=int(self.config.pipeline.incident_touch_s * 1000))
        self.state.update(open_incidents=tuple(book.open_incidents()))
        if recent:
            log.info("resuming with %d open incidents from %s", len(book.open_incidents()), self.tables.incidents)

        raw = read_observations(self.spark, self.config)
        p = self.config.pipeline
        balance = BalanceCheck(BalanceSettings(p.leader_skew_tolerance, p.replica_imbalance_tolerance),
                               restored_history(self.tables, store))
        deleted_after_ms = int(max(30.0, 3 * self.config.collector.poll_interval_s) * 1000)
        alert_path = interruptible(AlertPath(self.state, book, store, balance, deleted_after_ms))
        for query in ("alerts", "history"):
            repair(self.tables.checkpoints / query)
        app_id = writer_id(self.spark, self.tables.checkpoints / "history", legacy="krm-history")
        history_path = interruptible(HistoryPath(self.state, self.tables, app_id=app_id,
                                                 tasks=history_tasks(p.history_tasks, p.spark_master)))

        def start_alerts() -> Any:
            return self._in_pool("alerts", lambda: (
                F_.alert_rows(valid(parse(raw)), detector_settings(self.config))
                .writeStream.queryName("krm-alerts").foreachBatch(alert_path)
                .option("checkpointLocation", str(self.tables.checkpoints / "alerts")).start()))

        def start_history() -> Any:
            return self._in_pool("history", lambda: (
                parse(raw).writeStream.queryName("krm-history").foreachBatch(history_path)
                .trigger(processingTime=f"{self.config.pipeline.history_trigger_s} seconds")
                .option("checkpointLocation", str(self.tables.checkpoints / "history")).start()))

        self._starters = {"krm-alerts": start_alerts, "krm-history": start_history}
        self.queries = [start_alerts(), start_history()]
        if p.quality_interval_s > 0:
            self._quality = QualityRunner(self.tables.observations, self.tables.data_quality, self.state,
                                          p.quality_interval_s, p.quality_max_rows, properties).start()
        self._watchdog = threading.Thread(target=self._watch, name="krm-query-watchdog", daemon=True)
        self._watchdog.start()
        return self

    def prepare_tables(self) -> dict[str, str]:
        """Bound every table's _delta_log (pipelines/log_retention.py) before any query writes: the
        tables Spark creates from now on, and those an earlier release created. Returns the table
        properties, for the tables delta-rs creates."""
        properties = log_retention.table_properties(self.config.pipeline.delta_log_retention_hours)
        for key, value in log_retention.spark_defaults(properties).items():
            self.spark.conf.set(key, value)
        log_retention.apply(self.tables.all(), properties)
        return properties

    def _in_pool(self, pool: str, start: Any) -> Any:
        """Start a query in a FAIR scheduler pool, so history writes never queue ahead of alerts."""
        sc = self.spark.sparkContext
        sc.setLocalProperty("spark.scheduler.pool", pool)
        try:
            return start()
        finally:
            sc.setLocalProperty("spark.scheduler.pool", None)

    def _watch(self) -> None:
        executors = ExecutorWatch(self.spark, self.config.pipeline.spark_master, self.state)
        while not self._stopping.wait(2.0):
            try:
                self.restart_failed()
                executors.check()
            except Exception:  # noqa: BLE001 - e.g. the JVM is going down; the next round retries
                log.exception("could not restart a failed streaming query")

    def stop(self) -> None:
        self._stopping.set()
        if self._quality is not None:
            self._quality.stop()
        if self._watchdog is not None:
            self._watchdog.join(timeout=30)  # no restart may race with the stop below
        logging.getLogger("py4j.clientserver").setLevel(logging.CRITICAL)  # interrupted batches are expected now
        for q in self.queries:
            try:
                q.stop()
            except Exception as e:  # noqa: BLE001 - e.g. the JVM already went down with the same signal
                log.warning("a streaming query did not stop cleanly (%s: %s)", type(e).__name__, str(e)[:200])
        self.queries = []

    def restart_failed(self) -> int:
        """Restart every query that died, from its checkpoint (nothing lost or duplicated); returns
        how many. A monitor must outlive a transient failure such as a Kafka fetch timing out."""
        restarted = 0
        for i, q in enumerate(list(self.queries)):
            if q.isActive or q.exception() is None:
                continue
            log.error("streaming query %s failed; restarting it from its checkpoint: %s", q.name,
                      str(q.exception())[:300])
            repair(self.tables.checkpoints / q.name.removeprefix("krm-"))
            self.queries[i] = self._starters[q.name]()
            self.state.add_query_restart(q.name)
            restarted += 1
        return restarted


class ExecutorWatch:
    """On a Spark cluster, a pipeline the master gives no executors (no free cores, executors too big
    for the workers) waits forever without an error. Say so, once, after EXECUTOR_PATIENCE_S, and keep
    it in the state (/readyz, krm_pipeline_up 0) until executors come."""

    EXECUTOR_PATIENCE_S = 60.0

    def __init__(self, spark: Any, master: str, state: PipelineState, clock: Any = time.monotonic) -> None:
        self.spark, self.master, self.state, self.clock = spark, master, state, clock
        self.local = master.startswith("local")
        self.since: float | None = None
        self.reported = False

    def count(self) -> int:
        """Executors registered with the driver (the driver itself excluded)."""
        sc = self.spark.sparkContext
        return max(0, len(sc._jsc.sc().statusTracker().getExecutorInfos()) - 1)

    def check(self, executors: int | None = None) -> None:
        if self.local:
            return
        n = self.count() if executors is None else executors
        now = self.clock()
        if n > 0:
            self.since = None
            if self.reported:
                log.warning("Spark master %s gave the pipeline %d executor(s); running", self.master, n)
                self.state.update(pipeline_error=None)
                self.reported = False
            return
        self.since = self.since or now
        if not self.reported and now - self.since >= self.EXECUTOR_PATIENCE_S:
            why = (f"Spark master {self.master} has given the pipeline no executors for "
                   f"{now - self.since:.0f}s: no free cores or memory on its workers? (spark.cores.max, "
                   f"spark.executor.memory, spark.executor.cores in [pipeline.spark_conf])")
            log.error("%s", why)
            self.state.update(pipeline_error=why)
            self.reported = True

