"""One cluster's topics split across collector processes (`krm collect --topic-share I/N`). Pure.

A cluster too large for one collector's poll (docs/scale.md) is polled by N processes, each asking
the offsets of, and publishing the topic records of, only the topics whose name hashes to its share.
Every process still reads the whole Metadata answer (one request, and the cluster-wide facts: who is
registered, which broker holds what), but only share 1 speaks for the cluster: its cluster records
are judged (BROKER_DOWN, CONTROLLER_ANOMALY, CLUSTER_UNREACHABLE) and carry the cluster's totals.
The other shares' cluster records say only that the share is alive, so the pipeline takes a cluster's
view as fresh only while every share is (pipelines/state.py `ClusterView.fresh_ms`): a dead share
makes the view stale (KrmViewStale) instead of leaving its topics silently unwatched.

The hash is CRC-32 of the topic name (zlib, the same on every host and Python), so the processes
need no coordination beyond holding the same N.
"""

from __future__ import annotations

import zlib
from dataclasses import dataclass

from schemas.typed import Observation, TopicShareField


@dataclass(frozen=True)
class TopicShare:
    index: int  # 1-based
    count: int

    def __post_init__(self) -> None:
        if not 1 <= self.index <= self.count:
            raise ValueError(f"topic share {self.index}/{self.count}: expected 1 <= I <= N")

    @property
    def speaks_for_cluster(self) -> bool:
        """Share 1's cluster records are the cluster's; the others' only say the share is alive."""
        return self.index == 1

    def holds(self, topic: str) -> bool:
        return share_of(topic, self.count) == self.index

    def field(self) -> TopicShareField:
        """The cluster record's `topic_share`."""
        return {"index": self.index, "count": self.count}

    def stamp(self, records: list[Observation]) -> list[Observation]:
        """Mark this share on every cluster record among `records` (in place); returns them."""
        for r in records:
            if r["kind"] == "cluster":
                r["cluster_state"]["topic_share"] = self.field()
        return records


def share_of(topic: str, count: int) -> int:
    """The share (1..count) that polls `topic`."""
    return 1 + zlib.crc32(topic.encode()) % count


def parse(text: str) -> TopicShare:
    """`I/N` as the command line and the config file say it."""
    i, sep, n = text.partition("/")
    if not (sep and i.isdigit() and n.isdigit()):
        raise ValueError(f"expected I/N such as 2/3, got {text!r}")
    return TopicShare(int(i), int(n))
