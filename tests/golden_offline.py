"""Golden cases for OFFLINE_PARTITION, shared by the pure-Python test (unit) and the Spark test.

Each case: (number, leader, replicas, isr, elr, last known elr, live brokers, offline replicas,
expected cause or None, must_return, reason). `elr` None: not reported (ZooKeeper mode, Kafka 3.x); []
reported empty. Offline replicas: Metadata's (KIP-112), None where the case does not depend on them.
Cases 12+ follow Kafka 4.4's controller (PartitionChangeBuilder, ReplicationControlManager): the
rule each relies on is named in its reason.
"""

from pipelines.detectors.offline import (ALL_ISR_DEAD, ELR_DOWN, LAST_KNOWN_ELR_ONLY, LIVE_ISR_NO_LEADER, LOG_DIR_OFFLINE,
                                         SINGLE_REPLICA)

CASES = [
    (1, 1, [1], [1], None, None, {1, 2, 3}, None, None, (), "RF 1, its broker alive and leading: healthy"),
    (2, -1, [1], [1], None, None, {2, 3}, None, SINGLE_REPLICA, (1,), "RF 1, only replica's broker dead, leader -1"),
    (3, 1, [1], [1], None, None, {2, 3}, None, SINGLE_REPLICA, (1,), "controller has not noticed yet: leader still names the dead broker"),
    (4, 2, [1, 2, 3], [1, 2, 3], None, None, {1, 2, 3}, None, None, (), "RF 3, non-preferred leader alive: healthy (imbalance is not offline)"),
    (5, -1, [1, 2], [1], None, None, {2}, None, ALL_ISR_DEAD, (1,), "ISR shrank to the dead broker; the live replica is out of sync"),
    (6, -1, [1, 2, 3], [1, 2], None, None, set(), None, ALL_ISR_DEAD, (1, 2), "every broker down: one of the last ISR must return"),
    (7, -1, [1, 2, 3], [2, 3], None, None, {1, 3}, None, LIVE_ISR_NO_LEADER, (), "ISR member 3 is alive but no leader elected yet"),
    (8, 3, [1, 2, 3], [1, 2, 3], None, None, {1, 2}, None, LIVE_ISR_NO_LEADER, (), "leader on a dead broker, live ISR members can take over"),
    (9, -1, [2], [], None, None, {1}, None, SINGLE_REPLICA, (2,), "RF 1 with an empty ISR"),
    (10, -1, [1, 2], [], None, None, {1, 2}, None, ALL_ISR_DEAD, (), "empty ISR, every replica alive: no broker's return helps (unclean off)"),
    (11, 1, [1, 2, 3], [1], None, None, {1}, None, None, (), "ISR of just the leader: under-replicated, but not offline"),
    # Kafka 4 (ELR on)
    (12, -1, [2], [], [2], [2], {1, 3}, None, SINGLE_REPLICA, (2,),
     "RF 1 fenced: the ISR is emptied into the ELR (maybePopulateTargetElr), the leader kept as last known"),
    (13, -1, [2], [], [], [2], {1, 3}, None, SINGLE_REPLICA, (2,),
     "RF 1 broker re-registered after a crash then died again: out of the ELR, still the only replica"),
    (14, -1, [1, 2, 3], [], [1, 3], [1], {4}, None, ELR_DOWN, (1, 3),
     "RF 3 min ISR 2: followers 2, 3 stopped, leader 1 killed: 3 and 1 hold all committed data, 2 does not"),
    (15, -1, [1, 2, 3], [], [1, 3], [1], {3, 4}, None, LIVE_ISR_NO_LEADER, (),
     "ELR member 3 back after a clean stop: may lead while the ISR is empty (isValidNewLeader)"),
    (16, -1, [1, 2, 3], [], [1], [1], {3, 4}, None, ELR_DOWN, (1,),
     "3 back after a SIGKILL: removed from the ELR on registration (handleBrokerShutdown, unclean)"),
    (17, -1, [1, 2, 3], [], [], [1], {2, 3}, None, LAST_KNOWN_ELR_ONLY, (1,),
     "ISR and ELR empty: only the last known leader may be elected, as an unclean election (canElectLastKnownLeader)"),
    (18, -1, [1, 2, 3], [1], [3], [], {2, 3}, None, ALL_ISR_DEAD, (1,),
     "ISR not empty: ELR members may not lead until it is (isValidNewLeader)"),
    (19, -1, [1, 2], [1], [], [], {2}, None, ALL_ISR_DEAD, (1,), "Kafka 3.9 KRaft reports empty ELR lists: judged by the ISR"),
    (20, -1, [1, 2, 3], [], [], [], {3}, None, ALL_ISR_DEAD, (1, 2),
     "nothing eligible and nothing remembered: the dead replicas are all whose return could help"),
    (21, 2, [1, 2, 3], [2], [1], [], {1, 2, 3}, None, None, (), "leader alive with ISR [2] and ELR [1]: online (under min ISR)"),
    # a failed log directory (JBOD, KIP-112): the broker lives, its copy does not (ControllerContext.isReplicaOnline;
    # KRaft: ReplicationControlManager.handleDirectoriesOffline); Metadata lists it in offline_replicas
    (22, -1, [1], [1], None, None, {1, 2, 3}, [1], LOG_DIR_OFFLINE, (1,),
     "RF 1, its broker alive but its log dir failed: no election, the ISR keeps its last member"),
    (23, -1, [1, 2, 3], [1, 2], None, None, {1, 3}, [1, 2], LOG_DIR_OFFLINE, (1, 2),
     "ISR member 1 on a failed disk, 2 dead: 1's disk back or 2 back restores it"),
    (24, 3, [1, 2, 3], [1, 3], None, None, {1, 2, 3}, [1], None, (), "the leader's disk is fine: online"),
    (25, -1, [1, 2, 3], [1], None, None, {1, 2, 3}, [1], LOG_DIR_OFFLINE, (1,),
     "the only ISR member's disk failed; 2 and 3 are alive but out of sync (unclean election off)"),
    (26, -1, [1, 2], [1, 2], None, None, {1, 2}, [1], LIVE_ISR_NO_LEADER, (),
     "2 is online and in the ISR: the controller will elect it (1 is not a candidate)"),
    (27, -1, [1, 2, 3], [], [1], [1], {1, 3}, [1], LOG_DIR_OFFLINE, (1,),
     "Kafka 4: the ISR empty, the one ELR member alive with its copy on a failed log dir"),
    (28, -1, [1, 2], [1], None, None, {2}, [1], ALL_ISR_DEAD, (1,),
     "offline_replicas also lists a dead broker's replicas (KRaft: fenced ones): a dead broker is no failed disk"),
]

# With the brokers' own word on their log directories (the topic record's `failed_log_dir_brokers`, DescribeLogDirs'
# KAFKA_STORAGE_ERROR): (number, leader, replicas, isr, live brokers, offline replicas, brokers reporting a failed
# directory, expected cause, must_return, reason). Metadata lists a restarting broker's replicas offline for a
# moment after it registers; only a broker that reports a failed directory has one.
WITH_DIR_REPORTS = [
    (101, -1, [2], [2], {1, 2, 3}, [2], [], LIVE_ISR_NO_LEADER, (),
     "RF 1, its broker registered again after a kill, logs not yet online: a restart, not a disk (make demo)"),
    (102, -1, [2], [2], {1, 2, 3}, [2], [2], LOG_DIR_OFFLINE, (2,),
     "RF 1, its broker up and reporting a failed directory: the disk"),
    (103, -1, [1, 2, 3], [1], {1, 2, 3}, [1], [2], LIVE_ISR_NO_LEADER, (),
     "broker 2's failed directory says nothing of broker 1's replica: 1 is coming back"),
    (104, -1, [1, 2, 3], [1, 2], {1, 3}, [1, 2], [1], LOG_DIR_OFFLINE, (1, 2),
     "ISR member 1 reports the failed directory, 2 is dead: 1's disk back or 2 back restores it"),
    (105, -1, [1, 2], [1], {2}, [1], [], ALL_ISR_DEAD, (1,), "a dead broker's replica is offline whatever its disks"),
]
