"""UNCLEAN_LEADER_ELECTION: the partition's new leader was not eligible to lead cleanly.

A clean election picks the new leader from the ISR (`PartitionLeaderElectionAlgorithms.
offlinePartitionLeaderElection`, core/src/main/scala/kafka/controller/, ZooKeeper mode; KRaft:
`PartitionChangeBuilder.isValidNewLeader`, metadata/src/main/java/org/apache/kafka/controller/) or,
on Kafka 4 with Eligible Leader Replicas, from the ELR while the ISR is empty (KIP-966): ELR members
hold every committed message, so such an election loses nothing ("Setting new leader ... using
ELR"). Only with unclean.leader.election.enable may any other replica become leader, and the
messages it never received are gone.

Kafka 4 has a third way: with ISR and ELR empty, the *last known leader* (`lastKnownElr`) is elected
when it returns, and Kafka logs it as an unclean election and marks the leader RECOVERING
(`canElectLastKnownLeader`). It was the leader: it lost nothing unless its own log did (a crash
before the page cache reached disk). So it is reported with cause `last_known_elr`, severity
`warning`, and `critical` only when the high watermark went back in the same observation; a later
regression is OFFSET_REGRESSION, which stays the proof of loss.

The collector attaches the previous poll's state whenever the leader epoch changed (`previous`,
collectors/memory.py), so the rule is: a leader now, a different one (or none) before, and the new
one in neither the previous ISR nor the previous ELR.

The ISR krm saw is not the whole history: it can grow between two polls, and a follower that
rejoined and was then elected cleanly within one poll interval looks unclean. Above all a
reassignment does exactly that: the adding replicas join the ISR, then the controller moves the
leader onto one of them and drops the old replicas, often between two polls (Kafka completes a
reassignment only once every target replica is in the ISR: ReplicationControlManager /
PartitionReassignmentReplicas in KRaft, KafkaController.isReassignmentComplete in ZooKeeper mode).
So an election outside the previous ISR pages only with evidence that data went missing, read once the
new leader answers (it returns no offsets until its HW is established; the collector then carries the
pre-election state as `previous` to the next poll, collectors/memory.py):
- a leader that the previous poll listed as an adding replica, or that was not a replica at all
  then (the assignment changed in between), was moved by a reassignment: no finding;
- `not_in_isr_or_elr` (critical) needs proof of loss in the same observation: the high watermark
  went back, or the new leader's log ends below the highest HW krm saw (committed messages it
  never had);
- without that proof it is `unconfirmed` (info): the leader moved outside the ISR krm last saw
  and no loss is visible. A loss that shows later is OFFSET_REGRESSION / LOG_TRUNCATION.
These are events: the incident stays open for the pipeline's `event_hold_s` and then resolves.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from pipelines.columns import leo_of
from pipelines.detectors.details import PartitionChange
from pipelines.detectors.exports import Alert, INCIDENTS_OF_TYPE, console
from pipelines.detectors.rule import Escalation, PartitionView, Rule, changed

if TYPE_CHECKING:
    from pyspark.sql import Column

TYPE = "UNCLEAN_LEADER_ELECTION"
NOT_ELIGIBLE = "not_in_isr_or_elr"  # an out-of-sync replica leads and committed messages are gone
UNCONFIRMED = "unconfirmed"  # a leader outside the ISR krm last saw, no loss visible: ISR history incomplete
LAST_KNOWN_ELR = "last_known_elr"  # Kafka 4's recovery of the last known leader
HW_WENT_BACK = "hw_went_back"  # escalation: the high watermark went back in the same observation


def election_columns(p: Column) -> dict[str, Any]:
    """The same rule as Spark Columns over a partition struct: {"unclean", "cause", "severity"}."""
    from pyspark.sql import functions as F

    prev = p["previous"]
    leader = p["leader"]
    no = F.lit(False)
    elected = prev.isNotNull() & (leader >= 0) & (leader != prev["leader"])
    was_eligible = F.array_contains(prev["isr"], leader) | F.coalesce(F.array_contains(prev["elr"], leader), no)
    moved = (F.coalesce(F.array_contains(prev["adding_replicas"], leader), no)
             | F.coalesce(~F.array_contains(prev["replicas"], leader), no))
    last_known = F.coalesce(F.array_contains(prev["last_known_elr"], leader), no)
    went_back = F.coalesce(p["high_watermark"] < prev["high_watermark"], no)
    leader_leo = leo_of(F.coalesce(p["replica_offsets"], F.array()), leader)
    short = F.coalesce(leader_leo < F.coalesce(prev["max_high_watermark"], prev["high_watermark"]), no)
    cause = (F.when(last_known, F.lit(LAST_KNOWN_ELR)).when(went_back | short, F.lit(NOT_ELIGIBLE))
             .otherwise(F.lit(UNCONFIRMED)))
    offsets_known = p["high_watermark"].isNotNull() | leader_leo.isNotNull()
    return {
        "unclean": F.coalesce(elected & ~was_eligible & ~moved & (last_known | offsets_known), no),
        "cause": cause,
        "severity": RULE.severity_column(cause, **{HW_WENT_BACK: went_back}),
    }


def _plan(view: PartitionView) -> Column:
    from pyspark.sql import functions as F

    e = election_columns(view.p)
    return F.array(F.when(e["unclean"], view.finding(RULE, e["cause"], view.change_details, e["severity"])))


ALERTS = (
    Alert("KafkaUncleanLeaderElection",
          'krm_incidents_open{type=~"UNCLEAN_LEADER_ELECTION|OFFSET_REGRESSION",severity="critical"} > 0',
          "critical",
          summary="{{ $labels.cluster }}: {{ $value }} partition(s) lost committed data ({{ $labels.type }})",
          runbook=("An out-of-sync replica became leader and the high watermark went back: messages that consumers may "
                   "already have read are gone from the log. List them with `krm incidents --open --json` (details.hw_lost, "
                   "previous_isr); tell the owners of the topics; consider disabling unclean.leader.election.enable on them."),
          links=(("incidents", console(INCIDENTS_OF_TYPE)),)),
    Alert("KafkaLastKnownLeaderElected",
          'krm_incidents_open{type="UNCLEAN_LEADER_ELECTION",severity="warning"} > 0',
          "warning",
          summary=("{{ $labels.cluster }}: {{ $value }} partition(s) re-elected their last known leader without an ISR or "
                   "ELR"),
          runbook=("The partition's last leader came back after every other eligible replica was gone and Kafka elected it "
                   'from the last known ELR (its log: "using an unclean election"). Its high watermark did not go back, so '
                   "no committed message is known to be lost. If the broker crashed with unflushed data (power loss, not a "
                   "process kill), check the partition's end offsets; an OFFSET_REGRESSION incident would show a real loss."),
          links=(("incidents", console(INCIDENTS_OF_TYPE)),),
          why=("Kafka 4: with ISR and ELR empty, the last known leader is elected when it comes back; Kafka logs it as an "
               "unclean election and recovers the leader, but that broker held everything committed. Worth knowing, not a "
               "page: an actual loss shows as OFFSET_REGRESSION.")),
)


RULE = Rule(TYPE, {NOT_ELIGIBLE: "critical", LAST_KNOWN_ELR: "warning", UNCONFIRMED: "info"}, "partition",
            "a leader elected from outside the ISR and the ELR", scope="offsets", plan=_plan, affected=changed,
            event=True, details=PartitionChange,
            escalations=(Escalation((LAST_KNOWN_ELR,), HW_WENT_BACK, "critical",
                                    "the high watermark went back in the same observation: acknowledged writes lost"),),
            alerts=ALERTS, routine=(
            "A reassignment moves the leader onto a replica that joined the ISR between two polls: not judged. A "
            "leader outside the ISR krm saw pages only with proof of lost data (HW back, or the new leader's log "
            "below the HW); otherwise `unconfirmed` (info)."))
CAUSES = RULE.causes
