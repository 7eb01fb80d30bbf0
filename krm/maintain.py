"""`krm maintain`: keep the history tables fast and bounded, beside the pipeline (cron or by hand).

For each history table (observations, partition_state, replica_lag, assignments, quarantine, data_quality,
broker_state):
1. retention: delete the days older than `retention_days` (a predicate on the `date` partition
   column, so whole files go);
2. sorting (partition_state, replica_lag): each past day (date < today) still in more than one file
   is rewritten as one file sorted by partition (SORT_KEYS), in row groups small enough that a
   reader of one partition (`krm timeline`, `krm lag`, the console) or of the rare `changed` rows
   skips the rest of the day by the row groups' statistics instead of decoding all of it. A day
   rewritten once is one file and is left alone. Today, which the pipeline appends to while this
   runs, is clustered by topic instead (delta-rs `optimize.z_order(["topic"])`: a rewrite that
   changes no data, committed beside the appends): a one-partition reader then decodes the row
   groups of its topic, not the whole day. The clustering key is the first 15 characters of the
   topic name (delta-rs keeps 16 bytes of each value), so topics that share a longer prefix share
   row groups. Appends after the run stay in time order until the next run, and the next day's run
   sorts the day as a past one (a day whose last rewrite was this clustering, with no append after
   it, keeps it: the same rows, read a little slower by `changed` questions);
3. compaction: rewrite each day's many small files (one per history micro-batch) into few large
   ones (delta-rs `optimize.compact`), for the tables not sorted above. Each micro-batch's rows stay
   together, in time order, so bounded row groups each cover a short time span and a reader that
   filters on time (the data-quality thread's "observed since the last run") skips the rest
   instead of decoding a whole day;
4. vacuum: remove files no longer referenced and older than `vacuum_hours` (readers that started
   before the compaction keep working for that long).
The incidents table is kept whole (open incidents have no age) and not compacted (the alert path
upserts it all the time, and a compaction would fail its upserts): only vacuumed, for each upsert
rewrites the files holding its rows and the old ones are never read again. How long each table's
`_delta_log` keeps its commits is the table property the pipeline sets (pipelines/log_retention.py);
Spark and delta-rs delete expired log files themselves. Delta's optimistic concurrency lets this
run while the pipeline appends to a local data_dir; a conflicting commit is reported and retried at
the next run. On an object store (s3a://) there is no such arbitration between Spark and delta-rs writers:
run it with the pipeline stopped (foundation/storage.py).
"""

from __future__ import annotations

import collections
import datetime as dt
import logging
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from foundation.storage import Location, as_location

log = logging.getLogger(__name__)

HISTORY_TABLES = ("observations", "partition_state", "replica_lag", "assignments", "quarantine", "data_quality",
                  "broker_state")
VACUUM_ONLY = ("incidents",)
# rows per Parquet row group written by compaction, sorting and clustering, where the writer's default (about a
# million) is too coarse: an observations row is a whole topic record with every partition in it; a
# sorted day's group of partition_state or replica_lag rows should hold a few topics, not a day
ROW_GROUP_ROWS = {"observations": 1024, "partition_state": 65_536, "replica_lag": 65_536}
# past days are sorted by these (those a table has): the rare changed rows first, then by partition
SORT_KEYS = {"partition_state": (("changed", "descending"), ("cluster", "ascending"), ("topic", "ascending"),
                                 ("partition", "ascending"), ("observed_at", "ascending")),
             "replica_lag": (("cluster", "ascending"), ("topic", "ascending"), ("partition", "ascending"),
                             ("broker", "ascending"), ("observed_at", "ascending"))}
SORTED_FILE_BYTES = 1 << 30  # one file per sorted day and cluster
SORT_MEMORY = "1GB"  # DuckDB's share while sorting a day; beyond it, it spills to the temporary folder
ROWS_PER_BATCH = 65_536


@dataclass(frozen=True)
class TableReport:
    table: str
    deleted_rows: int
    files_before: int
    files_after: int
    vacuumed_files: int
    seconds: float
    error: str | None = None


def maintain_table(path: Location, retention_days: int, vacuum_hours: float, today: dt.date) -> TableReport:
    t0 = time.perf_counter()
    name = path.name
    dtable = path.table()
    before = len(dtable.file_uris())
    deleted = 0
    try:
        if name not in VACUUM_ONLY:
            if "date" in [f.name for f in dtable.schema().fields]:
                cutoff = today - dt.timedelta(days=retention_days)
                metrics = dtable.delete(f"date < '{cutoff.isoformat()}'")
                deleted = int(metrics.get("num_deleted_rows", 0) or 0)
            if name in SORT_KEYS:
                sort_past_days(path, SORT_KEYS[name], today)
                cluster_today(path, today)
                dtable = path.table()
            else:
                dtable.optimize.compact(writer_properties=_writer_properties(name))
        vacuumed = dtable.vacuum(retention_hours=int(vacuum_hours), enforce_retention_duration=False, dry_run=False)
        after = len(path.table().file_uris())
    except Exception as e:  # noqa: BLE001 - one table's conflict must not stop the others
        return TableReport(name, deleted, before, before, 0, time.perf_counter() - t0, f"{type(e).__name__}: {e}")
    return TableReport(name, deleted, before, after, len(vacuumed), time.perf_counter() - t0)


def sort_past_days(path: Location, keys: tuple[tuple[str, str], ...], today: dt.date) -> int:
    """Rewrite every (date, cluster) partition of a day before `today` that is in more than one file
    as one file sorted by `keys`; a replace-where overwrite, so readers see the old files or the new
    one, never both. Returns how many were rewritten."""
    from deltalake import write_deltalake

    dtable = path.table()
    cols = list(dtable.metadata().partition_columns)
    if "date" not in cols:
        return 0
    names = {f.name for f in dtable.schema().fields}
    order = [(k, how) for k, how in keys if k in names]
    done = 0
    for part, files in sorted(_files_per_partition(dtable, cols).items()):
        where = dict(zip(cols, part))
        day = where["date"]
        if files < 2 or day >= today:
            continue
        predicate = " AND ".join(f"{c} = '{(day.isoformat() if c == 'date' else str(v)).replace(chr(39), chr(39) * 2)}'"
                                 for c, v in where.items())
        con, rows = _sorted_rows(path.dataset(dtable), predicate, order)
        try:
            write_deltalake(dtable, rows, mode="overwrite", predicate=predicate, partition_by=cols,
                            target_file_size=SORTED_FILE_BYTES, writer_properties=_writer_properties(path.name))
        finally:
            con.close()
        log.info("sorted %s %s: %d files", path.name, predicate, files)
        dtable = path.table()
        done += 1
    return done


def cluster_today(path: Location, today: dt.date) -> bool:
    """Rewrite today's files of a SORT_KEYS table clustered by topic, when the pipeline has
    appended since the last run (today in more than one file). A compaction after it would bin-pack
    the clustered file with the new appends in time order again, so this replaces compaction for
    these tables. Returns whether it rewrote."""
    dtable = path.table()
    cols = list(dtable.metadata().partition_columns)
    if "date" not in cols or "topic" not in {f.name for f in dtable.schema().fields}:
        return False
    date = cols.index("date")
    if all(n < 2 for part, n in _files_per_partition(dtable, cols).items() if part[date] == today):
        return False
    dtable.optimize.z_order(["topic"], partition_filters=[("date", "=", today.isoformat())],
                            writer_properties=_writer_properties(path.name))
    log.info("clustered %s date=%s by topic", path.name, today)
    return True


def _files_per_partition(dtable: Any, cols: list[str]) -> collections.Counter:
    """How many files each partition of the table's current version has, keyed by its values in
    `cols` order (`date` as a datetime.date)."""
    adds = dtable.get_add_actions(flatten=True)
    columns = [[dt.date.fromisoformat(str(v)) if c == "date" and not isinstance(v, dt.date) else v
                for v in adds.column(f"partition.{c}").to_pylist()] for c in cols]
    return collections.Counter(zip(*columns))


def _sorted_rows(dataset: Any, predicate: str, order: list[tuple[str, str]]) -> tuple[Any, Any]:
    """The rows of one day and cluster, sorted, as a stream of record batches (with the DuckDB
    connection that produces them, to close after reading): DuckDB sorts within a
    memory limit and spills the rest to disk, where pyarrow's sort would hold the day several times
    over (a day of partition_state at 50k partitions is ~15 million rows)."""
    import tempfile

    import duckdb

    con = duckdb.connect(":memory:", config={"memory_limit": SORT_MEMORY, "temp_directory": tempfile.gettempdir()})
    con.register("rows", dataset)
    by = ", ".join(f'"{k}" {"DESC" if how == "descending" else "ASC"}' for k, how in order)
    reader = con.sql(f"SELECT * FROM rows WHERE {predicate} ORDER BY {by}").to_arrow_reader(ROWS_PER_BATCH)
    return con, reader.cast(dataset.schema)


def _writer_properties(table: str) -> Any:
    """None: delta-rs's defaults. Given properties replace all of them, so the compression that
    compaction uses by default (zstd, level 4) is restated."""
    from deltalake import WriterProperties

    rows = ROW_GROUP_ROWS.get(table)
    return WriterProperties(max_row_group_size=rows, compression="ZSTD", compression_level=4) if rows else None


def maintain(tables_root: Location | Path, retention_days: int, vacuum_hours: float,
             today: dt.date | None = None) -> list[TableReport]:
    today = today or dt.datetime.now(dt.timezone.utc).date()
    out = []
    for name in HISTORY_TABLES + VACUUM_ONLY:
        path = as_location(tables_root) / name
        if path.is_table():
            out.append(maintain_table(path, retention_days, vacuum_hours, today))
    return out
