"""CONTROLLER_ANOMALY: the one declaration of the type, judged in three places.

- `no_active_controller` (critical): a successful cluster record names no controller (ZooKeeper mode:
  no broker has held /controller for `CONTROLLER_ELECTION_GRACE_S`, collectors/zookeeper.py);
  judged in the alert projection (see pipelines/detectors/brokers.py
  for why KRaft never shows it).
- `no_quorum_leader`, `voter_lagging`, `quorum_at_risk`: the KRaft metadata quorum
  (pipelines/detectors/quorum.py, on the driver).
- `multiple_active_controllers` (critical), from the brokers' own JMX, below.
- `migration_copy_stuck`, `migration_dual_write_stuck` (warnings): a ZooKeeper → KRaft migration
  (KIP-866) left half-way: a KRaft controller claimed /controller but has not copied ZooKeeper's
  metadata for `[pipeline] migration_copy_stuck_s` (it waits for every broker to register with it in
  migration mode: one is missing or misconfigured), or the cluster has been in dual writes for
  `migration_dual_write_max_s` (brokers still in ZooKeeper mode, or finalization never done; rolling
  back is possible only until then). The phase comes from the collector (collectors/zookeeper.py,
  Kafka's ZkMigrationState numbers); judged in the alert projection.

Split brain from JMX: more than one broker says it is the active controller.

Metadata answers name one controller; only the brokers themselves can reveal a split brain (a
deposed controller that has not noticed, e.g. after a long GC pause or a ZooKeeper partition):
`kafka.controller:type=KafkaController,name=ActiveControllerCount` is 1 on every broker that
believes it is the controller (KafkaController.scala, ZooKeeper mode; in KRaft mode the controller
quorum is separate processes and the brokers report 0). Judged on one scrape round, so a clean
fail-over between two rounds is not a split brain.
"""

from __future__ import annotations

from typing import Any

from pipelines.detectors.rule import ClusterView, Rule

TYPE = "CONTROLLER_ANOMALY"
NO_CONTROLLER = "no_active_controller"
MULTIPLE = "multiple_active_controllers"
NO_QUORUM_LEADER = "no_quorum_leader"
VOTER_LAGGING = "voter_lagging"
QUORUM_AT_RISK = "quorum_at_risk"
MIGRATION_COPY_STUCK = "migration_copy_stuck"
MIGRATION_DUAL_WRITE_STUCK = "migration_dual_write_stuck"
# Kafka's ZkMigrationState numbers (metadata/src/main/java/org/apache/kafka/metadata/migration/ZkMigrationState.java)
DUAL_WRITE, COPYING = 1, 2


def active_controllers(counts: dict[int, float]) -> list[int]:
    """`counts`: broker -> ActiveControllerCount from one scrape round (reachable brokers only)."""
    return sorted(b for b, n in counts.items() if n >= 1)


def split_brain(counts: dict[int, float]) -> list[int] | None:
    claimants = active_controllers(counts)
    return claimants if len(claimants) > 1 else None


def _plan(view: ClusterView) -> Any:
    from pyspark.sql import functions as F

    cid = view.cs["controller_id"]
    phase, since = view.cs["migration_phase"], view.cs["migration_phase_since_ms"]
    age = view.observed_at_ms - since
    details = F.to_json(F.struct(phase.alias("migration_phase"), since.alias("migration_phase_since_ms")))
    settings = view.settings
    return F.array(
        F.when(cid.isNull() | (cid < 0), view.finding(RULE, NO_CONTROLLER, F.lit("{}"))),
        F.when((phase == COPYING) & (age >= settings.migration_copy_stuck_ms),
               view.finding(RULE, MIGRATION_COPY_STUCK, details)),
        F.when((phase == DUAL_WRITE) & (age >= settings.migration_dual_write_max_ms),
               view.finding(RULE, MIGRATION_DUAL_WRITE_STUCK, details)))


RULE = Rule(TYPE, {NO_CONTROLLER: "critical", MULTIPLE: "critical", NO_QUORUM_LEADER: "critical",
                   VOTER_LAGGING: "warning", QUORUM_AT_RISK: "warning", MIGRATION_COPY_STUCK: "warning",
                   MIGRATION_DUAL_WRITE_STUCK: "warning"}, "cluster",
            "no active controller, more than one, a KRaft quorum losing its majority, or a ZooKeeper → KRaft "
            "migration left half-way", plan=_plan,
            routine=(
            "A controller fail-over (ZooKeeper mode) lasts under its 5 s grace; restarting one KRaft voter of "
            "three is `voter_lagging` / `quorum_at_risk` (warnings). No active controller or no quorum stops "
            "every election: critical. A ZooKeeper → KRaft migration pages nobody; one left in a phase past "
            "`migration_copy_stuck_s` / `migration_dual_write_max_s` is a warning."))
