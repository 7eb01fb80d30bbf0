"""Tiered storage as the operator sees it: per partition of a tiered topic, where the leader's local
log starts and how far behind its remote copy is (KIP-405; the offsets come from collectors/tiered.py).

Remote copy lag, in messages: the high watermark minus the first offset not yet in remote storage
(the highest remote offset + 1, or the log start offset while nothing is copied). Kafka copies a
segment only once it is rolled, so a healthy partition's lag stays within about one active segment;
a lag that keeps growing past that is a copy that fell behind (the remote store refusing writes,
the copy threads saturated), and the leader's disk fills because local segments cannot be deleted
before they are copied (`UnifiedLog.isSegmentEligibleForDeletion`).
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class TieredPartition:
    partition: int
    high_watermark: int | None
    log_start_offset: int | None
    local_log_start_offset: int | None
    highest_remote_offset: int | None  # -1: nothing copied yet

    @property
    def remote_copy_lag(self) -> int | None:
        """Committed messages not yet in remote storage; None when the leader did not say."""
        if self.high_watermark is None or self.highest_remote_offset is None:
            return None
        first_not_copied = self.highest_remote_offset + 1
        if self.log_start_offset is not None:
            first_not_copied = max(first_not_copied, self.log_start_offset)
        return max(0, self.high_watermark - first_not_copied)


@dataclass(frozen=True)
class TieredTopic:
    cluster: str
    topic: str
    observed_at_ms: int
    partitions: tuple[TieredPartition, ...]


def parse(cluster: str, topic: str, observed_at_ms: int, rows: list[list[int | None]]) -> TieredTopic:
    """From the alert row's JSON (pipelines/findings.py tiered_offsets)."""
    return TieredTopic(cluster, topic, observed_at_ms, tuple(
        TieredPartition(int(r[0]), r[1], r[2], r[3], r[4]) for r in rows if r and r[0] is not None))


def newest(known: dict[tuple[str, str], TieredTopic], fresh: list[TieredTopic],
           forget_before_ms: dict[str, int]) -> dict[tuple[str, str], TieredTopic]:
    """The newest view of each tiered topic; a topic no poll of its cluster listed since
    `forget_before_ms[cluster]` was deleted (or is no longer tiered) and leaves."""
    out = dict(known)
    for t in fresh:
        key = (t.cluster, t.topic)
        if key not in out or t.observed_at_ms >= out[key].observed_at_ms:
            out[key] = t
    return {k: t for k, t in out.items() if t.observed_at_ms >= forget_before_ms.get(t.cluster, 0)}
