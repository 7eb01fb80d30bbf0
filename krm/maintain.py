"""`krm maintain`: keep the history tables fast and bounded, beside the pipeline (cron or by hand).

For each history table (observations, partition_state, replica_lag, assignments, quarantine, data_quality):
1. retention: delete the days older than `retention_days` (a predicate on the `date` partition
   column, so whole files go);
2. compaction: rewrite each day's many small files (one per history micro-batch) into few large
   ones (delta-rs `optimize.compact`), which is what keeps `krm lag` fast. Compaction keeps the
   files' order, i.e. time order, so bounded row groups each cover a short time span and a reader
   that filters on time (the data-quality thread's "observed since the last run") skips the rest
   instead of decoding a whole day;
3. vacuum: remove files no longer referenced and older than `vacuum_hours` (readers that started
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

import datetime as dt
import logging
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from foundation.storage import Location, as_location

log = logging.getLogger(__name__)

HISTORY_TABLES = ("observations", "partition_state", "replica_lag", "assignments", "quarantine", "data_quality")
VACUUM_ONLY = ("incidents",)
# rows per Parquet row group written by compaction, where the writer's default (about a million)
# is too coarse: an observations row is a whole topic record with every partition in it
ROW_GROUP_ROWS = {"observations": 1024}


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
            dtable.optimize.compact(writer_properties=_writer_properties(name))
        vacuumed = dtable.vacuum(retention_hours=int(vacuum_hours), enforce_retention_duration=False, dry_run=False)
        after = len(path.table().file_uris())
    except Exception as e:  # noqa: BLE001 - one table's conflict must not stop the others
        return TableReport(name, deleted, before, before, 0, time.perf_counter() - t0, f"{type(e).__name__}: {e}")
    return TableReport(name, deleted, before, after, len(vacuumed), time.perf_counter() - t0)


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
