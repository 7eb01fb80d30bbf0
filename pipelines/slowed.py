"""The partitions a slow broker hurts while KafkaBrokerSlow pages for it: one page names the broker and the kind,
and the partitions' own pages it explains wait (the shipped rules hold them with `unless on(cluster, topic,
partition) krm_partition_slowed_by`). Pure, built from the open incidents on each scrape.

A partition is slowed by the broker when an open incident of one of `HELD` names it (as its leader, or among
the brokers to act on: the ISR follower holding its high watermark back) and opened while the broker was slow
(from incident_groups.LEAD_MS before the BROKER_SLOW incident opened: the stall may be seen first). Only a
critical BROKER_SLOW holds pages: a warning pages nobody, so the partitions page for themselves.
"""

from __future__ import annotations

from typing import Iterable, Iterator

from prometheus_client.metrics_core import Metric

from pipelines.detectors import availability, hw_stall, isr, slow
from pipelines.detectors.details import PartitionDetails
from pipelines.incident_groups import LEAD_MS
from pipelines.incidents import Incident

HELD = (hw_stall.TYPE, availability.TYPE, isr.UNDER_MIN_ISR)  # the partition pages a slow broker explains


def _named(i: Incident) -> set[int]:
    """The brokers a partition incident names: its leader, and the brokers to act on."""
    facts = i.facts
    if not isinstance(facts, PartitionDetails):
        return set()
    return facts.brokers_named() | ({facts.leader} if facts.leader is not None else set())


def hurting(incidents: Iterable[Incident], cluster: str) -> set[int]:
    """The brokers of `cluster` that an open critical partition page of `HELD` names: the partitions' own signals
    that clients are hurt (BROKER_SLOW turns critical on them: pipelines/detectors/slow.py)."""
    out: set[int] = set()
    for i in incidents:
        if i.cluster == cluster and i.status == "open" and i.severity == "critical" and i.type in HELD:
            out |= _named(i)
    return out


def slowed(incidents: Iterable[Incident]) -> set[tuple[str, str, int, int]]:
    """(cluster, topic, partition, broker) of the open partition incidents a critical BROKER_SLOW explains."""
    items = incidents if isinstance(incidents, (list, tuple)) else list(incidents)
    heads = {(i.cluster, i.broker): i.opened_at_ms for i in items
             if i.type == slow.TYPE and i.status == "open" and i.severity == "critical" and i.broker is not None}
    if not heads:  # every scrape at rest: one pass, nothing built
        return set()
    out = set()
    for i in items:
        if i.status != "open" or i.type not in HELD or i.topic is None or i.partition is None:
            continue
        for b in _named(i):
            opened = heads.get((i.cluster, b))
            if opened is not None and i.opened_at_ms >= opened - LEAD_MS:
                out.add((i.cluster, i.topic, i.partition, b))
    return out


def series(incidents: Iterable[Incident]) -> Iterator[Metric]:
    """krm_partition_slowed_by{cluster,topic,partition,broker}."""
    from prometheus_client.core import GaugeMetricFamily

    family = GaugeMetricFamily("krm_partition_slowed_by",
                               "1 while the partition's open HW_STALL, PARTITION_UNAVAILABLE or UNDER_MIN_ISR incident "
                               "names a broker that is critically slow (KafkaBrokerSlow pages for it): the partition's "
                               "own pages wait on that one.", labels=["cluster", "topic", "partition", "broker"])
    for cluster, topic, partition, broker in sorted(slowed(incidents)):
        family.add_metric([cluster, topic, str(partition), str(broker)], 1)
    yield family
