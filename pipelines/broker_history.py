"""Each broker's load over time: the `broker_state` table, sampled from the pipeline's snapshot.

The broker page charts a broker's leaders, replicas and out-of-sync replicas over hours (a rolling
restart, a reassignment, an expansion's imbalance and its rebalance). Summing `partition_state` per
broker at each moment would scan every partition's rows; the alert path already keeps these totals
(pipelines/load.py), so a thread beside it writes them every `[pipeline] broker_history_s`: a row per
broker, a few thousand rows a day per broker (delta-rs; no Spark, never on the alert path).

A row: the broker's leaders, replicas, preferred leaderships (load.Counts), whether it is registered,
and, as the open incidents name it, the partitions where its replica is out of the ISR and the
partitions without a leader that need it back (`must_return`). A cluster whose view is stale is not
sampled: a row says what krm saw, never a guess.
"""

from __future__ import annotations

import datetime as dt
import logging
import threading
from typing import Any

from foundation.storage import Location, as_location

log = logging.getLogger(__name__)

ISR_TYPES = frozenset({"UNDER_REPLICATED", "UNDER_MIN_ISR", "AT_MIN_ISR"})


def samples(snapshot: Any, stale: set[str] | dict[str, float], at_ms: int) -> list[dict[str, Any]]:
    """The rows of one sample: every broker of every cluster whose view is fresh."""
    when = dt.datetime.fromtimestamp(at_ms / 1000, dt.timezone.utc)
    out_of_sync: dict[tuple[str, int], set[tuple[str, int]]] = {}
    offline: dict[tuple[str, int], set[tuple[str, int]]] = {}
    for i in snapshot.open_incidents:
        if i.topic is None or i.partition is None:
            continue
        tp = (i.topic, i.partition)
        if i.type in ISR_TYPES:
            for b in i.details.get("out_of_sync") or ():
                out_of_sync.setdefault((i.cluster, b), set()).add(tp)
        elif i.type == "OFFLINE_PARTITION":
            for b in i.details.get("must_return") or ():
                offline.setdefault((i.cluster, b), set()).add(tp)
    rows = []
    for cluster, view in sorted(snapshot.clusters.items()):
        if cluster in stale or view.error is not None:
            continue
        live = dict(view.brokers)
        load = snapshot.broker_load.get(cluster, {})
        for b in sorted(set(live) | set(load)):
            leaders, replicas, preferred, _ = load.get(b, (0, 0, 0, 0))
            rows.append({"date": when.date(), "cluster": cluster, "broker": b, "observed_at": when,
                         "registered": bool(live.get(b, False)), "leaders": leaders, "replicas": replicas,
                         "preferred": preferred, "out_of_sync": len(out_of_sync.get((cluster, b), ())),
                         "offline_needing": len(offline.get((cluster, b), ()))})
    return rows


SCHEMA_FIELDS = (("date", "date32"), ("cluster", "string"), ("broker", "int32"), ("observed_at", "timestamp"),
                 ("registered", "bool"), ("leaders", "int32"), ("replicas", "int32"), ("preferred", "int32"),
                 ("out_of_sync", "int32"), ("offline_needing", "int32"))


def schema() -> Any:
    import pyarrow as pa

    kinds = {"date32": pa.date32(), "string": pa.string(), "int32": pa.int32(), "bool": pa.bool_(),
             "timestamp": pa.timestamp("us", tz="UTC")}
    return pa.schema([(name, kinds[kind]) for name, kind in SCHEMA_FIELDS])


def append(table: Location, rows: list[dict[str, Any]], properties: dict[str, str] | None = None) -> None:
    import pyarrow as pa

    if rows:
        as_location(table).write(pa.Table.from_pylist(rows, schema=schema()), mode="append", partition_by=["date"],
                                 configuration=properties)


class BrokerHistory:
    """The sampler's thread. A failed write is logged and retried at the next sample; the alert path
    never waits for it."""

    def __init__(self, table: Location, state: Any, interval_s: float, properties: dict[str, str] | None = None
                 ) -> None:
        self.table = table
        self.state = state
        self.interval_s = interval_s
        self.properties = properties
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self.failures = 0

    def start(self) -> BrokerHistory:
        self._thread = threading.Thread(target=self._loop, name="krm-broker-history", daemon=True)
        self._thread.start()
        return self

    def stop(self, timeout_s: float = 5.0) -> None:
        """A last sample, so the chart reaches the stop."""
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=timeout_s)
        self.sample_once()

    def _loop(self) -> None:
        while not self._stop.wait(self.interval_s):
            self.sample_once()

    def sample_once(self, now_ms: int | None = None) -> int:
        import time

        snap = self.state.snapshot
        if not snap.batches:
            return 0  # nothing processed yet: the load is unknown, not zero
        try:
            rows = samples(snap, self.state.stale(), int(time.time() * 1000) if now_ms is None else now_ms)
            append(self.table, rows, self.properties)
            return len(rows)
        except Exception:  # noqa: BLE001 - the next sample tries again
            self.failures += 1
            log.exception("broker history: a sample could not be written to %s", self.table)
            return 0
