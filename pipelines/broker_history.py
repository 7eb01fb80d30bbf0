"""Each broker's load over time: the `broker_state` table, sampled from the pipeline's snapshot.

The broker page charts a broker's leaders, replicas and out-of-sync replicas over hours (a rolling
restart, a reassignment, an expansion's imbalance and its rebalance). Summing `partition_state` per
broker at each moment would scan every partition's rows; the alert path already keeps these totals
(pipelines/load.py), so a thread beside it writes them every `[pipeline] broker_history_s`: a row per
broker, a few thousand rows a day per broker (delta-rs; no Spark, never on the alert path).

Samples are kept in memory (`Unwritten`, which the console reads too) and appended every
`[pipeline] broker_history_write_s` (15 min) and at a stop: each Delta append is a file and a commit, and a
reader of a day opens every file of it (benchmarks/BENCHMARKS.md, "The console's pages at 200k partitions").

A row: the broker's leaders, replicas, preferred leaderships (load.Counts), whether it is registered,
and, as the open incidents name it, the partitions where its replica is out of the ISR and the
partitions without a leader that need it back (`must_return`). A cluster whose view is stale is not
sampled: a row says what krm saw, never a guess.
"""

from __future__ import annotations

import datetime as dt
import logging
import threading
from typing import TYPE_CHECKING, Any, Iterable, TypedDict

from foundation.storage import Location, as_location
from pipelines.detectors.isr import IsrDetails
from pipelines.detectors.offline import OfflineDetails
from pipelines.incidents import Incident

log = logging.getLogger(__name__)

ISR_TYPES = frozenset({"UNDER_REPLICATED", "UNDER_MIN_ISR", "AT_MIN_ISR"})


if TYPE_CHECKING:
    import pyarrow as pa



class BrokerSample(TypedDict):
    """One broker at one sample: a row of the broker history (SCHEMA_FIELDS)."""
    date: dt.date
    cluster: str
    broker: int
    observed_at: dt.datetime
    registered: bool
    leaders: int
    replicas: int
    preferred: int
    out_of_sync: int
    offline_needing: int


def trouble(open_incidents: Iterable[Incident]) -> dict[tuple[str, int], tuple[int, int]]:
    """(cluster, broker) -> (partitions where its replica is out of the ISR, offline partitions that need it
    back: `must_return`), as the open incidents name them; a partition counts once per broker."""
    out_of_sync: dict[tuple[str, int], set[tuple[str, int]]] = {}
    offline: dict[tuple[str, int], set[tuple[str, int]]] = {}
    for i in open_incidents:
        if i.topic is None or i.partition is None:
            continue
        tp = (i.topic, i.partition)
        if i.type not in ISR_TYPES and i.type != "OFFLINE_PARTITION":
            continue  # the others are not parsed: the sample reads every open incident
        facts = i.facts
        if i.type in ISR_TYPES and isinstance(facts, IsrDetails):
            for b in facts.out_of_sync:
                out_of_sync.setdefault((i.cluster, b), set()).add(tp)
        elif isinstance(facts, OfflineDetails):
            for b in facts.must_return:
                offline.setdefault((i.cluster, b), set()).add(tp)
    return {k: (len(out_of_sync.get(k, ())), len(offline.get(k, ()))) for k in set(out_of_sync) | set(offline)}


def samples(snapshot: Any, stale: set[str] | dict[str, float], at_ms: int) -> list[BrokerSample]:
    """The rows of one sample: every broker of every cluster whose view is fresh."""
    when = dt.datetime.fromtimestamp(at_ms / 1000, dt.timezone.utc)
    troubled = trouble(snapshot.open_incidents)
    rows: list[BrokerSample] = []
    for cluster, view in sorted(snapshot.clusters.items()):
        if cluster in stale or view.error is not None:
            continue
        live = dict(view.brokers)
        load = snapshot.broker_load.get(cluster, {})
        for b in sorted(set(live) | set(load)):
            leaders, replicas, preferred, _ = load.get(b, (0, 0, 0, 0))
            oos, offline = troubled.get((cluster, b), (0, 0))
            rows.append({"date": when.date(), "cluster": cluster, "broker": b, "observed_at": when,
                         "registered": bool(live.get(b, False)), "leaders": leaders, "replicas": replicas,
                         "preferred": preferred, "out_of_sync": oos, "offline_needing": offline})
    return rows


SCHEMA_FIELDS = (("date", "date32"), ("cluster", "string"), ("broker", "int32"), ("observed_at", "timestamp"),
                 ("registered", "bool"), ("leaders", "int32"), ("replicas", "int32"), ("preferred", "int32"),
                 ("out_of_sync", "int32"), ("offline_needing", "int32"))


def schema() -> pa.Schema:
    import pyarrow as pa

    kinds = {"date32": pa.date32(), "string": pa.string(), "int32": pa.int32(), "bool": pa.bool_(),
             "timestamp": pa.timestamp("us", tz="UTC")}
    return pa.schema([(name, kinds[kind]) for name, kind in SCHEMA_FIELDS])


def append(table: Location, rows: list[BrokerSample], properties: dict[str, str] | None = None) -> None:
    import pyarrow as pa

    if rows:
        as_location(table).write(pa.Table.from_pylist(rows, schema=schema()), mode="append", partition_by=["date"],
                                 configuration=properties)


MAX_UNWRITTEN = 200_000  # rows kept while the table cannot be written (the oldest go first, logged)


class Unwritten:
    """Samples taken and not yet appended; thread-safe (the sampler adds and takes, the console reads)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._rows: list[BrokerSample] = []

    def add(self, rows: list[BrokerSample]) -> None:
        with self._lock:
            self._rows.extend(rows)
            if len(self._rows) > MAX_UNWRITTEN:
                dropped = len(self._rows) - MAX_UNWRITTEN
                del self._rows[:dropped]
                log.warning("broker history: %d samples dropped, the table has not been writable for long", dropped)

    def take(self) -> list[BrokerSample]:
        with self._lock:
            rows, self._rows = self._rows, []
            return rows

    def put_back(self, rows: list[BrokerSample]) -> None:
        """A failed append's rows, ahead of those taken since."""
        with self._lock:
            self._rows[:0] = rows

    def of(self, cluster: str, broker: int) -> list[BrokerSample]:
        with self._lock:
            return [r for r in self._rows if r["cluster"] == cluster and r["broker"] == broker]

    def __len__(self) -> int:
        return len(self._rows)


class BrokerHistory:
    """The sampler's thread: a sample every `interval_s` into `state.broker_samples`, appended every
    `write_s`. A failed append is logged, counted and retried with the next; the alert path never waits."""

    def __init__(self, table: Location, state: Any, interval_s: float, properties: dict[str, str] | None = None,
                 write_s: float = 900.0) -> None:
        self.table = table
        self.state = state
        self.interval_s = interval_s
        self.write_s = max(write_s, interval_s)
        self.properties = properties
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self.failures = 0

    def start(self) -> BrokerHistory:
        self._thread = threading.Thread(target=self._loop, name="krm-broker-history", daemon=True)
        self._thread.start()
        return self

    def stop(self, timeout_s: float = 5.0) -> None:
        """A last sample and the append of every unwritten one, so the chart reaches the stop."""
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=timeout_s)
        self.sample_once()
        self.write()

    def _loop(self) -> None:
        import time

        last_write = time.monotonic()
        while not self._stop.wait(self.interval_s):
            self.sample_once()
            if time.monotonic() - last_write >= self.write_s:
                self.write()
                last_write = time.monotonic()

    def sample_once(self, now_ms: int | None = None) -> int:
        """Take one sample (kept until the next write); how many rows."""
        import time

        snap = self.state.snapshot
        if not snap.batches:
            return 0  # nothing processed yet: the load is unknown, not zero
        rows = samples(snap, self.state.stale(), int(time.time() * 1000) if now_ms is None else now_ms)
        self.state.broker_samples.add(rows)
        return len(rows)

    def write(self) -> int:
        """Append every unwritten sample; how many rows (0 when the append failed: they wait for the next)."""
        rows = self.state.broker_samples.take()
        if not rows:
            return 0
        try:
            append(self.table, rows, self.properties)
            return len(rows)
        except Exception:  # noqa: BLE001 - the next write tries again
            self.failures += 1
            self.state.broker_samples.put_back(rows)
            log.exception("broker history: %d samples could not be written to %s", len(rows), self.table)
            return 0
