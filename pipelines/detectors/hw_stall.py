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
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Sequence

TYPE = "HW_STALL"
SEVERITY = "critical"
FOLLOWER_UNREACHABLE = "isr_follower_unreachable"
FOLLOWER_BEHIND = "isr_follower_not_caught_up"
DEFAULT_WINDOW_MS = 30_000  # Kafka's default replica.lag.time.max.ms since 2.5


@dataclass(frozen=True)
class Stall:
    stalled_ms: int
    cause: str
    holding_back: tuple[int, ...]
    unreachable: tuple[int, ...]


def classify_stall(leader: int, isr: Sequence[int], hw: int | None, leos: dict[int, int], since_ms: int | None,
                   observed_at_ms: int, window_ms: int) -> Stall | None:
    if since_ms is None or hw is None or leader < 0 or observed_at_ms - since_ms < window_ms:
        return None
    followers = [r for r in isr if r != leader]
    unreachable = tuple(r for r in followers if r not in leos)
    behind = tuple(r for r in followers if r in leos and leos[r] <= hw)
    return Stall(observed_at_ms - since_ms, FOLLOWER_UNREACHABLE if unreachable else FOLLOWER_BEHIND,
                 unreachable + behind, unreachable)


def leo_of(replica_offsets: Any, broker: Any) -> Any:
    """The LEO a replica reported, as a Column (null when it did not answer)."""
    from pyspark.sql import functions as F

    return F.get(F.transform(F.filter(replica_offsets, lambda o: o["broker"] == broker),
                             lambda o: o["log_end_offset"]), 0)


def stall_columns(p: Any, observed_at_ms: Any, window_ms: Any) -> dict[str, Any]:
    """The same rule as Spark Columns over one partition struct of a topic record."""
    from pyspark.sql import functions as F

    since = p["hw_stalled_since_ms"]
    hw = p["high_watermark"]
    offsets = F.coalesce(p["replica_offsets"], F.array())
    followers = F.filter(p["isr"], lambda r: r != p["leader"])
    reported = F.transform(offsets, lambda o: o["broker"])
    unreachable = F.filter(followers, lambda r: ~F.array_contains(reported, r))
    behind = F.filter(followers, lambda r: F.array_contains(reported, r) & (leo_of(offsets, r) <= hw))
    stalled = since.isNotNull() & hw.isNotNull() & (p["leader"] >= 0) & (observed_at_ms - since >= window_ms)
    return {
        "stalled": F.coalesce(stalled, F.lit(False)),
        "stalled_ms": observed_at_ms - since,
        "cause": F.when(F.size(unreachable) > 0, F.lit(FOLLOWER_UNREACHABLE)).otherwise(F.lit(FOLLOWER_BEHIND)),
        "holding_back": F.concat(unreachable, behind),
        "unreachable": unreachable,
    }
