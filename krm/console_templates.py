"""The console's page templates (Jinja2, autoescaped; krm/console.py renders them): one base with the
stale banners and the live-part script, a template per page, and the live parts each page reloads."""

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

TEMPLATES = {
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
    "said.html": """{% extends "base.html" %}{% block body %}<p class="warning">{{ said }}</p>{% endblock %}""",
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
{% if headline %}<tr><th>evidence</th><td>{{ headline }}</td></tr>{% endif %}
<tr><th>opened</th><td>{{ iso(i.opened_at_ms) }}</td></tr><tr><th>last seen</th><td>{{ iso(i.last_seen_at_ms) }}</td></tr>
<tr><th>resolved</th><td>{{ iso(i.resolved_at_ms) if i.resolved_at_ms else "open" }}</td></tr>
<tr><th>id</th><td><code>{{ i.incident_id }}</code></td></tr>
{% if rule %}<tr><th>means</th><td>{{ rule.summary }}</td></tr><tr><th>routine work</th><td>{{ rule.routine }}</td></tr>{% endif %}
</table>
<h2>details</h2><pre>{{ details }}</pre>{% if unreadable %}<p class="muted">not of the declared shape, left out: {{ unreadable|join(", ") }}</p>{% endif %}
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
