"""What a poller remembers of each topic between polls: its replica lists as last published, when its
assignment was last snapshotted, what it adds to the brokers' load and leadership, and the topics a poll
may pass over (`Frozen`)."""

from __future__ import annotations

import zlib
from typing import Any

from collectors.memory import Seen
from collectors.wire import MdPartition, MdTopic
from schemas.quiet import load_of
from schemas.typed import Partition

TopicView = tuple[list[list[int]], dict[int, int], set[int]]  # (broker_load, leaders per broker, holders)


class Frozen:
    """A topic whose every partition was steady and idle at the poll that built it (no replica behind
    the leader, the HW at the leader's LEO): while the brokers' answers about it stay the same bytes
    (the same objects back from collectors/wire.py and offsets.py), the world around it the same and its
    keyframe interval not over, the next poll would judge every partition as that one did. Such a
    poll only re-stamps what `still_quiet` would have re-stamped (`seen`, `keys`) and publishes the
    same summary: nothing per partition is read, compared or built."""

    __slots__ = ("parts", "config", "start_ms", "end_ms", "seq", "seen", "keys")

    def __init__(self, parts: list[MdPartition], config: tuple[int | None, bool | None, bool],
                 interval: tuple[int, int], seq: int, seen: list[Seen], keys: list[tuple[str, int]]) -> None:
        self.parts = parts  # Metadata's decoded partitions (the same object while the bytes are the same)
        self.config = config  # min ISR, unclean election, remote storage: what the record says of the topic
        self.start_ms, self.end_ms = interval  # the keyframe interval it was built in
        self.seq = seq  # the offsets round it was last judged at (OffsetsRound.seq)
        self.seen, self.keys = seen, keys  # its partitions' memory (collectors/memory.py Seen) and keys


def topic_view(listed: list[MdPartition], built: list[Partition]) -> TopicView:
    """A topic's broker_load (schemas/quiet.py), partitions led per broker and departures.holders(), from
    every partition as published: those `built` by the full way (ZooKeeper's overlay, no_older) in
    place of their `listed` (decoded) form."""
    rebuilt: dict[int, MdPartition | Partition] = {part["partition"]: part for part in built}
    pairs: list[tuple[int, list[int]]] = []
    leads: dict[int, int] = {}
    held: set[int] = set()
    for listed_p in listed:
        p = rebuilt.get(listed_p["partition"], listed_p)
        leader, replicas = p["leader"], p["replicas"]
        pairs.append((leader, replicas))
        leads[leader] = leads.get(leader, 0) + 1
        if len(replicas) > 1:
            if leader >= 0:
                held.add(leader)
            held.update(p["isr"])
    return load_of(pairs), leads, held


class TopicViews:
    """Per topic, what the last poll published of it (see the module's docstring)."""

    def __init__(self) -> None:
        # topic -> partition -> replicas as last published (a new dict per topic per poll, never changed after)
        self.assignments: dict[str, dict[int, list[int]]] = {}
        self.snapshot_slot: dict[str, int] = {}  # topic -> its assignment_snapshot_s interval last recorded
        # topic -> (its TopicView, how many partitions it had then)
        self.views: dict[str, tuple[TopicView, int]] = {}
        self.layout: list[tuple[str, int]] = []  # (topic, partition count) as the last poll listed them
        self._replica_sets: dict[str, tuple[list[MdPartition], set[int]]] = {}  # topic -> (partitions, replicas)
        self.frozen: dict[str, Frozen] = {}  # topics the next poll may pass over
        self.frozen_world: tuple[Any, ...] | None = None  # what the frozen topics were judged against
        self.frozen_topics = 0  # how many topics the last poll passed over (benchmarks, tests)

    def snapshot_due(self, name: str, observed_at_ms: int, snapshot_ms: int) -> bool:
        """The assignment history (pipelines/history.py) records each topic once per assignment_snapshot_s,
        at an offset of its own (not every topic in one poll)."""
        slot = (observed_at_ms + zlib.crc32(name.encode())) // snapshot_ms
        due = self.snapshot_slot.get(name, slot) != slot
        self.snapshot_slot[name] = slot
        return due

    def referenced(self, topics: list[MdTopic]) -> set[int]:
        """Every broker a replica list names, each topic's set kept while its partitions are the same
        object (collectors/wire.py hands an unchanged topic's back)."""
        out: set[int] = set()
        kept = {}
        for t in topics:
            name, parts = t["topic"], t["partitions"]
            known = self._replica_sets.get(name)
            if known is None or known[0] is not parts:
                known = (parts, {r for p in parts for r in p["replicas"]})
            kept[name] = known
            out |= known[1]
        self._replica_sets = kept
        return out

    def forget_unpolled(self, polled: set[str]) -> None:
        for topic in [name for name in self.assignments if name not in polled]:
            del self.assignments[topic]
            self.snapshot_slot.pop(topic, None)
            self.views.pop(topic, None)
            self.frozen.pop(topic, None)
