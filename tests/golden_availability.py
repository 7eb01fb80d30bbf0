"""Golden cases for PARTITION_UNAVAILABLE (leader_unreachable), shared by the unit and Spark tests.

Each case: (number, leader, live brokers, unreachable brokers, expected unavailable, reason).
"""

CASES = [
    (1, 1, [1, 2, 3], [], False, "every broker answers"),
    (2, 2, [1, 2, 3], [2], True, "the leader's port refuses connections while it is still registered (SIGKILL)"),
    (3, 1, [1, 2, 3], [2], False, "a follower is unreachable: the partition still serves (under-replicated later)"),
    (4, -1, [1, 3], [2], False, "leader -1: the controller already acted, OFFLINE_PARTITION says it"),
    (5, 2, [1, 3], [2], False, "leader on a broker no longer registered: offline (Kafka's own verdict), not this"),
    (6, 3, [1, 2, 3], None, False, "no unreachable list (older collector, ZooKeeper quick record): nothing judged"),
]
