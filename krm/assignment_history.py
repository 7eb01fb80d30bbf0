"""What the pipeline's history knows about a topic's placement over time, for `krm assign explain`:
its partition count at each recorded assignment (the `assignments` Delta table) and when brokers
joined (open or past REPLICA_IMBALANCE incidents with cause `broker_expansion`). Read with delta-rs,
no Spark. Absent tables mean no history, not an error: the pipeline may never have run here.
"""

from __future__ import annotations

import datetime as dt
from pathlib import Path
from typing import Any


def topic_history(assignments: Path, cluster: str, topic: str) -> list[dict[str, Any]]:
    """[{observed_at, partition_count}] oldest first (empty without a table)."""
    if not (assignments / "_delta_log").exists():
        return []
    import pyarrow.compute as pc
    from deltalake import DeltaTable

    t = DeltaTable(str(assignments)).to_pyarrow_dataset().to_table(columns=["cluster", "topic", "observed_at",
                                                                          "partition_count"])
    t = t.filter(pc.and_(pc.equal(t["cluster"], cluster), pc.equal(t["topic"], topic)))
    t = t.sort_by([("observed_at", "ascending")])
    return [{"observed_at": _utc(r["observed_at"]), "partition_count": r["partition_count"]} for r in t.to_pylist()]


def broker_joins(incidents: list[Any], cluster: str) -> dict[int, dt.datetime]:
    """broker -> when its broker_expansion incident opened (the pipeline's first sight of it)."""
    out: dict[int, dt.datetime] = {}
    for i in incidents:
        if i.cluster == cluster and i.type == "REPLICA_IMBALANCE" and i.cause == "broker_expansion" and i.broker is not None:
            when = dt.datetime.fromtimestamp(i.opened_at_ms / 1000, dt.timezone.utc)
            out[i.broker] = min(when, out.get(i.broker, when))
    return out


def _utc(t: Any) -> Any:
    if isinstance(t, dt.datetime) and t.tzinfo is None:
        return t.replace(tzinfo=dt.timezone.utc)
    return t
