"""PARTITION_UNAVAILABLE: clients cannot use the partition, before Kafka's controller says so.

Kafka declares a dead broker's partitions offline (or elects new leaders) only when the broker's
session expires: 18 s by default in ZooKeeper mode (zookeeper.session.timeout.ms), 9 s in KRaft
(broker.session.timeout.ms). Until then the metadata still names the dead broker as leader, and
producers and consumers of its partitions fail. The collector sees it first: the topic record's
`unreachable_brokers` holds the registered brokers whose port refuses connections (the process is
gone) or that have been silent for `unreachable_after_s` (collectors/admin.py).

Cause `leader_unreachable` (critical): the partition has a leader by the metadata, and it is one
of those brokers. When the controller acts, the partition either gets a new leader (the incident
resolves) or becomes OFFLINE_PARTITION (the controller confirmed it; this one resolves as the
offline one opens). `krm_partition_unavailable` reports both: every offline cause, and this one.

Cause `leader_not_serving` (critical): the elected leader does not serve the partition (the topic
record's `leader_error`) for `NOT_SERVING_WINDOW_MS`: it answers krm but refuses the partition
(collectors/offsets.py REFUSALS) with NOT_LEADER_OR_FOLLOWER, it has not heard that it leads (producers
get the same refusal), or OFFSET_NOT_AVAILABLE, its HW has not reached the start of its leader epoch (its
ISR followers have not fetched from it, and acks=all producers wait); or, in ZooKeeper mode,
STALE_METADATA: the brokers' metadata, which clients read, still names another leader than the one the
controller elected (collectors/poll_records.py). OFFSET_NOT_AVAILABLE is not judged under min ISR,
where Kafka 4 holds the HW by design (KIP-966) and UNDER_MIN_ISR says it. Every election has a moment
of each; held for seconds, the controller's word has not reached the brokers: seen after the active
controller's connections were cut (docs/cases/controller-channel.md).
"""

from __future__ import annotations

from dataclasses import replace
from typing import TYPE_CHECKING, Sequence

from pipelines.detectors import isr, offline
from pipelines.detectors.details import Brokers, PartitionDetails
from pipelines.detectors.exports import Alert, BROKER_PAGE, console, incident_info, UNLESS_SLOWED
from pipelines.detectors.rule import PartitionView, Rule
from schemas.observation import OFFSET_NOT_AVAILABLE

if TYPE_CHECKING:
    from pyspark.sql import Column

TYPE = "PARTITION_UNAVAILABLE"
LEADER_UNREACHABLE = "leader_unreachable"
CANARY_FAILED = "canary_failed"  # judged on the driver from canary rounds (pipelines/detectors/canary.py)
LEADER_NOT_SERVING = "leader_not_serving"
# how long a leader may refuse its partition before it pages: the first moments of an election (its word
# on the way, its followers' first fetches) stay well under it
NOT_SERVING_WINDOW_MS = 3000


def leader_unreachable(leader: int, live: Sequence[int], unreachable: Sequence[int] | None) -> bool:
    """The metadata's leader is registered (not offline) but clients cannot reach it."""
    return leader >= 0 and leader in live and leader in (unreachable or ())


def leader_unreachable_column(leader: Column, live: Column, unreachable: Column) -> Column:
    from pyspark.sql import functions as F

    # the (usually empty) unreachable list first: every partition of every poll passes here
    return F.coalesce(F.array_contains(unreachable, leader) & (leader >= 0) & F.array_contains(live, leader),
                      F.lit(False))


def leader_not_serving(leader: int, live: Sequence[int], unreachable: Sequence[int] | None, error: str | None,
                       error_since_ms: int | None, at_ms: int, under_min_isr: bool = False) -> bool:
    """The elected leader is registered and answers, but has not served the partition (`leader_error`)
    for NOT_SERVING_WINDOW_MS. OFFSET_NOT_AVAILABLE is not judged under min ISR (the ISR rule's verdict,
    pipelines/detectors/isr.py): Kafka 4 holds the HW there by design (KIP-966), and UNDER_MIN_ISR says what
    is wrong, with the wait its routine dips need."""
    return (error is not None and error_since_ms is not None and at_ms - error_since_ms >= NOT_SERVING_WINDOW_MS
            and not (error == OFFSET_NOT_AVAILABLE and under_min_isr)
            and leader >= 0 and leader in live and leader not in (unreachable or ()))


def leader_not_serving_column(p: Column, live: Column, unreachable: Column, at_ms: Column, under_min_isr: Column) -> Column:
    from pyspark.sql import functions as F

    leader, error = p["leader"], p["leader_error"]
    held_by_min_isr = (error == F.lit(OFFSET_NOT_AVAILABLE)) & F.coalesce(under_min_isr, F.lit(False))
    return F.coalesce(error.isNotNull() & (at_ms - p["leader_error_since_ms"] >= F.lit(NOT_SERVING_WINDOW_MS))
                      & ~held_by_min_isr & (leader >= 0) & F.array_contains(live, leader)
                      & ~F.coalesce(F.array_contains(unreachable, leader), F.lit(False)), F.lit(False))


def _unreachable(view: PartitionView) -> Column:
    return view.memo("unavailable", lambda: leader_unreachable_column(view.p["leader"], view.live, view.unreachable))


def _not_serving(view: PartitionView) -> Column:
    return view.memo("not_serving", lambda: leader_not_serving_column(
        view.p, view.live, view.unreachable, view.observed_at_ms, isr.of(view)["under_min_isr"]))


def _affected(view: PartitionView) -> Column:
    return _unreachable(view) | _not_serving(view)


def _plan(view: PartitionView) -> Column:
    from pyspark.sql import functions as F

    p = view.p
    details = view.details(view.unreachable.alias("unreachable_brokers"), p["leader_error"].alias("leader_error"),
                           p["leader_error_since_ms"].alias("leader_error_since_ms"))
    return F.array(F.when(_unreachable(view), view.finding(RULE, LEADER_UNREACHABLE, details))
                   .when(_not_serving(view), view.finding(RULE, LEADER_NOT_SERVING, details)))


SERIES = (replace(offline.UNAVAILABLE, cause_default=LEADER_UNREACHABLE),)

ALERTS = (
    Alert("KafkaPartitionLeaderUnreachable",
          'krm_partition_unavailable{cause="leader_unreachable"} == 1' + UNLESS_SLOWED,
          "critical",
          summary=("{{ $labels.cluster }}: {{ $labels.topic }}-{{ $labels.partition }} is unavailable: its leader does not "
                   "answer"),
          runbook=("The broker leading this partition is gone or hung, and Kafka's controller has not noticed yet. The "
                   "BROKER_DOWN incident (cause unreachable) names it. The controller will elect a new leader when the "
                   "broker's session expires, or report the partition offline if no in-sync replica is left; if the process "
                   "is hung rather than dead, restarting it now shortens the outage."),
          links=(("incident", incident_info(TYPE, "url")),
                 ("broker", incident_info(TYPE, "broker"))),
          why=("Before Kafka's controller acts (its broker session: 18 s in ZooKeeper mode, 9 s in KRaft by default): the "
               "leader's broker refuses connections, or has been silent for the collector's unreachable_after_s, while still"
               " registered. Producers and consumers already fail, so it pages at once: the collector's verdict already "
               "took unreachable_after_s of silence or a refused connection from a broker registered longer than that "
               "(a starting cluster's brokers register before their ports open: RELIABILITY.md), and a pause shorter "
               "than that verdict plus a wait would hurt clients and end unpaged.")),
    Alert("KafkaPartitionLeaderNotServing",
          'krm_partition_unavailable{cause="leader_not_serving"} == 1' + UNLESS_SLOWED,
          "critical",
          summary=("{{ $labels.cluster }}: {{ $labels.topic }}-{{ $labels.partition }} is unavailable: its elected leader "
                   "does not serve it"),
          runbook=("The elected leader of this partition does not serve it: details.leader_error of the "
                   "PARTITION_UNAVAILABLE incident says how. NOT_LEADER_OR_FOLLOWER: it has not heard that it leads, so "
                   "producers are refused too; OFFSET_NOT_AVAILABLE: it leads, but its high watermark has not reached "
                   "the start of its leader epoch because its in-sync followers do not fetch from it yet, so acks=all "
                   "producers wait; STALE_METADATA (ZooKeeper mode): the brokers' metadata, which clients read, still "
                   "names the old leader. Usually the controller's requests (LeaderAndIsr, "
                   "UpdateMetadata in ZooKeeper mode; the metadata log in KRaft) have not reached that broker or its "
                   "followers (OFFSET_NOT_AVAILABLE alone can also be an in-sync follower that fetches nothing: its "
                   "broker's health, as for HW_STALL): check the active controller's log for its requests to them, "
                   "the brokers' logs for the leader epoch, and the connections between the controller and the brokers "
                   "(docs/cases/controller-channel.md). In ZooKeeper mode, as a last resort, moving the controller "
                   "(deleting the /controller znode) makes the next one send every broker the whole state again."),
          links=(("incident", incident_info(TYPE, "url")),
                 ("broker", incident_info(TYPE, "broker"))),
          why=("The elected leader did not serve the partition for 3 s (NOT_SERVING_WINDOW_MS): every election has a "
               "moment of it (the controller's word or the followers' first fetches on the way); held, clients are "
               "refused or wait.")),
    Alert("KafkaCanaryProduceFailing",
          ('krm_canary_produce_up == 0 unless on(cluster, broker) krm_broker_slow{severity="critical"} == 1'
           ' unless on(cluster, broker) krm_canary_slowed_by == 1'), "critical",
          wait="10s",
          summary="{{ $labels.cluster }}: acks=all writes through broker {{ $labels.broker }} fail (canary)",
          runbook=("krm's canary could not write to the krm.canary partition led by this broker (or, with acks=all, to one "
                   "its in-sync followers hold back). Clients of the partitions it leads fail the same way now. `krm "
                   "incidents --open --type PARTITION_UNAVAILABLE --json` (cause canary_failed) has the error; check the "
                   "broker (BROKER_DOWN), its disk and network, and the ISR of its partitions. It clears when writes succeed"
                   " again, e.g. after the controller moves leadership away."),
          links=(("broker_page", console(BROKER_PAGE)),),
          why=("The canary (clusters with `canary = true`): acks=all writes to the canary partition the broker should lead "
               "fail. Two failed rounds (canary_interval_s 5 s) before it pages. Held while a critically slow broker "
               "(itself, or a follower in the ISR the write waited on: krm_canary_slowed_by) explains it: "
               "KafkaBrokerSlow's one page names that broker.")),
)


class AvailabilityDetails(PartitionDetails):
    """PARTITION_UNAVAILABLE incidents' details: the metadata's leader does not answer (`unreachable_brokers`),
    refuses the partition (`leader_error` since `leader_error_since_ms`), or the canary's writes fail (`error`,
    `produce_ms`; `leader` then is the leader the canary saw)."""

    ACT_ON = ("unreachable_brokers",)
    unreachable_brokers: Brokers = ()
    leader_error: str | None = None
    leader_error_since_ms: int | None = None
    error: str | None = None
    produce_ms: float | None = None


RULE = Rule(TYPE, {LEADER_UNREACHABLE: "critical", LEADER_NOT_SERVING: "critical", CANARY_FAILED: "critical"},
            "partition",
            "clients cannot use the partition, before the controller says so", scope="offsets", plan=_plan,
            affected=_affected, details=AvailabilityDetails,
            series=SERIES, alerts=ALERTS, routine=(
            "A controlled shutdown hands leadership over before the ports close, so a gated restart shows none; a "
            "crashed or hung leader does (critical) until the controller acts. A starting cluster shows none: a "
            "broker registered less than `unreachable_after_s` ago is still opening its ports. Every election "
            "leaves its partition unserved for a moment (the controller's word or the followers' first fetches on "
            "the way): `leader_not_serving` only once that lasts 3 s."))
