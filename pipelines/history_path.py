"""The history path: a streaming query on its own trigger that appends every observation, the rows
derived from it (pipelines/history.py) and every refused record to Delta, beside the alert path.
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
from pipelines.metrics import PipelineState
from pipelines.tables import Tables

log = logging.getLogger(__name__)


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
            polls = history.partition_polls(good)
            for name, frame, path in (("observations", good, self.tables.observations),
                                      ("partition_state", history.partition_state(polls), self.tables.partition_state),
                                      ("replica_lag", history.replica_lag(polls), self.tables.replica_lag),
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
