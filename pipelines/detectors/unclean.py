"""UNCLEAN_LEADER_ELECTION: the partition's new leader was not in the ISR it had before.

A clean election picks the new leader from the ISR (`PartitionLeaderElectionAlgorithms.
offlinePartitionLeaderElection`, core/src/main/scala/kafka/controller/; KRaft:
metadata/src/main/java/org/apache/kafka/controller/PartitionChangeBuilder.java); only with
unclean.leader.election.enable may an out-of-sync replica become leader, and the messages it never
received are gone (seeds/003). The collector attaches the previous poll's state whenever the leader
epoch changed (`previous`, collectors/memory.py), so the rule is: a leader now, a different one (or
none) before, and the new one not in the previous ISR.

Limit: the ISR can grow between two polls; a follower that rejoined and was then elected cleanly
within one poll interval would look unclean. ZooKeeper watches (ZK mode) make that window short.
These are events: the incident stays open for the pipeline's `event_hold_s` and then resolves.
"""

from __future__ import annotations

from typing import Any, Sequence

TYPE = "UNCLEAN_LEADER_ELECTION"
SEVERITY = "critical"


def is_unclean(leader: int, previous_leader: int | None, previous_isr: Sequence[int] | None) -> bool:
    if previous_isr is None or leader < 0 or leader == previous_leader:
        return False
    return leader not in previous_isr


def unclean_column(p: Any) -> Any:
    from pyspark.sql import functions as F

    prev = p["previous"]
    return F.coalesce(prev.isNotNull() & (p["leader"] >= 0) & (p["leader"] != prev["leader"])
                      & ~F.array_contains(prev["isr"], p["leader"]), F.lit(False))
