"""OFFLINE_PARTITION: a partition with no leader, and why.

Kafka's definition (ZooKeeper-mode controller, `core/src/main/scala/kafka/controller/
PartitionStateMachine.scala`, `PartitionLeaderElectionAlgorithms.offlinePartitionLeaderElection`;
KRaft: `metadata/src/main/java/org/apache/kafka/controller/PartitionChangeBuilder.java`):
a partition is offline when its leader is -1 or sits on a broker that is not alive. The controller
elects the first replica *in assignment order* that is alive and in the ISR; if there is none and
`unclean.leader.election.enable` is true, the first live replica; otherwise nobody, and the leader
stays -1 until an ISR member comes back.

Causes, checked in this order:
- `single_replica_on_dead_broker`: replication factor 1 and that one replica's broker is down
  (seeds/002): only that broker coming back restores the partition.
- `all_isr_replicas_dead`: no ISR member is alive (unclean election disabled, or no live replica
  at all): `details.must_return` names the ISR brokers of which one must come back.
- `live_isr_but_no_leader`: an ISR member is alive but no leader was elected (yet): the controller
  has not acted (or cannot: no active controller).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Sequence

TYPE = "OFFLINE_PARTITION"
SEVERITY = "critical"
SINGLE_REPLICA = "single_replica_on_dead_broker"
ALL_ISR_DEAD = "all_isr_replicas_dead"
LIVE_ISR_NO_LEADER = "live_isr_but_no_leader"


@dataclass(frozen=True)
class OfflineVerdict:
    cause: str
    must_return: tuple[int, ...]  # brokers of which one must come back (empty: none needs to)
    live_isr: tuple[int, ...]  # ISR members that are alive and could lead


def is_offline(leader: int, live: set[int] | frozenset[int]) -> bool:
    return leader == -1 or leader not in live


def classify_offline(leader: int, replicas: Sequence[int], isr: Sequence[int],
                     live: set[int] | frozenset[int]) -> OfflineVerdict | None:
    """None when the partition has a live leader; otherwise why it has none."""
    if not is_offline(leader, live):
        return None
    live_isr = tuple(b for b in replicas if b in live and b in isr)  # assignment order, as the controller scans
    if len(replicas) == 1 and replicas[0] not in live:
        return OfflineVerdict(SINGLE_REPLICA, (replicas[0],), ())
    if not live_isr:
        dead_isr = tuple(b for b in isr if b not in live)
        return OfflineVerdict(ALL_ISR_DEAD, dead_isr, ())
    return OfflineVerdict(LIVE_ISR_NO_LEADER, (), live_isr)


def offline_columns(leader: Any, replicas: Any, isr: Any, live: Any) -> dict[str, Any]:
    """The same rule as Spark Columns (built-in expressions only, no UDF), over any four columns or
    lambda variables: {"is_offline", "cause", "must_return", "live_isr"}."""
    from pyspark.sql import functions as F

    is_live = lambda b: F.array_contains(live, b)  # noqa: E731
    empty = F.array().cast("array<int>")
    offline = (leader == -1) | ~is_live(leader)
    live_isr = F.filter(replicas, lambda b: is_live(b) & F.array_contains(isr, b))
    dead_isr = F.filter(isr, lambda b: ~is_live(b))
    single = (F.size(replicas) == 1) & ~is_live(F.element_at(replicas, 1))
    no_live_isr = F.size(live_isr) == 0
    cause = F.when(single, F.lit(SINGLE_REPLICA)).when(no_live_isr, F.lit(ALL_ISR_DEAD)).otherwise(F.lit(LIVE_ISR_NO_LEADER))
    must_return = F.when(single, F.slice(replicas, 1, 1)).when(no_live_isr, dead_isr).otherwise(empty)
    live_isr_out = F.when(single | no_live_isr, empty).otherwise(live_isr)
    return {"is_offline": offline, "cause": cause, "must_return": must_return, "live_isr": live_isr_out}
