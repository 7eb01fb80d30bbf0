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

Limit: the ISR can grow between two polls; a follower that rejoined and was then elected cleanly
within one poll interval would look unclean. ZooKeeper watches (ZK mode) make that window short.
These are events: the incident stays open for the pipeline's `event_hold_s` and then resolves.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Sequence

from pipelines.detectors.rule import PartitionView, Rule, changed

TYPE = "UNCLEAN_LEADER_ELECTION"
NOT_ELIGIBLE = "not_in_isr_or_elr"  # an out-of-sync replica leads: committed messages may be gone
LAST_KNOWN_ELR = "last_known_elr"  # Kafka 4's recovery of the last known leader


@dataclass(frozen=True)
class ElectionVerdict:
    cause: str
    severity: str


def classify_election(leader: int, previous_leader: int | None, previous_isr: Sequence[int] | None,
                      previous_elr: Sequence[int] | None = None, previous_last_known_elr: Sequence[int] | None = None,
                      hw: int | None = None, previous_hw: int | None = None) -> ElectionVerdict | None:
    """None for no election or a clean one; otherwise what kind of unclean election it was."""
    if previous_isr is None or leader < 0 or leader == previous_leader:
        return None
    if leader in previous_isr or leader in (previous_elr or ()):
        return None
    if leader in (previous_last_known_elr or ()):
        went_back = hw is not None and previous_hw is not None and hw < previous_hw
        return ElectionVerdict(LAST_KNOWN_ELR, "critical" if went_back else RULE.severity_of(LAST_KNOWN_ELR))
    return ElectionVerdict(NOT_ELIGIBLE, RULE.severity_of(NOT_ELIGIBLE))


def is_unclean(leader: int, previous_leader: int | None, previous_isr: Sequence[int] | None) -> bool:
    return classify_election(leader, previous_leader, previous_isr) is not None


def election_columns(p: Any) -> dict[str, Any]:
    """The same rule as Spark Columns over a partition struct: {"unclean", "cause", "severity"}."""
    from pyspark.sql import functions as F

    prev = p["previous"]
    leader = p["leader"]
    elected = prev.isNotNull() & (leader >= 0) & (leader != prev["leader"])
    was_eligible = F.array_contains(prev["isr"], leader) | F.coalesce(F.array_contains(prev["elr"], leader), F.lit(False))
    last_known = F.coalesce(F.array_contains(prev["last_known_elr"], leader), F.lit(False))
    went_back = F.coalesce(p["high_watermark"] < prev["high_watermark"], F.lit(False))
    return {
        "unclean": F.coalesce(elected & ~was_eligible, F.lit(False)),
        "cause": F.when(last_known, F.lit(LAST_KNOWN_ELR)).otherwise(F.lit(NOT_ELIGIBLE)),
        "severity": F.when(last_known & ~went_back, F.lit(RULE.severity_of(LAST_KNOWN_ELR))).otherwise(F.lit("critical")),
    }


def _plan(view: PartitionView) -> Any:
    from pyspark.sql import functions as F

    e = election_columns(view.p)
    return F.array(F.when(e["unclean"], view.finding(RULE, e["cause"], view.change_details, e["severity"])))


# declared severities; a last-known-leader election whose HW went back in the same poll is critical
RULE = Rule(TYPE, {NOT_ELIGIBLE: "critical", LAST_KNOWN_ELR: "warning"}, "partition",
            "a leader elected from outside the ISR and the ELR", scope="offsets", plan=_plan, affected=changed,
            event=True)
CAUSES = RULE.causes
