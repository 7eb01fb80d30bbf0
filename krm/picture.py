"""A cluster at a glance: its brokers against its topics, each cell what a broker holds of a topic and
what hurts there. Pure: built from the pipeline's snapshot (pipelines/state.py `Snapshot`), drawn by
the console (krm/console.py) on the cluster page and, one row per cluster, on the fleet page.

A cell is unhealthy when an open incident of that topic names that broker as one to act on (out of
sync, must return, holding the HW back, unreachable) or as its subject; its colour is the worst such
incident's severity and its text says which incidents, so no colour stands alone. A healthy cell's
shade is the broker's share of the topic's replicas (the imbalance after an expansion shows as a pale
or empty column).
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field
from typing import Any, Iterable
from urllib.parse import quote, urlencode
from pipelines.incidents import Incident
from pipelines.load import TopicLoad
from pipelines.state import ClusterView


SEVERITY_ORDER = {"critical": 0, "warning": 1, "info": 2}
# what a cell says of each partition incident (the incident type's short name)
SHORT = {"OFFLINE_PARTITION": "offline", "PARTITION_UNAVAILABLE": "unavailable", "UNDER_MIN_ISR": "under min ISR",
         "AT_MIN_ISR": "at min ISR", "UNDER_REPLICATED": "out of sync", "HW_STALL": "HW stalled",
         "REPLICA_LAG": "lagging", "UNCLEAN_LEADER_ELECTION": "unclean election", "LOG_TRUNCATION": "truncated",
         "OFFSET_REGRESSION": "offsets back", "PARTITION_REASSIGNING": "reassigning",
         "REPLICA_IMBALANCE": "imbalanced"}
MAX_TOPICS = 60  # topic rows drawn by default: the unhealthy first, then by name (`?all=1` draws every one)


@dataclass(frozen=True)
class Cell:
    leaders: int
    replicas: int
    severity: str | None  # the worst open incident naming the broker here; None: healthy
    label: str  # what hurts here, in words ("" when healthy)
    href: str  # the incident (one), the incidents of this topic and broker (several), or the topic page
    shade: int  # 0..4: the broker's share of the topic's replicas, for a healthy cell


@dataclass(frozen=True)
class BrokerHead:
    id: int
    state: str  # "up", or why it is not: "down: <cause>", "unreachable", "not registered"
    severity: str | None
    leaders: int
    replicas: int
    href: str
    incidents: int  # open incidents naming it


@dataclass(frozen=True)
class Row:
    topic: str
    partitions: int
    severity: str | None
    cells: tuple[Cell, ...]
    href: str


@dataclass(frozen=True)
class Grid:
    cluster: str
    brokers: tuple[BrokerHead, ...]
    rows: tuple[Row, ...]
    hidden_healthy: int  # topics not drawn (all healthy) for MAX_TOPICS
    hidden_unhealthy: int
    cluster_incidents: tuple[Incident, ...] = field(default=())  # open incidents of no topic and no broker


def names(i: Incident) -> set[int]:
    """The brokers an incident names: to act on, or its subject."""
    named = i.facts.brokers_named()
    if i.broker is not None:
        named.add(i.broker)
    return named


def _worst(sevs: Iterable[str]) -> str | None:
    return min(sevs, key=lambda s: SEVERITY_ORDER.get(s, 3), default=None)


def _label(found: list[Incident]) -> str:
    """The incidents in words, the most severe kind first."""
    kinds = Counter(SHORT.get(i.type, i.type.lower()) for i in found)
    rank: dict[str, int] = {}
    for i in found:
        k = SHORT.get(i.type, i.type.lower())
        rank[k] = min(rank.get(k, 3), SEVERITY_ORDER.get(i.severity, 3))
    return ", ".join(f"{n} {k}" if n > 1 else k for k, n in sorted(kinds.items(), key=lambda kv: (rank[kv[0]], -kv[1])))


def _incidents_href(cluster: str, **q: Any) -> str:
    return "/incidents?" + urlencode({"cluster": cluster, **{k: v for k, v in q.items() if v is not None}})


def broker_heads(cluster: str, view: ClusterView, load: dict[int, tuple[int, int, int, int]], incidents: list[Incident]
                 ) -> tuple[BrokerHead, ...]:
    """Every broker the view registers or that holds replicas, with its state: a BROKER_DOWN incident
    says why it is not up (its cause), else the view's registration."""
    live = dict(view.brokers) if view is not None else {}
    down = {i.broker: i for i in incidents if i.type == "BROKER_DOWN" and i.broker is not None}
    named: Counter[int] = Counter()
    for i in incidents:
        for b in names(i):
            named[b] += 1
    heads = []
    for b in sorted(set(live) | set(load) | set(down)):
        leaders, replicas = load.get(b, (0, 0, 0, 0))[:2]
        if b in down:
            d = down[b]
            state = "unreachable" if d.cause == "unreachable" else f"down: {d.cause or 'unknown'}"
            severity: str | None = d.severity
        elif not live.get(b, False):
            state, severity = "not registered", "warning"
        else:
            state, severity = "up", None
        heads.append(BrokerHead(b, state, severity, leaders, replicas, f"/brokers/{quote(cluster, safe='')}/{b}",
                                named[b]))
    return tuple(heads)


def cluster_grid(cluster: str, view: ClusterView, topic_load: dict[str, TopicLoad],
                 broker_load: dict[int, tuple[int, int, int, int]],
                 open_incidents: Iterable[Incident], max_topics: int | None = MAX_TOPICS) -> Grid:
    """The grid of one cluster from the snapshot: `topic_load` topic -> load.TopicLoad, `broker_load`
    broker -> Counts, `open_incidents` (any clusters; this one's are taken)."""
    mine = [i for i in open_incidents if i.cluster == cluster]
    heads = broker_heads(cluster, view, broker_load, mine)
    ids = [h.id for h in heads]
    by_topic: dict[str, list[Incident]] = {}
    for i in mine:
        if i.topic is not None:
            by_topic.setdefault(i.topic, []).append(i)
    worst = {topic: _worst(i.severity for i in found) for topic, found in by_topic.items()}
    order = sorted(set(topic_load) | set(by_topic), key=lambda t: (SEVERITY_ORDER.get(worst.get(t) or "", 3), t))
    shown = order if max_topics is None else order[:max_topics]
    hidden = order[len(shown):]
    rows = []
    for topic in shown:  # cells only for the rows drawn: a large cluster's healthy rest is counted, not built
        load = topic_load.get(topic)
        counts = load.by_broker if load is not None else {}
        found = by_topic.get(topic, [])
        most = max((c[1] for c in counts.values()), default=0)
        cells = []
        for b in ids:
            here = [i for i in found if b in names(i)]
            lead, rep = counts.get(b, (0, 0, 0, 0))[:2]
            if len(here) == 1:
                href = f"/incidents/{here[0].incident_id}"
            elif here:
                href = _incidents_href(cluster, topic=topic, broker=b)
            else:
                href = f"/topics/{quote(cluster, safe='')}/{quote(topic, safe='')}"
            cells.append(Cell(lead, rep, _worst(i.severity for i in here), _label(here), href,
                              0 if not rep or not most else 1 + min(3, 3 * rep // most)))
        rows.append(Row(topic, load.partitions if load is not None else 0, worst.get(topic), tuple(cells),
                        f"/topics/{quote(cluster, safe='')}/{quote(topic, safe='')}"))
    return Grid(cluster, heads, tuple(rows), sum(1 for t in hidden if worst.get(t) is None),
                sum(1 for t in hidden if worst.get(t) is not None),
                tuple(i for i in mine if i.topic is None and i.broker is None))
