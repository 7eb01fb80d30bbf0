"""Golden cases for OFFLINE_PARTITION, shared by the pure-Python test (unit) and the Spark test.

Each case: (number, leader, replicas, isr, live brokers, expected cause or None, must_return, reason).
"""

from pipelines.detectors.offline import ALL_ISR_DEAD, LIVE_ISR_NO_LEADER, SINGLE_REPLICA

CASES = [
    (1, 1, [1], [1], {1, 2, 3}, None, (), "RF 1, its broker alive and leading: healthy"),
    (2, -1, [1], [1], {2, 3}, SINGLE_REPLICA, (1,), "seeds/002: RF 1, only replica's broker dead, leader -1"),
    (3, 1, [1], [1], {2, 3}, SINGLE_REPLICA, (1,), "controller has not noticed yet: leader still names the dead broker"),
    (4, 2, [1, 2, 3], [1, 2, 3], {1, 2, 3}, None, (), "RF 3, non-preferred leader alive: healthy (imbalance is not offline)"),
    (5, -1, [1, 2], [1], {2}, ALL_ISR_DEAD, (1,), "ISR shrank to the dead broker; the live replica is out of sync"),
    (6, -1, [1, 2, 3], [1, 2], set(), ALL_ISR_DEAD, (1, 2), "every broker down: one of the last ISR must return"),
    (7, -1, [1, 2, 3], [2, 3], {1, 3}, LIVE_ISR_NO_LEADER, (), "ISR member 3 is alive but no leader elected yet"),
    (8, 3, [1, 2, 3], [1, 2, 3], {1, 2}, LIVE_ISR_NO_LEADER, (), "leader on a dead broker, live ISR members can take over"),
    (9, -1, [2], [], {1}, SINGLE_REPLICA, (2,), "RF 1 with an empty ISR (KRaft keeps ISR [] in some paths)"),
    (10, -1, [1, 2], [], {1, 2}, ALL_ISR_DEAD, (), "empty ISR, replicas alive: no ISR member can lead (unclean off)"),
    (11, 1, [1, 2, 3], [1], {1}, None, (), "ISR of just the leader: under-replicated, but not offline"),
]
