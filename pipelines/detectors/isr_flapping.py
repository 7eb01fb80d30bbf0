"""ISR_FLAPPING: a partition whose ISR shrinks and expands again and again, one incident with a count and the
follower named, not a stream of under-replicated openings and resolutions.

A follower at the edge of replica.lag.time.max.ms (a slow disk, a busy fetcher, a link that drops now and then)
leaves the ISR when the leader's check finds it more than that behind (Partition.maybeShrinkIsr,
core/src/main/scala/kafka/cluster/Partition.scala) and rejoins as soon as its fetch reaches the leader's log end
(Partition.maybeExpandIsr): each round trip is an UNDER_REPLICATED incident opening and resolving. The incident
book already reopens the same UNDER_REPLICATED incident within the flap window (pipelines/incidents.py,
`reopen_count`); here a partition whose ISR shrank `FLAPS_MIN` times within it is ISR_FLAPPING, naming the
followers that left, with the count. Pure, judged on the driver from the incident book; it resolves once the
under-replicated incident has stayed resolved past the flap window.

A warning: each dip is a moment one copy short, and acks=all producers wait for the follower until it leaves the
ISR; the follower's broker is the thing to look at (its disk, its fetcher, its network), not each dip.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Iterable

from pipelines.detectors.details import Brokers, PartitionDetails
from pipelines.detectors.exports import Alert, Series, incident_info
from pipelines.detectors.rule import Rule

TYPE = "ISR_FLAPPING"
SCOPE = "isr_flapping"
SHRINK_EXPAND = "shrink_expand"
UNDER_REPLICATED = "UNDER_REPLICATED"
FLAPS_MIN = 3  # ISR shrinks of one partition within the flap window that make it flapping


class FlapDetails(PartitionDetails):
    """An ISR_FLAPPING incident's details."""

    ACT_ON = ("followers",)
    followers: Brokers = ()  # the replicas that left the ISR, as the last shrink saw them
    shrinks: int | None = None  # ISR shrinks within the flap window, counted so far
    first_shrink_at_ms: int | None = None  # when the first of them opened the under-replicated incident

    def headline(self) -> str | None:
        if self.shrinks is None:
            return None
        who = ", ".join(str(b) for b in self.followers) or "a follower"
        return f"its ISR shrank {self.shrinks} times: broker {who} leaves and rejoins"


@dataclass(frozen=True)
class Flap:
    cluster: str
    topic: str
    partition: int
    follower: int | None
    details: dict[str, object]
    seen_at_ms: int


def judge(under_replicated: Iterable[Any], now_ms: int, flap_window_ms: int) -> list[Flap]:
    """The partitions whose UNDER_REPLICATED incident (`under_replicated`: the book's, pipelines/incidents.py)
    opened FLAPS_MIN times or more and is open, or resolved within the flap window before `now_ms` (it may
    still reopen as the same incident)."""
    out = []
    for i in under_replicated:
        if i.type != UNDER_REPLICATED or i.topic is None or i.partition is None or i.reopen_count + 1 < FLAPS_MIN:
            continue
        if i.resolved_at_ms is not None and now_ms - i.resolved_at_ms > flap_window_ms:
            continue
        facts = i.facts
        followers = tuple(getattr(facts, "out_of_sync", ()) or ())
        base = {k: v for k, v in (("leader", getattr(facts, "leader", None)), ("replicas", getattr(facts, "replicas", None)),
                                  ("isr", getattr(facts, "isr", None))) if v is not None}
        details = {**base, "followers": list(followers), "shrinks": i.reopen_count + 1, "first_shrink_at_ms": i.opened_at_ms}
        out.append(Flap(i.cluster, i.topic, i.partition, followers[0] if len(followers) == 1 else None, details,
                        i.last_seen_at_ms))
    return out


SERIES = (Series("krm_partition_isr_flapping", "1 while the partition's ISR keeps shrinking and expanding (ISR_FLAPPING: "
                 f"{FLAPS_MIN} shrinks or more within the flap window); its incident names the follower and the count."),)

ALERTS = (
    Alert("KafkaIsrFlapping", "krm_partition_isr_flapping == 1", "warning", wait="5m",
          summary="{{ $labels.cluster }}: {{ $labels.topic }}-{{ $labels.partition }}'s ISR keeps shrinking and expanding",
          runbook=("A follower sits at the edge of replica.lag.time.max.ms: it falls behind, leaves the ISR, catches up "
                   "and rejoins, again and again. details.followers of the ISR_FLAPPING incident names it and "
                   "details.shrinks counts the rounds. Look at that broker: its disk latency, its replica fetcher "
                   "(num.replica.fetchers, fetch sizes), its network to the leader, and BROKER_SLOW for it. Raising "
                   "replica.lag.time.max.ms only hides it."),
          links=(("incident", incident_info(TYPE, "url")), ("followers", incident_info(TYPE, "followers"))),
          why="Each dip alone heals; the repetition is the finding. A warning: no client fails while it lasts."),
)

RULE = Rule(TYPE, {SHRINK_EXPAND: "warning"}, "driver",
            "a partition whose ISR shrank and expanded again and again within the flap window: one incident, the "
            "follower named and counted", details=FlapDetails, series=SERIES, alerts=ALERTS, routine=(
            "A rolling restart shrinks and expands each partition's ISR once a broker, a few times over the whole "
            "restart but each by another follower in turn; a partition shrinks three times within the flap window "
            "only when its restarts follow closely: a warning, never a page."))
