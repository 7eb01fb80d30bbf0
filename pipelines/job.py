"""Wiring only: observations topic -> (alert path, history path) -> incidents, Delta tables, /metrics.

Two streaming queries read the same topic through one plan (`read_observations` -> `parse`):
- the alert path (pipelines/alert_path.py; trigger: as soon as data arrives) detects, advances the
  incident book, publishes the new /metrics snapshot, and only then upserts the changed incidents;
- the history path (pipelines/history_path.py; trigger: every `history_trigger_s`) appends every
  observation to the `observations` table, the rows derived from it to `partition_state`,
  `replica_lag` and `assignments` (pipelines/history.py), and every refused record to `quarantine`;
  a stop runs it once more over what the topic holds (`history_flush_on_stop_s`), so the last seconds
  before a stop are in the history when the process has gone.
They run in separate FAIR pools, so heavy writes never delay alerts. Both checkpoint under
`<data_dir>/checkpoints`; a restart resumes where each left off, and a query that dies is restarted.
"""

from __future__ import annotations

import logging
import math
import threading
import time
from typing import TYPE_CHECKING, Callable

from foundation.cadence import read_back_s
from foundation.config import Config
from pipelines import findings as F_
from pipelines import clock, log_retention
from pipelines.alert_path import AlertPath, event_hold_ms, restored_history
from pipelines.balance import BalanceCheck, BalanceSettings
from pipelines.checkpoints import repair, writer_id
from pipelines.history_path import HistoryPath, history_tasks
from pipelines.incident_store import IncidentStore
from pipelines.incidents import IncidentBook
from pipelines.ingest import parse, read_observations, valid
from pipelines.state import PipelineState, alert_query_said, blindness_said
from pipelines.broker_history import BrokerHistory
from pipelines.quality import QualityRunner
from pipelines.session import alert_session
from pipelines.tables import Tables
from pipelines.slow_view import SlowView

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession
    from pyspark.sql.streaming import StreamingQuery

BatchHandler = Callable[["DataFrame", int], None]  # a foreachBatch handler

log = logging.getLogger(__name__)

CLOCK_TICK_S = 1.0  # how often the pipeline's clock advances what time alone changes (pipelines/clock.py)


_STOPPED = ("py4j.protocol.Py4JJavaError: An error occurred while calling krm.foreachBatch.\n"
            ": java.lang.InterruptedException")
# What Spark counts as a stop's interruption (StreamExecution's IO_EXCEPTION_NAMES): a stop that lands in
# a Kafka read or a file write surfaces as one of the I/O forms, not as InterruptedException.
_INTERRUPTIONS = ("java.lang.InterruptedException", "java.io.InterruptedIOException",
                  "java.nio.channels.ClosedByInterruptException")


def interruptible(handler: BatchHandler) -> BatchHandler:
    """Wrap a foreachBatch handler so that a query stop mid-batch ends quietly.

    Stopping interrupts the running Spark job; the handler then fails with a Py4JJavaError whose
    text (a Python traceback around a Java stack) is long enough to overflow the stack of the regex
    Spark uses to recognise an interruption (StreamExecution.PROXY_ERROR). Re-raising a short error
    in the shape that regex expects lets Spark classify it as a stop: the batch is not committed
    and is replayed on restart.
    """

    def run(batch: DataFrame, batch_id: int) -> None:
        try:
            handler(batch, batch_id)
        except Exception as e:
            if stopped_by_interrupt(str(e)):
                raise RuntimeError(_STOPPED) from None
            raise

    return run


def stopped_by_interrupt(error_text: str) -> bool:
    """The handler failed because a stop interrupted its Spark job (any of Spark's interruption forms,
    anywhere in the text: the Java cause may follow a long Python traceback)."""
    return any(name in error_text for name in _INTERRUPTIONS)


class Pipeline:
    """Construct validates paths only; start() opens Spark queries and the incident table."""

    def __init__(self, config: Config, spark: SparkSession, state: PipelineState | None = None,
                 history_since_ms: int | None = None, collector_said: Callable[[str, float], str] | None = None) -> None:
        """`history_since_ms`: where a history query with no checkpoint starts (ingest.read_observations).
        `collector_said`: a collector in this process describing its side of a blind moment (`_tick`)."""
        self.config = config
        self.collector_said = collector_said
        self.history_since_ms = history_since_ms
        self.spark = spark
        self.state = state or PipelineState()
        self.state.log_dir_within_s = (config.pipeline.log_dir_page_within_s, config.pipeline.log_dir_warn_within_s)
        self.tables = Tables(config.pipeline.data_dir)
        self.queries: list[StreamingQuery] = []
        self._starters: dict[str, Callable[[], StreamingQuery]] = {}
        self._stopping = threading.Event()
        self._watchdog: threading.Thread | None = None
        self._clock: threading.Thread | None = None
        self._quality: QualityRunner | None = None  # beside the alert path
        self._brokers: BrokerHistory | None = None  # the broker_state sampler, beside the alert path
        # starts the history's last run at a stop (start() sets it)
        self._flush_history: Callable[[], StreamingQuery] | None = None

    def start(self) -> Pipeline:
        flap_ms = int(self.config.pipeline.flap_window_s * 1000)
        properties = self.prepare_tables()
        store = IncidentStore(self.tables.incidents, properties)
        recent = store.load_recent(since_ms=int(time.time() * 1000) - flap_ms - 3_600_000)
        book = IncidentBook.from_incidents(flap_ms, recent, hold_ms=event_hold_ms(self.config),
                                           touch_ms=int(self.config.pipeline.incident_touch_s * 1000),
                                           earliest=clock.SINCE)
        self.state.update(open_incidents=tuple(book.open_incidents()))
        if recent:
            log.info("resuming with %d open incidents from %s", len(book.open_incidents()), self.tables.incidents)

        raw = read_observations(self.spark, self.config, since_ms=self.history_since_ms)
        # a new alert query reads back one resend window: a collector at rest publishes a cluster's steady
        # poll once per `unchanged_publish_s` (collectors/unchanged.py), so its last one is in there
        back_s = read_back_s(self.config.slowest_poll_s, self.config.collector.unchanged_publish_s)
        alert_since_ms = None if back_s is None else int((time.time() - back_s) * 1000)
        alert_raw = read_observations(alert_session(self.spark), self.config, since_ms=alert_since_ms)
        p = self.config.pipeline
        balance = BalanceCheck(BalanceSettings.of(p),
                               restored_history(self.tables, store))
        deleted_after_ms = int(max(30.0, 3 * self.config.slowest_poll_s) * 1000)
        settings = F_.DetectorSettings.of(p)
        alerts = AlertPath(self.state, book, store, balance, deleted_after_ms, settings,
                           SlowView({c.name: c.latency_objective_s for c in self.config.clusters}))
        alert_path = interruptible(alerts)
        for query in ("alerts", "history"):
            repair(self.tables.checkpoints / query)
        app_id = writer_id(self.spark, self.tables.checkpoints / "history", legacy="krm-history")
        history_path = interruptible(HistoryPath(self.state, self.tables, app_id=app_id,
                                                 tasks=history_tasks(p.history_tasks, p.spark_master)))

        def start_alerts() -> StreamingQuery:
            return self._in_pool("alerts", lambda: (
                F_.alert_rows(valid(parse(alert_raw)), settings)
                .writeStream.queryName("krm-alerts").foreachBatch(alert_path)
                .option("checkpointLocation", str(self.tables.checkpoints / "alerts")).start()))

        def history_query(name: str, every: str | None) -> StreamingQuery:
            """The history query, triggered `every` (a processing time), or once over what is there (None)."""
            def start() -> StreamingQuery:
                writer = parse(raw).writeStream.queryName(name).foreachBatch(history_path)
                writer = writer.trigger(processingTime=every) if every else writer.trigger(availableNow=True)
                return writer.option("checkpointLocation", str(self.tables.checkpoints / "history")).start()
            return self._in_pool("history", start)

        def start_history() -> StreamingQuery:
            return history_query("krm-history", f"{self.config.pipeline.history_trigger_s} seconds")

        # on a stop: the same query, from the same checkpoint, over what the topic holds now, then it ends
        self._flush_history = lambda: history_query("krm-history-flush", None)

        self._starters = {"krm-alerts": start_alerts, "krm-history": start_history}
        self.queries = [start_alerts(), start_history()]
        if p.quality_interval_s > 0:
            self._quality = QualityRunner(self.tables.observations, self.tables.data_quality, self.state,
                                          p.quality_interval_s, p.quality_max_rows, properties).start()
        if p.broker_history_s > 0:
            self._brokers = BrokerHistory(self.tables.broker_state, self.state, p.broker_history_s, properties,
                                          write_s=p.broker_history_write_s).start()
        self._watchdog = threading.Thread(target=self._watch, name="krm-query-watchdog", daemon=True)
        self._watchdog.start()
        self._clock = threading.Thread(target=self._tick, args=(alerts,), name="krm-clock", daemon=True)
        self._clock.start()
        return self

    def _tick(self, alerts: AlertPath) -> None:
        """What time alone changes, between batches (pipelines/clock.py); and when krm goes blind to a
        cluster or sees it again, which side fell behind (pipelines/state.py `blindness_said`)."""
        stale: set[str] = set()
        while not self._stopping.wait(CLOCK_TICK_S):
            try:
                alerts.tick()
            except Exception:  # noqa: BLE001 - e.g. the incidents table being compacted; the next tick retries
                log.exception("the pipeline's clock could not advance")
            now = time.time()
            stale_now = self.state.stale(now)
            doing = self._alert_query_said(alerts) if stale_now.keys() - stale else None
            said = self.collector_said
            collector = {name: said(name, now) for name in stale_now.keys() - stale} if said is not None else {}
            for line in blindness_said(stale, stale_now, self.state.snapshot, now, doing, collector):
                log.warning("%s", line)
            stale = set(stale_now)

    def _alert_query_said(self, alerts: AlertPath) -> tuple[bool, str] | None:
        """What the alert query is doing now (busy or waiting for data), asked only as a view turns stale."""
        running = alerts.batch_running_s()
        try:
            status = next((q.status for q in self.queries if q.name == "krm-alerts"), None)
        except Exception:  # noqa: BLE001 - a query being restarted: the handler's clock still says something
            status = None
        return alert_query_said(status, running)

    def prepare_tables(self) -> dict[str, str]:
        """Bound every table's _delta_log (pipelines/log_retention.py) before any query writes: the
        tables Spark creates from now on, and those an earlier release created. Returns the table
        properties, for the tables delta-rs creates."""
        properties = log_retention.table_properties(self.config.pipeline.delta_log_retention_hours)
        for key, value in log_retention.spark_defaults(properties).items():
            self.spark.conf.set(key, value)
        log_retention.apply(self.tables.all(), properties)
        return properties

    def _in_pool(self, pool: str, start: Callable[[], StreamingQuery]) -> StreamingQuery:
        """Start a query in a FAIR scheduler pool, so history writes never queue ahead of alerts."""
        sc = self.spark.sparkContext
        sc.setLocalProperty("spark.scheduler.pool", pool)
        try:
            return start()
        finally:
            sc.setLocalProperty("spark.scheduler.pool", None)  # type: ignore[arg-type]  # (None clears it)

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
        if self._brokers is not None:
            self._brokers.stop()
        if self._watchdog is not None:
            self._watchdog.join(timeout=30)  # no restart may race with the stop below
        if self._clock is not None:
            self._clock.join(timeout=30)
        logging.getLogger("py4j.clientserver").setLevel(logging.CRITICAL)  # interrupted batches are expected now
        for q in self.queries:
            try:
                q.stop()
            except Exception as e:  # noqa: BLE001 - e.g. the JVM already went down with the same signal
                log.warning("a streaming query did not stop cleanly (%s: %s)", type(e).__name__, str(e)[:200])
        self.queries = []
        if self._flush_history is not None and self.config.pipeline.history_flush_on_stop_s > 0:
            self.flush_history(self.config.pipeline.history_flush_on_stop_s)

    def flush_history(self, within_s: float) -> bool:
        """Write to the history tables what the observations topic holds beyond their last append: the
        moments between the last history trigger and a stop (a demo's, a post-mortem's last seconds) are
        otherwise stored only by the next start. Bounded: stopped after `within_s` (the rest waits for the
        next start, from the checkpoint, as before). True when it finished."""
        t0 = time.monotonic()
        try:
            if self._flush_history is None:  # never started: nothing written
                return False
            q = self._flush_history()
            done = bool(q.awaitTermination(math.ceil(within_s)))
            if not done:
                q.stop()
                log.warning("history: the last write before the stop took over %.0fs and was stopped; the next start "
                            "writes the rest ([pipeline] history_flush_on_stop_s)", within_s)
            elif q.exception() is not None:
                log.warning("history: the last write before the stop failed: %s", str(q.exception())[:300])
                done = False
            else:
                log.info("history: wrote what was read before the stop in %.1fs", time.monotonic() - t0)
            return done
        except Exception as e:  # noqa: BLE001 - e.g. the JVM went down with the signal: the next start writes it
            log.warning("history: no last write before the stop (%s: %s)", type(e).__name__, str(e)[:200])
            return False

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

    def __init__(self, spark: SparkSession, master: str, state: PipelineState,
                 clock: Callable[[], float] = time.monotonic) -> None:
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

