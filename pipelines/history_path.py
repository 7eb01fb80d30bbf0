"""The history path: a streaming query on its own trigger that appends every observation, the rows
derived from it (pipelines/history.py) and every refused record to Delta, beside the alert path.

A replayed batch (Spark plans the batch a stop interrupted again at the next start, and a stop can
fall after some of its appends committed) must not be written twice. Delta's own idempotent writes
(the `txnAppId` / `txnVersion` options) were used first, but delta-spark 4.0 answers "is this
version already written?" from the table's full state (`OptimisticTransactionImpl.txnVersion` ->
`Snapshot.transactions` -> `computedState`): a Spark job over the log on every append, most of a
history batch's CPU. Each append now carries its batch's mark in the commit's `userMetadata`, and
only a batch that may be a replay (the first after a start, or after a failed batch) looks for the
mark among the table's last commits, through delta-rs.
"""

from __future__ import annotations

import logging
import os
import re
import time
from typing import Any

from foundation.storage import Location
from pipelines import history
from pipelines.ingest import rejected, valid
from pipelines.state import PipelineState
from pipelines.tables import Tables

log = logging.getLogger(__name__)

# Commits searched for a replayed batch's mark: its own appends, and whatever `krm maintain` (retention,
# compaction, vacuum) committed since on the same table.
REPLAY_LOOKBACK = 100


def batch_mark(app_id: str, table: str, batch_id: int) -> str:
    """The `userMetadata` of batch `batch_id`'s append to `table` (app_id: pipelines/checkpoints.writer_id)."""
    return f"{app_id}-{table}:{batch_id}"


def committed(path: Location, app_id: str, table: str, batch_id: int) -> bool:
    """Whether batch `batch_id`'s append to `table` is already in it: its mark among the last commits,
    or (appends of releases that used Delta's transaction ids) a transaction version at least as new."""
    if not path.is_table():
        return False
    delta = path.table()
    mark = batch_mark(app_id, table, batch_id)
    if any(c.get("userMetadata") == mark for c in delta.history(REPLAY_LOOKBACK)):
        return True
    legacy = delta.transaction_version(f"{app_id}-{table}")
    return legacy is not None and legacy >= batch_id


def append(frame: Any, path: Location, mark: str, partition_by: tuple[str, ...] = ()) -> None:
    """One blind Delta append carrying `mark` (new columns of a newer release merged into the schema)."""
    writer = frame.write.format("delta").mode("append").option("mergeSchema", "true").option("userMetadata", mark)
    if partition_by:
        writer = writer.partitionBy(*partition_by)
    writer.save(str(path))


def history_tasks(configured: int, master: str) -> int | None:
    """How many tasks a history batch may run at once. Spark does not preempt: an alert batch waits
    for a core held by a history task. In local mode the history path therefore keeps one core free
    (local[N] -> N-1 tasks); on a cluster the executors are not the driver's cores and nothing is
    capped. `configured` > 0 wins."""
    if configured > 0:
        return configured
    m = re.fullmatch(r"local\[(\d+|\*)(?:,\d+)?\]", master.strip())
    if not m:
        return None
    cores = (os.cpu_count() or 2) if m.group(1) == "*" else int(m.group(1))
    return max(1, cores - 1)


class HistoryPath:
    """foreachBatch handler of the history query (input: `ingest.parse` of the stream): Delta appends
    marked with their batch, so a replayed batch is not written twice (see the module docstring)."""

    def __init__(self, state: PipelineState, tables: Tables, app_id: str, tasks: int | None = None) -> None:
        self.state = state
        self.tables = tables
        self.app_id = app_id
        self.tasks = tasks  # at most this many tasks at once (None: one per Kafka partition)
        self._layouts: dict[str, tuple[str, ...]] = {}
        self._tables: set[str] = set()  # tables known to exist
        self._maybe_replay = True  # the next batch may have been (partly) written: the first, or after a failure
        self._last_done = -1  # the newest batch this handler wrote whole (Spark may replay it after a restart)

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

    def _exists(self, path: Location) -> bool:
        """Whether the table exists (remembered once true: a table is never dropped under a running pipeline)."""
        if path.uri not in self._tables:
            if not path.is_table():
                return False
            self._tables.add(path.uri)
        return True

    def __call__(self, batch: Any, batch_id: int) -> None:
        from pyspark.sql import functions as F

        parsed = (batch.coalesce(self.tasks) if self.tasks else batch).persist()
        took: list[str] = []
        replay = self._maybe_replay or batch_id <= self._last_done
        self._maybe_replay = True  # until this batch is whole

        def written(name: str, path: Location) -> bool:
            if replay and committed(path, self.app_id, name, batch_id):
                log.info("history batch %d: already appended to %s (a replay), skipped", batch_id, name)
                return True
            return False

        try:
            holds = history.contents(parsed).first()
            assert holds is not None  # (an aggregation's one row)
            good = valid(parsed).withColumn("date", F.to_date(F.timestamp_millis("observed_at_ms")))
            polls = history.partition_polls(good)
            for name, frame, path, held in (
                    ("observations", good, self.tables.observations, True),
                    ("partition_state", history.partition_state(polls), self.tables.partition_state, holds.keep),
                    ("replica_lag", history.replica_lag(polls), self.tables.replica_lag, holds.lag),
                    ("assignments", history.assignments(good), self.tables.assignments, holds.assignment)):
                t0 = time.perf_counter()
                # Most batches of a healthy cluster change no assignment and carry no keyframe or lag: an
                # empty Delta commit is not free (a table is created by its first append, even empty,
                # so that readers find it)
                if (not held and self._exists(path)) or written(name, path):
                    continue
                append(frame, path, batch_mark(self.app_id, name, batch_id), self._layout(path))
                took.append(f"{name} {time.perf_counter() - t0:.2f}s")
            n_bad = holds.rejected
            if n_bad and not written("quarantine", self.tables.quarantine):
                append(rejected(parsed), self.tables.quarantine, batch_mark(self.app_id, "quarantine", batch_id))
                log.warning("quarantined %d observation records (see the quarantine table)", n_bad)
                self.state.add_quarantined(n_bad)
            self._maybe_replay, self._last_done = False, max(self._last_done, batch_id)
            log.debug("history batch %d: %s", batch_id, ", ".join(took))
        finally:
            parsed.unpersist()
