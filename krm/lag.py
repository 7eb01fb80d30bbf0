"""`krm lag`: replication-lag history of one topic from the `replica_lag` Delta table.

Reads through delta-rs and a pyarrow dataset scan filtered on the `date` partition column first,
so a `--since 1h` query opens today's (and at most yesterday's) files only. No Spark, no JVM.
Summaries and downsampling are Arrow compute, so a week of a topic answers interactively.
"""

from __future__ import annotations

import datetime as dt
import re
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from foundation.errors import KrmError
from foundation.storage import Location, as_location
from pipelines.detectors import hw_stall, isr, lag, offline

if TYPE_CHECKING:
    import pyarrow as pa

    from pipelines.incidents import Incident

_UNITS = {"s": 1, "m": 60, "h": 3600, "d": 86400}


def parse_since(text: str) -> dt.timedelta:
    m = re.fullmatch(r"\s*(\d+(?:\.\d+)?)\s*([smhd])\s*", text)
    if not m:
        raise KrmError(f"--since {text!r}: expected a number and a unit s, m, h or d, e.g. 90s, 15m, 1h, 2d")
    return dt.timedelta(seconds=float(m.group(1)) * _UNITS[m.group(2)])


@dataclass(frozen=True)
class LagRow:
    observed_at: dt.datetime
    cluster: str
    partition: int
    broker: int
    leader: int
    in_isr: bool
    lag_messages: int
    lag_seconds: float | None
    log_end_offset: int
    leader_leo: int | None


@dataclass(frozen=True)
class LagHistory:
    summary: list[dict[str, Any]]  # per (cluster, partition, follower), over every sample
    samples: list[LagRow]  # oldest first; at most max_points per follower (max lag per time bucket)
    resolution_s: int | None  # bucket width when downsampled, None when raw


KEYS = ["cluster", "partition", "broker"]


def read_history(table: Location | Path | str, topic: str, partition: int | None, since: dt.timedelta,
                 now: dt.datetime | None = None, cluster: str | None = None,
                 max_points: int | None = 2000) -> LagHistory:
    """Follower rows (the leader's own row is not lag) of `topic` observed within `since`. The scan,
    the summary and the downsampling stay in Arrow: a week of one topic is ~10^6 rows, too many to
    turn into Python objects within an interactive wait."""
    import pyarrow.compute as pc
    import pyarrow.dataset as ds

    where = as_location(table)
    if not where.is_table():
        raise KrmError(f"no replica_lag table at {where}: has the pipeline (`krm run`) written history yet?")
    now = now or dt.datetime.now(dt.timezone.utc)
    start = now - since
    data = where.table().to_pyarrow_dataset()
    # is_leader is filtered after the scan: a boolean predicate pushed into delta-rs' dataset pruned
    # whole files that held both values (seen with deltalake 1.6.6)
    cond = (ds.field("date") >= start.date()) & (ds.field("topic") == topic) & (ds.field("observed_at") >= start)
    if partition is not None:
        cond = cond & (ds.field("partition") == partition)
    if cluster is not None:
        cond = cond & (ds.field("cluster") == cluster)
    cols = ["observed_at", "cluster", "partition", "broker", "leader", "in_isr", "lag_messages", "lag_seconds",
            "log_end_offset", "leader_leo", "is_leader"]
    t = data.to_table(columns=cols, filter=cond, use_threads=True)
    t = t.filter(pc.invert(t["is_leader"])).drop_columns(["is_leader"]).sort_by("observed_at")
    return LagHistory(summarize(t), *downsample(t, max_points))


def summarize(t: pa.Table) -> list[dict[str, Any]]:
    """Per (cluster, partition, follower): samples, latest and max lag, samples out of the ISR.
    `t`: the follower rows as an Arrow table sorted by observed_at."""
    import pyarrow.compute as pc

    if t.num_rows == 0:
        return []
    t = t.append_column("out", pc.cast(pc.invert(t["in_isr"]), "int64"))
    agg = t.group_by(KEYS, use_threads=False).aggregate([
        ("lag_messages", "count"), ("lag_messages", "max"), ("lag_seconds", "max"), ("lag_messages", "last"),
        ("observed_at", "last"), ("out", "sum")]).to_pylist()
    worst = t.sort_by([("lag_messages", "descending"), ("observed_at", "ascending")]).group_by(
        KEYS, use_threads=False).aggregate([("observed_at", "first")]).to_pylist()
    worst_at = {(w["cluster"], w["partition"], w["broker"]): w["observed_at_first"] for w in worst}
    out = []
    for a in sorted(agg, key=lambda a: (a["cluster"], a["partition"], a["broker"])):
        key = (a["cluster"], a["partition"], a["broker"])
        out.append({
            "cluster": a["cluster"], "partition": a["partition"], "broker": a["broker"],
            "samples": a["lag_messages_count"], "latest_lag_messages": a["lag_messages_last"],
            "max_lag_messages": a["lag_messages_max"], "max_lag_at": iso(worst_at[key]),
            "max_lag_seconds": None if a["lag_seconds_max"] is None else round(a["lag_seconds_max"], 3),
            "samples_out_of_isr": a["out_sum"], "last_seen": iso(a["observed_at_last"]),
        })
    return out


def downsample(t: pa.Table, max_points: int | None) -> tuple[list[LagRow], int | None]:
    """At most `max_points` per follower: the worst sample of each time bucket (max lag, ISR
    membership lost if lost at any moment of it). Raw when the range is short enough."""
    import math

    import pyarrow.compute as pc

    if t.num_rows == 0:
        return [], None
    per_series = max(t.group_by(KEYS).aggregate([("lag_messages", "count")])["lag_messages_count"].to_pylist())
    if max_points is None or per_series <= max_points:
        rows = [LagRow(**r) for r in t.to_pylist()]
        return sorted(rows, key=lambda r: (r.observed_at, r.partition, r.broker)), None
    import pyarrow as pa

    epoch_us = pc.cast(pc.cast(t["observed_at"], pa.timestamp("us", tz="UTC")), pa.int64())
    span_s = (pc.max(epoch_us).as_py() - pc.min(epoch_us).as_py()) / 1e6
    step = max(1, math.ceil(span_s / max_points))
    t = t.append_column("bucket", pc.divide(epoch_us, step * 1_000_000))
    agg = t.group_by([*KEYS, "bucket"], use_threads=False).aggregate([
        ("observed_at", "min"), ("leader", "last"), ("in_isr", "all"), ("lag_messages", "max"),
        ("lag_seconds", "max"), ("log_end_offset", "min"), ("leader_leo", "max")]).to_pylist()
    rows = [LagRow(a["observed_at_min"], a["cluster"], a["partition"], a["broker"], a["leader_last"],
                   a["in_isr_all"], a["lag_messages_max"], a["lag_seconds_max"], a["log_end_offset_min"],
                   a["leader_leo_max"]) for a in agg]
    return sorted(rows, key=lambda r: (r.observed_at, r.partition, r.broker)), step


def read_lag(table: Path, topic: str, partition: int | None, since: dt.timedelta,
             now: dt.datetime | None = None, cluster: str | None = None) -> list[LagRow]:
    """Every follower sample, raw (tests and small ranges)."""
    return read_history(table, topic, partition, since, now, cluster, max_points=None).samples


def to_json_obj(r: LagRow) -> dict[str, Any]:
    return {"observed_at": iso(r.observed_at), "cluster": r.cluster, "partition": r.partition, "broker": r.broker,
            "leader": r.leader, "in_isr": r.in_isr, "lag_messages": r.lag_messages,
            "lag_seconds": None if r.lag_seconds is None else round(r.lag_seconds, 3),
            "log_end_offset": r.log_end_offset, "leader_leo": r.leader_leo}


def iso(t: dt.datetime) -> str:
    if t.tzinfo is None:
        t = t.replace(tzinfo=dt.timezone.utc)
    return t.astimezone(dt.timezone.utc).isoformat(timespec="milliseconds").replace("+00:00", "Z")


@dataclass(frozen=True)
class Window:
    """An incident's span on the plot."""

    start: dt.datetime
    end: dt.datetime
    label: str


def incident_windows(incidents: list[Incident], topic: str, partition: int | None, start: dt.datetime,
                     now: dt.datetime) -> list[Window]:
    """Replication incidents of `topic` (pipelines.incidents.Incident) overlapping [start, now]."""
    kinds = {lag.TYPE, isr.UNDER_REPLICATED, isr.UNDER_MIN_ISR, hw_stall.TYPE, offline.TYPE}
    out = []
    for i in incidents:
        if i.topic != topic or i.type not in kinds or (partition is not None and i.partition != partition):
            continue
        opened = dt.datetime.fromtimestamp(i.opened_at_ms / 1000, tz=dt.timezone.utc)
        closed = (dt.datetime.fromtimestamp(i.resolved_at_ms / 1000, tz=dt.timezone.utc)
                  if i.resolved_at_ms is not None else now)
        if closed >= start:
            who = f" broker {i.broker}" if i.broker is not None else ""
            out.append(Window(max(opened, start), closed, f"{i.type} p{i.partition}{who}"))
    return out


def plot(rows: list[LagRow], topic: str, path: Path, windows: list[Window] | None = None) -> None:
    """One line per (partition, follower): lag in messages over time; out-of-ISR samples marked,
    incident windows shaded.

    Drawn once, on a bare Figure (no pyplot, no tight_layout, legend beside the axes): each of
    those costs a full extra draw or a search over every point, a third of `krm lag --plot`'s wall."""
    from matplotlib.figure import Figure

    series: dict[tuple[int, int], list[LagRow]] = {}
    for r in rows:
        series.setdefault((r.partition, r.broker), []).append(r)
    fig = Figure(figsize=(10, 4.5))
    ax = fig.add_subplot()
    fig.subplots_adjust(left=0.08, right=0.80, top=0.92, bottom=0.16)  # the legend sits right of the axes
    for (partition, broker), rs in sorted(series.items()):
        # matplotlib takes datetimes through its unit converters; its type stubs say floats
        line, = ax.plot([r.observed_at for r in rs], [r.lag_messages for r in rs],  # type: ignore[arg-type]
                        label=f"p{partition} broker {broker}")
        out = [r for r in rs if not r.in_isr]
        if out:
            ax.scatter([r.observed_at for r in out], [r.lag_messages for r in out],  # type: ignore[arg-type]
                       color=line.get_color(), marker="x")
    for n, w in enumerate(windows or []):
        ax.axvspan(w.start, w.end, color=f"C{(n % 8) + 2}", alpha=0.15, label=w.label)  # type: ignore[arg-type]
    ax.set_title(f"{topic}: follower lag (x = out of the ISR, shaded = incidents)")
    ax.set_ylabel("messages behind the leader")
    ax.grid(alpha=0.3)
    if series or windows:
        ax.legend(fontsize="small", loc="upper left", bbox_to_anchor=(1.01, 1.0), borderaxespad=0)
    for label in ax.get_xticklabels():
        label.set_rotation(30)
        label.set_horizontalalignment("right")
    fig.savefig(path, dpi=110)
