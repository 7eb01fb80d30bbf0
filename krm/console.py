"""The console: read-only HTML pages beside /metrics, on the same port, TLS and basic auth.

Live pages (the fleet, a cluster's grid, open incidents, a broker's state) read the pipeline's in-memory
snapshot, the same one /metrics serves, so they cost no table read; the fleet and the grid reload their
live part every poll (a fragment of the same route, `?fragment=1`, fetched by a few lines of inline
script). History (resolved incidents, a partition's changes, a topic's lag, a broker's load over time)
comes from the Delta tables through delta-rs (krm/timeline.py), never Spark. Server-rendered with Jinja2
(autoescaped) from krm/console_templates.py; charts are inline SVG (krm/charts.py); no asset from anywhere else.

Routes: `/` the fleet, `/clusters/<cluster>` (its brokers against its topics: krm/picture.py), `/incidents`
(filters: cluster, type, severity, topic, broker, status=open|all), `/incidents/<id>`,
`/topics/<cluster>/<topic>`, `/partitions/<cluster>/<topic>/<partition>`, `/brokers/<cluster>/<id>`
(`?since=` on the history pages: 15m to 7d). An unknown cluster, topic, partition or broker answers 404
with what exists.
"""

from __future__ import annotations

import datetime as dt
import json
import time
from collections import Counter
from typing import Any, Callable
from urllib.parse import parse_qs, quote

from foundation.cadence import STALE_MIN_S, reload_every_s
from foundation.errors import KrmError
from krm.lag import parse_since
from krm.timeline import (broker_rows, changes, latest_states, oldest_day, read_states, timeline, topic_lag_rows)
from pipelines.detectors.registry import BY_TYPE
from krm import picture
from krm.console_templates import TEMPLATES
from krm.charts import BLUE, ORANGE, bar_chart, partition_chart
from krm.history_charts import broker_chart, lag_chart, plan_bars
from pipelines import incident_groups
from pipelines.incident_store import IncidentStore
from foundation.storage import Location
from pipelines.incidents import Incident
from pipelines.state import ClusterView, PipelineState
from pipelines.tables import Tables
from pathlib import Path


NOT_FOUND_LISTED = 200  # what exists, listed at most, on a 404
HISTORY_LIMIT = 500  # resolved incidents listed at most (newest first)
SHUTDOWN_ROWS = 200  # a broker page's shutdown verdicts listed at most (worst first; `krm check shutdown` has all)

def _iso(ms: int | None) -> str:
    return "" if ms is None else dt.datetime.fromtimestamp(ms / 1000, dt.timezone.utc).isoformat(timespec="seconds")


def _where(i: Incident) -> str:
    if i.topic is not None:
        return f"{i.topic}-{i.partition}" + (f" broker {i.broker}" if i.broker is not None else "")
    return f"broker {i.broker}" if i.broker is not None else "cluster"


def _act_on(i: Incident) -> str:
    return "; ".join(f"{name} {list(brokers)}" for name, brokers in i.facts.act_on())


RANGES = ("15m", "1h", "6h", "24h", "7d")  # the history pages' windows


def _first_drawn(start: dt.datetime, rows_at: list[dt.datetime], incidents_ms: list[int]) -> dt.datetime:
    """Where a chart of a window starting at `start` begins: there, or, when the history starts inside the
    window (a cluster watched for minutes, a new partition), a little before its first row or incident, so
    the moments drawn are not squeezed against the right edge."""
    firsts = [r.astimezone(dt.timezone.utc) for r in rows_at[:1]] + [
        dt.datetime.fromtimestamp(ms / 1000, dt.timezone.utc) for ms in incidents_ms]
    if not firsts or min(firsts) <= start:
        return start
    now = dt.datetime.now(dt.timezone.utc)
    return max(start, min(firsts) - max(dt.timedelta(seconds=30), (now - min(firsts)) / 10))


def _min_isr(incidents: list[Incident]) -> int | None:
    """The effective min ISR (min(min.insync.replicas, RF), pipelines/detectors/isr.py) the newest of these
    incidents recorded; None when none did."""
    for i in sorted(incidents, key=lambda i: i.last_seen_at_ms, reverse=True):
        value = getattr(i.facts, "effective_min_isr", None)
        if isinstance(value, int):
            return value
    return None


class Console:
    """A WSGI app for the console's routes; answers None for any other path (the caller serves it)."""

    def __init__(self, state: PipelineState, tables: Tables, look: Callable[[str], Any] | None = None,
                 keyframe_s: float = 300.0) -> None:
        """`look(cluster)`: one Admin poll of a cluster (krm/snapshot.py), for the broker page's shutdown
        check; None where this process has no cluster config. `keyframe_s`: the collectors'
        `history_keyframe_s` (an unchanged partition's newest row is at most that old)."""
        from jinja2 import DictLoader, Environment, select_autoescape
        from markupsafe import Markup

        self.state = state
        self.tables = tables
        self.look = look
        self.recent = dt.timedelta(seconds=max(600.0, 2 * keyframe_s))
        self.env = Environment(loader=DictLoader(TEMPLATES), autoescape=select_autoescape(default=True))
        self.env.globals.update(iso=_iso, where=_where, act_on=_act_on)
        row = self.env.get_template("group_row.html")
        self.env.globals["group_row"] = lambda g, span: Markup(row.render(g=g, span=span))

    def handles(self, path: str) -> bool:
        return path == "/" or path == "/incidents" or path.startswith(("/incidents/", "/topics/", "/partitions/",
                                                                         "/brokers/", "/clusters/"))

    def __call__(self, environ: dict[str, Any], start_response: Callable[..., Any]) -> list[bytes]:
        path = environ.get("PATH_INFO", "/")
        q = {k: v[-1] for k, v in parse_qs(environ.get("QUERY_STRING", "")).items()}
        parts = [p for p in path.split("/") if p]
        fragment = q.get("fragment") == "1"
        try:
            if path == "/" and q.get("fragment") == "stale":  # every page's banners, live
                status, body = "200 OK", self.env.get_template("stale.html").render(stale=sorted(self.state.stale().items()))
            elif path == "/":
                status, body = "200 OK", self.fleet(fragment)
            elif parts == ["incidents"]:
                status, body = "200 OK", self.incidents(q)
            elif len(parts) == 2 and parts[0] == "incidents":
                status, body = self.incident(parts[1])
            elif len(parts) == 2 and parts[0] == "clusters":
                status, body = self.cluster(parts[1], q.get("all") == "1", fragment)
            elif len(parts) == 3 and parts[0] == "topics":
                status, body = self.topic(parts[1], parts[2], q.get("since", "1h"))
            elif len(parts) == 4 and parts[0] == "partitions" and parts[3].lstrip("-").isdigit():
                status, body = self.partition(parts[1], parts[2], int(parts[3]), q.get("since", "1h"))
            elif len(parts) == 3 and parts[0] == "brokers" and parts[2].lstrip("-").isdigit():
                status, body = self.broker(parts[1], int(parts[2]), q.get("check"), q.get("since", "6h"))
            else:
                status, body = "404 Not Found", self._page("not found", "base.html")
        except KrmError as e:  # a request krm cannot answer as asked (a range it does not read, ...)
            status, body = "400 Bad Request", self._page("bad request", "said.html", said=str(e))
        except Exception as e:  # noqa: BLE001 - a page that cannot be built says why, the server goes on
            from html import escape

            status = "500 Internal Server Error"
            body = f"<h1>krm console</h1><p>this page failed: {escape(str(e))}</p>"
        start_response(status, [("Content-Type", "text/html; charset=utf-8")])
        return [body.encode()]

    def _page(self, title: str, template: str, **values: Any) -> str:
        """Every page starts with a banner for each cluster whose view is stale (PipelineState.stale)."""
        return self.env.get_template(template).render(title=title, stale=sorted(self.state.stale().items()),
                                                      banner_every_ms=self._every_ms(), **values)

    def _open(self) -> list[Incident]:
        return list(self.state.snapshot.open_incidents)

    def _every_ms(self, cluster: str | None = None) -> int:
        """How often a live part reloads: a poll (a view is stale after three), at least a second."""
        names = [cluster] if cluster else list(self.state.snapshot.clusters)
        stale_after = min((self.state.stale_after_s.get(n, STALE_MIN_S) for n in names), default=STALE_MIN_S)
        return int(reload_every_s(stale_after) * 1000)

    def _age(self, view: ClusterView) -> str:
        return f"{max(0.0, time.time() - view.fresh_ms / 1000):.0f}s"

    def fleet(self, fragment: bool = False) -> str:
        """Every cluster in one screen: its brokers as cells in their state (krm/picture.py)."""
        snap = self.state.snapshot
        stale = self.state.stale()
        rows = []
        for name, view in sorted(snap.clusters.items()):
            mine = [i for i in snap.open_incidents if i.cluster == name]
            sev = Counter(i.severity for i in mine)
            heads = picture.broker_heads(name, view, snap.broker_load.get(name, {}), mine)
            rows.append({"name": name, "reachable": view.unreachable_reason is None, "reason": view.unreachable_reason,
                         "heads": heads, "up": sum(1 for h in heads if h.state == "up"),
                         "controller": view.controller_id, "age": self._age(view), "stale": name in stale,
                         "open": [(s, sev[s]) for s in ("critical", "warning", "info") if sev[s]]})
        if fragment:
            return self.env.get_template("fleet_live.html").render(clusters=rows)
        return self._page("fleet", "fleet.html", clusters=rows, every_ms=self._every_ms())

    def cluster(self, name: str, everything: bool, fragment: bool = False) -> tuple[str, str]:
        """One cluster's brokers against its topics, live (krm/picture.py)."""
        snap = self.state.snapshot
        view = snap.clusters.get(name)
        if view is None:
            return self._not_found(f"no cluster {name}", "clusters", sorted(snap.clusters), "/clusters/{}")
        grid = picture.cluster_grid(name, view, snap.topic_load.get(name, {}), snap.broker_load.get(name, {}),
                                    snap.open_incidents, None if everything else picture.MAX_TOPICS)
        values = {"cluster": name, "g": grid, "age": self._age(view), "is_stale": name in self.state.stale(),
                  "reason": view.unreachable_reason, "all": everything, "max_topics": picture.MAX_TOPICS}
        if fragment:
            return "200 OK", self.env.get_template("grid_live.html").render(**values)
        return "200 OK", self._page(f"cluster {name}", "cluster.html", every_ms=self._every_ms(name), **values)

    def _not_found(self, title: str, kind: str, known: list[Any], href: str) -> tuple[str, str]:
        """404, naming what exists instead (at most NOT_FOUND_LISTED of them)."""
        return "404 Not Found", self._page(title, "missing.html", kind=kind, known=known[:NOT_FOUND_LISTED],
                                           more=max(0, len(known) - NOT_FOUND_LISTED), href=href)

    def incidents(self, q: dict[str, str]) -> str:
        """Filters: cluster, type, severity, topic, broker (the incidents that name it: picture.names),
        status=open|all."""
        status = q.get("status", "open")
        note = ""
        if status == "all":
            found = IncidentStore(self.tables.incidents).read()
            found.sort(key=lambda i: i.opened_at_ms, reverse=True)
        else:
            found = sorted(self._open(), key=lambda i: ({"critical": 0, "warning": 1}.get(i.severity, 2), i.opened_at_ms))
        for key in ("cluster", "type", "severity", "topic"):
            if q.get(key):
                found = [i for i in found if getattr(i, key) == q[key]]
        if q.get("broker", "").lstrip("-").isdigit():
            found = [i for i in found if int(q["broker"]) in picture.names(i)]
        if len(found) > HISTORY_LIMIT:
            note = f" (the newest {HISTORY_LIMIT} of {len(found)}; `krm sql` for the rest)"
            found = found[:HISTORY_LIMIT]
        qv = {key: q.get(key, "") for key in ("cluster", "type", "severity", "topic", "broker")} | {"status": status}
        return self._page("open incidents" if status == "open" else "all incidents", "incidents.html",
                          incidents=found, groups=incident_groups.group(found), q=qv, note=note)

    def _find(self, incident_id: str) -> Incident | None:
        for i in self._open():
            if i.incident_id == incident_id:
                return i

        for i in IncidentStore(self.tables.incidents).read():
            if i.incident_id == incident_id:
                return i
        return None

    def incident(self, incident_id: str) -> tuple[str, str]:
        i = self._find(incident_id)
        if i is None:
            return "404 Not Found", self._page(f"no incident {incident_id}", "base.html")
        states: list[dict[str, Any]] = []
        svg = ""
        if i.topic is not None and i.partition is not None and self.tables.partition_state.is_table():
            now = dt.datetime.now(dt.timezone.utc)
            opened = dt.datetime.fromtimestamp(i.opened_at_ms / 1000, dt.timezone.utc)
            start = opened - dt.timedelta(minutes=15)
            end = (min(now, dt.datetime.fromtimestamp(i.resolved_at_ms / 1000, dt.timezone.utc) + dt.timedelta(minutes=5))
                   if i.resolved_at_ms is not None else now)
            states = read_states(self.tables.partition_state, i.topic, i.partition, now - start, now=now,
                                 cluster=i.cluster, until=end)
            svg = partition_chart(states, [i], start, end, min_isr=_min_isr([i]))
        return "200 OK", self._page(f"{i.type} on {i.cluster} {_where(i)}", "incident.html", i=i,
                                    rule=BY_TYPE.get(i.type), details=json.dumps(i.facts.raw(), indent=2, default=str),
                                    changes=changes(states)[-30:], svg=svg, headline=i.facts.headline(),
                                    unreadable=i.facts.unreadable)

    def _unknown(self, cluster: str, topic: str | None = None, partition: int | None = None,
                 broker: int | None = None) -> tuple[str, str] | None:
        """A 404 naming what exists, when the live view knows the cluster's brokers and topics and the
        asked one is not among them; None when the page may be drawn (a topic deleted since, or one the
        pipeline has not seen yet, still has its history)."""
        snap = self.state.snapshot
        if not snap.clusters:
            return None  # nothing processed yet: the history may still answer
        if cluster not in snap.clusters:
            return self._not_found(f"no cluster {cluster}", "clusters", sorted(snap.clusters), "/clusters/{}")
        loads = snap.topic_load.get(cluster, {})
        if topic is not None and loads and topic not in loads and not self._in_history(cluster, topic):
            return self._not_found(f"no topic {topic} on {cluster}", "topics", sorted(loads),
                                   f"/topics/{quote(cluster, safe='')}/{{}}")
        if topic is not None and partition is not None and topic in loads and loads[topic].partitions \
                and not 0 <= partition < loads[topic].partitions:
            return self._not_found(f"no partition {partition} of {topic} on {cluster}", "partitions",
                                   list(range(loads[topic].partitions)),
                                   f"/partitions/{quote(cluster, safe='')}/{quote(topic, safe='')}/{{}}")
        if broker is not None:
            known = set(dict(snap.clusters[cluster].brokers)) | set(snap.broker_load.get(cluster, {}))
            if broker not in known:
                return self._not_found(f"no broker {broker} in {cluster}", "brokers", sorted(known),
                                       f"/brokers/{quote(cluster, safe='')}/{{}}")
        return None

    def _in_history(self, cluster: str, topic: str) -> bool:
        """The topic has a row in the last `recent` of partition_state (a topic deleted since)."""
        if not self.tables.partition_state.is_table():
            return False
        return bool(latest_states(self.tables.partition_state, topic, cluster, within=self.recent))

    def _reach(self, table: Location | Path | str, window: dt.timedelta, now: dt.datetime) -> str:
        """'' or what to say when the window starts before the table's first day."""
        first = oldest_day(table)
        if first is not None and (now - window).date() < first:
            return f"the history goes back to {first.isoformat()} (older days were dropped, or never written)"
        return ""

    def partition(self, cluster: str, topic: str, partition: int, since: str) -> tuple[str, str]:
        missing = self._unknown(cluster, topic, partition)
        if missing:
            return missing
        window = parse_since(since)
        now = dt.datetime.now(dt.timezone.utc)
        states: list[dict[str, Any]] = []
        reach = ""
        if self.tables.partition_state.is_table():
            states = read_states(self.tables.partition_state, topic, partition, window, now=now, cluster=cluster)
            empty = f"no row of {topic}-{partition} in the last {since} (nor a day before): nothing to draw"
            reach = self._reach(self.tables.partition_state, window, now)
        else:
            empty = "the partition_state table is not written yet (the history path writes it every history_trigger_s)"
        incidents = [i for i in IncidentStore(self.tables.incidents).read() if i.cluster == cluster]
        events = timeline(states, incidents, topic, partition, now - window)
        mine = [i for i in incidents if i.topic == topic and i.partition == partition]
        shown = _first_drawn(now - window, [r["observed_at"] for r in states],
                             [i.opened_at_ms for i in mine if i.resolved_at_ms is None or i.resolved_at_ms >= (now - window
                                                                                                          ).timestamp() * 1000])
        drawn = (f"its history starts inside the window: drawn from {shown.isoformat(timespec='seconds')}"
                 if shown > now - window else "")
        lag_svg = ""
        if self.tables.replica_lag.is_table():
            lag_svg = lag_chart(topic_lag_rows(self.tables.replica_lag, cluster, topic, window, now, partition=partition),
                                now - window, now, by="broker")
        return "200 OK", self._page(f"{cluster} {topic}-{partition}", "partition.html", events=events, since=since,
                                    svg=partition_chart(states, mine, shown, now, min_isr=_min_isr(mine)),
                                    lag_svg=lag_svg, empty=empty, cluster=cluster, topic=topic, ranges=RANGES, reach=reach,
                                    drawn=drawn)

    def topic(self, cluster: str, topic: str, since: str = "1h") -> tuple[str, str]:
        """Its partitions as the newest poll recorded them (the history table: the pipeline keeps no
        per-partition state in memory), how its leaders and replicas spread over the brokers (live), its
        followers' lag over the window, and its open incidents (live)."""
        missing = self._unknown(cluster, topic)
        if missing:
            return missing
        rows: list[dict[str, Any]] = []
        empty = "the partition_state table is not written yet"
        if self.tables.partition_state.is_table():
            rows = latest_states(self.tables.partition_state, topic, cluster, within=self.recent)
            empty = (f"the history holds no row of {topic} on {cluster} from the last {self.recent.total_seconds() / 60:.0f}"
                     " minutes (yet: the history path appends every history_trigger_s)")
        load = self.state.snapshot.topic_load.get(cluster, {}).get(topic)
        if load is not None:  # the live count (every partition, quiet ones too)
            spread = {b: (c[0], c[1], c[2]) for b, c in load.by_broker.items()}
        else:
            leads = Counter(r["leader"] for r in rows if r["leader"] >= 0)
            holds = Counter(b for r in rows for b in r["replicas"])
            preferred = Counter(r["replicas"][0] for r in rows if r["replicas"])
            spread = {b: (leads[b], holds[b], preferred[b]) for b in holds}
        brokers = [{"id": b, "leads": c[0], "replicas": c[1], "preferred": c[2]} for b, c in sorted(spread.items())]
        bars = bar_chart([(f"broker {b['id']}", [("leaders", BLUE, b["leads"]), ("replicas", ORANGE, b["replicas"])])
                          for b in brokers], title=f"{topic}: partitions per broker")
        window = parse_since(since)
        now = dt.datetime.now(dt.timezone.utc)
        lag_svg, lag_note = "", "the replica_lag table is not written yet"
        if self.tables.replica_lag.is_table():
            lag_svg = lag_chart(topic_lag_rows(self.tables.replica_lag, cluster, topic, window, now), now - window, now)
            lag_note = (self._reach(self.tables.replica_lag, window, now) or
                        ("" if lag_svg else f"no follower of {topic} lagged in the last {since}"))
        newest = max((r["observed_at"] for r in rows), default=None)
        groups = [g for g in incident_groups.group(i for i in self._open() if i.cluster == cluster)
                  if any(i.topic == topic for i in g.members)]  # (a broker down heads its group here too)
        return "200 OK", self._page(f"{cluster} topic {topic}", "topic.html", cluster=cluster, topic=topic,
                                    partitions=rows, brokers=brokers, groups=groups, empty=empty, bars=bars,
                                    lag_svg=lag_svg, lag_note=lag_note, since=since, ranges=RANGES,
                                    newest=newest.isoformat(timespec="seconds") if newest else "",
                                    under=sum(1 for r in rows if len(r["isr"] or ()) < len(r["replicas"] or ())),
                                    offline=sum(1 for r in rows if r["leader"] < 0))

    def _shutdown(self, cluster: str, broker: int) -> dict[str, Any]:
        """The shutdown check (krm/shutdown_check.py) on a fresh look at the cluster, worst first."""
        from krm.shutdown_check import ORDER, UNSAFE, check

        if self.look is None:
            return {"error": "this process has no cluster config"}
        try:
            snap = self.look(cluster)
        except Exception as e:  # noqa: BLE001 - said on the page; the server goes on
            return {"error": f"{type(e).__name__}: {e}"}
        verdicts = sorted(check(broker, snap.topics, snap.live), key=lambda v: ORDER.index(v.verdict))
        counts = [(k, sum(1 for v in verdicts if v.verdict == k)) for k in ORDER]
        return {"error": None, "unsafe": sum(1 for v in verdicts if v.verdict in UNSAFE),
                "counts": [(k, n) for k, n in counts if n],
                "verdicts": [v for v in verdicts if v.verdict != "follower_only"][:SHUTDOWN_ROWS]}

    def _plan(self, cluster: str, broker: int) -> dict[str, Any]:
        """`krm plan rebalance` on a fresh look at the cluster: each broker's replicas and preferred
        leaderships now and after the plan (krm/rebalance.py), as bars."""
        from krm.rebalance import broker_counts, plan_rebalance

        if self.look is None:
            return {"error": "this process has no cluster config"}
        try:
            snap = self.look(cluster)
            plan = plan_rebalance(snap.assignment(), snap.live, racks=snap.racks)
        except Exception as e:  # noqa: BLE001 - said on the page; the server goes on
            return {"error": f"{type(e).__name__}: {e}"}
        brokers = snap.known | snap.live
        before, after = broker_counts(plan.before, brokers), broker_counts(plan.after, brokers)
        return {"error": None, "moves": plan.replica_moves, "leader_changes": plan.leader_changes,
                "unresolved": plan.unresolved,
                "svg": bar_chart(plan_bars(before, after), title="krm plan rebalance: now and after",
                                 highlight=f"broker {broker}")}

    def broker(self, cluster: str, broker: int, check: str | None = None, since: str = "6h") -> tuple[str, str]:
        missing = self._unknown(cluster, broker=broker)
        if missing:
            return missing
        snap = self.state.snapshot
        view = snap.clusters.get(cluster)
        live = bool(view and dict(view.brokers).get(broker))
        lead, rep, _, _ = snap.broker_load.get(cluster, {}).get(broker, (0, 0, 0, 0))
        named = []
        for i in self._open():
            if i.cluster != cluster:
                continue
            why = [name for name, brokers in i.facts.act_on() if broker in brokers]
            if i.broker == broker:
                why.insert(0, "its subject")
            if why:
                named.append((i, ", ".join(why)))
        from krm.shutdown_check import UNSAFE

        window = parse_since(since)
        now = dt.datetime.now(dt.timezone.utc)
        unwritten = [r for r in self.state.broker_samples.of(cluster, broker) if r["observed_at"] >= now - window]
        rows = broker_rows(self.tables.broker_state, cluster, broker, window, now) if self.tables.broker_state.is_table() else []
        samples = rows + [dict(r) for r in unwritten]  # (the table's rows as the sampler's)
        svg = broker_chart(samples, _first_drawn(now - window, [r["observed_at"] for r in samples[:1]], []), now)
        note = (self._reach(self.tables.broker_state, window, now) if rows else "") or ("" if svg else (
            f"no sample in the last {since} (the pipeline samples each broker every broker_history_s)"))
        return "200 OK", self._page(
            f"{cluster} broker {broker}", "broker.html", live=live, leaders=lead, replicas=rep,
            groups=incident_groups.group(i for i, _ in named), why={i.incident_id: w for i, w in named},
            broker=broker, cluster=cluster, shutdown=self._shutdown(cluster, broker) if check == "shutdown" else None,
            plan=self._plan(cluster, broker) if check == "plan" else None, unsafe_kinds=UNSAFE, svg=svg, note=note,
            since=since, ranges=RANGES)
