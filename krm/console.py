"""The console: read-only HTML pages beside /metrics, on the same port, TLS and basic auth.

Live pages (the overview, open incidents, a broker) read the pipeline's in-memory snapshot, the same
one /metrics serves, so they cost no table read; history (resolved incidents, a partition's
changes) comes from the Delta tables through delta-rs (krm/timeline.py), never Spark. Server-rendered
with Jinja2 (autoescaped), no JavaScript and no asset from the internet: a chart is inline SVG.

Routes: `/` clusters, `/incidents` (filters: cluster, type, severity, status=open|all),
`/incidents/<id>`, `/topics/<cluster>/<topic>`, `/partitions/<cluster>/<topic>/<partition>`,
`/brokers/<cluster>/<id>`.
"""

from __future__ import annotations

import datetime as dt
import json
from typing import Any, Callable
from urllib.parse import parse_qs

from krm.lag import parse_since
from krm.timeline import changes, latest_states, read_states, timeline
from pipelines.detectors.registry import BY_TYPE
from krm.charts import partition_chart
from pipelines import incident_groups
from pipelines.detectors.rule import PartitionDetails
from pipelines.disks import last_look
from pipelines.incident_store import IncidentStore

HISTORY_LIMIT = 500  # resolved incidents listed at most (newest first)
SHUTDOWN_ROWS = 200  # a broker page's shutdown verdicts listed at most (worst first; `krm check shutdown` has all)

_BASE = """<!doctype html><html><head><meta charset="utf-8"><title>{{ title }} · krm</title>
<style>
body{font:14px/1.4 system-ui,sans-serif;margin:1.5em;color:#222}
table{border-collapse:collapse;margin:.5em 0}td,th{border-bottom:1px solid #ddd;padding:3px 8px;text-align:left;vertical-align:top}
th{background:#f4f4f4}.critical{color:#b00020;font-weight:bold}.warning{color:#a05a00}.info{color:#555}
a{color:#0645ad}nav a{margin-right:1em}code{background:#f4f4f4;padding:0 3px}.muted{color:#777}
.stale{background:#b00020;color:#fff;padding:.5em .8em;margin:.5em 0;font-weight:bold}
</style></head><body><nav><a href="/">clusters</a><a href="/incidents">open incidents</a>
<a href="/incidents?status=all">all incidents</a><a href="/metrics">/metrics</a></nav>
{% for name, age in stale %}<div class="stale" id="stale-{{ name }}">STALE: krm's view of {{ name }} is {{ "%.0f"|format(age) }}s old
(older than three polls): nothing new has arrived from it, so what these pages say about it may no longer be true.
Check the collector and the observations topic (KrmViewStale).</div>{% endfor %}
<h1>{{ title }}</h1>{% block body %}{% endblock %}</body></html>"""

# incidents that share one cause (pipelines/incident_groups.py): one row, its members a click away
_GROUP_ROW = """<tr class="group"><td class="{{ g.severity }}">{{ g.severity }}</td><td colspan="{{ span - 1 }}">
<details><summary><b>{{ g.title }}</b> · {{ g.partitions|length }} partition(s): {% for kind, n in g.counts() %}{{ n }} {{ kind
}}{{ ", " if not loop.last }}{% endfor %} · {{ g.head.cluster }} · since {{ iso(g.opened_at_ms) }} · {{ g.status }}</summary>
<ul>{% for i in g.members %}<li><a href="/incidents/{{ i.incident_id }}">{{ i.type }}</a> <span class="{{ i.severity }}">{{ i.severity
}}</span> {{ i.cause or "" }} · {{ where(i) }}{% if act_on(i) %} · act on {{ act_on(i) }}{% endif %} · {{ i.status }}</li>{% endfor %}</ul>
</details></td></tr>"""

_TEMPLATES = {
    "base.html": _BASE,
    "group_row.html": _GROUP_ROW,
    "overview.html": """{% extends "base.html" %}{% block body %}
<table><tr><th>cluster</th><th>reachable</th><th>brokers up</th><th>controller</th><th>observation age</th>
<th>open incidents</th></tr>
{% for c in clusters %}<tr><td>{{ c.name }}</td><td>{{ "yes" if c.reachable else "no: " ~ c.reason }}</td>
<td>{{ c.up }} / {{ c.brokers|length }}{% for b, live in c.brokers %}
 <a href="/brokers/{{ c.name|urlencode }}/{{ b }}" class="{{ '' if live else 'critical' }}">{{ b }}</a>{% endfor %}</td>
<td>{{ c.controller if c.controller is not none else "none" }}</td>
<td class="{{ 'critical' if c.stale else '' }}">{{ c.age }}{{ " STALE" if c.stale }}</td>
<td>{% for sev, n in c.open %}<a class="{{ sev }}" href="/incidents?cluster={{ c.name|urlencode }}&severity={{ sev }}">{{ n }} {{ sev }}</a> {% else %}none{% endfor %}</td></tr>
{% else %}<tr><td colspan="6" class="muted">no cluster observed yet</td></tr>{% endfor %}</table>
{% endblock %}""",
    "incidents.html": """{% extends "base.html" %}{% block body %}
<form method="get">cluster <input name="cluster" value="{{ q.cluster }}"> type <input name="type" value="{{ q.type }}">
severity <input name="severity" value="{{ q.severity }}"> <select name="status"><option value="open">open</option>
<option value="all" {{ "selected" if q.status == "all" }}>all</option></select> <button>filter</button></form>
<table><tr><th>severity</th><th>type</th><th>cause</th><th>cluster</th><th>where</th><th>act on</th><th>opened</th><th>status</th></tr>
{% for g in groups %}{% if g.key is none %}{% set i = g.head %}<tr><td class="{{ i.severity }}">{{ i.severity }}</td>
<td><a href="/incidents/{{ i.incident_id }}">{{ i.type }}</a></td><td>{{ i.cause or "" }}</td><td>{{ i.cluster }}</td>
<td>{{ where(i) }}</td><td>{{ act_on(i) }}</td><td>{{ iso(i.opened_at_ms) }}</td><td>{{ i.status }}</td></tr>
{% else %}{{ group_row(g, 8) }}{% endif %}
{% else %}<tr><td colspan="8" class="muted">none</td></tr>{% endfor %}</table>
<p class="muted">{{ incidents|length }} incident(s){% if groups|length < incidents|length %} in {{ groups|length }} row(s):
incidents that share one cause read as one{% endif %}{{ note }}</p>{% endblock %}""",
    "incident.html": """{% extends "base.html" %}{% block body %}
<table>
<tr><th>severity</th><td class="{{ i.severity }}">{{ i.severity }}</td></tr>
<tr><th>type / cause</th><td>{{ i.type }} / {{ i.cause or "-" }}</td></tr>
<tr><th>where</th><td>{{ i.cluster }} {{ where(i) }}{% if i.topic is not none and i.partition is not none %}
 (<a href="/partitions/{{ i.cluster|urlencode }}/{{ i.topic|urlencode }}/{{ i.partition }}">partition timeline</a>,
 <a href="/topics/{{ i.cluster|urlencode }}/{{ i.topic|urlencode }}">topic</a>){% endif %}</td></tr>
<tr><th>act on</th><td>{{ act_on(i) or "-" }}</td></tr>
{% set link = i.details.replication_link %}{% if link and link.summary %}<tr><th>cut</th>
<td>{{ link.summary }} ({{ link.side }} side)</td></tr>{% endif %}
{% if i.details.disk_full and disks %}<tr><th>disks</th><td>{{ disks }} (the last look before it went)</td></tr>{% endif %}
<tr><th>opened</th><td>{{ iso(i.opened_at_ms) }}</td></tr><tr><th>last seen</th><td>{{ iso(i.last_seen_at_ms) }}</td></tr>
<tr><th>resolved</th><td>{{ iso(i.resolved_at_ms) if i.resolved_at_ms else "open" }}</td></tr>
<tr><th>id</th><td><code>{{ i.incident_id }}</code></td></tr>
{% if rule %}<tr><th>means</th><td>{{ rule.summary }}</td></tr><tr><th>routine work</th><td>{{ rule.routine }}</td></tr>{% endif %}
</table>
<h2>details</h2><pre>{{ details }}</pre>
{% if svg %}<h2>the partition around it</h2>{{ svg|safe }}{% endif %}
{% if changes %}<table><tr><th>at</th><th>what</th></tr>{% for e in changes %}<tr><td>{{ e.at.isoformat(timespec="seconds") }}</td>
<td>{{ e.what }}</td></tr>{% endfor %}</table>{% endif %}{% endblock %}""",
    "partition.html": """{% extends "base.html" %}{% block body %}
<p>last {{ since }} ·{% for r in ranges %} {% if r == since %}<b>{{ r }}</b>{% else %}<a href="?since={{ r }}">{{ r }}</a>{% endif %} ·{% endfor %}
<a href="/topics/{{ cluster|urlencode }}/{{ topic|urlencode }}">the topic</a></p>{% if svg %}{{ svg|safe }}{% endif %}
<table><tr><th>at</th><th>kind</th><th>what</th></tr>{% for e in events %}<tr><td>{{ e.at.isoformat(timespec="seconds") }}</td>
<td>{{ e.kind }}</td><td>{% if e.fields.incident_id %}<a href="/incidents/{{ e.fields.incident_id }}">{{ e.what }}</a>{% else %}{{ e.what }}{% endif %}</td></tr>
{% else %}<tr><td colspan="3" class="muted">{{ empty }}</td></tr>{% endfor %}</table>{% endblock %}""",
    "topic.html": """{% extends "base.html" %}{% block body %}
{% if partitions %}<p>{{ partitions|length }} partition(s) as the newest poll recorded them ({{ newest }}) ·
{{ under }} under-replicated · {{ offline }} without a leader</p>
<h2>brokers</h2><table><tr><th>broker</th><th>leads</th><th>replicas</th><th>preferred leader of</th></tr>
{% for b in brokers %}<tr><td><a href="/brokers/{{ cluster|urlencode }}/{{ b.id }}">{{ b.id }}</a></td><td>{{ b.leads }}</td>
<td>{{ b.replicas }}</td><td>{{ b.preferred }}</td></tr>{% endfor %}</table>
<h2>partitions</h2><table><tr><th>partition</th><th>leader</th><th>replicas</th><th>ISR</th><th>high watermark</th></tr>
{% for p in partitions %}<tr><td><a href="/partitions/{{ cluster|urlencode }}/{{ topic|urlencode }}/{{ p.partition }}">{{ p.partition }}</a></td>
<td class="{{ 'critical' if p.leader < 0 else '' }}">{{ p.leader if p.leader >= 0 else "none" }}</td><td>{{ p.replicas }}</td>
<td class="{{ 'warning' if p.isr|length < p.replicas|length else '' }}">{{ p.isr }}</td><td>{{ p.high_watermark if p.high_watermark is not none else "" }}</td></tr>{% endfor %}</table>
{% else %}<p class="muted">{{ empty }}</p>{% endif %}
<h2>open incidents</h2><table><tr><th>severity</th><th>type</th><th>cause</th><th>where</th><th>act on</th></tr>
{% for g in groups %}{% if g.key is none %}{% set i = g.head %}<tr><td class="{{ i.severity }}">{{ i.severity }}</td><td><a href="/incidents/{{ i.incident_id }}">{{ i.type }}</a></td>
<td>{{ i.cause or "" }}</td><td>{{ where(i) }}</td><td>{{ act_on(i) }}</td></tr>{% else %}{{ group_row(g, 5) }}{% endif %}
{% else %}<tr><td colspan="5" class="muted">none</td></tr>{% endfor %}</table>{% endblock %}""",
    "broker.html": """{% extends "base.html" %}{% block body %}
<p>{{ "registered" if live else "NOT registered" }} · leads {{ leaders }} partition(s) · holds {{ replicas }} replica(s)</p>
<h2>open incidents that name it</h2>
<table><tr><th>severity</th><th>type</th><th>cause</th><th>where</th><th>why it names this broker</th></tr>
{% for g in groups %}{% if g.key is none %}{% set i = g.head %}<tr><td class="{{ i.severity }}">{{ i.severity }}</td><td><a href="/incidents/{{ i.incident_id }}">{{ i.type }}</a></td>
<td>{{ i.cause or "" }}</td><td>{{ where(i) }}</td><td>{{ why[i.incident_id] }}</td></tr>{% else %}{{ group_row(g, 5) }}{% endif %}
{% else %}<tr><td colspan="5" class="muted">none</td></tr>{% endfor %}</table>
<h2>what stopping it would do</h2>
{% if shutdown is none %}<p><a href="?check=shutdown">look at the cluster now</a> (the shutdown check, one Admin poll;
the same as <code>krm check shutdown --broker {{ broker }} --config FILE</code>)</p>
{% elif shutdown.error %}<p class="warning">could not look at the cluster from this host: {{ shutdown.error }}; run
<code>krm check shutdown --broker {{ broker }} --config FILE</code> where the cluster is reachable</p>
{% else %}<p class="{{ 'critical' if shutdown.unsafe else '' }}">{{ "UNSAFE: " ~ shutdown.unsafe ~ " partition(s) would go offline or below min ISR"
if shutdown.unsafe else "safe to stop" }} · {% for k, n in shutdown.counts %}{{ n }} {{ k }}{{ ", " if not loop.last }}{% endfor %}</p>
<table><tr><th>verdict</th><th>partition</th><th>why</th></tr>{% for v in shutdown.verdicts %}<tr>
<td class="{{ 'critical' if v.verdict in unsafe_kinds else '' }}">{{ v.verdict }}</td><td>{{ v.topic }}-{{ v.partition }}</td><td>{{ v.reason }}</td></tr>
{% endfor %}</table>{% endif %}{% endblock %}""",
}

def _iso(ms: int | None) -> str:
    return "" if ms is None else dt.datetime.fromtimestamp(ms / 1000, dt.timezone.utc).isoformat(timespec="seconds")


def _where(i: Any) -> str:
    if i.topic is not None:
        return f"{i.topic}-{i.partition}" + (f" broker {i.broker}" if i.broker is not None else "")
    return f"broker {i.broker}" if i.broker is not None else "cluster"


def _act_on(i: Any) -> str:
    return "; ".join(f"{name} {list(brokers)}" for name, brokers in PartitionDetails.of(i.details).act_on())


RANGES = ("15m", "1h", "6h", "24h", "7d")  # the partition page's windows


class Console:
    """A WSGI app for the console's routes; answers None for any other path (the caller serves it)."""

    def __init__(self, state: Any, tables: Any, look: Callable[[str], Any] | None = None,
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
        self.env = Environment(loader=DictLoader(_TEMPLATES), autoescape=select_autoescape(default=True))
        self.env.globals.update(iso=_iso, where=_where, act_on=_act_on)
        row = self.env.get_template("group_row.html")
        self.env.globals["group_row"] = lambda g, span: Markup(row.render(g=g, span=span))

    def handles(self, path: str) -> bool:
        return path == "/" or path == "/incidents" or path.startswith(("/incidents/", "/topics/", "/partitions/",
                                                                         "/brokers/"))

    def __call__(self, environ: dict[str, Any], start_response: Callable[..., Any]) -> list[bytes]:
        path = environ.get("PATH_INFO", "/")
        q = {k: v[-1] for k, v in parse_qs(environ.get("QUERY_STRING", "")).items()}
        parts = [p for p in path.split("/") if p]
        try:
            if path == "/":
                status, body = "200 OK", self.overview()
            elif parts == ["incidents"]:
                status, body = "200 OK", self.incidents(q)
            elif len(parts) == 2 and parts[0] == "incidents":
                status, body = self.incident(parts[1])
            elif len(parts) == 3 and parts[0] == "topics":
                status, body = "200 OK", self.topic(parts[1], parts[2])
            elif len(parts) == 4 and parts[0] == "partitions" and parts[3].lstrip("-").isdigit():
                status, body = "200 OK", self.partition(parts[1], parts[2], int(parts[3]), q.get("since", "1h"))
            elif len(parts) == 3 and parts[0] == "brokers" and parts[2].lstrip("-").isdigit():
                status, body = "200 OK", self.broker(parts[1], int(parts[2]), q.get("check") == "shutdown")
            else:
                status, body = "404 Not Found", self._page("not found", "base.html")
        except Exception as e:  # noqa: BLE001 - a page that cannot be built says why, the server goes on
            from html import escape

            status = "500 Internal Server Error"
            body = f"<h1>krm console</h1><p>this page failed: {escape(str(e))}</p>"
        start_response(status, [("Content-Type", "text/html; charset=utf-8")])
        return [body.encode()]

    def _page(self, title: str, template: str, **values: Any) -> str:
        """Every page starts with a banner for each cluster whose view is stale (PipelineState.stale)."""
        return self.env.get_template(template).render(title=title, stale=sorted(self.state.stale().items()), **values)

    def _open(self) -> list[Any]:
        return list(self.state.snapshot.open_incidents)

    def overview(self) -> str:
        import time
        from collections import Counter

        snap = self.state.snapshot
        stale = self.state.stale()
        rows = []
        for name, view in sorted(snap.clusters.items()):
            sev = Counter(i.severity for i in snap.open_incidents if i.cluster == name)
            reason = view.unreachable_reason
            rows.append({"name": name, "reachable": reason is None, "reason": reason, "brokers": view.brokers,
                         "up": sum(1 for _, live in view.brokers if live), "controller": view.controller_id,
                         "age": f"{max(0.0, time.time() - view.fresh_ms / 1000):.0f}s",
                         "stale": name in stale,
                         "open": [(s, sev[s]) for s in ("critical", "warning", "info") if sev[s]]})
        return self._page("clusters", "overview.html", clusters=rows)

    def incidents(self, q: dict[str, str]) -> str:
        status = q.get("status", "open")
        note = ""
        if status == "all":
            found = IncidentStore(self.tables.incidents).read()
            found.sort(key=lambda i: i.opened_at_ms, reverse=True)
            if len(found) > HISTORY_LIMIT:
                note = f" (the newest {HISTORY_LIMIT} of {len(found)}; `krm sql` for the rest)"
            found = found[:HISTORY_LIMIT]
        else:
            found = sorted(self._open(), key=lambda i: ({"critical": 0, "warning": 1}.get(i.severity, 2), i.opened_at_ms))
        for key in ("cluster", "type", "severity"):
            if q.get(key):
                found = [i for i in found if getattr(i, key) == q[key]]
        qv = {"cluster": q.get("cluster", ""), "type": q.get("type", ""), "severity": q.get("severity", ""),
              "status": status}
        return self._page("open incidents" if status == "open" else "all incidents", "incidents.html",
                          incidents=found, groups=incident_groups.group(found), q=qv, note=note)

    def _find(self, incident_id: str) -> Any:
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
            svg = partition_chart(states, [i], start, end)
        return "200 OK", self._page(f"{i.type} on {i.cluster} {_where(i)}", "incident.html", i=i,
                                    rule=BY_TYPE.get(i.type), details=json.dumps(i.details, indent=2, default=str),
                                    changes=changes(states)[-30:], svg=svg,
                                    disks=last_look(i.details.get("log_dirs")))

    def partition(self, cluster: str, topic: str, partition: int, since: str) -> str:
        window = parse_since(since)
        now = dt.datetime.now(dt.timezone.utc)
        states: list[dict[str, Any]] = []
        empty = "no history yet"
        if self.tables.partition_state.is_table():
            states = read_states(self.tables.partition_state, topic, partition, window, now=now, cluster=cluster)
        else:
            empty = "the partition_state table is not written yet"
        incidents = [i for i in IncidentStore(self.tables.incidents).read() if i.cluster == cluster]
        events = timeline(states, incidents, topic, partition, now - window)
        mine = [i for i in incidents if i.topic == topic and i.partition == partition]
        return self._page(f"{cluster} {topic}-{partition}", "partition.html", events=events, since=since,
                          svg=partition_chart(states, mine, now - window, now), empty=empty, cluster=cluster,
                          topic=topic, ranges=RANGES)

    def topic(self, cluster: str, topic: str) -> str:
        """Its partitions as the newest poll recorded them (the history table: the pipeline keeps no
        per-partition state in memory), how its leaders and replicas spread over the brokers, and its
        open incidents (live)."""
        from collections import Counter

        rows: list[dict[str, Any]] = []
        empty = "the partition_state table is not written yet"
        if self.tables.partition_state.is_table():
            rows = latest_states(self.tables.partition_state, topic, cluster, within=self.recent)
            empty = f"no poll of {topic} on {cluster} in the last {self.recent.total_seconds() / 60:.0f} minutes"
        leads = Counter(r["leader"] for r in rows if r["leader"] >= 0)
        holds = Counter(b for r in rows for b in r["replicas"])
        preferred = Counter(r["replicas"][0] for r in rows if r["replicas"])
        brokers = [{"id": b, "leads": leads[b], "replicas": holds[b], "preferred": preferred[b]} for b in sorted(holds)]
        newest = max((r["observed_at"] for r in rows), default=None)
        groups = [g for g in incident_groups.group(i for i in self._open() if i.cluster == cluster)
                  if any(i.topic == topic for i in g.members)]  # (a broker down heads its group here too)
        return self._page(f"{cluster} topic {topic}", "topic.html", cluster=cluster, topic=topic, partitions=rows,
                          brokers=brokers, groups=groups, empty=empty,
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

    def broker(self, cluster: str, broker: int, check: bool = False) -> str:
        snap = self.state.snapshot
        view = snap.clusters.get(cluster)
        live = bool(view and dict(view.brokers).get(broker))
        lead, rep, _, _ = snap.broker_load.get(cluster, {}).get(broker, (0, 0, 0, 0))
        named = []
        for i in self._open():
            if i.cluster != cluster:
                continue
            why = [name for name, brokers in PartitionDetails.of(i.details).act_on() if broker in brokers]
            if i.broker == broker:
                why.insert(0, "its subject")
            if why:
                named.append((i, ", ".join(why)))
        from krm.shutdown_check import UNSAFE

        return self._page(f"{cluster} broker {broker}", "broker.html", live=live, leaders=lead, replicas=rep,
                          groups=incident_groups.group(i for i, _ in named), why={i.incident_id: w for i, w in named},
                          broker=broker, shutdown=self._shutdown(cluster, broker) if check else None,
                          unsafe_kinds=UNSAFE)

