"""The console: read-only HTML pages beside /metrics, on the same port, TLS and basic auth.

Live pages (the fleet, a cluster's grid, open incidents, a broker's state) read the pipeline's in-memory
snapshot, the same one /metrics serves, so they cost no table read; the fleet and the grid reload their
live part every poll (a fragment of the same route, `?fragment=1`, fetched by a few lines of inline
script). History (resolved incidents, a partition's changes, a topic's lag, a broker's load over time)
comes from the Delta tables through delta-rs (krm/timeline.py), never Spark. Server-rendered with Jinja2
(autoescaped); charts are inline SVG (krm/charts.py); no asset from anywhere else.

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

from foundation.errors import KrmError
from krm.lag import parse_since
from krm.timeline import (broker_rows, changes, latest_states, oldest_day, read_states, timeline, topic_lag_rows)
from pipelines.detectors.registry import BY_TYPE
from krm import picture
from krm.charts import BLUE, ORANGE, bar_chart, partition_chart
from krm.history_charts import broker_chart, lag_chart, plan_bars
from pipelines import incident_groups
from pipelines.detectors.rule import PartitionDetails
from pipelines.disks import last_look
from pipelines.incident_store import IncidentStore
from pipelines.metrics import STALE_DEFAULT_S

NOT_FOUND_LISTED = 200  # what exists, listed at most, on a 404
HISTORY_LIMIT = 500  # resolved incidents listed at most (newest first)
SHUTDOWN_ROWS = 200  # a broker page's shutdown verdicts listed at most (worst first; `krm check shutdown` has all)

_BASE = """<!doctype html><html><head><meta charset="utf-8"><title>{{ title }} · krm</title>
<style>
body{font:14px/1.4 system-ui,sans-serif;margin:1.5em;color:#222;background:#fff}
table{border-collapse:collapse;margin:.5em 0}td,th{border-bottom:1px solid #ddd;padding:3px 8px;text-align:left;vertical-align:top}
th{background:#f4f4f4}.critical{color:#b00020;font-weight:bold}.warning{color:#a05a00}.info{color:#555}
a{color:#0645ad}nav a{margin-right:1em}code{background:#f4f4f4;padding:0 3px}.muted{color:#777}
.stale{background:#b00020;color:#fff;padding:.5em .8em;margin:.5em 0;font-weight:bold}
table.grid td,table.grid th{border:1px solid #bbb;padding:2px 6px;font-size:13px}
table.grid td a,table.grid th a{color:inherit;text-decoration:none;display:block}
.sev-critical{background:#D55E00;color:#fff;font-weight:bold}.sev-warning{background:#E69F00;color:#000}
.sev-info{background:#56B4E9;color:#000}.shade-0{background:#fff;color:#999}.shade-1{background:#eff3ff}
.shade-2{background:#c6dbef}.shade-3{background:#9ecae1}.shade-4{background:#6baed6}
.legend span{display:inline-block;padding:0 6px;margin-right:4px;border:1px solid #bbb}
@media (prefers-color-scheme: dark){body{background:#111;color:#ddd}th{background:#222}td,th{border-color:#333}
a{color:#8ab4f8}code{background:#222}.muted{color:#999}.warning{color:#E69F00}.critical{color:#ff7a45}
table.grid td,table.grid th{border-color:#444}.shade-0{background:#111;color:#777}.shade-1{background:#132a40}
.shade-2{background:#1d4266}.shade-3{background:#2b5f8f}.shade-4{background:#3b7bbf}}
</style></head><body><nav><a href="/">fleet</a><a href="/incidents">open incidents</a>
<a href="/incidents?status=all">all incidents</a><a href="/metrics">/metrics</a></nav>
<div id="banners" data-live="/?fragment=stale" data-every="{{ banner_every_ms }}">{% include "stale.html" %}</div>
<h1>{{ title }}</h1>{% block body %}{% endblock %}
<script>/* every [data-live] element reloads its fragment every data-every ms, no full reload (from the origin:
   a page opened with credentials in its address may not fetch an address carrying them; the browser resends them) */
document.querySelectorAll("[data-live]").forEach(function (el) {
  var every = +el.dataset.every || 2000;
  function tick() {
    fetch(new URL(el.dataset.live, location.origin), {credentials: "same-origin", cache: "no-store"})
      .then(function (r) { if (!r.ok) throw new Error("HTTP " + r.status); return r.text(); })
      .then(function (t) { el.innerHTML = t; el.dataset.updated = Date.now(); })
      .catch(function (e) {
        var note = el.querySelector(".lost-note") || el.insertBefore(document.createElement("div"), el.firstChild);
        note.className = "lost-note stale";
        note.textContent = "the console stopped answering (" + e.message + ") at " + new Date().toISOString() +
          ": what is drawn below is from before that";
      })
      .finally(function () { setTimeout(tick, every); });
  }
  setTimeout(tick, every);
});</script></body></html>"""

# incidents that share one cause (pipelines/incident_groups.py): one row, its members a click away
_GROUP_ROW = """<tr class="group"><td class="{{ g.severity }}">{{ g.severity }}</td><td colspan="{{ span - 1 }}">
<details><summary><b>{{ g.title }}</b> · {{ g.partitions|length }} partition(s): {% for kind, n in g.counts() %}{{ n }} {{ kind
}}{{ ", " if not loop.last }}{% endfor %} · {{ g.head.cluster }} · since {{ iso(g.opened_at_ms) }} · {{ g.status }}</summary>
<ul>{% for i in g.members %}<li><a href="/incidents/{{ i.incident_id }}">{{ i.type }}</a> <span class="{{ i.severity }}">{{ i.severity
}}</span> {{ i.cause or "" }} · {{ where(i) }}{% if act_on(i) %} · act on {{ act_on(i) }}{% endif %} · {{ i.status }}</li>{% endfor %}</ul>
</details></td></tr>"""

_STALE = """{% for name, age in stale %}<div class="stale" id="stale-{{ name }}">STALE: krm's view of {{ name }} is {{ "%.0f"|format(age)
}}s old (older than three polls): nothing new has arrived from it, so what these pages say about it may no longer be true.
Check the collector and the observations topic (KrmViewStale).</div>{% endfor %}"""

_TEMPLATES = {
    "base.html": _BASE,
    "stale.html": _STALE,
    "group_row.html": _GROUP_ROW,
    "fleet.html": """{% extends "base.html" %}{% block body %}
<div id="fleet" data-live="/?fragment=1" data-every="{{ every_ms }}">{% include "fleet_live.html" %}</div>
<p class="legend muted">each broker: <span class="sev-critical">critical</span><span class="sev-warning">warning</span>
<span class="shade-2">up</span> (its state in words, its leaders L and replicas R); a click opens the broker, the cluster's
name its grid of brokers against topics. Updates every poll.</p>{% endblock %}""",
    "fleet_live.html": """<table><tr><th>cluster</th><th>brokers</th><th>controller</th><th>view age</th><th>open incidents</th></tr>
{% for c in clusters %}<tr><td><a href="/clusters/{{ c.name|urlencode }}"><b>{{ c.name }}</b></a>{% if not c.reachable %}
<div class="sev-critical">unreachable: {{ c.reason }}</div>{% endif %}</td>
<td><table class="grid"><tr>{% for h in c.heads %}<td class="{{ 'sev-' ~ h.severity if h.severity else 'shade-2' }}" id="b-{{ c.name }}-{{ h.id }}">
<a href="{{ h.href }}" title="broker {{ h.id }}: {{ h.state }}, leads {{ h.leaders }}, holds {{ h.replicas }} replicas, named by {{ h.incidents }} open incident(s)">{{ h.id }}
<small>{{ h.state }}<br>{{ h.leaders }} L / {{ h.replicas }} R</small></a></td>{% endfor %}</tr></table>{{ c.up }} / {{ c.heads|length }} up</td>
<td>{{ c.controller if c.controller is not none else "none" }}</td>
<td class="{{ 'stale' if c.stale else '' }}">{{ c.age }}{{ " STALE" if c.stale }}</td>
<td>{% for sev, n in c.open %}<a class="{{ sev }}" href="/incidents?cluster={{ c.name|urlencode }}&severity={{ sev }}">{{ n }} {{ sev }}</a> {% else %}none{% endfor %}</td></tr>
{% else %}<tr><td colspan="5" class="muted">no cluster observed yet</td></tr>{% endfor %}</table>""",
    "cluster.html": """{% extends "base.html" %}{% block body %}
<p><a href="/incidents?cluster={{ cluster|urlencode }}">its open incidents</a> ·
{% if all %}<a href="?">the unhealthy topics first, at most {{ max_topics }}</a>{% else %}<a href="?all=1">every topic</a>{% endif %}</p>
<div id="grid" data-live="/clusters/{{ cluster|urlencode }}?fragment=1{{ '&all=1' if all }}" data-every="{{ every_ms }}">{% include "grid_live.html" %}</div>
<p class="legend muted">a cell: the leaders / replicas the broker holds of the topic, and in words what hurts there;
<span class="sev-critical">critical</span><span class="sev-warning">warning</span> an open incident names the broker in that
topic (a click opens it, or the list of them); healthy cells are shaded by the broker's share of the topic's replicas
<span class="shade-1">least</span><span class="shade-4">most</span><span class="shade-0">none</span>. Updates every poll.</p>{% endblock %}""",
    "grid_live.html": """<p class="{{ 'stale' if is_stale else 'muted' }}" id="age">{{ "STALE: " if is_stale }}krm's view of {{ cluster }} is {{ age }} old
{%- if is_stale %} (older than three polls: nothing new has arrived from it){% endif %}{% if reason %} · <b class="critical">unreachable: {{ reason }}</b>{% endif %}</p>
{% for i in g.cluster_incidents %}<p><a class="{{ i.severity }}" href="/incidents/{{ i.incident_id }}">{{ i.type }}</a> {{ i.cause or "" }}</p>{% endfor %}
<table class="grid"><tr><th>topic</th>{% for h in g.brokers %}<th class="{{ 'sev-' ~ h.severity if h.severity else '' }}" id="head-{{ h.id }}">
<a href="{{ h.href }}">broker {{ h.id }}<br><small>{{ h.state }} · {{ h.leaders }} L / {{ h.replicas }} R</small></a></th>{% endfor %}</tr>
{% for r in g.rows %}<tr><th><a href="{{ r.href }}">{{ r.topic }}</a> <small class="muted">{{ r.partitions }} p</small></th>
{% for c in r.cells %}<td class="{{ 'sev-' ~ c.severity if c.severity else 'shade-' ~ c.shade }}" data-broker="{{ g.brokers[loop.index0].id }}"
data-topic="{{ r.topic }}"><a href="{{ c.href }}" title="{{ r.topic }} on broker {{ g.brokers[loop.index0].id }}: leads {{ c.leaders }}, holds {{ c.replicas
}}{{ '; ' ~ c.label if c.label }}">{{ c.leaders }} / {{ c.replicas }}{% if c.label %}<br><b>{{ c.label }}</b>{% endif %}</a></td>{% endfor %}</tr>
{% else %}<tr><td colspan="{{ g.brokers|length + 1 }}" class="muted">no topic observed yet</td></tr>{% endfor %}</table>
{% if g.hidden_healthy or g.hidden_unhealthy %}<p class="muted">and {{ g.hidden_unhealthy + g.hidden_healthy }} more topic(s) not drawn
({{ g.hidden_unhealthy }} unhealthy): <a href="?all=1">every topic</a></p>{% endif %}""",
    "missing.html": """{% extends "base.html" %}{% block body %}
<p>{{ kind }} that krm knows of:{% for k in known %} <a href="{{ href.format(k|string|urlencode) }}">{{ k }}</a>{{ "," if not loop.last }}{% else %}
none yet{% endfor %}{% if more %} and {{ more }} more{% endif %}</p>{% endblock %}""",
    "incidents.html": """{% extends "base.html" %}{% block body %}
<form method="get">cluster <input name="cluster" value="{{ q.cluster }}"> type <input name="type" value="{{ q.type }}">
severity <input name="severity" value="{{ q.severity }}">
topic <input name="topic" value="{{ q.topic }}"> broker <input name="broker" value="{{ q.broker }}" size="4"> <select name="status"><option value="open">open</option>
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
<a href="/topics/{{ cluster|urlencode }}/{{ topic|urlencode }}">the topic</a></p>{% if reach %}<p class="warning">{{ reach }}</p>{% endif %}
{% if drawn %}<p class="muted">{{ drawn }}</p>{% endif %}
{% if svg %}{{ svg|safe }}{% else %}<p class="muted">{{ empty }}</p>{% endif %}{{ lag_svg|safe }}
<table><tr><th>at</th><th>kind</th><th>what</th></tr>{% for e in events %}<tr><td>{{ e.at.isoformat(timespec="seconds") }}</td>
<td>{{ e.kind }}</td><td>{% if e.fields.incident_id %}<a href="/incidents/{{ e.fields.incident_id }}">{{ e.what }}</a>{% else %}{{ e.what }}{% endif %}</td></tr>
{% else %}<tr><td colspan="3" class="muted">{{ empty }}</td></tr>{% endfor %}</table>{% endblock %}""",
    "topic.html": """{% extends "base.html" %}{% block body %}
{% if partitions %}<p>{{ partitions|length }} partition(s) as the newest poll recorded them ({{ newest }}) ·
{{ under }} under-replicated · {{ offline }} without a leader</p>
<h2>brokers</h2>{{ bars|safe }}<table><tr><th>broker</th><th>leads</th><th>replicas</th><th>preferred leader of</th></tr>
{% for b in brokers %}<tr><td><a href="/brokers/{{ cluster|urlencode }}/{{ b.id }}">{{ b.id }}</a></td><td>{{ b.leads }}</td>
<td>{{ b.replicas }}</td><td>{{ b.preferred }}</td></tr>{% endfor %}</table>
<h2>partitions</h2><table><tr><th>partition</th><th>leader</th><th>replicas</th><th>ISR</th><th>high watermark</th></tr>
{% for p in partitions %}<tr><td><a href="/partitions/{{ cluster|urlencode }}/{{ topic|urlencode }}/{{ p.partition }}">{{ p.partition }}</a></td>
<td class="{{ 'critical' if p.leader < 0 else '' }}">{{ p.leader if p.leader >= 0 else "none" }}</td><td>{{ p.replicas }}</td>
<td class="{{ 'warning' if p.isr|length < p.replicas|length else '' }}">{{ p.isr }}</td><td>{{ p.high_watermark if p.high_watermark is not none else "" }}</td></tr>{% endfor %}</table>
{% else %}<p class="muted">{{ empty }}</p>{% if bars %}<h2>brokers</h2>{{ bars|safe }}{% endif %}{% endif %}
<h2>replication lag, last {{ since }}</h2><p>{% for r in ranges %} {% if r == since %}<b>{{ r }}</b>{% else %}<a href="?since={{ r }}">{{ r }}</a>{% endif %} ·{% endfor %}</p>
{% if lag_note %}<p class="muted">{{ lag_note }}</p>{% endif %}{{ lag_svg|safe }}
<h2>open incidents</h2><table><tr><th>severity</th><th>type</th><th>cause</th><th>where</th><th>act on</th></tr>
{% for g in groups %}{% if g.key is none %}{% set i = g.head %}<tr><td class="{{ i.severity }}">{{ i.severity }}</td><td><a href="/incidents/{{ i.incident_id }}">{{ i.type }}</a></td>
<td>{{ i.cause or "" }}</td><td>{{ where(i) }}</td><td>{{ act_on(i) }}</td></tr>{% else %}{{ group_row(g, 5) }}{% endif %}
{% else %}<tr><td colspan="5" class="muted">none</td></tr>{% endfor %}</table>{% endblock %}""",
    "broker.html": """{% extends "base.html" %}{% block body %}
<p>{{ "registered" if live else "NOT registered" }} · leads {{ leaders }} partition(s) · holds {{ replicas }} replica(s) ·
<a href="/clusters/{{ cluster|urlencode }}">the cluster's grid</a></p>
<h2>over the last {{ since }}</h2><p>{% for r in ranges %} {% if r == since %}<b>{{ r }}</b>{% else %}<a href="?since={{ r }}">{{ r }}</a>{% endif %} ·{% endfor %}</p>
{% if note %}<p class="muted">{{ note }}</p>{% endif %}{{ svg|safe }}
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
{% endfor %}</table>{% endif %}
<h2>what a rebalance would move</h2>
{% if plan is none %}<p><a href="?check=plan">plan it now</a> (one Admin poll; the same as
<code>krm plan rebalance --config FILE</code>: even replicas and preferred leaders with the fewest moves, nothing executed)</p>
{% elif plan.error %}<p class="warning">could not plan from this host: {{ plan.error }}</p>
{% else %}<p>{{ plan.moves }} replica move(s), {{ plan.leader_changes }} preferred leader change(s){% if plan.unresolved %} ·
<span class="warning">{{ plan.unresolved|length }} not resolved</span>{% endif %}: each broker now and after the plan
(this broker in bold); <code>krm plan rebalance --config FILE --output plan.json</code> writes it for kafka-reassign-partitions.</p>
{{ plan.svg|safe }}{% endif %}{% endblock %}""",
}

def _iso(ms: int | None) -> str:
    return "" if ms is None else dt.datetime.fromtimestamp(ms / 1000, dt.timezone.utc).isoformat(timespec="seconds")


def _where(i: Any) -> str:
    if i.topic is not None:
        return f"{i.topic}-{i.partition}" + (f" broker {i.broker}" if i.broker is not None else "")
    return f"broker {i.broker}" if i.broker is not None else "cluster"


def _act_on(i: Any) -> str:
    return "; ".join(f"{name} {list(brokers)}" for name, brokers in PartitionDetails.of(i.details).act_on())


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


def _min_isr(incidents: list[Any]) -> int | None:
    """The effective min ISR (min(min.insync.replicas, RF), pipelines/detectors/isr.py) the newest of these
    incidents recorded; None when none did."""
    for i in sorted(incidents, key=lambda i: i.last_seen_at_ms, reverse=True):
        if isinstance(i.details.get("effective_min_isr"), int):
            return int(i.details["effective_min_isr"])
    return None


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
            status, body = "400 Bad Request", self._page("bad request", "missing.html", kind=str(e), known=[], more=0,
                                                         href="")
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

    def _open(self) -> list[Any]:
        return list(self.state.snapshot.open_incidents)

    def _every_ms(self, cluster: str | None = None) -> int:
        """How often a live part reloads: a poll (a view is stale after three), at least a second."""
        names = [cluster] if cluster else list(self.state.snapshot.clusters)
        stale_after = min((self.state.stale_after_s.get(n, STALE_DEFAULT_S) for n in names), default=STALE_DEFAULT_S)
        return int(max(1.0, stale_after / 3) * 1000)

    def _age(self, view: Any) -> str:
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
            svg = partition_chart(states, [i], start, end, min_isr=_min_isr([i]))
        return "200 OK", self._page(f"{i.type} on {i.cluster} {_where(i)}", "incident.html", i=i,
                                    rule=BY_TYPE.get(i.type), details=json.dumps(i.details, indent=2, default=str),
                                    changes=changes(states)[-30:], svg=svg,
                                    disks=last_look(i.details.get("log_dirs")))

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

    def _reach(self, table: Any, window: dt.timedelta, now: dt.datetime) -> str:
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
            why = [name for name, brokers in PartitionDetails.of(i.details).act_on() if broker in brokers]
            if i.broker == broker:
                why.insert(0, "its subject")
            if why:
                named.append((i, ", ".join(why)))
        from krm.shutdown_check import UNSAFE

        window = parse_since(since)
        now = dt.datetime.now(dt.timezone.utc)
        unwritten = [r for r in self.state.broker_samples.of(cluster, broker) if r["observed_at"] >= now - window]
        rows = broker_rows(self.tables.broker_state, cluster, broker, window, now) if self.tables.broker_state.is_table() else []
        samples = rows + unwritten
        svg = broker_chart(samples, _first_drawn(now - window, [r["observed_at"] for r in samples[:1]], []), now)
        note = (self._reach(self.tables.broker_state, window, now) if rows else "") or ("" if svg else (
            f"no sample in the last {since} (the pipeline samples each broker every broker_history_s)"))
        return "200 OK", self._page(
            f"{cluster} broker {broker}", "broker.html", live=live, leaders=lead, replicas=rep,
            groups=incident_groups.group(i for i, _ in named), why={i.incident_id: w for i, w in named},
            broker=broker, cluster=cluster, shutdown=self._shutdown(cluster, broker) if check == "shutdown" else None,
            plan=self._plan(cluster, broker) if check == "plan" else None, unsafe_kinds=UNSAFE, svg=svg, note=note,
            since=since, ranges=RANGES)
