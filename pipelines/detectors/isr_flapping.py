"""ISR_FLAPPING: a partition whose ISR shrinks and expands again and again, one incident with a count and the
follower named, not a stream of under-replicated openings and resolutions.

A follower at the edge of replica.lag.time.max.ms (a slow disk, a busy fetcher, a link that drops now and then)
leaves the ISR when the leader's check finds it more than that behind (Partition.maybeShrinkIsr,
core/src/main/scala/kafka/cluster/Partition.scala) and rejoins as soon as its fetch reaches the leader's log end
(Partition.maybeExpandIsr): each round trip is an UNDER_REPLICATED incident opening and resolving. The incident
book already reopens the same UNDER_REPLICATED incident within the flap window (pipelines/incidents.py,
`reopen_count`); here a partition whose ISR lost the same follower `FLAPS_MIN` times within it is ISR_FLAPPING,
naming the follower that left, with the count. Counted per follower: a rolling restart takes each follower out
once, so the partition's dips then are one per follower, never flapping. Pure, judged on the driver from the incidents the
book changes; it resolves once fewer than FLAPS_MIN of that follower's shrinks are left within the window.

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
    followers: Brokers = ()  # the follower that keeps leaving the ISR
    shrinks: int | None = None  # times it left within the flap window, counted so far
    first_shrink_at_ms: int | None = None  # when the first of them opened the under-replicated incident

    def headline(self) -> str | None:
        if self.shrinks is None:
            return None
        who = ", ".join(str(b) for b in self.followers) or "a follower"
        return f"broker {who} left its ISR {self.shrinks} times and rejoined"


@dataclass(frozen=True)
class Flap:
    cluster: str
    topic: str
    partition: int
    follower: int
    details: dict[str, object]


class Shrinks:
    """Per partition, its ISR shrinks of the flap window: when, and which followers left. A shrink is an
    UNDER_REPLICATED incident opening or reopening (the book keeps one incident per partition through its dips).
    Counted per follower: a rolling restart takes each follower out once, a flapping one leaves again and again.
    Pure; bounded by the partitions that shrank within the window."""

    def __init__(self) -> None:
        self._seen: dict[tuple[str, str, int], list[tuple[int, tuple[int, ...]]]] = {}
        self._marks: dict[tuple[str, str, int], tuple[int, int]] = {}  # the (opening, reopen count) noted last
        self._partition: dict[tuple[str, str, int], dict[str, object]] = {}  # leader, replicas, ISR as last seen

    def note(self, incidents: Iterable[Any]) -> None:
        """The book's changed incidents (pipelines/incidents.py Incident): each UNDER_REPLICATED one that opened or
        reopened since the last look is a shrink."""
        for i in incidents:
            if i.type != UNDER_REPLICATED or i.status != "open" or i.topic is None or i.partition is None:
                continue
            key, mark = (i.cluster, i.topic, i.partition), (i.opened_at_ms, i.reopen_count)
            if self._marks.get(key) == mark:
                continue  # seen again, not a new shrink
            self._marks[key] = mark
            facts = i.facts
            self._seen.setdefault(key, []).append((i.last_seen_at_ms, tuple(getattr(facts, "out_of_sync", ()) or ())))
            self._partition[key] = {k: v for k in ("leader", "replicas", "isr")
                                    if (v := getattr(facts, k, None)) is not None}

    def flapping(self, cluster: str, now_ms: int, window_ms: int) -> list[Flap]:
        """The partitions of `cluster` one follower of which left the ISR FLAPS_MIN times or more within the window."""
        out = []
        for key in [k for k in self._seen if k[0] == cluster]:
            shrinks = [(at, left) for at, left in self._seen[key] if now_ms - at <= window_ms]
            if not shrinks:
                for held in (self._seen, self._marks, self._partition):
                    held.pop(key, None)
                continue
            self._seen[key] = shrinks
            by_follower: dict[int, list[int]] = {}
            for at, left in shrinks:
                for b in left:
                    by_follower.setdefault(b, []).append(at)
            for b, ats in sorted(by_follower.items()):
                if len(ats) >= FLAPS_MIN:
                    out.append(Flap(cluster, key[1], key[2], b, {**self._partition.get(key, {}), "followers": [b],
                                                                  "shrinks": len(ats), "first_shrink_at_ms": ats[0]}))
                    break  # one incident a partition: its most flapping follower first by id
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
            "A rolling restart takes each follower out of each partition's ISR once, another follower each time: "
            "counted per follower, never flapping. A warning, never a page."))
