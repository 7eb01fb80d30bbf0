"""HW_STALL: the leader's high watermark has not moved for a window while its log end offset is ahead.

The leader's HW is the minimum LEO over the ISR (docs/cases/isr-hw-leo-epoch.md, `Partition.maybeIncrementLeaderHW` in
core/src/main/scala/kafka/cluster/Partition.scala): one ISR follower that stops fetching holds it
still, and acks=all producers hang until that follower catches up or leaves the ISR, which takes up
to replica.lag.time.max.ms (plus half of it: the ISR shrink check runs at that period). An idle
partition (LEO == HW) is not stalled. The collector reports since when the HW has held still
while behind (`hw_stalled_since_ms`, collectors/memory.py); the window defaults to the cluster's
replica.lag.time.max.ms, the point past which Kafka itself considers a follower out of sync.

The follower holding the HW back is an ISR member other than the leader whose LEO is at (or below)
the HW, or that did not answer the collector at all (`unreachable`).

A follower the collector has *judged* unreachable (the topic record's `unreachable_brokers`: silent
for `unreachable_after_s`, or its port refusing connections) does not get the whole window: a dead,
paused or cut-off ISR follower holds acks=all producers from the moment it stops fetching, and
Kafka frees them only when the leader drops it from the ISR (replica.lag.time.max.ms) or the
controller does at its session's expiry, both after the clients have waited many seconds. So the HW
held still for `SILENT_FOLLOWER_WINDOW_MS` with such a follower in the ISR is a stall at once. A
follower krm cannot reach but that still fetches (a one-way cut) lets the HW move: no stall.

Nor does an ISR follower that answers krm but fetches nothing from its leader (its replication link
cut, its fetcher thread stuck): the collector reads its log end offset (ListOffsets asked of the
follower itself, replica id -2: `ReplicaManager.fetchOffsetForTimestamp` answers from the local log,
core/src/main/scala/kafka/server/ReplicaManager.scala) standing still while the leader's grows. A
follower that fetches brings its log up to the leader's at each fetch, which comes back at once when
there is data and within replica.fetch.wait.max.ms (500 ms) when there is none. So a follower at (or
below) the HW, or one the collector saw stand still for a poll while the leader had more for it
(`stalled_followers`; its LEO may be one batch past the HW: the leader learns a follower's LEO from its
next fetch), with the HW held still for `STOPPED_FETCHER_WINDOW_MS` and its leader answering, is a
stopped fetcher and a stall at once. pipelines/replication_links.py groups these stalls by follower and
leader: which side of a replication link is cut.

And the leader that waits for a replica krm does not see in the ISR (`waits_outside_isr`): every ISR
follower answered past the HW and none stood still, yet the HW held for `STOPPED_FETCHER_WINDOW_MS`. The
leader moves its HW to the lowest LEO over its own maximal ISR and over replicas it still counts as caught
up (`Partition.maybeIncrementLeaderHW`), and the followers' fetches tell it their offsets at once, so a HW
behind all of them waits for a replica outside the ISR the metadata gives: one the controller took out
whose change has not reached the leader, or one the leader still counts as caught up. Acks=all producers
wait meanwhile: seen after the active controller's connections to the other brokers were cut and healed
(docs/cases/controller-channel.md has the field case and our reading of it). Not judged under min ISR,
where Kafka 4 holds the HW by design (KIP-966: `maybeIncrementLeaderHW` returns at `isUnderMinIsr`) and
UNDER_MIN_ISR says what is wrong. Its first poll may also be a follower that stopped right after it caught
up (its next fetch never told the leader): the poll after marks it `stalled_followers`, and the cause
turns `isr_follower_not_caught_up`.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from pipelines.columns import leo_of
from pipelines.detectors import isr, offline
from pipelines.detectors.details import Brokers, Part, PartitionDetails, parse
from pipelines.detectors.exports import Alert, Series, incident_info, UNLESS_SLOWED
from pipelines.detectors.rule import PartitionView, Rule
from schemas.quiet import DEFAULT_WINDOW_MS, SILENT_FOLLOWER_WINDOW_MS, STOPPED_FETCHER_WINDOW_MS

if TYPE_CHECKING:
    from pyspark.sql import Column

TYPE = "HW_STALL"
FOLLOWER_UNREACHABLE = "isr_follower_unreachable"
FOLLOWER_BEHIND = "isr_follower_not_caught_up"
WAITS_OUTSIDE_ISR = "waits_outside_isr"


def stall_columns(p: Column, observed_at_ms: Column, window_ms: Column, judged_unreachable: Column,
                  under_min_isr: Column | None = None) -> dict[str, Any]:
    """The same rule as Spark Columns over one partition struct of a topic record; `judged_unreachable`:
    the topic record's `unreachable_brokers` (an array, empty when none); `under_min_isr`: the ISR rule's
    column (pipelines/detectors/isr.py), None when unknown."""
    from pyspark.sql import functions as F

    since = p["hw_stalled_since_ms"]
    hw = p["high_watermark"]
    offsets = F.coalesce(p["replica_offsets"], F.array())
    followers = F.filter(p["isr"], lambda r: r != p["leader"])
    reported = F.transform(offsets, lambda o: o["broker"])
    unreachable = F.filter(followers, lambda r: ~F.array_contains(reported, r))
    not_fetching = F.coalesce(p["stalled_followers"], F.array().cast("array<int>"))
    behind = F.filter(followers, lambda r: F.array_contains(reported, r)
                      & ((leo_of(offsets, r) <= hw) | F.array_contains(not_fetching, r)))
    held_ms = observed_at_ms - since
    silent_follower = F.exists(followers, lambda r: F.array_contains(judged_unreachable, r))
    leader_answers = ~F.array_contains(judged_unreachable, p["leader"])
    stopped_fetcher = (F.size(behind) > 0) & leader_answers
    # every ISR follower fetching and past the HW; not under min ISR, where Kafka 4 holds the HW by design
    outside = F.forall(followers, lambda r: F.array_contains(reported, r) & (leo_of(offsets, r) > hw)
                       & ~F.array_contains(not_fetching, r))
    if under_min_isr is not None:
        outside = outside & ~F.coalesce(under_min_isr, F.lit(False))
    long_enough = ((held_ms >= window_ms) | ((held_ms >= F.lit(SILENT_FOLLOWER_WINDOW_MS)) & silent_follower)
                   | ((held_ms >= F.lit(STOPPED_FETCHER_WINDOW_MS)) & (stopped_fetcher | (outside & leader_answers))))
    stalled = since.isNotNull() & hw.isNotNull() & (p["leader"] >= 0) & long_enough
    return {
        "stalled": F.coalesce(stalled, F.lit(False)),
        "stalled_ms": observed_at_ms - since,
        "cause": F.when(F.size(unreachable) > 0, F.lit(FOLLOWER_UNREACHABLE))
                  .when(outside, F.lit(WAITS_OUTSIDE_ISR)).otherwise(F.lit(FOLLOWER_BEHIND)),
        "holding_back": F.concat(unreachable, behind),
        "unreachable": unreachable,
    }


def of(view: PartitionView) -> dict[str, Any]:
    """`stall_columns` of a partition view with its window: the detector setting, else the cluster's
    replica.lag.time.max.ms."""
    from pyspark.sql import functions as F

    def build() -> dict[str, Any]:
        configured = view.settings.hw_stall_window_ms
        window = (F.lit(configured) if configured is not None
                  else F.coalesce(view.ts["replica_lag_time_max_ms"], F.lit(DEFAULT_WINDOW_MS)))
        under_min = isr.of(view)["under_min_isr"]
        return {**stall_columns(view.p, view.observed_at_ms, window, view.unreachable, under_min), "window": window}
    return view.memo("stall", build)


def _plan(view: PartitionView) -> Column:
    from pyspark.sql import functions as F

    st, p = of(view), view.p
    details = view.details(
        *view.offsets_details, st["stalled_ms"].alias("stalled_ms"), p["hw_stalled_since_ms"].alias("hw_stalled_since_ms"),
        st["window"].alias("window_ms"), st["holding_back"].alias("holding_back"), st["unreachable"].alias("unreachable"))
    return F.array(F.when(~offline.of(view)["is_offline"] & st["stalled"], view.finding(RULE, st["cause"], details)))


class ReplicationLink(Part):
    """Which side of a replication link is cut, judged over every stalled pair of the cluster
    (pipelines/replication_links.py side)."""

    side: str | None = None  # follower | leader | link
    broker: int | None = None  # the broker on the cut side
    peers: Brokers = ()  # the brokers it fetches nothing from (follower side) or that fetch nothing from it
    summary: str | None = None


class StallDetails(PartitionDetails):
    """A HW_STALL incident's details."""

    ACT_ON = ("holding_back",)
    high_watermark: int | None = None
    leader_leo: int | None = None
    stalled_ms: int | None = None
    hw_stalled_since_ms: int | None = None  # since when the HW has not moved with the LEO ahead
    window_ms: int | None = None
    holding_back: Brokers = ()  # the ISR followers holding it: unreachable, then not caught up
    unreachable: Brokers = ()  # of those, the ones that did not answer the collector
    replication_link: ReplicationLink | None = None

    def headline(self) -> str | None:
        link = self.replication_link
        if link is None or not link.summary:
            return None
        return f"cut: {link.summary} ({link.side} side)"


def _stalled_s(inc: Any, now: float) -> float | None:
    """Seconds since the HW stopped moving (from the incident's latest observation; it keeps counting)."""
    since = parse(StallDetails, inc.details).hw_stalled_since_ms
    return None if since is None else max(0.0, now - since / 1000)


SERIES = (Series("krm_partition_hw_stall_seconds",
                 "Seconds the leader's high watermark has not moved while its LEO is ahead.", value=_stalled_s),)

ALERTS = (
    Alert("KafkaHighWatermarkStalled", "krm_partition_hw_stall_seconds > 0" + UNLESS_SLOWED, "critical",
          summary=("{{ $labels.cluster }}: {{ $labels.topic }}-{{ $labels.partition }} high watermark stalled for {{ $value "
                   "| humanizeDuration }}"),
          runbook=("acks=all producers of this partition are waiting. details.holding_back of the HW_STALL incident names "
                   "the ISR follower the HW waits for (`krm incidents --open --type HW_STALL --json`); check that broker "
                   "(paused, GC, disk, network; cause isr_follower_unreachable: it does not answer krm either). Kafka drops "
                   "it from the ISR after replica.lag.time.max.ms (or the controller at its session's expiry), which "
                   "unblocks producers at the cost of redundancy. Cause waits_outside_isr: every follower of the ISR "
                   "fetches and is past the HW, so the leader waits for a replica outside the ISR the controller "
                   "gave: one it took out whose change has not reached the leader (the controller's log for its "
                   "requests to that broker, the leader's for the LeaderAndIsr or metadata it is missing; "
                   "docs/cases/controller-channel.md)."),
          links=(("incident", incident_info(TYPE, "url")),
                 ("holding_back", incident_info(TYPE, "holding_back")))),
    Alert("KafkaReplicationLinkStalled", "krm_replication_link_stalled == 1", "warning",
          summary="{{ $labels.cluster }}: broker {{ $labels.follower }} fetches nothing from broker {{ $labels.leader }}",
          runbook=("The follower answers krm, but its copies of partitions this leader writes to stand still at the "
                   "high watermark: its replica fetcher gets nothing from the leader. The HW_STALL incidents' "
                   "details.replication_link says which side is cut: one follower behind several leaders (its outgoing "
                   "connections: a firewall or security group rule, a network policy, a broken route or MTU from its "
                   "host; its fetcher threads: `ReplicaFetcherThread` in a thread dump) or several followers behind one "
                   "leader (that leader's host or its inter-broker listener). Check from the follower's host that the "
                   "leader's inter-broker listener is reachable (`nc -vz host port`), its log for `Error sending fetch "
                   "request` / `Connection to node N ... could not be established`, and the fetcher's JMX "
                   "(kafka.server:type=FetcherLagMetrics, type=replica-fetcher-metrics). Kafka drops the follower from "
                   "the ISR after replica.lag.time.max.ms, which frees acks=all producers (KafkaHighWatermarkStalled "
                   "pages meanwhile) and leaves those partitions a copy short until the link is back."),
          why=("Names the cut; the page is KafkaHighWatermarkStalled's (acks=all producers wait). A warning: once Kafka "
               "drops the follower from the ISR, clients are served again, one copy short.")),
)


RULE = Rule(TYPE, {FOLLOWER_UNREACHABLE: "critical", FOLLOWER_BEHIND: "critical", WAITS_OUTSIDE_ISR: "critical"},
            "partition",
            "the HW held still for a window while the leader's log is ahead: acks=all producers hang",
            scope="offsets", plan=_plan, affected=lambda v: of(v)["stalled"], details=StallDetails,
            series=SERIES, alerts=ALERTS, routine=(
            "A controlled shutdown takes the broker out of the ISR before it stops, so no HW waits for it; a "
            "stall means an ISR follower holds acks=all producers: critical, within 1 s of the HW held once krm "
            "judges that follower unreachable (dead, paused, cut off), within 1.5 s once it finds it answering but "
            "fetching nothing while its leader's log grows (a stopped fetcher: a replication link cut) or the HW "
            "behind every follower of the ISR (the leader waits for a replica outside it), else "
            "after the window."))
