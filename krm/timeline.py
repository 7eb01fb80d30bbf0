"""`krm timeline` and `krm incidents show`: one partition's history, changes only, from the Delta tables.

The `partition_state` table holds a partition at each change and once per keyframe interval
(docs/history.md); an operator wants the moments it changed: the leader, its epoch, the replica
set, the ISR (and, where reported, the ELR). Read through
delta-rs and a pyarrow dataset scan filtered on the `date` partition column first (as krm/lag.py), so
no Spark and no JVM; the changes are picked in one pass over the rows of one partition, oldest first.
Incidents of the partition (opened, resolved) are merged in on the same time axis.
"""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterable

from foundation.errors import KrmError
from foundation.storage import as_location
from foundation.storage import Location
from pipelines.incidents import Incident

STATE_FIELDS = ("leader", "leader_epoch", "replicas", "isr")
LOOKBACK = dt.timedelta(days=1)  # how far before a window its starting state is looked for


@dataclass(frozen=True)
class Event:
    at: dt.datetime
    kind: str  # "state" | "opened" | "resolved"
    what: str  # one line for a person
    fields: dict[str, Any] = field(default_factory=dict)  # the machine-readable side

    def to_json(self) -> dict[str, Any]:
        return {"at": self.at.isoformat(), "kind": self.kind, "what": self.what, **self.fields}


def read_states(table: Location | Path | str, topic: str, partition: int, since: dt.timedelta, now: dt.datetime | None = None,
                cluster: str | None = None, until: dt.datetime | None = None) -> list[dict[str, Any]]:
    """The partition's rows within the window, oldest first, as dicts, led by the newest row before
    it (of each cluster) when there is one within a day: the table holds a partition at each change
    and once per keyframe interval (docs/history.md), so the state at the window's start is a row
    written before it."""
    import pyarrow.dataset as ds

    table = as_location(table)
    if not table.is_table():
        raise KrmError(f"no partition_state table at {table}: has the pipeline (`krm run`) written history yet?")
    now = now or dt.datetime.now(dt.timezone.utc)
    start = now - since
    end = until or now
    lookback = start - LOOKBACK
    cond = ((ds.field("date") >= lookback.date()) & (ds.field("topic") == topic) & (ds.field("partition") == partition)
            & (ds.field("observed_at") >= lookback) & (ds.field("observed_at") <= end))
    if cluster is not None:
        cond = cond & (ds.field("cluster") == cluster)
    cols = ["observed_at", "cluster", *STATE_FIELDS, "high_watermark", "leader_leo"]
    rows = table.dataset().to_table(columns=cols, filter=cond).sort_by("observed_at").to_pylist()
    before: dict[str, dict[str, Any]] = {}
    for r in rows:
        if _utc(r["observed_at"]) < start:
            before[r["cluster"]] = r
    return sorted(before.values(), key=lambda r: r["observed_at"]) + [r for r in rows if _utc(r["observed_at"]) >= start]


def latest_states(table: Location | Path | str, topic: str, cluster: str, within: dt.timedelta = dt.timedelta(minutes=10),
                  now: dt.datetime | None = None) -> list[dict[str, Any]]:
    """Each partition of a topic as the newest poll within `within` recorded it, by partition."""
    import pyarrow.dataset as ds

    table = as_location(table)
    now = now or dt.datetime.now(dt.timezone.utc)
    start = now - within
    cond = ((ds.field("date") >= start.date()) & (ds.field("cluster") == cluster) & (ds.field("topic") == topic)
            & (ds.field("observed_at") >= start))
    cols = ["observed_at", "partition", *STATE_FIELDS, "high_watermark", "leader_leo"]
    newest: dict[int, dict[str, Any]] = {}
    for r in table.dataset().to_table(columns=cols, filter=cond).to_pylist():
        if r["partition"] not in newest or r["observed_at"] >= newest[r["partition"]]["observed_at"]:
            newest[r["partition"]] = r
    return [newest[p] for p in sorted(newest)]


def changes(rows: Iterable[dict[str, Any]]) -> list[Event]:
    """The rows at which leader, epoch, replicas or ISR differ from the row before (the first row counts)."""
    out: list[Event] = []
    last: dict[str, tuple[Any, ...]] = {}
    for r in rows:
        key = tuple(tuple(r[f]) if isinstance(r[f], list) else r[f] for f in STATE_FIELDS)
        if last.get(r["cluster"]) == key:
            continue
        before = last.get(r["cluster"])
        last[r["cluster"]] = key
        parts = [f"leader {r['leader']} (epoch {r['leader_epoch']})", f"ISR {r['isr']}", f"replicas {r['replicas']}"]
        if before is not None:
            moved = [n for n, a, b in zip(STATE_FIELDS, before, key) if a != b]
            parts.append("changed: " + ", ".join(moved))
        out.append(Event(_utc(r["observed_at"]), "state", "; ".join(parts),
                         {"cluster": r["cluster"], **{f: r[f] for f in STATE_FIELDS},
                          "high_watermark": r["high_watermark"], "leader_leo": r["leader_leo"]}))
    return out


def incident_events(incidents: Iterable[Incident], topic: str, partition: int, start: dt.datetime) -> list[Event]:
    """Opened / resolved moments of the partition's incidents (pipelines.incidents.Incident) since `start`."""
    out = []
    for i in incidents:
        if i.topic != topic or i.partition != partition:
            continue
        ident = {"incident_id": i.incident_id, "type": i.type, "cause": i.cause, "severity": i.severity}
        opened = _ms(i.opened_at_ms)
        if opened >= start:
            out.append(Event(opened, "opened", f"{i.severity} {i.type} ({i.cause or '-'}) opened: {i.incident_id}", ident))
        if i.resolved_at_ms is not None and _ms(i.resolved_at_ms) >= start:
            out.append(Event(_ms(i.resolved_at_ms), "resolved", f"{i.type} resolved: {i.incident_id}", ident))
    return out


def timeline(states: list[dict[str, Any]], incidents: Iterable[Incident], topic: str, partition: int,
             start: dt.datetime) -> list[Event]:
    return sorted(changes(states) + incident_events(incidents, topic, partition, start), key=lambda e: e.at)


def plot(states: list[dict[str, Any]], events: list[Event], topic: str, partition: int, out: Path) -> None:
    """A PNG for a post-mortem: the leader and the ISR size per poll, incidents as shaded spans."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, (ax1, ax2) = plt.subplots(2, 1, figsize=(10, 5), sharex=True)
    times = [_utc(r["observed_at"]) for r in states]
    ax1.step(times, [r["leader"] for r in states], where="post", label="leader")
    ax1.set_ylabel("leader (-1: none)")
    ax2.step(times, [len(r["isr"] or ()) for r in states], where="post", color="tab:orange", label="|ISR|")
    ax2.step(times, [len(r["replicas"] or ()) for r in states], where="post", color="tab:gray", linestyle="--",
             label="replicas")
    ax2.set_ylabel("replicas")
    ax2.legend(loc="lower left")
    opened: dict[str, dt.datetime] = {}
    for e in events:
        if e.kind == "opened":
            opened[e.fields["incident_id"]] = e.at
        elif e.kind == "resolved" and e.fields["incident_id"] in opened:
            began = opened.pop(e.fields["incident_id"])
            for ax in (ax1, ax2):
                ax.axvspan(began, e.at, color="tab:red", alpha=0.15)
    end = times[-1] if times else dt.datetime.now(dt.timezone.utc)
    for at in opened.values():  # still open
        for ax in (ax1, ax2):
            ax.axvspan(at, end, color="tab:red", alpha=0.15)
    fig.suptitle(f"{topic}-{partition}: leader and ISR (incidents shaded)")
    fig.autofmt_xdate()
    fig.savefig(out, dpi=100)
    plt.close(fig)


def _utc(t: dt.datetime) -> dt.datetime:
    return t if t.tzinfo is not None else t.replace(tzinfo=dt.timezone.utc)


def _ms(ms: int) -> dt.datetime:
    return dt.datetime.fromtimestamp(ms / 1000, dt.timezone.utc)


def broker_rows(table: Location | Path | str, cluster: str, broker: int, since: dt.timedelta, now: dt.datetime | None = None
                ) -> list[dict[str, Any]]:
    """A broker's `broker_state` samples in the window, oldest first (pipelines/broker_history.py)."""
    import pyarrow.dataset as ds

    table = as_location(table)
    now = now or dt.datetime.now(dt.timezone.utc)
    start = now - since
    cond = ((ds.field("date") >= start.date()) & (ds.field("cluster") == cluster) & (ds.field("broker") == broker)
            & (ds.field("observed_at") >= start))
    return table.dataset().to_table(filter=cond).sort_by("observed_at").to_pylist()


def topic_lag_rows(table: Location | Path | str, cluster: str, topic: str, since: dt.timedelta, now: dt.datetime | None = None,
                   partition: int | None = None) -> list[dict[str, Any]]:
    """A topic's (or one partition's) followers' `replica_lag` rows in the window, oldest first: written
    while a follower lags and at each change of the partition (docs/history.md), so a lag holds until its
    partition's next row."""
    import pyarrow.dataset as ds

    table = as_location(table)
    now = now or dt.datetime.now(dt.timezone.utc)
    start = now - since
    cond = ((ds.field("date") >= start.date()) & (ds.field("cluster") == cluster) & (ds.field("topic") == topic)
            & (ds.field("observed_at") >= start) & (ds.field("is_leader") == False))  # noqa: E712 - an Arrow expression
    if partition is not None:
        cond = cond & (ds.field("partition") == partition)
    cols = ["observed_at", "partition", "broker", "lag_messages", "lag_seconds", "in_isr"]
    return table.dataset().to_table(columns=cols, filter=cond).sort_by("observed_at").to_pylist()


def oldest_day(table: Location | Path | str) -> dt.date | None:
    """The first day a date-partitioned history table holds (None: no table or no row), from its file
    list alone: how far back a chart can go (`krm maintain --retention-days` drops older days)."""
    table = as_location(table)
    if not table.is_table():
        return None
    days = [v for v in table.table().get_add_actions(flatten=True).column("partition.date").to_pylist() if v is not None]
    if not days:
        return None
    first = min(days)
    return first if isinstance(first, dt.date) else dt.date.fromisoformat(str(first))
