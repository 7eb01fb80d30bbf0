"""A partition's recent history as inline SVG: server-rendered, no script, no asset from anywhere.

Three panels over one time axis, from the partition_state rows (written on each change and at each
keyframe, so every line is a step line: a value holds until the next row): the in-sync replicas against
the replication factor, the leader (-1: none), and the high watermark with the leader's log end offset.
Each incident of the partition is a band across the panels, in its severity's colour with its type and
cause written on it. The palette is Okabe and Ito's, safe for the colour-blind, and every colour also has
a text label, so the picture reads in a dark room and in grey.
"""

from __future__ import annotations

import datetime as dt
from html import escape
from typing import Any, Callable, Sequence

# Okabe-Ito: blue, vermillion, orange, sky blue, bluish green, grey
BLUE, VERMILLION, ORANGE, SKY, GREEN, GREY = "#0072B2", "#D55E00", "#E69F00", "#56B4E9", "#009E73", "#666666"
SEVERITY_COLOUR = {"critical": VERMILLION, "warning": ORANGE, "info": SKY}

LEFT, RIGHT, PANEL_H, GAP, AXIS_H = 70, 12, 70, 22, 26


def _ts(value: Any) -> float:
    return value.timestamp() if isinstance(value, dt.datetime) else float(value) / 1000


def _steps(points: Sequence[tuple[float, float]], end: float, x: Callable[[float], float],
           y: Callable[[float], float]) -> str:
    """An SVG path holding each value until the next point, the last one until `end`."""
    if not points:
        return ""
    out = []
    for n, (t, v) in enumerate(points):
        nxt = points[n + 1][0] if n + 1 < len(points) else end
        out.append(f"{'M' if n == 0 else 'L'}{x(t):.1f},{y(v):.1f} L{x(nxt):.1f},{y(v):.1f}")
    return " ".join(out)


def partition_chart(states: Sequence[dict[str, Any]], incidents: Sequence[Any], start: dt.datetime,
                    end: dt.datetime, width: int = 900, min_isr: int | None = None) -> str:
    """The partition between `start` and `end`; '' without a row to draw. `states` oldest first (the first
    may be older than `start`: the state the window opens with); `incidents` this partition's; `min_isr` the
    effective min ISR, drawn as a line where known."""
    if not states:
        return ""
    t0, t1 = start.timestamp(), max(end.timestamp(), start.timestamp() + 1)
    plot_w = width - LEFT - RIGHT
    height = 3 * PANEL_H + 2 * GAP + AXIS_H + 18

    def x(t: float) -> float:
        return LEFT + (min(max(t, t0), t1) - t0) / (t1 - t0) * plot_w

    def panel(n: int) -> tuple[float, float]:  # (top, bottom) of panel n
        top = 18 + n * (PANEL_H + GAP)
        return top, top + PANEL_H

    def scale(n: int, lo: float, hi: float) -> Callable[[float], float]:
        top, bottom = panel(n)
        span = max(hi - lo, 1e-9)
        return lambda v: bottom - 4 - (v - lo) / span * (PANEL_H - 8)

    parts = [f'<svg width="{width}" height="{height}" viewBox="0 0 {width} {height}" xmlns="http://www.w3.org/2000/svg" '
             f'role="img" font-family="sans-serif"><title>partition history</title>']
    for n in range(3):  # panel frames
        top, bottom = panel(n)
        parts.append(f'<rect x="{LEFT}" y="{top}" width="{plot_w}" height="{PANEL_H}" fill="none" stroke="#bbb"/>')
    shown = 0
    for i in sorted(incidents, key=lambda i: i.opened_at_ms):  # bands first, lines over them
        a, b = _ts(i.opened_at_ms), _ts(i.resolved_at_ms) if i.resolved_at_ms is not None else t1
        if b < t0 or a > t1:
            continue
        shown += 1
        colour = SEVERITY_COLOUR.get(i.severity, GREY)
        top, bottom = panel(0)[0], panel(2)[1]
        label = escape(f"{i.severity}: {i.type}" + (f" ({i.cause})" if i.cause else ""))
        parts.append(f'<rect x="{x(a):.1f}" y="{top}" width="{max(x(b) - x(a), 2):.1f}" height="{bottom - top}" '
                     f'fill="{colour}" fill-opacity="0.18" stroke="{colour}" stroke-opacity="0.6">'
                     f'<title>{label}</title></rect>')
        row = top + 11 + 11 * ((shown - 1) % 3)  # overlapping bands: their labels on different lines
        end_anchor = x(a) > LEFT + 0.6 * plot_w  # a band near the right edge: its label ends at the edge
        parts.append(f'<text x="{LEFT + plot_w - 3 if end_anchor else x(a) + 3:.1f}" y="{row}" font-size="10" '
                     f'text-anchor="{"end" if end_anchor else "start"}" font-weight="bold" fill="{colour}" '
                     f'stroke="#fff" stroke-width="3" paint-order="stroke">'
                     f'{label}</text>')

    rows = [(_ts(r["observed_at"]), r) for r in states]
    # 1: in-sync replicas against the replication factor
    rf_max = max([len(r["replicas"] or ()) for _, r in rows] + [1])
    y0 = scale(0, 0, rf_max)
    parts.append(f'<path d="{_steps([(t, len(r["replicas"] or ())) for t, r in rows], t1, x, y0)}" fill="none" '
                 f'stroke="{GREY}" stroke-width="1.5" stroke-dasharray="5 3"/>')
    parts.append(f'<path d="{_steps([(t, len(r["isr"] or ())) for t, r in rows], t1, x, y0)}" fill="none" '
                 f'stroke="{BLUE}" stroke-width="2"/>')
    if min_isr is not None:
        parts.append(f'<line x1="{LEFT}" x2="{LEFT + plot_w}" y1="{y0(min_isr):.1f}" y2="{y0(min_isr):.1f}" '
                     f'stroke="{VERMILLION}" stroke-width="1" stroke-dasharray="2 3"><title>effective min ISR</title></line>')
    parts.append(_label(0, "in-sync", f"ISR (blue) of RF {rf_max} (grey)" + (
        f", effective min ISR {min_isr} (dotted vermillion)" if min_isr is not None else ""), panel))
    # 2: the leader
    ids = sorted({r["leader"] for _, r in rows} | {-1})
    y1 = scale(1, -1, max(ids + [0]))
    parts.append(f'<path d="{_steps([(t, r["leader"]) for t, r in rows], t1, x, y1)}" fill="none" '
                 f'stroke="{GREEN}" stroke-width="2"/>')
    for leader in ids:
        parts.append(f'<text x="{LEFT - 4}" y="{y1(leader) + 3:.1f}" font-size="9" text-anchor="end" fill="{GREY}">'
                     f'{"none" if leader < 0 else leader}</text>')
    for (a, r), nxt in zip(rows, [t for t, _ in rows[1:]] + [t1]):  # no leader: a red stretch, labelled
        if r["leader"] < 0:
            parts.append(f'<rect x="{x(a):.1f}" y="{y1(-1) - 3:.1f}" width="{max(x(nxt) - x(a), 2):.1f}" height="6" '
                         f'fill="{VERMILLION}"><title>no leader</title></rect>')
    parts.append(_label(1, "leader", "broker leading (none: offline)", panel))
    # 3: high watermark and the leader's log end offset
    offsets = [(t, r.get("high_watermark"), r.get("leader_leo")) for t, r in rows]
    known = [v for _, hw, leo in offsets for v in (hw, leo) if v is not None]
    if known:
        y2 = scale(2, min(known), max(known))
        hw_pts = [(t, float(hw)) for t, hw, _ in offsets if hw is not None]
        leo_pts = [(t, float(leo)) for t, _, leo in offsets if leo is not None]
        parts.append(f'<path d="{_steps(leo_pts, t1, x, y2)}" fill="none" stroke="{ORANGE}" stroke-width="1.5" '
                     f'stroke-dasharray="4 2"/>')
        parts.append(f'<path d="{_steps(hw_pts, t1, x, y2)}" fill="none" stroke="{BLUE}" stroke-width="2"/>')
        parts.append(f'<text x="{LEFT - 4}" y="{panel(2)[0] + 10}" font-size="9" text-anchor="end" fill="{GREY}">'
                     f'{max(known)}</text><text x="{LEFT - 4}" y="{panel(2)[1] - 2}" font-size="9" text-anchor="end" '
                     f'fill="{GREY}">{min(known)}</text>')
    parts.append(_label(2, "offsets", "high watermark (blue), leader's log end (orange)", panel))
    parts.append(_time_axis(t0, t1, plot_w, panel(2)[1] + 14))
    parts.append("</svg>")
    return "".join(parts)


def _time_axis(t0: float, t1: float, plot_w: float, base: float) -> str:
    """The window's start, middle and end, in UTC, under the panels."""
    out = []
    for frac in (0.0, 0.5, 1.0):
        stamp = dt.datetime.fromtimestamp(t0 + frac * (t1 - t0), dt.timezone.utc).strftime("%m-%d %H:%M:%S")
        anchor = {0.0: "start", 0.5: "middle", 1.0: "end"}[frac]
        out.append(f'<text x="{LEFT + frac * plot_w:.1f}" y="{base}" font-size="10" text-anchor="{anchor}" '
                   f'fill="{GREY}">{stamp} UTC</text>')
    return "".join(out)


def _label(n: int, name: str, legend: str, panel: Callable[[int], tuple[float, float]]) -> str:
    top, _ = panel(n)
    return (f'<text x="{LEFT}" y="{top - 5}" font-size="11"><tspan font-weight="bold">{name}</tspan>'
            f'<tspan fill="{GREY}"> · {escape(legend)}</tspan></text>')


# the colours of several lines in one panel, each also named in the panel's legend
LINE_COLOURS = (BLUE, ORANGE, GREEN, VERMILLION, SKY, "#CC79A7", "#000000", GREY)


def series_chart(panels: Sequence[tuple[str, Sequence[tuple[str, str, Sequence[tuple[float, float]]]]]],
                 start: dt.datetime, end: dt.datetime, bands: Sequence[tuple[float, float, str, str]] = (),
                 width: int = 900, title: str = "history") -> str:
    """Panels of step lines over one time axis: `panels` [(name, [(label, colour, [(t, value), ...]), ...])],
    t in epoch seconds, oldest first (a line holds its value until its next point, the last one until `end`);
    `bands` [(from_s, to_s, colour, label)] drawn across every panel. Each line's label is written in its
    colour in the panel's legend, with its newest value; '' when no panel has a point."""
    if not any(points for _, lines in panels for _, _, points in lines):
        return ""
    t0, t1 = start.timestamp(), max(end.timestamp(), start.timestamp() + 1)
    plot_w = width - LEFT - RIGHT
    n_panels = len(panels)
    height = n_panels * PANEL_H + (n_panels - 1) * GAP + AXIS_H + 18

    def x(t: float) -> float:
        return LEFT + (min(max(t, t0), t1) - t0) / (t1 - t0) * plot_w

    def panel(n: int) -> tuple[float, float]:
        top = 18 + n * (PANEL_H + GAP)
        return top, top + PANEL_H

    def near_end(a: float) -> bool:  # a band starting near the right edge: its label ends at the edge instead
        return x(a) > LEFT + 0.6 * plot_w

    def label_x(a: float, b: float) -> float:
        return LEFT + plot_w - 3 if near_end(a) else x(a) + 3

    parts = [f'<svg width="{width}" height="{height}" viewBox="0 0 {width} {height}" xmlns="http://www.w3.org/2000/svg" '
             f'role="img" font-family="sans-serif"><title>{escape(title)}</title>']
    top_all, bottom_all = panel(0)[0], panel(n_panels - 1)[1]
    for n, (a, b, colour, label) in enumerate(sorted(bands)):
        if b < t0 or a > t1:
            continue
        parts.append(f'<rect x="{x(a):.1f}" y="{top_all}" width="{max(x(b) - x(a), 2):.1f}" height="{bottom_all - top_all}" '
                     f'fill="{colour}" fill-opacity="0.15" stroke="{colour}" stroke-opacity="0.5"><title>{escape(label)}'
                     f'</title></rect><text x="{label_x(a, b):.1f}" y="{top_all + 11 + 11 * (n % 3)}" font-size="10" '
                     f'text-anchor="{"end" if near_end(a) else "start"}" '
                     f'font-weight="bold" fill="{colour}" stroke="#fff" stroke-width="3" paint-order="stroke">'
                     f'{escape(label)}</text>')
    for n, (name, lines) in enumerate(panels):
        top, bottom = panel(n)
        parts.append(f'<rect x="{LEFT}" y="{top}" width="{plot_w}" height="{PANEL_H}" fill="none" stroke="#bbb"/>')
        values = [v for _, _, points in lines for _, v in points]
        lo, hi = (min(values + [0.0]), max(values + [1.0])) if values else (0.0, 1.0)
        span = max(hi - lo, 1e-9)

        def y(v: float, bottom: float = bottom, lo: float = lo, span: float = span) -> float:
            return bottom - 4 - (v - lo) / span * (PANEL_H - 8)

        legend = [f'<tspan font-weight="bold">{escape(name)}</tspan>']
        for label, colour, points in lines:
            if points:
                parts.append(f'<path d="{_steps(points, t1, x, y)}" fill="none" stroke="{colour}" stroke-width="2">'
                             f'<title>{escape(label)}</title></path>')
                legend.append(f'<tspan fill="{colour}" font-weight="bold"> ■ {escape(label)} {_num(points[-1][1])}</tspan>')
        parts.append(f'<text x="{LEFT}" y="{top - 5}" font-size="11">{"".join(legend)}</text>')
        parts.append(f'<text x="{LEFT - 4}" y="{top + 10}" font-size="9" text-anchor="end" fill="{GREY}">{_num(hi)}</text>'
                     f'<text x="{LEFT - 4}" y="{bottom - 2}" font-size="9" text-anchor="end" fill="{GREY}">{_num(lo)}</text>')
    parts.append(_time_axis(t0, t1, plot_w, bottom_all + 14))
    parts.append("</svg>")
    return "".join(parts)


def _num(v: float) -> str:
    return f"{v:.0f}" if abs(v) >= 100 or float(v).is_integer() else f"{v:.1f}"


def bar_chart(groups: Sequence[tuple[str, Sequence[tuple[str, str, float]]]], width: int = 900,
              title: str = "per broker", highlight: str | None = None) -> str:
    """Grouped horizontal bars: `groups` [(group label, [(bar label, colour, value), ...])], one row per
    bar, its value written at its end; the `highlight` group's label in bold. '' without a group."""
    if not groups:
        return ""
    bar_h, label_w = 12, 150
    rows = sum(len(bars) for _, bars in groups) + len(groups)
    height = rows * (bar_h + 3) + 10
    most = max((v for _, bars in groups for _, _, v in bars), default=1.0) or 1.0
    plot_w = width - label_w - 60
    parts = [f'<svg width="{width}" height="{height}" viewBox="0 0 {width} {height}" xmlns="http://www.w3.org/2000/svg" '
             f'role="img" font-family="sans-serif"><title>{escape(title)}</title>']
    yy = 5.0
    for group, bars in groups:
        weight = "bold" if group == highlight else "normal"
        parts.append(f'<text x="0" y="{yy + bar_h - 2:.0f}" font-size="11" font-weight="{weight}">{escape(group)}</text>')
        yy += bar_h + 3
        for label, colour, value in bars:
            w = value / most * plot_w
            parts.append(f'<text x="{label_w - 4}" y="{yy + bar_h - 2:.0f}" font-size="10" text-anchor="end" '
                         f'fill="{GREY}">{escape(label)}</text><rect x="{label_w}" y="{yy:.0f}" width="{max(w, 1):.1f}" '
                         f'height="{bar_h}" fill="{colour}"><title>{escape(group)} {escape(label)}: {_num(value)}</title>'
                         f'</rect><text x="{label_w + w + 4:.1f}" y="{yy + bar_h - 2:.0f}" font-size="10">{_num(value)}</text>')
            yy += bar_h + 3
    parts.append("</svg>")
    return "".join(parts)
