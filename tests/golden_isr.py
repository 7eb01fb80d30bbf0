"""Golden cases for UNDER_REPLICATED / UNDER_MIN_ISR / AT_MIN_ISR (partitions with a live leader).

(number, replicas, isr, min.insync.replicas, expected types, effective min ISR, kafka-topics view, reason)
"""

from pipelines.detectors.isr import AT_MIN_ISR as AT
from pipelines.detectors.isr import UNDER_MIN_ISR as UNDER
from pipelines.detectors.isr import UNDER_REPLICATED as URP

CASES = [
    (1, [1, 2, 3], [1, 2, 3], 2, (), 2, {}, "full ISR: healthy"),
    (2, [1, 2, 3], [1, 2], 2, (URP, AT), 2, {}, "one follower out, ISR at min 2: one more loss stops acks=all"),
    (3, [1, 2, 3], [1], 2, (URP, UNDER), 2, {}, "two followers out: below min ISR, acks=all refused"),
    (4, [1, 2, 3], [1, 2], 1, (URP,), 1, {}, "min ISR 1: under-replicated only"),
    (5, [1], [1], 1, (), 1, {}, "RF 1 at min ISR by Kafka's definition, but nothing was lost: no incident"),
    (6, [1], [1], 2, (), 1, {"under_min_isr": True, "at_min_isr": False},
     "min.insync.replicas 2 > RF 1: the broker clamps to 1 (at min, no event); kafka-topics says under"),
    (7, [1, 2], [1], 3, (URP, UNDER), 2, {}, "min ISR 3 > RF 2: clamped to 2, and 1 < 2 either way"),
    (8, [1, 2, 3], [1, 2], None, (URP,), 1, {}, "unknown config: Kafka's default min ISR 1"),
    (9, [3, 1, 2], [2, 3, 1], 2, (), 2, {}, "ISR order differs from assignment order: still full"),
    (10, [1, 2, 3], [1, 2, 3], 3, (), 3, {}, "RF = min ISR, full: Kafka's AtMinIsr is 1 (config, not event): no incident"),
    (11, [1, 2], [1, 2], 3, (), 2, {"under_min_isr": True, "at_min_isr": False},
     "min ISR 3 > RF 2, full ISR: the broker is at min (2); kafka-topics lists it under min (3)"),
]

# During a reassignment (KIP-455): (number, replicas, isr, min.insync.replicas, adding, removing, expected types,
# reason). Kafka's replication factor is then the replicas minus the adding ones (TopicCommand.getReplicationFactor).
REASSIGNING = [
    (1, [1, 2, 3, 4], [1, 2], 2, [3, 4], [1, 2], (), "move 1,2 -> 3,4 copying: RF 4 - 2 adding = 2, ISR 2: healthy"),
    (2, [1, 2, 3, 4], [1, 2, 3], 2, [3, 4], [1, 2], (), "3 caught up and joined the ISR: still healthy"),
    (3, [1, 2, 3, 4], [1], 2, [3, 4], [1, 2], (URP, UNDER), "2 fell out during the move: under-replicated and under min ISR"),
    (4, [1, 2, 3], [1, 2], 2, [3], [], (), "RF 2 -> 3 by adding 3: not under-replicated while 3 copies"),
    (5, [1, 2, 3], [1, 2, 3], 2, [], [3], (), "RF 3 -> 2 removing 3: nothing added, full ISR"),
    (6, [1, 2, 3], [1, 2], 2, [], [3], (URP, AT), "removing 3 that is out of sync: RF still 3 (nothing added), as kafka-topics"),
]
