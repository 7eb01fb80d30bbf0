"""Which partitions a v4 topic record may leave out: the quiet ones, on which no rule can find anything.

Most partitions of a real cluster are healthy and unchanged at most polls. Sending each of them every
poll made every poll cost the same as the first (bytes, parsing, the alert plan), so a v4 topic
record carries only the partitions that are not quiet, plus the topic's size and its per-broker
counts (`partition_count`, `broker_load`: the inputs of the balance rules, which need every
partition). The pipeline's topic marker still resolves the topic's incidents: a partition left out
yields no finding, exactly as it would have if sent, because `is_quiet` holds only where every
partition rule of pipelines/detectors is silent. tests/spark/test_quiet_partitions.py checks that
claim against the rules themselves.

A partition is quiet when all of these hold at this poll:
- nothing for the history: not `changed`, not a `keyframe`, no `previous` (the rules comparing two
  polls: UNCLEAN_LEADER_ELECTION, OFFSET_REGRESSION, LOG_TRUNCATION);
- a leader that is registered and answers (OFFLINE_PARTITION, LEADER_UNREACHABLE);
- the whole replica set in the ISR, none offline, none being added or removed (the ISR rules,
  PARTITION_REASSIGNING);
- no lagging follower, and none at REPLICA_LAG's thresholds (messages, or seconds at the write rate);
- the high watermark not held still for the HW_STALL window (a shorter one while an ISR member is
  judged unreachable).
The thresholds are the pipeline's (`[pipeline] replica_lag_messages`, `replica_lag_seconds`,
`hw_stall_window_s`): collectors read them from the same config file.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Collection, Iterable, Self

from foundation.config import PipelineConfig, from_pipeline, setting
from schemas.typed import Partition

# Kafka's default replica.lag.time.max.ms since 2.5 (KIP-537): the HW_STALL window when a cluster's is unknown
DEFAULT_WINDOW_MS = 30_000
# HW_STALL's window while an ISR follower is judged unreachable (pipelines/detectors/hw_stall.py says why).
# Its silence is proven already (unreachable_after_s); the HW held this long with data pending only rules
# out a follower krm cannot reach that still fetches (a fetch returns at once when there is data: the HW
# would move). Short, because the poll that judges the follower may come a second after the one that first
# saw the HW held (extra polls: a probe's, a watch's), and the next one after a short pause has ended.
SILENT_FOLLOWER_WINDOW_MS = 1000
# ... and while an ISR follower that answers krm sits at the HW or stood still for a poll (a fetcher wakes
# at least every replica.fetch.wait.max.ms, 500 ms): a stopped fetcher, acks=all producers wait. Under the
# 2 s poll, so two polls of the HW held still are enough whatever their jitter
STOPPED_FETCHER_WINDOW_MS = 1500


@dataclass(frozen=True)
class Thresholds:
    """The pipeline's thresholds of the rules that judge a healthy-looking partition."""

    lag_messages: int = setting("replica_lag_messages")
    lag_seconds: float = setting("replica_lag_seconds")
    hw_stall_window_ms: int | None = setting("hw_stall_window_s", 1000)  # None: the cluster's replica.lag.time.max.ms

    @classmethod
    def of(cls, pipeline: PipelineConfig) -> Self:
        """From a `[pipeline]` table (subclasses too: every `setting` field)."""
        return from_pipeline(cls, pipeline)

    def window_ms(self, replica_lag_time_max_ms: int | None) -> int:
        if self.hw_stall_window_ms is not None:
            return self.hw_stall_window_ms
        return DEFAULT_WINDOW_MS if replica_lag_time_max_ms is None else replica_lag_time_max_ms


def is_quiet(p: Partition, leos: dict[int, int], live: Collection[int], unreachable: Collection[int], at_ms: int,
             window_ms: int, t: Thresholds) -> bool:
    """True when no partition rule can find anything in partition dict `p` (as the collector publishes
    it, after collectors/memory.py annotated it); `leos`: its replicas' log end offsets as broker -> LEO
    (those that answered: `replica_offsets`). On the collector's hot path: plain tests, cheapest first."""
    if p.get("changed") or p.get("keyframe") or p.get("previous") is not None:
        return False
    leader = p["leader"]
    if (leader < 0 or leader not in live or leader in unreachable or len(p["isr"]) != len(p["replicas"])
            or p.get("offline_replicas") or p.get("adding_replicas") or p.get("removing_replicas")
            or p.get("lagging") or p.get("stalled_followers") or p.get("leader_error")):
        return False
    since = p.get("hw_stalled_since_ms")
    if since is not None and (held := at_ms - since) >= min(window_ms, SILENT_FOLLOWER_WINDOW_MS):
        # a stall HW_STALL may judge: a stopped fetcher, the window, or an ISR follower judged unreachable
        if (held >= min(window_ms, STOPPED_FETCHER_WINDOW_MS)
                or any(r != leader and r in unreachable for r in p["isr"])):
            return False
    leader_leo = leos.get(leader)
    if leader_leo is None:
        return True  # REPLICA_LAG judges a follower against its leader's LEO only
    behind = leader_leo - min(leos.values())
    if behind <= 0:
        return True
    if behind >= t.lag_messages:
        return False
    rate = p.get("write_rate")
    return not (rate is not None and rate > 0 and behind / rate >= t.lag_seconds)


def broker_load(partitions: Iterable[Partition]) -> list[list[int]]:
    """Per broker holding a replica, [broker, leaders, replicas, preferred, preferred_not_leading], sorted by
    broker: what the pipeline counted from every partition before v4 (pipelines/findings.py
    `broker_counts`)."""
    return load_of((p["leader"], p["replicas"]) for p in partitions)


def load_of(partitions: Iterable[tuple[int, list[int]]]) -> list[list[int]]:
    """`broker_load` from each partition's (leader, replicas). The preferred leader is the first replica;
    a leaderless partition counts as not led by it (KafkaController.checkAndTriggerAutoLeaderRebalance)."""
    load: dict[int, list[int]] = {}
    for leader, replicas in partitions:
        for b in replicas:
            row = load.get(b)
            if row is None:
                row = load[b] = [b, 0, 0, 0, 0]
            row[2] += 1
        if leader >= 0 and leader in load:
            load[leader][1] += 1
        if replicas:
            first = load[replicas[0]]
            first[3] += 1
            if leader != replicas[0]:
                first[4] += 1
    return [load[b] for b in sorted(load)]
