"""The topic's and the broker's history as charts (krm/charts.py draws them), from the history tables'
rows as krm/timeline.py reads them. Pure."""

from __future__ import annotations

import datetime as dt
from typing import Any, Sequence

from krm.charts import BLUE, GREEN, GREY, LINE_COLOURS, ORANGE, SKY, VERMILLION, series_chart

TOP_PARTITIONS = 6  # the partitions whose followers lagged most get a line each


def lag_chart(rows: Sequence[dict[str, Any]], start: dt.datetime, end: dt.datetime, by: str = "partition") -> str:
    """Per partition (`by="broker"`: per follower of one partition), the furthest follower's lag over time
    (messages, and seconds at the write rate where known), for the TOP_PARTITIONS that lagged most; ''
    when no follower lagged."""
    name = "p{}" if by == "partition" else "broker {}"
    worst: dict[int, dict[float, tuple[int, float | None]]] = {}
    for r in rows:
        t = r["observed_at"].timestamp()
        at = worst.setdefault(r[by], {})
        msgs, secs = at.get(t, (0, None))
        lag_s = r["lag_seconds"]
        at[t] = (max(msgs, r["lag_messages"] or 0),
                 secs if lag_s is None else max(secs or 0.0, float(lag_s)))
    peak = {p: max(m for m, _ in points.values()) for p, points in worst.items()}
    top = sorted((p for p in peak if peak[p] > 0), key=lambda p: (-peak[p], p))[:TOP_PARTITIONS]
    if not top:
        return ""
    rest = len([p for p in peak if peak[p] > 0]) - len(top)
    msgs_lines: list[tuple[str, str, list[tuple[float, float]]]] = []
    secs_lines: list[tuple[str, str, list[tuple[float, float]]]] = []
    for n, p in enumerate(top):
        points = sorted(worst[p].items())
        colour = LINE_COLOURS[n % len(LINE_COLOURS)]
        msgs_lines.append((name.format(p), colour, [(t, float(m)) for t, (m, _) in points]))
        in_seconds = [(t, s) for t, (_, s) in points if s is not None]
        if in_seconds:
            secs_lines.append((name.format(p), colour, in_seconds))
    more = f" (and {rest} {by}(s) that lagged less)" if rest > 0 else ""
    what = "furthest follower behind" if by == "partition" else "each follower behind its leader"
    panels = [(f"{what}, messages{more}", msgs_lines)]
    if secs_lines:
        panels.append(("the same in seconds at the partition's write rate", secs_lines))
    return series_chart(panels, start, end, title="replication lag per partition")


def broker_chart(rows: Sequence[dict[str, Any]], start: dt.datetime, end: dt.datetime) -> str:
    """A broker's leaders, preferred leaderships, replicas, and the partitions where its replica is out of
    sync or offline waiting for it, from its broker_state samples; a stretch it was not registered is a
    band. '' without a sample."""
    if not rows:
        return ""
    pts = [(r["observed_at"].timestamp(), r) for r in rows]

    def line(label: str, colour: str, key: str) -> tuple[str, str, list[tuple[float, float]]]:
        return label, colour, [(t, float(r[key])) for t, r in pts]

    bands = []
    down_since = None
    for t, r in pts:
        if not r["registered"] and down_since is None:
            down_since = t
        if r["registered"] and down_since is not None:
            bands.append((down_since, t, VERMILLION, "not registered"))
            down_since = None
    if down_since is not None:
        bands.append((down_since, end.timestamp(), VERMILLION, "not registered"))
    panels = [("leadership", [line("leaders", BLUE, "leaders"), line("preferred leader of", GREY, "preferred")]),
              ("replicas", [line("replicas", GREEN, "replicas")]),
              ("trouble", [line("out of sync", ORANGE, "out_of_sync"),
                           line("offline, needing it back", VERMILLION, "offline_needing")])]
    return series_chart(panels, start, end, bands=bands, title="broker load over time")


def plan_bars(before: dict[int, tuple[int, int]], after: dict[int, tuple[int, int]]
              ) -> list[tuple[str, list[tuple[str, str, float]]]]:
    """`krm plan rebalance`'s per-broker (replicas, preferred leaderships) now and after, as bar groups."""
    return [(f"broker {b}", [("replicas now", ORANGE, before.get(b, (0, 0))[0]),
                             ("replicas after", SKY, after.get(b, (0, 0))[0]),
                             ("preferred now", BLUE, before.get(b, (0, 0))[1]),
                             ("preferred after", GREEN, after.get(b, (0, 0))[1])])
            for b in sorted(set(before) | set(after))]
