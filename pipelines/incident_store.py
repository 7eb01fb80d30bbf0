"""The `incidents` Delta table: upserted by incident id from the alert path, read by the CLI.

Written through delta-rs (the `deltalake` package) rather than a Spark MERGE: a batch changes a
handful of rows, and a Spark MERGE costs seconds of jobs on the alert path where delta-rs costs
milliseconds. The table is ordinary Delta, readable by Spark and any other engine. Upserts by id are
idempotent, so a micro-batch replayed after a crash rewrites the same rows.
"""

from __future__ import annotations

import datetime as dt
import json
from pathlib import Path
from typing import Any, Iterable

from foundation.storage import Location, as_location
from pipelines.incidents import Incident

_UTC = dt.timezone.utc


def _schema() -> Any:
    import pyarrow as pa

    ts = pa.timestamp("us", tz="UTC")
    return pa.schema([
        ("incident_id", pa.string()), ("cluster", pa.string()), ("scope", pa.string()), ("type", pa.string()),
        ("severity", pa.string()), ("topic", pa.string()), ("partition", pa.int32()), ("broker", pa.int32()),
        ("cause", pa.string()), ("details", pa.string()), ("opened_at", ts), ("last_seen_at", ts),
        ("resolved_at", ts), ("status", pa.string()), ("reopen_count", pa.int32()),
    ])


def _ts(ms: int | None) -> dt.datetime | None:
    return None if ms is None else dt.datetime.fromtimestamp(ms / 1000, tz=_UTC)


def _ms(t: dt.datetime | None) -> int | None:
    return None if t is None else int(t.timestamp() * 1000)


def to_row(i: Incident) -> dict[str, Any]:
    return {
        "incident_id": i.incident_id, "cluster": i.cluster, "scope": i.scope, "type": i.type, "severity": i.severity,
        "topic": i.topic, "partition": i.partition, "broker": i.broker, "cause": i.cause,
        "details": json.dumps(i.details, sort_keys=True), "opened_at": _ts(i.opened_at_ms),
        "last_seen_at": _ts(i.last_seen_at_ms), "resolved_at": _ts(i.resolved_at_ms), "status": i.status,
        "reopen_count": i.reopen_count,
    }


def _details(text: str | None) -> dict[str, Any]:
    """A row's details object; a row whose details are not a JSON object (written by hand, cut short) reads as
    none, so every reader still lists the incident."""
    try:
        value = json.loads(text or "{}")
    except ValueError:
        return {}
    return value if isinstance(value, dict) else {}


def from_row(r: dict[str, Any]) -> Incident:
    return Incident(
        incident_id=r["incident_id"], cluster=r["cluster"], scope=r["scope"], type=r["type"], severity=r["severity"],
        topic=r["topic"], partition=r["partition"], broker=r["broker"], cause=r["cause"],
        details=_details(r["details"]), opened_at_ms=_ms(r["opened_at"]) or 0,
        last_seen_at_ms=_ms(r["last_seen_at"]) or 0, resolved_at_ms=_ms(r["resolved_at"]), status=r["status"],
        reopen_count=r["reopen_count"] or 0,
    )


class IncidentStore:
    def __init__(self, path: Location | Path | str, properties: dict[str, str] | None = None) -> None:
        self.path = as_location(path)
        self.properties = properties  # Delta table properties, set when the first upsert creates the table
        self._exists = False  # once there, a table stays (asked again only until then: a remote store)

    def exists(self) -> bool:
        self._exists = self._exists or self.path.is_table()
        return self._exists

    def upsert(self, incidents: Iterable[Incident]) -> None:
        import pyarrow as pa

        rows = [to_row(i) for i in incidents]
        if not rows:
            return
        table = pa.Table.from_pylist(rows, schema=_schema())
        if not self.exists():
            self.path.write(table, mode="append", configuration=self.properties)
            return
        (
            self.path.table()
            .merge(table, predicate="t.incident_id = s.incident_id", source_alias="s", target_alias="t")
            .when_matched_update_all()
            .when_not_matched_insert_all()
            .execute()
        )

    def read(self, open_only: bool = False, types: Iterable[str] | None = None) -> list[Incident]:
        if not self.exists():
            return []
        rows = self.path.table().to_pyarrow_table().to_pylist()
        out = [from_row(r) for r in rows]
        if open_only:
            out = [i for i in out if i.status == "open"]
        if types:
            wanted = set(types)
            out = [i for i in out if i.type in wanted]
        return sorted(out, key=lambda i: (i.opened_at_ms, i.incident_id))

    def load_recent(self, since_ms: int) -> list[Incident]:
        """What the alert path needs at start: open incidents and those resolved since `since_ms`."""
        return [i for i in self.read() if i.status == "open" or (i.resolved_at_ms or 0) >= since_ms]


def to_json_obj(i: Incident) -> dict[str, Any]:
    """The `krm incidents --json` contract (DESIGN.md): times as ISO-8601 UTC strings."""
    def iso(ms: int | None) -> str | None:
        at = _ts(ms)
        return None if at is None else at.isoformat().replace("+00:00", "Z")

    return {
        "incident_id": i.incident_id, "cluster": i.cluster, "type": i.type, "severity": i.severity,
        "topic": i.topic, "partition": i.partition, "broker": i.broker, "cause": i.cause, "details": i.facts.raw(),
        "opened_at": iso(i.opened_at_ms), "last_seen_at": iso(i.last_seen_at_ms), "resolved_at": iso(i.resolved_at_ms),
        "status": i.status,
    }
