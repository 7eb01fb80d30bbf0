"""OFFLINE_PARTITION: a partition with no leader, and why.

Kafka's definition (ZooKeeper-mode controller, `core/src/main/scala/kafka/controller/
PartitionStateMachine.scala`, `PartitionLeaderElectionAlgorithms.offlinePartitionLeaderElection`;
KRaft: `metadata/src/main/java/org/apache/kafka/controller/PartitionChangeBuilder.java`):
a partition is offline when its leader is -1 or sits on a broker that is not alive. The controller
elects the first replica *in assignment order* that is alive and in the ISR; if there is none and
`unclean.leader.election.enable` is true, the first live replica; otherwise nobody, and the leader
stays -1 until an ISR member comes back.

Kafka 4 (KRaft, Eligible Leader Replicas on: KIP-966; `PartitionChangeBuilder` and
`ReplicationControlManager` of metadata/src/main/java/org/apache/kafka/controller/, 4.4.0): when a
fenced broker's removal would leave the ISR below the effective min ISR (min(min.insync.replicas,
RF)), the removed members move to the ELR: they hold every committed message. The ISR may become
*empty*. A replica may then lead if it is in the ISR, or in the ELR while the ISR is empty
(`isValidNewLeader`); failing that, the last known leader (`lastKnownElr`, one broker) may be elected
by Kafka as an unclean election with leader recovery when it comes back (`canElectLastKnownLeader`).
A broker that re-registers after an unclean shutdown (SIGKILL, crash) is first removed from every
ELR (`handleBrokerShutdown`): only a cleanly stopped ELR member brings the partition back cleanly.
Without ELR (ZooKeeper mode, Kafka 3.x KRaft) the ISR is never emptied and the "eligible" replicas
are simply the ISR.

A replica leads only if it is *online*: its broker alive and its copy not on a failed log directory
(JBOD, KIP-112). ZooKeeper mode: `ControllerContext.isReplicaOnline` (core/src/main/scala/kafka/
controller/ControllerContext.scala) leaves `replicasOnOfflineDirs` out of every election; KRaft (JBOD,
KIP-858): `ReplicationControlManager.handleDirectoriesOffline` takes the broker's replicas on the
failed directory out of leadership and the ISR as a fencing would. Either way Metadata lists them in
the partition's `offline_replicas` (with those of dead or fenced brokers), and the broker lives on.
Metadata also lists a restarting broker's replicas there for a moment (registered, its logs not yet
online), so a live broker's offline replica counts as on a failed directory only where the broker
itself says one failed: its DescribeLogDirs answer lists a directory with KAFKA_STORAGE_ERROR
(`ReplicaManager.describeLogDirs`, core/src/main/scala/kafka/server/ReplicaManager.scala), carried in
the topic record's `failed_log_dir_brokers`. A record without that field (an older collector) trusts
Metadata's list as is.

Causes, checked in this order (eligible = the ISR, or the ELR when the ISR is empty):
- `single_replica_on_dead_broker`: replication factor 1 and that one replica's broker is down:
  only that broker coming back restores the partition.
- `live_isr_but_no_leader`: an eligible replica is online but no leader was elected (yet): the
  controller has not acted (or cannot: no active controller). `details.live_isr` names them.
- `log_dir_offline`: no eligible replica is online, and at least one sits on a live broker whose copy
  is on a failed log directory: the brokers are up, the disk is not, so no election and no broker
  restart alone helps: `must_return` names the eligible replicas (one of them back on a working
  disk, or a dead one back, restores the partition).
- `all_isr_replicas_dead`: the ISR is not empty and none of its members is alive (unclean election
  disabled, or no live replica at all): `details.must_return` names the ISR brokers of which one must
  come back.
- `elr_replicas_down` (Kafka 4): the ISR is empty and no ELR member is alive: `must_return` is the
  ELR; any one of them restarting after a clean shutdown restores the partition with no loss.
- `last_known_elr_only` (Kafka 4): ISR and ELR are empty; only the last known leader(s) remain:
  `must_return` is the last known ELR; Kafka elects it when it returns, as an unclean election.
`must_return` is never empty while a dead broker's return could help: when no rule above names
brokers (every list empty), it holds the dead replicas (with unclean election, any could lead).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Sequence

from pipelines.detectors.details import Brokers, PartitionDetails
from pipelines.detectors.exports import Alert, Series, incident_info
from pipelines.detectors.rule import PartitionView, Rule

if TYPE_CHECKING:
    from pyspark.sql import Column

TYPE = "OFFLINE_PARTITION"
SINGLE_REPLICA = "single_replica_on_dead_broker"
ALL_ISR_DEAD = "all_isr_replicas_dead"
LIVE_ISR_NO_LEADER = "live_isr_but_no_leader"
ELR_DOWN = "elr_replicas_down"
LAST_KNOWN_ELR_ONLY = "last_known_elr_only"
LOG_DIR_OFFLINE = "log_dir_offline"
CAUSES = (SINGLE_REPLICA, LIVE_ISR_NO_LEADER, ALL_ISR_DEAD, ELR_DOWN, LAST_KNOWN_ELR_ONLY, LOG_DIR_OFFLINE)


@dataclass(frozen=True)
class OfflineVerdict:
    cause: str
    must_return: tuple[int, ...]  # brokers of which one must come back (empty: a live one can lead)
    live_isr: tuple[int, ...]  # eligible replicas (ISR, or ELR when the ISR is empty) online to lead


def is_offline(leader: int, live: set[int] | frozenset[int]) -> bool:
    return leader == -1 or leader not in live


def eligible(isr: Sequence[int], elr: Sequence[int] | None) -> Sequence[int]:
    """Who may lead cleanly: the ISR, or the ELR when the ISR is empty (isValidNewLeader)."""
    return isr if isr or not elr else elr


def classify_offline(leader: int, replicas: Sequence[int], isr: Sequence[int],
                     live: set[int] | frozenset[int], elr: Sequence[int] | None = None,
                     last_known_elr: Sequence[int] | None = None,
                     offline_replicas: Sequence[int] | None = None,
                     failed_dir_brokers: Sequence[int] | None = None) -> OfflineVerdict | None:
    """None when the partition has a live leader; otherwise why it has none. `elr` and
    `last_known_elr` None: not reported (ZooKeeper mode, Kafka 3.x), judged as empty;
    `offline_replicas`: Metadata's; a live broker's replica in it is on a failed log directory when
    that broker is in `failed_dir_brokers` (None: not asked, Metadata's list is trusted)."""
    if not is_offline(leader, live):
        return None
    elr, last_known_elr = elr or (), last_known_elr or ()
    offline = {b for b in offline_replicas or () if failed_dir_brokers is None or b in failed_dir_brokers}
    candidates = eligible(isr, elr)
    live_candidates = tuple(b for b in replicas if b in live and b not in offline and b in candidates)  # assignment order
    if len(replicas) == 1 and replicas[0] not in live:
        return OfflineVerdict(SINGLE_REPLICA, (replicas[0],), ())
    if live_candidates:
        return OfflineVerdict(LIVE_ISR_NO_LEADER, (), live_candidates)
    if any(b in live and b in offline for b in candidates):
        return OfflineVerdict(LOG_DIR_OFFLINE, tuple(candidates), ())
    if isr:
        return OfflineVerdict(ALL_ISR_DEAD, tuple(isr), ())
    if elr:
        return OfflineVerdict(ELR_DOWN, tuple(elr), ())
    if last_known_elr:
        return OfflineVerdict(LAST_KNOWN_ELR_ONLY, tuple(last_known_elr), ())
    return OfflineVerdict(ALL_ISR_DEAD, tuple(b for b in replicas if b not in live), ())


def offline_columns(leader: Column, replicas: Column, isr: Column, live: Column, elr: Column | None = None,
                    last_known_elr: Column | None = None, offline_replicas: Column | None = None,
                    failed_dir_brokers: Column | None = None) -> dict[str, Any]:
    """The same rule as Spark Columns (built-in expressions only, no UDF), over any columns or
    lambda variables: {"is_offline", "cause", "must_return", "live_isr"}. `failed_dir_brokers` a null
    column (or None): Metadata's offline replicas trusted as in classify_offline."""
    from pyspark.sql import functions as F

    def is_live(b: Column) -> Column:
        return F.array_contains(live, b)

    empty = F.array().cast("array<int>")
    elr = empty if elr is None else F.coalesce(elr, empty)
    lk_elr = empty if last_known_elr is None else F.coalesce(last_known_elr, empty)
    dir_offline = empty if offline_replicas is None else F.coalesce(offline_replicas, empty)
    if failed_dir_brokers is not None:  # only where the broker itself reports a failed directory
        dir_offline = F.when(failed_dir_brokers.isNull(), dir_offline).otherwise(
            F.filter(dir_offline, lambda b: F.array_contains(failed_dir_brokers, b)))
    def on_failed_dir(b: Column) -> Column:
        return is_live(b) & F.array_contains(dir_offline, b)

    offline = (leader == -1) | ~is_live(leader)
    isr_empty = F.size(isr) == 0
    candidates = F.when(isr_empty & (F.size(elr) > 0), elr).otherwise(isr)
    live_candidates = F.filter(replicas, lambda b: is_live(b) & ~F.array_contains(dir_offline, b)
                               & F.array_contains(candidates, b))
    single = (F.size(replicas) == 1) & ~is_live(F.element_at(replicas, 1))
    has_live = F.size(live_candidates) > 0
    elr_down = isr_empty & (F.size(elr) > 0)
    lk_only = isr_empty & (F.size(elr) == 0) & (F.size(lk_elr) > 0)
    dir_failed = F.exists(candidates, on_failed_dir)
    cause = (F.when(single, F.lit(SINGLE_REPLICA)).when(has_live, F.lit(LIVE_ISR_NO_LEADER))
             .when(dir_failed, F.lit(LOG_DIR_OFFLINE)).when(elr_down, F.lit(ELR_DOWN))
             .when(lk_only, F.lit(LAST_KNOWN_ELR_ONLY)).otherwise(F.lit(ALL_ISR_DEAD)))
    must_return = (F.when(single, F.slice(replicas, 1, 1)).when(has_live, empty).when(dir_failed, candidates)
                   .when(~isr_empty, isr).when(elr_down, elr).when(lk_only, lk_elr)
                   .otherwise(F.filter(replicas, lambda b: ~is_live(b))))
    live_isr_out = F.when(single | ~has_live, empty).otherwise(live_candidates)
    return {"is_offline": offline, "cause": cause, "must_return": must_return, "live_isr": live_isr_out}


def of(view: PartitionView) -> dict[str, Any]:
    """`offline_columns` of a partition view, built once per plan (the ISR and stall rules ask too)."""
    p = view.p
    return view.memo("offline", lambda: offline_columns(p["leader"], p["replicas"], p["isr"], view.live, p["elr"],
                                                        p["last_known_elr"], p["offline_replicas"],
                                                        view.ts["failed_log_dir_brokers"]))


def _plan(view: PartitionView) -> Column:
    from pyspark.sql import functions as F

    o = of(view)
    details = view.details(view.live.alias("live_brokers"), o["must_return"].alias("must_return"),
                           o["live_isr"].alias("live_isr"),
                           view.ts["unclean_leader_election"].alias("unclean_leader_election"))
    return F.array(F.when(o["is_offline"], view.finding(RULE, o["cause"], details)))


class OfflineDetails(PartitionDetails):
    """An OFFLINE_PARTITION incident's details."""

    ACT_ON = ("must_return",)
    live_brokers: Brokers | None = None  # the brokers registered as the finding saw them
    must_return: Brokers = ()  # brokers of which one must come back (empty: a live one can lead)
    live_isr: Brokers | None = None  # live ISR members the controller has not elected (live_isr_but_no_leader)
    unclean_leader_election: bool | None = None  # the topic's unclean.leader.election.enable


# krm_partition_unavailable: every offline partition with the controller's cause, and (declared on
# PARTITION_UNAVAILABLE, later in the registry, so the offline cause wins) those krm finds unusable first
UNAVAILABLE = Series("krm_partition_unavailable", "Clients cannot use the partition (1 while so).",
                     ("topic", "partition", "cause"), one_per=("topic", "partition"))
SERIES = (
    Series("krm_partition_offline", "Partition has no live leader (1 while offline).", ("topic", "partition", "cause")),
    Series("krm_cluster_offline_partitions", "Partitions without a live leader.", (), kind="count"),
    UNAVAILABLE,
)


ALERTS = (
    Alert("KafkaPartitionOffline", 'krm_partition_offline{cause!="live_isr_but_no_leader"} == 1', "critical",
          summary="{{ $labels.cluster }}: {{ $labels.topic }}-{{ $labels.partition }} has no leader ({{ $labels.cause }})",
          runbook=("Producers and consumers of this partition fail. cause=single_replica_on_dead_broker: the partition has "
                   "one replica and its broker is down; bring that broker back or accept the loss of the partition's data. "
                   "cause=all_isr_replicas_dead: bring back one of the brokers in details.must_return (`krm incidents --open"
                   " --json`); enabling unclean election instead loses data. cause=elr_replicas_down (Kafka 4): the ISR is "
                   "empty and every Eligible Leader Replica is down; bring back one of details.must_return: a broker stopped"
                   " cleanly is elected with no loss, one that crashed leaves the ELR when it registers again. "
                   "cause=last_known_elr_only (Kafka 4): only the last leader is left; Kafka elects it when it returns (an "
                   "unclean election from the last known leader: a KafkaLastKnownLeaderElected warning, a page only if its "
                   "high watermark went back). cause=log_dir_offline: the brokers in details.must_return are up but their "
                   "copy of the partition is on a failed log directory (their log: `Stopping serving logs in dir`); repair "
                   "or replace that disk and restart the broker (a failed log directory comes back only with a restart), or "
                   "bring back a dead one of them. Before maintenance, run `krm check shutdown --broker ID` and move "
                   "single-replica partitions off the broker."),
          links=(("incident", incident_info(TYPE, "url")),
                 ("must_return", incident_info(TYPE, "must_return"))),
          why="Fires at once: no replica that could lead is online, so nothing but an operator fixes it."),
    Alert("KafkaPartitionLeaderNotElected",
          'krm_partition_offline{cause="live_isr_but_no_leader"} == 1',
          "critical", wait="30s",
          summary=("{{ $labels.cluster }}: {{ $labels.topic }}-{{ $labels.partition }} has a live in-sync replica but no "
                   "leader"),
          runbook=("The controller has not elected a leader although an in-sync replica is alive. Check that the cluster has"
                   " an active controller (KafkaControllerAnomaly, the CONTROLLER_ANOMALY incident) and read the "
                   "controller's log; a controller stuck on ZooKeeper or a KRaft quorum without a leader stops all "
                   "elections."),
          links=(("incident", incident_info(TYPE, "url")),),
          why=("A live ISR member can lead: every broker death leaves its partitions like this until the controller's "
               "election (ZooKeeper mode: once the dead broker's session expires), so only a gap that outlasts an election "
               "is worth a page.")),
)


RULE = Rule(TYPE, {c: "critical" for c in CAUSES}, "partition", "no live leader: nobody can produce or consume",
            scope="topic", plan=_plan, affected=lambda v: of(v)["is_offline"], details=OfflineDetails,
            series=SERIES, alerts=ALERTS, routine=(
            "No routine operation causes it on a replicated partition: a controlled shutdown moves leadership "
            "first. RF-1 partitions of a stopped broker are offline for real (clients fail): critical by design; "
            "`krm check shutdown` flags them before."))
