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

# PARTITION_UNAVAILABLE leader_not_serving: (number, leader, live, unreachable, leader_error, leader_error_since_ms,
# observed_at_ms, under min ISR, expected, reason). NOT_SERVING_WINDOW_MS is 3000.
NOT_SERVING_CASES = [
    (101, 2, [1, 2, 3], [], "NOT_LEADER_OR_FOLLOWER", 1000, 4000, False, True,
     "the metadata's leader has refused the partition for 3 s: it has not heard that it leads"),
    (102, 2, [1, 2, 3], [], "OFFSET_NOT_AVAILABLE", 1000, 4500, False, True,
     "a new leader's HW below its epoch start for 3.5 s: its ISR followers do not fetch from it"),
    (103, 2, [1, 2, 3], [], "NOT_LEADER_OR_FOLLOWER", 1000, 3999, False, False,
     "refused for just under the window: an election's first moments"),
    (104, 2, [1, 2, 3], [], None, None, 4000, False, False, "the leader gave its HW"),
    (105, 2, [1, 3], [], "NOT_LEADER_OR_FOLLOWER", 1000, 9000, False, False,
     "the leader is no longer registered: OFFLINE_PARTITION's case"),
    (106, -1, [1, 2, 3], [], "NOT_LEADER_OR_FOLLOWER", 1000, 9000, False, False, "no leader: OFFLINE_PARTITION's case"),
    (107, 2, [1, 2, 3], [2], "OFFSET_NOT_AVAILABLE", 1000, 9000, False, False,
     "the leader judged unreachable since: leader_unreachable says it (that cause wins)"),
    (108, 2, [1, 2, 3], [], "STALE_METADATA", 1000, 5000, False, True,
     "ZooKeeper mode: the brokers' metadata still names the old leader 4 s after the controller elected broker 2"),
    (109, 2, [1, 2, 3], [], "OFFSET_NOT_AVAILABLE", 1000, 9000, True, False,
     "Kafka 4 holds the HW under min ISR by design (KIP-966): UNDER_MIN_ISR's case, with its own wait"),
    (110, 2, [1, 2, 3], [], "NOT_LEADER_OR_FOLLOWER", 1000, 9000, True, True,
     "under min ISR too, but the leader has not heard that it leads: not Kafka 4's hold"),
]
