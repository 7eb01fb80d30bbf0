"""PARTITION_UNAVAILABLE: clients cannot use the partition, before Kafka's controller says so.

Kafka declares a dead broker's partitions offline (or elects new leaders) only when the broker's
session expires: 18 s by default in ZooKeeper mode (zookeeper.session.timeout.ms), 9 s in KRaft
(broker.session.timeout.ms). Until then the metadata still names the dead broker as leader, and
producers and consumers of its partitions fail. The collector sees it first: the topic record's
`unreachable_brokers` holds the registered brokers whose port refuses connections (the process is
gone) or that have been silent for `unreachable_after_s` (collectors/admin.py).

Cause `leader_unreachable` (critical): the partition has a leader by the metadata, and it is one
of those brokers. When the controller acts, the partition either gets a new leader (the incident
resolves) or becomes OFFLINE_PARTITION (the controller confirmed it; this one resolves as the
offline one opens). `krm_partition_unavailable` reports both: every offline cause, and this one.
"""

from __future__ import annotations

from typing import Any, Sequence

TYPE = "PARTITION_UNAVAILABLE"
LEADER_UNREACHABLE = "leader_unreachable"
SEVERITY = "critical"


def leader_unreachable(leader: int, live: Sequence[int], unreachable: Sequence[int] | None) -> bool:
    """The metadata's leader is registered (not offline) but clients cannot reach it."""
    return leader >= 0 and leader in live and leader in (unreachable or ())


def leader_unreachable_column(leader: Any, live: Any, unreachable: Any) -> Any:
    from pyspark.sql import functions as F

    # the (usually empty) unreachable list first: every partition of every poll passes here
    return F.coalesce(F.array_contains(unreachable, leader) & (leader >= 0) & F.array_contains(live, leader),
                      F.lit(False))
