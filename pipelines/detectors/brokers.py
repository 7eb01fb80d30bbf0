"""BROKER_DOWN: judged on each successful `cluster` record (with CONTROLLER_ANOMALY's
`no_active_controller`, declared in pipelines/detectors/controllers.py), and on a failed poll's
when ZooKeeper still says who is registered (the whole cluster down: opened then, it resolves broker
by broker as they return; a failed poll resolves nothing).

- BROKER_DOWN: a broker the cluster knows (it holds replicas, or the collector saw it alive) is not
  in the Metadata response's broker list, i.e. it is not registered: its ZooKeeper session expired
  (ZooKeeper mode) or the controller fenced it (KRaft). Cause `not_registered`: it went down still
  holding leaderships or ISR places, a crash or a hang (collectors/departures.py). A warning, critical
  past `planned_stop_max_s`: the clients it hurt were hurt *before* this, while it was registered and
  silent, and page on their partitions (PARTITION_UNAVAILABLE for the ones it led, HW_STALL for the ones
  whose HW it held); deregistering it is the controller's cure, which moves its leaderships and takes
  it out of every ISR in the same step (ZooKeeper mode: `onBrokerFailure` -> `onReplicasBecomeOffline`
  in core/src/main/scala/kafka/controller/KafkaController.scala, which elects new leaders and moves
  its replicas to OfflineReplica, out of the ISRs; KRaft: `handleBrokerFenced` in
  metadata/src/main/java/org/apache/kafka/controller/ReplicationControlManager.java, which removes it
  from the ISRs it is in, an ISR of one excepted in older releases). What it still hurts afterwards
  pages on its own (OFFLINE_PARTITION, UNDER_MIN_ISR), so a crash's page ends with the harm, not with
  the broker's return.
  Before that, cause `unreachable` (warning): still registered, but it did not answer the
  collector's offsets requests in time (collectors/offsets.py): dead, paused or overloaded, and the
  controller has not noticed yet (it waits for the ZooKeeper session, 18 s by default, or the KRaft
  broker session). The incident is the same one when it then turns `not_registered`.
- BROKER_DOWN, cause `stopped` (warning): down after a controlled shutdown (its ports closed, then
  not registered: the same cause throughout) — krm saw it holding a leadership or ISR place another
  replica could take shortly before, and none when it first saw it down: it handed everything
  over (collectors/departures.py says how that is told apart from a crash, and why a crash, once
  judged, stays one until the broker serves again). A rolling restart, an
  upgrade or an operator's stop is routine: Kafka moved the load away first, and clients of
  multi-replica partitions never noticed. It turns critical once the broker has been down longer
  than `[pipeline] planned_stop_max_s` (default 10 min: longer than any restart). Partitions it does
  hurt page on their own incidents (OFFLINE_PARTITION, UNDER_MIN_ISR, PARTITION_UNAVAILABLE), which
  name it (`must_return`, `out_of_sync`).
- BROKER_DOWN, cause `unknown` (warning, critical past `planned_stop_max_s` as `stopped`): not
  registered, and nothing says how it went — it held nothing another replica could take over
  (only single-replica partitions, or none), or krm has not judged it yet. Never read as a clean stop.
- BROKER_DOWN, cause `log_dir_full` (warning, critical past `planned_stop_max_s`): down, registered or
  not, and at its last sampling every log directory of it had failed or was forecast full by the time it
  stopped answering (collectors/disk_watch.py): Kafka halts a broker whose last directory fails, a full
  disk included. Named so the on-call frees the disk before restarting it (a restart on a full disk
  fails again). Its partitions page on their own as for any departure.
- CONTROLLER_ANOMALY, cause `no_active_controller`: the Metadata response names no controller
  (ZooKeeper mode: no broker holds /controller). KRaft answers clients with a random live broker
  as "controller" (KIP-590), so this cause only fires in ZooKeeper mode; more than one active
  controller needs every broker's ActiveControllerCount (JMX source).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from pipelines.detectors.details import Details, Part
from pipelines.detectors.exports import Alert, Series, BROKER_PAGE, console, incident_info
from pipelines.detectors.rule import ClusterRecordView, Escalation, Rule

if TYPE_CHECKING:
    from pyspark.sql import Column

BROKER_DOWN = "BROKER_DOWN"
NOT_REGISTERED = "not_registered"
STOPPED = "stopped"
UNKNOWN = "unknown"
UNREACHABLE = "unreachable"
LOG_DIR_FULL = "log_dir_full"
PAST_PLANNED_STOP = "past_planned_stop"  # escalation: down longer than `planned_stop_max_s`


def broker_columns(cluster_state: Column) -> dict[str, Any]:
    """Spark form: {"down": broker structs not registered, "unreachable": registered but not answering}."""
    from pyspark.sql import functions as F

    return {
        "down": F.filter(cluster_state["brokers"], lambda b: ~b["live"]),
        "unreachable": F.filter(cluster_state["brokers"], lambda b: b["live"] & (b["reachable"] == F.lit(False))),
    }


def _plan(view: ClusterRecordView) -> Column:
    from pyspark.sql import functions as F

    b = broker_columns(view.cs)

    def details(br: Column) -> Column:
        return F.to_json(F.struct(br["host"].alias("host"), br["port"].alias("port"), br["rack"].alias("rack"),
                                  br["controlled_shutdown"].alias("controlled_shutdown"),
                                  how(br).alias("departure"), br["down_since_ms"].alias("down_since_ms"),
                                  disk_full(br).alias("disk_full"), br["log_dirs"].alias("log_dirs")))

    def how(br: Column) -> Column:
        """`controlled`, `crash` or `unknown` (collectors/departures.py); a record of an older collector
        carries only `controlled_shutdown`, whose null there meant a crash."""
        return F.coalesce(br["departure"], F.when(F.coalesce(br["controlled_shutdown"], F.lit(False)),
                                                  F.lit("controlled")).otherwise(F.lit("crash")))

    def disk_full(br: Column) -> Column:
        return F.coalesce(br["disk_full"], F.lit(False))

    def down(br: Column) -> Column:
        said = how(br)
        cause = (F.when(disk_full(br), F.lit(LOG_DIR_FULL)).when(said == "controlled", F.lit(STOPPED))
                 .when(said == "unknown", F.lit(UNKNOWN)).otherwise(F.lit(NOT_REGISTERED)))
        conditions = RULE.timed(view.observed_at_ms, view.settings, down_since_ms=br["down_since_ms"])
        return view.finding(RULE, cause, details(br), broker=br["id"], severity=RULE.severity_column(cause, **conditions))

    def silent(br: Column) -> Column:
        cause = (F.when(disk_full(br), F.lit(LOG_DIR_FULL)).when(how(br) == "controlled", F.lit(STOPPED))
                 .otherwise(F.lit(UNREACHABLE)))
        return view.finding(RULE, cause, details(br), broker=br["id"], severity=RULE.severity_column(cause))

    return F.concat(F.transform(b["down"], down), F.transform(b["unreachable"], silent))


# krm_broker_down says how the broker went and whether that pages (the alerts key on its severity),
# where krm_broker_up only says whether it is registered
SERIES = (Series("krm_broker_down", "1 while the broker is down: cause not_registered (crash), stopped (controlled "
                 "shutdown), log_dir_full (its disks full or failed), unknown or unreachable; severity as the "
                 "BROKER_DOWN incident's.",
                 ("broker", "cause", "severity")),)

ALERTS = (
    Alert("KafkaBrokerDown", 'krm_broker_down{severity="critical"} == 1', "critical",
          summary="{{ $labels.cluster }}: broker {{ $labels.broker }} has been down too long ({{ $labels.cause }})",
          runbook=("The broker has been down longer than planned_stop_max_s: no restart takes that long, and its "
                   "partitions run with one copy less (one more failure and those at min ISR refuse acks=all writes). "
                   "cause=not_registered: it crashed or hung holding leaderships (ZooKeeper session expired or fenced by the"
                   " KRaft controller). cause=stopped: it was stopped cleanly. cause=unknown: it held nothing another "
                   "replica could take over, so nothing says how it went. cause=log_dir_full: its log directories were "
                   "full or failed when it went: free space before restarting it. Check its process and logs; `krm incidents "
                   "--open` lists the partitions it left offline or under-replicated."),
          links=(("incident", incident_info(BROKER_DOWN, "url", by=("broker",))),
                 ("broker_page", console(BROKER_PAGE))),
          why=("A broker down longer than [pipeline] planned_stop_max_s, however it went. Before that a broker's "
               "absence pages only through the clients it hurts (PARTITION_UNAVAILABLE, HW_STALL, OFFLINE_PARTITION, "
               "UNDER_MIN_ISR): a crash is KafkaBrokerDeregistered and a rolling restart's stop KafkaBrokerStopped, both "
               "warnings.")),
    Alert("KafkaBrokerDeregistered", 'krm_broker_down{cause=~"not_registered|unknown",severity="warning"} == 1', "warning",
          summary="{{ $labels.cluster }}: broker {{ $labels.broker }} is down ({{ $labels.cause }}), its load moved",
          runbook=("cause=not_registered: the broker crashed or hung still holding leaderships or ISR places; the "
                   "controller has moved them (its session expired, or KRaft fenced it), so clients of replicated "
                   "partitions are served again, with one copy less. cause=unknown: it held nothing another replica could "
                   "take over, so nothing says how it went. Restart it; partitions it still hurts page on their own "
                   "(OFFLINE_PARTITION, UNDER_MIN_ISR). KafkaBrokerDown pages if it stays down past planned_stop_max_s."),
          links=(("incident", incident_info(BROKER_DOWN, "url", by=("broker",))),
                 ("broker_page", console(BROKER_PAGE))),
          why=("A crash after the controller's cure: the harm was while the broker was registered and silent (paged on "
               "its partitions); now it is a broker to restart, not a client to save.")),
    Alert("KafkaBrokerDiskFull", 'krm_broker_down{cause="log_dir_full",severity="warning"} == 1', "warning",
          summary="{{ $labels.cluster }}: broker {{ $labels.broker }} went down with its log directories full",
          runbook=("Kafka halts a broker whose last log directory fails, and a full disk fails it: at krm's last look "
                   "every log directory of this broker was full or failed (`krm incidents show` lists them; its log: "
                   "`Shutdown broker because all log dirs in ... have failed`). A restart on a full disk fails again: "
                   "free space first (delete old segments of topics with retention to spare, grow the volume), restart "
                   "it, then lower retention or move partitions away (`krm plan rebalance`). Partitions it hurts page on "
                   "their own (OFFLINE_PARTITION, UNDER_MIN_ISR); KafkaBrokerDown pages if it stays down past "
                   "planned_stop_max_s."),
          links=(("incident", incident_info(BROKER_DOWN, "url", by=("broker",))),
                 ("broker_page", console(BROKER_PAGE))),
          why=("The broker is a disk to free, not a process to restart; the clients it hurt page on their partitions "
               "(and KafkaLogDirFullSoon paged before).")),
    Alert("KafkaBrokerStopped", 'krm_broker_down{cause="stopped",severity="warning"} == 1', "warning", wait="5m",
          summary="{{ $labels.cluster }}: broker {{ $labels.broker }} stopped by a controlled shutdown",
          runbook=("Kafka moved its leaders away before it stopped, so clients of replicated partitions are served. Its "
                   "partitions are under-replicated (at min ISR where RF = min ISR + 1) until it is back: do not stop "
                   "another broker meanwhile (`krm check shutdown --broker ID --wait 600` blocks until that is safe). It "
                   "pages (KafkaBrokerDown) if it stays down past planned_stop_max_s."),
          links=(("incident", incident_info(BROKER_DOWN, "url", by=("broker",))),
                 ("broker_page", console(BROKER_PAGE))),
          why=("Routine: a controlled shutdown moved the broker's leaderships and ISR places away first. Worth knowing while"
               " it lasts (its partitions are under-replicated), not a page.")),
    Alert("KafkaBrokerUnreachable", 'krm_broker_down{cause="unreachable"} == 1', "warning", wait="1m",
          summary="{{ $labels.cluster }}: registered broker {{ $labels.broker }} does not answer",
          runbook=("Still registered with the controller but not answering requests (dead, paused, overloaded); the "
                   "controller only reacts after its session timeout. `krm incidents --open --type BROKER_DOWN --json` names"
                   " them (cause unreachable)."),
          links=(("incident", incident_info(BROKER_DOWN, "url", by=("broker",))),
                 ("broker_page", console(BROKER_PAGE)))),
)


class LogDir(Part):
    """One log directory of the broker as krm last saw it (schemas/observation.py LOG_DIR)."""

    path: str | None = None
    failed: bool | None = None
    total_bytes: int | None = None
    usable_bytes: int | None = None
    full_in_s: float | None = None


class BrokerDownDetails(Details):
    """A BROKER_DOWN incident's details (the incident's `broker` is the broker)."""

    host: str | None = None
    port: int | None = None
    rack: str | None = None
    controlled_shutdown: bool | None = None
    departure: str | None = None  # controlled | crash | unknown (collectors/departures.py)
    down_since_ms: int | None = None
    disk_full: bool | None = None
    log_dirs: tuple[LogDir, ...] = ()

    def last_look(self) -> str | None:
        """Its directories as krm last saw them, in a line (`log_dir_full`'s evidence)."""
        parts = []
        for d in self.log_dirs:
            if d.failed:
                parts.append(f"{d.path} failed")
            elif d.total_bytes is not None and d.usable_bytes is not None:
                eta = f", full in {d.full_in_s:.0f} s at its rate" if d.full_in_s is not None else ""
                parts.append(f"{d.path} {d.usable_bytes / 2**20:.1f} of {d.total_bytes / 2**20:.1f} MiB free{eta}")
        return "; ".join(parts) or None

    def headline(self) -> str | None:
        disks = self.last_look() if self.disk_full else None
        return None if disks is None else f"disks: {disks} (the last look before it went)"


RULE = Rule(BROKER_DOWN, {NOT_REGISTERED: "warning", STOPPED: "warning", UNKNOWN: "warning", UNREACHABLE: "warning",
                          LOG_DIR_FULL: "warning"},
            "cluster",
            "a broker not registered after a crash, a controlled shutdown, a full disk or a departure nothing "
            "explains (warning, critical when it lasts), or not answering while still registered (warning)",
            plan=_plan, failed_polls=True, details=BrokerDownDetails,
            escalations=(Escalation((NOT_REGISTERED, STOPPED, UNKNOWN, LOG_DIR_FULL), PAST_PLANNED_STOP, "critical",
                                    "down longer than `planned_stop_max_s`: no restart takes that long",
                                    since="down_since_ms", after="planned_stop_max_ms"),),
            series=SERIES, alerts=ALERTS, routine=(
            "A rolling restart, upgrade or operator's stop is a controlled shutdown: `stopped`, a warning, "
            "critical only past `planned_stop_max_s`. A crash or hang (`not_registered`) is a warning too: the "
            "clients it hurt page on their partitions until the controller moves its load, which ends their harm."))
