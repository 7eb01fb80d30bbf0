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

from pipelines.detectors.rule import PartitionView, Rule

TYPE = "PARTITION_UNAVAILABLE"
LEADER_UNREACHABLE = "leader_unreachable"
CANARY_FAILED = "canary_failed"  # judged on the driver from canary rounds (pipelines/detectors/canary.py)


def leader_unreachable(leader: int, live: Sequence[int], unreachable: Sequence[int] | None) -> bool:
    """The metadata's leader is registered (not offline) but clients cannot reach it."""
    return leader >= 0 and leader in live and leader in (unreachable or ())


def leader_unreachable_column(leader: Any, live: Any, unreachable: Any) -> Any:
    from pyspark.sql import functions as F

    # the (usually empty) unreachable list first: every partition of every poll passes here
    return F.coalesce(F.array_contains(unreachable, leader) & (leader >= 0) & F.array_contains(live, leader),
                      F.lit(False))


def _affected(view: PartitionView) -> Any:
    return view.memo("unavailable", lambda: leader_unreachable_column(view.p["leader"], view.live, view.unreachable))


def _plan(view: PartitionView) -> Any:
    from pyspark.sql import functions as F

    return F.array(F.when(_affected(view), view.finding(
        RULE, LEADER_UNREACHABLE, view.details(view.unreachable.alias("unreachable_brokers")))))


RULE = Rule(TYPE, {LEADER_UNREACHABLE: "critical", CANARY_FAILED: "critical"}, "partition",
            "clients cannot use the partition, before the controller says so", scope="offsets", plan=_plan,
            affected=_affected,
            routine=(
            "A controlled shutdown hands leadership over before the ports close, so a gated restart shows none; a "
            "crashed or hung leader does (critical) until the controller acts. Its alert waits 5 s, past the sub- "
            "second gaps of a starting cluster."))
