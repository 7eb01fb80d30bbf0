"""Which replication links are cut: HW_STALL incidents grouped by the follower that fetches nothing
and the leader it fails to fetch from. Pure.

A HW_STALL whose holding-back follower still answers krm (not in the incident's `unreachable`) is a
follower that fetches nothing from that partition's leader (pipelines/detectors/hw_stall.py). One
follower stalled behind several leaders is its own side of the links cut (its outgoing connections,
its fetcher threads: "broker 3 fetches nothing from brokers 1, 2, 4"); several followers stalled behind
one leader are the leader's side ("brokers 2, 3 fetch nothing from broker 1"); one pair alone is that
link. Each stalled partition's incident says so in `details.replication_link`, and
krm_replication_link_stalled{cluster, follower, leader} is 1 for each pair while it lasts.
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import replace
from typing import Any, Callable, Iterable, Iterator

from prometheus_client.metrics_core import Metric

from pipelines.detectors.details import parse
from pipelines.detectors.hw_stall import StallDetails
from pipelines.incidents import Finding, Incident

TYPE = "HW_STALL"
Pair = tuple[int, int]  # (follower, leader)


def stopped(details: StallDetails) -> list[Pair]:
    """The (follower, leader) pairs of one HW_STALL's details: followers holding it back that answer krm."""
    leader = details.leader
    if leader is None or leader < 0:
        return []
    silent = set(details.unreachable)
    return [(f, leader) for f in details.holding_back if f not in silent and f != leader]


def side(pair: Pair, pairs: set[Pair]) -> dict[str, Any]:
    """Which side of the link `pair` is cut, judged over every stalled pair of its cluster."""
    follower, leader = pair
    leaders = sorted({ld for f, ld in pairs if f == follower})
    followers = sorted({f for f, ld in pairs if ld == leader})
    if len(leaders) >= 2 and len(leaders) >= len(followers):
        return {"side": "follower", "broker": follower, "peers": leaders,
                "summary": f"broker {follower} fetches nothing from brokers {_names(leaders)}"}
    if len(followers) >= 2:
        return {"side": "leader", "broker": leader, "peers": followers,
                "summary": f"brokers {_names(followers)} fetch nothing from broker {leader}"}
    return {"side": "link", "broker": follower, "peers": [leader],
            "summary": f"broker {follower} fetches nothing from broker {leader}"}


def _names(brokers: list[int]) -> str:
    return ", ".join(str(b) for b in brokers)


def annotate(found: list[Finding], open_incidents: Callable[[], Iterable[Incident]]) -> list[Finding]:
    """This batch's HW_STALL findings with `details.replication_link`, judged over the stalls of each
    cluster: this batch's, and the open ones it does not see again (other topics of the cluster).
    `open_incidents` is called only when the batch has a HW_STALL finding."""
    stalls = [f for f in found if f.type == TYPE]
    if not stalls:
        return found
    latest: dict[tuple[str, str | None, int | None], StallDetails] = {}
    for inc in open_incidents():
        if inc.type == TYPE:
            latest[(inc.cluster, inc.topic, inc.partition)] = _stall(inc.facts)
    seen = {id(f): parse(StallDetails, f.details) for f in stalls}
    for f in stalls:
        latest[(f.cluster, f.topic, f.partition)] = seen[id(f)]
    pairs: dict[str, set[Pair]] = defaultdict(set)
    for (cluster, _, _), details in latest.items():
        pairs[cluster].update(stopped(details))
    out = []
    for f in found:
        mine = stopped(seen[id(f)]) if f.type == TYPE else []
        if mine:
            f = replace(f, details={**f.details, "replication_link": side(mine[0], pairs[f.cluster])})
        out.append(f)
    return out


def _stall(facts: object) -> StallDetails:
    return facts if isinstance(facts, StallDetails) else StallDetails()


def stalled_pairs(open_incidents: Iterable[Incident]) -> dict[str, set[Pair]]:
    out: dict[str, set[Pair]] = defaultdict(set)
    for inc in open_incidents:
        if inc.type == TYPE and inc.status == "open":
            out[inc.cluster].update(stopped(_stall(inc.facts)))
    return out


def series(open_incidents: Iterable[Incident]) -> Iterator[Metric]:
    """krm_replication_link_stalled: one sample per (cluster, follower, leader) pair while it lasts."""
    from prometheus_client.core import GaugeMetricFamily

    fam = GaugeMetricFamily("krm_replication_link_stalled", "1 while the follower fetches nothing from the leader: "
                            "it answers krm at the high watermark of partitions that leader's log grows ahead of "
                            "(HW_STALL, details.replication_link says which side is cut).",
                            labels=["cluster", "follower", "leader"])
    for cluster, pairs in sorted(stalled_pairs(open_incidents).items()):
        for follower, leader in sorted(pairs):
            fam.add_metric([cluster, str(follower), str(leader)], 1)
    yield fam
