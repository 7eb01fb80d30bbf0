"""The partitions a slow broker hurts while KafkaBrokerSlow pages for it: one page names the broker and the kind,
and the partitions' own pages it explains wait (the shipped rules hold them with `unless on(cluster, topic,
partition) krm_partition_slowed_by`). Pure, built from the open incidents on each scrape, but for `CriticalSpells`:
when each BROKER_SLOW was last critical, kept by the alert path.

A partition is slowed by the broker when an open incident of one of `HELD` names it (as its leader, among the
brokers to act on: the ISR follower holding its high watermark back, or among its replicas) and opened while the
broker was slow (from incident_groups.LEAD_MS before the BROKER_SLOW incident opened: the stall may be seen first). Only a
critical BROKER_SLOW holds pages: a warning pages nobody, so the partitions page for themselves. Once it
resolves, the pages of its spell stay held for GRACE_MS: a stall or a failed canary round takes a poll or a round
to clear after the broker is at pace again, and paging for that tail would page twice for one cause.

The canary's writes wait on every in-sync replica (acks=all): a canary partition led by a healthy broker fails
when a slow one follows it, so KafkaCanaryProduceFailing is held by `krm_canary_slowed_by` (the canary record
carries the ISR its write waited on).
"""

from __future__ import annotations

from dataclasses import replace
from typing import Iterable, Iterator

from prometheus_client.metrics_core import Metric

from pipelines.detectors import slow
from pipelines.detectors.canary import CanarySample
from pipelines.detectors.details import PartitionDetails
from pipelines.incident_groups import LEAD_MS, SLOWED, spell_began
from pipelines.incidents import Incident

HELD = SLOWED  # the partition pages a slow broker explains
GRACE_MS = 20_000  # a spell's pages stay held this long after its BROKER_SLOW resolved critical
TAIL_MS = 5_000  # a partition page opening this long after the spell ended is still its (a stall is seen late)
_FOREVER = 1 << 62


def hurting(incidents: Iterable[Incident], cluster: str) -> set[int]:
    """The brokers of `cluster` that an open critical partition page of `HELD` blames: the partitions' own signals
    that clients are hurt (BROKER_SLOW turns critical on them: pipelines/detectors/slow.py). The brokers to act on
    (the follower holding a high watermark back), else the leader: the leader of a partition a slow follower holds
    back is not hurting its clients itself."""
    out: set[int] = set()
    for i in incidents:
        if i.cluster == cluster and i.status == "open" and i.severity == "critical" and i.type in HELD:
            facts = i.facts
            if isinstance(facts, PartitionDetails):
                out |= facts.brokers_named() or ({facts.leader} if facts.leader is not None else set())
    return out


class CriticalSpells:
    """When each BROKER_SLOW incident was last critical: a spell whose clients are no longer hurt turns a warning
    (the broker still a little slow) or resolves, and either way its tail stays held for GRACE_MS. The one memory
    of this module, kept by the alert path beside its incident book."""

    def __init__(self) -> None:
        self._last: dict[tuple[object, ...], int] = {}  # incident key -> last_seen_at_ms while critical

    def ended(self, open_incidents: Iterable[Incident], resolved: Iterable[Incident]) -> tuple[Incident, ...]:
        """The BROKER_SLOW incidents no longer critical, each as if it resolved critical when it last was (what
        `slowed` and `canary_slowed` take as `ended`). `resolved`: the resolved BROKER_SLOW incidents the book holds."""
        mine = [i for i in open_incidents if i.type == slow.TYPE]
        for i in mine:
            if i.severity == "critical":
                self._last[i.key] = i.last_seen_at_ms
        past = [*(i for i in mine if i.severity != "critical"), *resolved]
        out = []
        for i in past:
            at = i.resolved_at_ms if i.status == "resolved" and i.severity == "critical" else self._last.get(i.key)
            if at is not None:
                out.append(replace(i, status="resolved", severity="critical", resolved_at_ms=at))
        held = {i.key for i in mine} | {i.key for i in past}  # the book forgot the rest
        self._last = {k: v for k, v in self._last.items() if k in held}
        return tuple(out)


def _heads(incidents: list[Incident], ended: Iterable[Incident], now_ms: int | None) -> dict[tuple[str, int], tuple[int, int]]:
    """(cluster, broker) -> (when its BROKER_SLOW opened, the latest a partition page it explains may open): a
    critical one open now, or one that ended critical within GRACE_MS of `now_ms` (its stalls and failed canary
    writes take a poll or a round to clear once the broker is at pace again: they are the same spell's)."""
    heads = {(i.cluster, i.broker): (i.opened_at_ms, _FOREVER) for i in incidents
             if i.type == slow.TYPE and i.status == "open" and i.severity == "critical" and i.broker is not None}
    if now_ms is not None:
        for i in ended:
            if (i.type == slow.TYPE and i.status == "resolved" and i.severity == "critical" and i.broker is not None
                    and i.resolved_at_ms is not None and now_ms - i.resolved_at_ms <= GRACE_MS):
                heads.setdefault((i.cluster, i.broker), (i.opened_at_ms, i.resolved_at_ms + TAIL_MS))
    return heads


def slowed(incidents: Iterable[Incident], ended: Iterable[Incident] = (), now_ms: int | None = None,
           ) -> set[tuple[str, str, int, int]]:
    """(cluster, topic, partition, broker) of the open partition incidents a critical BROKER_SLOW explains: open
    now, or among `ended` (resolved BROKER_SLOW incidents) within GRACE_MS of `now_ms`."""
    items = incidents if isinstance(incidents, (list, tuple)) else list(incidents)
    heads = _heads(list(items), ended, now_ms)
    if not heads:  # every scrape at rest: one pass, nothing built
        return set()
    out = set()
    for i in items:
        if i.status != "open" or i.type not in HELD or i.topic is None or i.partition is None:
            continue
        began = spell_began(i)
        for b in i.facts.brokers_waited_on() if isinstance(i.facts, PartitionDetails) else ():
            head = heads.get((i.cluster, b))
            if head is not None and (began is None or head[0] - LEAD_MS <= began <= head[1]):
                out.add((i.cluster, i.topic, i.partition, b))
    return out


def canary_slowed(samples: Iterable[CanarySample], incidents: Iterable[Incident], ended: Iterable[Incident] = (),
                  now_ms: int | None = None) -> set[tuple[str, int, int]]:
    """(cluster, canary broker, slow broker): the canary partitions whose last acks=all write waited on a critically
    slow broker among its in-sync replicas (the leader, or a follower the leader waits for)."""
    heads = _heads(list(incidents), ended, now_ms)
    if not heads:
        return set()
    return {(s.cluster, s.broker, b) for s in samples for b in (s.isr or (() if s.leader is None else (s.leader,)))
            if (s.cluster, b) in heads}


def series(incidents: Iterable[Incident], canary: Iterable[CanarySample] = (), ended: Iterable[Incident] = (),
           now_ms: int | None = None) -> Iterator[Metric]:
    """krm_partition_slowed_by{cluster,topic,partition,broker} and krm_canary_slowed_by{cluster,broker,slow_broker}."""
    from prometheus_client.core import GaugeMetricFamily

    items = list(incidents)
    ended = list(ended)
    family = GaugeMetricFamily("krm_partition_slowed_by",
                               "1 while the partition's open HW_STALL, PARTITION_UNAVAILABLE or UNDER_MIN_ISR incident "
                               "names a broker that is critically slow (KafkaBrokerSlow pages for it), or was within "
                               f"{GRACE_MS // 1000} s: the partition's own pages wait on that one.",
                               labels=["cluster", "topic", "partition", "broker"])
    for cluster, topic, partition, broker in sorted(slowed(items, ended, now_ms)):
        family.add_metric([cluster, topic, str(partition), str(broker)], 1)
    yield family
    by_canary = GaugeMetricFamily("krm_canary_slowed_by",
                                  "1 while the canary partition the broker should lead had a critically slow broker "
                                  f"(slow_broker; or one within {GRACE_MS // 1000} s) among the in-sync replicas its "
                                  "last write waited on: KafkaCanaryProduceFailing waits on KafkaBrokerSlow's page.",
                                  labels=["cluster", "broker", "slow_broker"])
    for cluster, broker, slow_broker in sorted(canary_slowed(canary, items, ended, now_ms)):
        by_canary.add_metric([cluster, str(broker), str(slow_broker)], 1)
    yield by_canary
