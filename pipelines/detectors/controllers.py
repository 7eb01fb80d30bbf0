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
  Kafka's ZkMigrationState numbers); judged in the alert projection, and opened on the pipeline's clock
  while polls stay home (`TimedOpening`, pipelines/clock.py).

Split brain from JMX: more than one broker says it is the active controller.

Metadata answers name one controller; only the brokers themselves can reveal a split brain (a
deposed controller that has not noticed, e.g. after a long GC pause or a ZooKeeper partition):
`kafka.controller:type=KafkaController,name=ActiveControllerCount` is 1 on every broker that
believes it is the controller (KafkaController.scala, ZooKeeper mode; in KRaft mode the controller
quorum is separate processes and the brokers report 0). Judged on one scrape round, so a clean
fail-over between two rounds is not a split brain.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from pipelines.detectors.details import Brokers, Details
from pipelines.detectors.exports import Alert, INCIDENTS_OF_TYPE, console
from pipelines.detectors.rule import ClusterRecordView, Rule, TimedOpening

if TYPE_CHECKING:
    from pyspark.sql import Column

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


MIGRATION_DETAILS = ("migration_phase", "migration_phase_since_ms")  # a stuck phase's details (both forms)


def _plan(view: ClusterRecordView) -> Column:
    from pyspark.sql import functions as F

    cid = view.cs["controller_id"]
    phase, since = view.cs["migration_phase"], view.cs["migration_phase_since_ms"]
    assert view.observed_at_ms is not None  # (a plan's view has its record's time)
    age = view.observed_at_ms - since
    details = F.to_json(F.struct(phase.alias("migration_phase"), since.alias("migration_phase_since_ms")))
    settings = view.settings
    assert settings is not None  # (the alert plan's view has them: pipelines/findings.py)
    return F.array(
        F.when(cid.isNull() | (cid < 0), view.finding(RULE, NO_CONTROLLER, F.lit("{}"))),
        F.when((phase == COPYING) & (age >= settings.migration_copy_stuck_ms),
               view.finding(RULE, MIGRATION_COPY_STUCK, details)),
        F.when((phase == DUAL_WRITE) & (age >= settings.migration_dual_write_max_ms),
               view.finding(RULE, MIGRATION_DUAL_WRITE_STUCK, details)))


ALERTS = (
    Alert("KafkaControllerAnomaly",
          'krm_incidents_open{type="CONTROLLER_ANOMALY",severity="critical"} > 0',
          "critical", wait="30s",
          summary="{{ $labels.cluster }}: no working controller",
          runbook=("Without a controller no leader is elected and no broker failure is handled. `krm incidents --open --type"
                   " CONTROLLER_ANOMALY --json` names the cause: no_active_controller (ZooKeeper mode: check /controller and"
                   " the brokers' controller logs), multiple_active_controllers (split brain), no_quorum_leader (KRaft: the "
                   "metadata quorum has no leader or lost its majority; restart the controllers in details.out)."),
          links=(("incidents", console(INCIDENTS_OF_TYPE)),),
          why=("30 s: a voter restarting in a rolling restart or upgrade can leave the quorum leader without a caught-up "
               "majority for a few seconds (CI: `majority lost` for one poll while the next voter was still catching up); "
               "that is routine. Half a minute without a working controller is not: no leader is elected and no dead broker "
               "is fenced meanwhile.")),
    Alert("KafkaControllerQuorumDegraded",
          "krm_kraft_quorum_voters_caught_up < krm_kraft_quorum_voters",
          "warning", wait="1m",
          summary="{{ $labels.cluster }}: {{ $value }} controller quorum voter(s) caught up",
          runbook=("krm_kraft_voter_caught_up names the voters that stopped fetching or fell behind (CONTROLLER_ANOMALY "
                   "voter_lagging, quorum_at_risk: details.can_lose is how many more voters may go). Restart or fix that "
                   "controller: its log, disk, network to the quorum leader."),
          links=(("console", console()),),
          why=("KRaft: a voter of the metadata quorum is down or behind. The quorum still works, but with only a majority "
               "left the next controller loss stops all metadata changes.")),
    Alert("KafkaMigrationMetadataCopyStuck", "krm_cluster_migration_state == 2", "warning", wait="15m",
          summary=("{{ $labels.cluster }}: a KRaft controller claimed /controller but has not finished copying ZooKeeper's "
                   "metadata"),
          runbook=("The active KRaft controller starts copying once every broker has registered with it in migration mode. "
                   "Look for a broker still without zookeeper.metadata.migration.enable or controller.quorum.voters, or an "
                   "inter.broker.protocol.version that differs from the controllers' metadata.version; the controller's log "
                   "(KRaftMigrationDriver) says what it waits for."),
          why=("A ZooKeeper → KRaft migration (KIP-866) is planned work and pages nobody; one left half-way is worth a look."
               " krm_cluster_migration_state uses Kafka's ZkMigrationState numbers.")),
    Alert("KafkaMigrationStuckInDualWrite", "krm_cluster_migration_state == 1", "warning", wait="24h",
          summary=("{{ $labels.cluster }}: in the migration's dual writes for a day ({{ with printf "
                   '"krm_cluster_migration_zk_brokers{cluster=%q}" $labels.cluster | query }}{{ . | first | value }}{{ end '
                   "}} broker(s) still in ZooKeeper mode)"),
          runbook=("The KRaft controller holds the metadata and still writes every change to ZooKeeper. With brokers still "
                   "in ZooKeeper mode, roll them into KRaft mode (process.roles=broker, node.id, no zookeeper.connect); with"
                   " none left, finalize (restart the controllers without zookeeper.metadata.migration.enable and "
                   "zookeeper.connect) once satisfied: rolling back to ZooKeeper is possible only until then. A planned soak"
                   " silences this alert.")),
)


class ControllerDetails(Details):
    """A CONTROLLER_ANOMALY incident's details, by cause: `multiple_active_controllers` names the claimants
    (`active_controllers`); a stuck migration its phase; the KRaft quorum's causes the voters (pipelines/
    detectors/quorum.py: `voter_lagging` one voter's fetch state, the others the counts and the voters `out`)."""

    ACT_ON = ("out", "active_controllers")
    active_controllers: Brokers = ()
    migration_phase: int | None = None  # ZooKeeper migration state: 1 dual-write, 2 copying (ZkMigrationState)
    migration_phase_since_ms: int | None = None
    error: str | None = None
    quorum_epoch: int | None = None  # the quorum leader's epoch
    leader_id: int | None = None  # the quorum's leader
    state: str | None = None  # a voter's fetch state: caught_up | lagging | not_fetching
    records_behind: int | None = None
    fetch_age_ms: int | None = None
    caught_up_age_ms: int | None = None
    voter_count: int | None = None
    healthy: int | None = None
    majority: int | None = None
    can_lose: int | None = None
    out: Brokers = ()  # voters lagging or not fetching


RULE = Rule(TYPE, {NO_CONTROLLER: "critical", MULTIPLE: "critical", NO_QUORUM_LEADER: "critical",
                   VOTER_LAGGING: "warning", QUORUM_AT_RISK: "warning", MIGRATION_COPY_STUCK: "warning",
                   MIGRATION_DUAL_WRITE_STUCK: "warning"}, "cluster",
            "no active controller, more than one, a KRaft quorum losing its majority, or a ZooKeeper → KRaft "
            "migration left half-way", plan=_plan, details=ControllerDetails,
            opens=(TimedOpening(MIGRATION_COPY_STUCK, "migration_phase_since_ms", "migration_copy_stuck_ms",
                                lambda cs: cs.get("migration_phase") == COPYING, MIGRATION_DETAILS),
                   TimedOpening(MIGRATION_DUAL_WRITE_STUCK, "migration_phase_since_ms", "migration_dual_write_max_ms",
                                lambda cs: cs.get("migration_phase") == DUAL_WRITE, MIGRATION_DETAILS)),
            alerts=ALERTS, routine=(
            "A controller fail-over (ZooKeeper mode) lasts under its 5 s grace; restarting one KRaft voter of "
            "three is `voter_lagging` / `quorum_at_risk` (warnings). No active controller or no quorum stops "
            "every election: critical. A ZooKeeper → KRaft migration pages nobody; one left in a phase past "
            "`migration_copy_stuck_s` / `migration_dual_write_max_s` is a warning."))
