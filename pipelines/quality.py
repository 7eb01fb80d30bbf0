"""Data quality of the observations: a great-expectations suite, run beside the alert path.

Never inside a micro-batch: a thread of the pipeline process reads the `observations` Delta table
(delta-rs, no Spark) every `quality_interval_s`, validates the partitions observed since its last
run, appends one row per expectation to the `data_quality` Delta table and publishes the outcome
on /metrics (krm_data_quality_*). A failing expectation is a finding about the data, not a
replication incident: it says a collector, a clock or the cluster's answers are off.

Two kinds of expectation:
- the contract Kafka itself keeps (leader in replicas, ISR subset of replicas, ids and offsets in
  range, log start <= HW). Ingest already quarantines records that break it (pipelines/ingest.py),
  so here it must always pass: it checks that the quarantine works and that older history is clean.
- what sampling may break now and then (`mostly` < 1): HW <= the leader's LEO and follower LEO <=
  leader LEO (brokers answer at slightly different moments; an unclean election breaks both for a
  poll), and the delay from observation to the observations topic.
"""

from __future__ import annotations

import datetime as dt
import json
import logging
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from krm.storage import Location, as_location

log = logging.getLogger(__name__)

INDEX = ["cluster", "topic", "partition"]  # names the offending rows in the results


def expectations() -> list[Any]:
    """The suite, in the order it is reported."""
    import great_expectations as gx

    E = gx.expectations
    return [
        E.ExpectColumnValuesToNotBeNull(column="leader"),
        E.ExpectColumnValuesToBeBetween(column="partition", min_value=0),
        E.ExpectColumnValuesToBeBetween(column="leader", min_value=-1),
        E.ExpectColumnValuesToBeBetween(column="leader_epoch", min_value=0),
        E.ExpectColumnValuesToBeBetween(column="replica_count", min_value=1),
        E.ExpectColumnValuesToBeInSet(column="leader_in_replicas", value_set=[True]),
        E.ExpectColumnValuesToBeInSet(column="isr_in_replicas", value_set=[True]),
        E.ExpectColumnValuesToBeBetween(column="high_watermark", min_value=0),
        E.ExpectColumnValuesToBeBetween(column="log_start_offset", min_value=0),
        E.ExpectColumnValuesToBeBetween(column="write_rate", min_value=0),
        E.ExpectColumnPairValuesAToBeGreaterThanB(column_A="high_watermark", column_B="log_start_offset", or_equal=True,
                                                  ignore_row_if="either_value_is_missing"),
        E.ExpectColumnPairValuesAToBeGreaterThanB(column_A="leader_leo", column_B="high_watermark", or_equal=True,
                                                  ignore_row_if="either_value_is_missing", mostly=0.99),
        E.ExpectColumnPairValuesAToBeGreaterThanB(column_A="leader_leo", column_B="max_follower_leo", or_equal=True,
                                                  ignore_row_if="either_value_is_missing", mostly=0.95),
        E.ExpectColumnValuesToBeBetween(column="publish_delay_s", min_value=-5, max_value=60, mostly=0.99),
    ]


def partition_rows(records: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """One row per partition of each topic record, with the derived columns the suite checks."""
    out = []
    for r in records:
        ts = r.get("topic_state") or {}
        delay = None
        if r.get("kafka_timestamp") is not None:
            kt = r["kafka_timestamp"]
            kt_ms = kt.timestamp() * 1000 if isinstance(kt, dt.datetime) else float(kt)
            delay = (kt_ms - r["observed_at_ms"]) / 1000
        for p in ts.get("partitions") or []:
            replicas = p.get("replicas") or []
            leos = {o["broker"]: o["log_end_offset"] for o in (p.get("replica_offsets") or [])}
            leader = p.get("leader")
            followers = [v for b, v in leos.items() if b != leader]
            out.append({
                "cluster": r["cluster"], "topic": ts.get("topic"), "partition": p.get("partition"),
                "observed_at_ms": r["observed_at_ms"], "leader": leader, "leader_epoch": p.get("leader_epoch"),
                "replica_count": len(replicas),
                "leader_in_replicas": leader == -1 or leader in replicas,
                "isr_in_replicas": set(p.get("isr") or []) <= set(replicas),
                "high_watermark": p.get("high_watermark"), "log_start_offset": p.get("log_start_offset"),
                "write_rate": p.get("write_rate"), "leader_leo": leos.get(leader),
                "max_follower_leo": max(followers) if followers else None, "publish_delay_s": delay,
            })
    return out


@dataclass(frozen=True)
class Outcome:
    expectation: str
    column: str
    success: bool
    element_count: int
    unexpected_count: int
    examples: list[dict[str, Any]]  # up to 5 offending rows (cluster, topic, partition, values)
    error: str | None = None


@dataclass
class Report:
    run_at: dt.datetime
    rows: int
    outcomes: list[Outcome] = field(default_factory=list)

    @property
    def failed(self) -> list[Outcome]:
        return [o for o in self.outcomes if not o.success]


class Suite:
    """The expectation suite bound to a pandas data source in an ephemeral context (no files)."""

    def __init__(self) -> None:
        gx_log = logging.getLogger("great_expectations")
        if gx_log.level == logging.NOTSET:  # before the import, which logs too; `--log-level DEBUG` keeps them
            gx_log.setLevel(logging.WARNING)
        import great_expectations as gx
        from great_expectations.data_context.types.base import ProgressBarsConfig

        ctx = gx.get_context(mode="ephemeral")
        ctx.variables.progress_bars = ProgressBarsConfig(globally=False)
        batch = ctx.data_sources.add_pandas("krm").add_dataframe_asset("partitions") \
            .add_batch_definition_whole_dataframe("latest")
        suite = ctx.suites.add(gx.ExpectationSuite(name="krm-observations"))
        for e in expectations():
            suite.add_expectation(e)
        self._validation = ctx.validation_definitions.add(
            gx.ValidationDefinition(data=batch, suite=suite, name="krm-observations"))

    def run(self, rows: list[dict[str, Any]]) -> Report:
        import pandas as pd

        report = Report(dt.datetime.now(dt.timezone.utc), len(rows))
        if not rows:
            return report
        frame = pd.DataFrame(rows)
        # nullable dtypes: a column of ints with a missing value must stay ints (not float NaN)
        frame = frame.convert_dtypes()
        result = self._validation.run(batch_parameters={"dataframe": frame},
                                      result_format={"result_format": "COMPLETE",
                                                     "unexpected_index_column_names": INDEX})
        for r in result.results:
            cfg = r.expectation_config
            kw = cfg.kwargs
            column = kw.get("column") or f"{kw.get('column_A')} >= {kw.get('column_B')}"
            res = r.result or {}
            error = None
            if r.exception_info and r.exception_info.get("raised_exception"):
                error = str(r.exception_info.get("exception_message"))[:300]
            report.outcomes.append(Outcome(
                cfg.type, column, bool(r.success), int(res.get("element_count") or 0),
                int(res.get("unexpected_count") or 0),
                [{k: _plain(v) for k, v in row.items()} for row in (res.get("unexpected_index_list") or [])[:5]],
                error))
        return report


def _plain(v: Any) -> Any:
    if hasattr(v, "item"):
        return v.item()
    return None if v is None or v != v else v  # NaN -> None


def read_recent(observations: Location | Path, since_ms: int, max_rows: int) -> tuple[list[dict[str, Any]], int]:
    """Topic records observed after `since_ms` (newest first, at most about `max_rows` partitions),
    and the newest observed_at_ms seen."""
    import pyarrow.compute as pc
    import pyarrow.dataset as ds

    observations = as_location(observations)
    if not observations.is_table():
        return [], since_ms
    day = dt.datetime.fromtimestamp(since_ms / 1000, dt.timezone.utc).date()
    data = observations.table().to_pyarrow_dataset()
    t = data.to_table(columns=["cluster", "kind", "observed_at_ms", "kafka_timestamp", "topic_state"],
                      filter=(ds.field("date") >= day) & (ds.field("observed_at_ms") > since_ms))
    t = t.filter(pc.equal(t["kind"], "topic"))
    if t.num_rows == 0:
        return [], since_ms
    newest = pc.max(t["observed_at_ms"]).as_py()
    t = t.sort_by([("observed_at_ms", "descending")])
    out: list[dict[str, Any]] = []
    n = 0
    for batch in t.to_batches(max_chunksize=256):
        for rec in batch.to_pylist():
            out.append(rec)
            n += len((rec.get("topic_state") or {}).get("partitions") or [])
            if n >= max_rows:
                return out, newest
    return out, newest


def to_rows(report: Report) -> list[dict[str, Any]]:
    """The `data_quality` table's rows for one run."""
    return [{"run_at": report.run_at, "date": report.run_at.date(), "expectation": o.expectation, "column": o.column,
             "success": o.success, "element_count": o.element_count, "unexpected_count": o.unexpected_count,
             "examples": json.dumps(o.examples, default=str), "error": o.error, "rows_validated": report.rows}
            for o in report.outcomes]


def store(table: Location | Path, report: Report) -> None:
    import pyarrow as pa

    rows = to_rows(report)
    if rows:
        as_location(table).write(pa.Table.from_pylist(rows), mode="append", partition_by=["date"])


class QualityRunner:
    """The suite on a timer, in its own thread. Failures of the runner itself are logged and counted
    on /metrics (a failed run is a result too); the alert path never waits for it."""

    def __init__(self, observations: Location, results: Location, state: Any, interval_s: float, max_rows: int) -> None:
        self.observations = observations
        self.results = results
        self.state = state
        self.interval_s = interval_s
        self.max_rows = max_rows
        self._since_ms = int(time.time() * 1000 - interval_s * 1000)
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._suite: Suite | None = None

    def start(self) -> QualityRunner:
        self._thread = threading.Thread(target=self._loop, name="krm-data-quality", daemon=True)
        self._thread.start()
        return self

    def stop(self, timeout_s: float = 2.0) -> None:
        """Never holds up a shutdown: a run still going is abandoned with the (daemon) thread. Its
        append is one Delta commit, so the table keeps the run whole or not at all."""
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=timeout_s)
            if self._thread.is_alive():
                log.info("a data-quality run was still going at shutdown; it ends with the process")

    def _loop(self) -> None:
        while not self._stop.wait(self.interval_s):
            self.run_once()

    def run_once(self) -> Report | None:
        t0 = time.perf_counter()
        try:
            if self._suite is None:
                self._suite = Suite()
            records, newest = read_recent(self.observations, self._since_ms, self.max_rows)
            report = self._suite.run(partition_rows(records))
            if report.rows:
                store(self.results, report)
            self._since_ms = newest
        except Exception as e:  # noqa: BLE001 - a broken run is reported, the next one tries again
            log.exception("data-quality run failed")
            self.state.record_quality(None, time.perf_counter() - t0, f"{type(e).__name__}: {e}")
            return None
        if report.failed:
            log.warning("data quality: %d of %d expectations failed on %d partition rows: %s", len(report.failed),
                        len(report.outcomes), report.rows,
                        "; ".join(f"{o.expectation}({o.column}) {o.unexpected_count} rows" for o in report.failed))
        self.state.record_quality(report, time.perf_counter() - t0, None)
        return report
