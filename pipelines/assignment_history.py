"""What the pipeline's history knows about a topic's placement over time, for `krm assign explain`:
its partition count at each recorded assignment (the `assignments` Delta table) and when brokers
joined (open or past REPLICA_IMBALANCE incidents with cause `broker_expansion`). Read with delta-rs,
no Spark. Absent tables mean no history, not an error: the pipeline may never have run here.
"""

from __future__ import annotations

import datetime as dt
from pathlib import Path
from typing import Iterable, TypedDict, TypeVar

from foundation.storage import Location, as_location
from pipelines.detectors.balance import BROKER_EXPANSION, REPLICA_IMBALANCE, TopicLayout
from pipelines.incidents import Incident

T = TypeVar("T")


class SizeChange(TypedDict):
    observed_at: dt.datetime
    partition_count: int


def topic_history(assignments: Location | Path | str, cluster: str, topic: str) -> list[SizeChange]:
    """[{observed_at, partition_count}] oldest first (empty without a table)."""
    assignments = as_location(assignments)
    if not assignments.is_table():
        return []
    import pyarrow.compute as pc

    t = assignments.table().to_pyarrow_dataset().to_table(columns=["cluster", "topic", "observed_at",
                                                                          "partition_count"])
    t = t.filter(pc.and_(pc.equal(t["cluster"], cluster), pc.equal(t["topic"], topic)))
    t = t.sort_by([("observed_at", "ascending")])
    return [{"observed_at": _utc(r["observed_at"]), "partition_count": r["partition_count"]} for r in t.to_pylist()]


def topic_layouts(assignments: Location | Path | str) -> dict[tuple[str, str], TopicLayout]:
    """(cluster, topic) -> balance.TopicLayout over every recorded snapshot: when first recorded, when
    first recorded with its current (largest) partition count, that count. A pipeline restores its
    assignment history from it at start; two aggregations, no row-by-row scan."""

    assignments = as_location(assignments)
    if not assignments.is_table():
        return {}
    import pyarrow as pa
    import pyarrow.compute as pc

    t = assignments.table().to_pyarrow_dataset().to_table(
        columns=["cluster", "topic", "observed_at", "partition_count"])
    ms = pc.cast(pc.cast(t["observed_at"], pa.timestamp("ms", tz="UTC")), pa.int64())
    t = t.set_column(2, "observed_at", ms)
    if t.num_rows == 0:
        return {}
    first = {(r["cluster"], r["topic"]): r for r in t.group_by(["cluster", "topic"]).aggregate(
        [("observed_at", "min"), ("partition_count", "max")]).to_pylist()}
    by_count = t.group_by(["cluster", "topic", "partition_count"]).aggregate([("observed_at", "min")]).to_pylist()
    out = {}
    for r in by_count:
        key = (r["cluster"], r["topic"])
        f = first[key]
        if r["partition_count"] == f["partition_count_max"]:
            out[key] = TopicLayout(f["observed_at_min"], r["observed_at_min"], r["partition_count"])
    return out


def broker_join_ms(incidents: list[Incident]) -> dict[tuple[str, int], int]:
    """(cluster, broker) -> when its first `broker_expansion` incident opened: when the pipeline
    first saw the broker join."""
    return {(c, b): int(when.timestamp() * 1000)
            for c in {i.cluster for i in incidents} for b, when in broker_joins(incidents, c).items()}


def broker_joins(incidents: Iterable[Incident], cluster: str) -> dict[int, dt.datetime]:
    """broker -> when its broker_expansion incident opened (the pipeline's first sight of it)."""
    out: dict[int, dt.datetime] = {}
    for i in incidents:
        if i.cluster == cluster and i.type == REPLICA_IMBALANCE and i.cause == BROKER_EXPANSION and i.broker is not None:
            when = dt.datetime.fromtimestamp(i.opened_at_ms / 1000, dt.timezone.utc)
            out[i.broker] = min(when, out.get(i.broker, when))
    return out


def _utc(t: T) -> T:
    if isinstance(t, dt.datetime) and t.tzinfo is None:
        return t.replace(tzinfo=dt.timezone.utc)
    return t
