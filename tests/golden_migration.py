"""Golden cases for CONTROLLER_ANOMALY's migration causes, shared by the unit and Spark tests.

Each case: (number, migration phase (Kafka's ZkMigrationState; None: not reported), seconds in it,
expected cause or None, reason). Thresholds: the defaults, migration_copy_stuck_s 900 and
migration_dual_write_max_s 86400.
"""

CASES = [
    (1, 4, 10 * 86400, None, "no migration: ZooKeeper holds the metadata, for ever is fine"),
    (2, 2, 60, None, "a KRaft controller copying ZooKeeper's metadata for a minute: normal"),
    (3, 2, 900, "migration_copy_stuck", "copying for 15 min: a broker never registered in migration mode"),
    (4, 1, 3600, None, "an hour of dual writes: the brokers' second rolling restart under way"),
    (5, 1, 86400, "migration_dual_write_stuck", "a day of dual writes, not finalized"),
    (6, 3, 10 * 86400, None, "finalized: the migration is over"),
    (7, None, 10 * 86400, None, "a KRaft or older collector's record says nothing: nothing judged"),
]
