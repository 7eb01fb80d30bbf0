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
from typing import TYPE_CHECKING, Any

from foundation.storage import Location, as_location

if TYPE_CHECKING:
    import numpy as np
    import numpy.typing as npt
    import pyarrow as pa

    Ints = npt.NDArray[np.int64]
    Flags = npt.NDArray[np.bool_]

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


_NO_BROKER = -(2**40)  # fills a missing leader: equal to no broker id (int32) and not -1


def partition_rows(records: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """One row per partition of each topic record, with the derived columns the suite checks
    (records as dicts; the runner itself stays in Arrow: `partition_table`)."""
    import pyarrow as pa

    if not records:
        return []
    rows: list[dict[str, Any]] = partition_table(pa.Table.from_pylist(records)).to_pylist()
    return rows


def partition_table(records: pa.Table) -> pa.Table:
    """`partition_rows` over an Arrow table of topic records, computed column-wise: the runner's
    rows never become Python objects, whose freed memory the process would otherwise keep."""
    import numpy as np
    import pyarrow as pa
    import pyarrow.compute as pc

    ts = records.column("topic_state").combine_chunks()
    plist = _field(ts, "partitions")
    parts = _flatten(plist)
    n = len(parts)
    record_of = pc.list_parent_indices(plist) if n else pa.array([], pa.int64())  # each partition row's record

    def per_partition(column: pa.Array) -> pa.Array:
        return pc.take(column, record_of)

    leader = _field(parts, "leader")
    lead, has_leader = _ints(leader)
    lead = np.where(has_leader, lead, _NO_BROKER)

    replicas = _field(parts, "replicas")
    rep_row, rep_id, rep_ok = _elements(replicas)
    rep_row, rep_id = rep_row[rep_ok], rep_id[rep_ok]
    in_replicas = np.bincount(rep_row, weights=rep_id == lead[rep_row], minlength=n) > 0
    isr_row, isr_id, isr_ok = _elements(_field(parts, "isr"))
    isr_row, isr_id = isr_row[isr_ok], isr_id[isr_ok]
    isr_outside = ~np.isin((isr_row << 32) | (isr_id & 0xFFFFFFFF), (rep_row << 32) | (rep_id & 0xFFFFFFFF))

    offsets = _field(parts, "replica_offsets")
    leo_row, broker, broker_ok = _elements(offsets, "broker")
    _, leo, leo_ok = _elements(offsets, "log_end_offset")
    of_leader = broker_ok & (broker == lead[leo_row])
    leader_leo, has_leader_leo = np.zeros(n, np.int64), np.zeros(n, bool)
    pick = of_leader & leo_ok
    leader_leo[leo_row[pick]] = leo[pick]  # one offset per broker; the last one wins, as in a dict
    has_leader_leo[leo_row[pick]] = True
    follower = broker_ok & ~of_leader & leo_ok
    max_follower = np.full(n, np.iinfo(np.int64).min)
    np.maximum.at(max_follower, leo_row[follower], leo[follower])
    has_follower = np.bincount(leo_row[follower], minlength=n) > 0

    kt = records.column("kafka_timestamp")
    kt_ms = (pc.divide(pc.cast(pc.cast(kt, pa.timestamp("us")), pa.int64()).cast(pa.float64()), 1000.0)
             if pa.types.is_timestamp(kt.type) else pc.cast(kt, pa.float64()))
    delay = pc.divide(pc.subtract(kt_ms, pc.cast(records.column("observed_at_ms"), pa.float64())), 1000.0)

    return pa.table({
        "cluster": per_partition(records.column("cluster")),
        "topic": per_partition(_field(ts, "topic")),
        "partition": _field(parts, "partition"),
        "observed_at_ms": per_partition(records.column("observed_at_ms")),
        "leader": leader,
        "leader_epoch": _field(parts, "leader_epoch"),
        "replica_count": pc.list_value_length(replicas).fill_null(0) if _is_list(replicas) else pa.nulls(n, pa.int32()),
        "leader_in_replicas": pa.array((lead == -1) | in_replicas),
        "isr_in_replicas": pa.array(np.bincount(isr_row, weights=isr_outside, minlength=n) == 0),
        "high_watermark": _field(parts, "high_watermark"),
        "log_start_offset": _field(parts, "log_start_offset"),
        "write_rate": _field(parts, "write_rate"),
        "leader_leo": pa.array(leader_leo, mask=~has_leader_leo),
        "max_follower_leo": pa.array(max_follower, mask=~has_follower),
        "publish_delay_s": per_partition(delay),
    })


def _field(structs: pa.Array, name: str) -> pa.Array:
    """A struct array's child, nulls where the struct is null; all nulls if the type lacks it (a
    column inferred from records that never had a value)."""
    import pyarrow as pa
    import pyarrow.compute as pc

    if not pa.types.is_struct(structs.type) or structs.type.get_field_index(name) < 0:
        return pa.nulls(len(structs))
    return pc.struct_field(structs, name)


def _is_list(values: pa.Array) -> bool:
    """A list column with typed elements (not one inferred from empty or missing lists only)."""
    import pyarrow as pa

    return bool(pa.types.is_list(values.type) and not pa.types.is_null(values.type.value_type))


def _flatten(lists: pa.Array) -> pa.Array:
    import pyarrow as pa
    import pyarrow.compute as pc

    return pc.list_flatten(lists) if _is_list(lists) else pa.array([], pa.struct([]))


def _elements(lists: pa.Array, field: str | None = None) -> tuple[Ints, Ints, Flags]:
    """Every element of a list column (or that struct field of it) as numpy arrays: the row it
    belongs to, its value as int64 (0 where null) and whether it is not null."""
    import numpy as np
    import pyarrow.compute as pc

    if not _is_list(lists):
        return np.zeros(0, np.int64), np.zeros(0, np.int64), np.zeros(0, bool)
    rows = pc.list_parent_indices(lists).to_numpy(zero_copy_only=False).astype(np.int64)
    values = pc.list_flatten(lists)
    if field is not None:
        values = _field(values, field)
    filled, valid = _ints(values)
    return rows, filled, valid


def _ints(values: pa.Array) -> tuple[Ints, Flags]:
    """An integer Arrow array as numpy: its values as int64 (0 where null) and where it is not null."""
    import numpy as np
    import pyarrow as pa

    if len(values) == 0:
        return np.zeros(0, np.int64), np.zeros(0, bool)
    valid = values.is_valid().to_numpy(zero_copy_only=False)
    return values.cast(pa.int64()).fill_null(0).to_numpy(zero_copy_only=False).astype(np.int64), valid


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

    def run(self, rows: pa.Table | list[dict[str, Any]]) -> Report:
        """Validate partition rows: an Arrow table (`partition_table`) or a list of dicts."""
        import pandas as pd

        report = Report(dt.datetime.now(dt.timezone.utc), len(rows))
        if not len(rows):
            return report
        frame = rows.to_pandas() if hasattr(rows, "to_pandas") else pd.DataFrame(rows)
        # nullable dtypes: a column of ints with a missing value must stay ints (not float NaN)
        frame = frame.convert_dtypes()
        result = self._validation.run(batch_parameters={"dataframe": frame},
                                      result_format={"result_format": "COMPLETE",
                                                     "unexpected_index_column_names": INDEX})
        for r in result.results:
            cfg = r.expectation_config
            assert cfg is not None  # every result of a validation carries its expectation
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


def read_recent(observations: Location | Path, since_ms: int, max_rows: int) -> tuple[pa.Table | None, int]:
    """Topic records observed after `since_ms` as an Arrow table, newest first and cut after the
    record that brings them to `max_rows` partitions, and the newest observed_at_ms seen (or
    `since_ms`). The filter goes into the scan: files and row groups wholly older are not read."""
    import numpy as np
    import pyarrow.compute as pc
    import pyarrow.dataset as ds

    observations = as_location(observations)
    if not observations.is_table():
        return None, since_ms
    day = dt.datetime.fromtimestamp(since_ms / 1000, dt.timezone.utc).date()
    data = observations.table().to_pyarrow_dataset()
    t = data.to_table(columns=["cluster", "observed_at_ms", "kafka_timestamp", "topic_state"],
                      filter=(ds.field("date") >= day) & (ds.field("observed_at_ms") > since_ms)
                      & (ds.field("kind") == "topic"))
    if t.num_rows == 0:
        return None, since_ms
    newest = pc.max(t["observed_at_ms"]).as_py()
    t = t.sort_by([("observed_at_ms", "descending")])
    counts = pc.list_value_length(pc.struct_field(t["topic_state"], "partitions")).fill_null(0)
    reached = np.flatnonzero(np.cumsum(counts.to_numpy(zero_copy_only=False)) >= max_rows)
    if len(reached):
        t = t.slice(0, int(reached[0]) + 1)
    return t, newest


def to_rows(report: Report) -> list[dict[str, Any]]:
    """The `data_quality` table's rows for one run."""
    return [{"run_at": report.run_at, "date": report.run_at.date(), "expectation": o.expectation, "column": o.column,
             "success": o.success, "element_count": o.element_count, "unexpected_count": o.unexpected_count,
             "examples": json.dumps(o.examples, default=str), "error": o.error, "rows_validated": report.rows}
            for o in report.outcomes]


def store(table: Location | Path, report: Report, properties: dict[str, str] | None = None) -> None:
    """Append one run's rows; `properties` are the table's, if this append creates it."""
    import pyarrow as pa

    rows = to_rows(report)
    if rows:
        as_location(table).write(pa.Table.from_pylist(rows), mode="append", partition_by=["date"],
                                 configuration=properties)


class QualityRunner:
    """The suite on a timer, in its own thread. Failures of the runner itself are logged and counted
    on /metrics (a failed run is a result too); the alert path never waits for it."""

    def __init__(self, observations: Location, results: Location, state: Any, interval_s: float, max_rows: int,
                 properties: dict[str, str] | None = None) -> None:
        self.observations = observations
        self.results = results
        self.properties = properties  # of the results table, when the first run creates it
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
            report = self._suite.run(partition_table(records) if records is not None else [])
            if report.rows:
                store(self.results, report, self.properties)
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
