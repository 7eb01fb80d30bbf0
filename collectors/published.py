"""What a poller has published of each partition's leadership, so that no record goes back in leader epoch,
and the poll numbers and Metadata hand-over that the ZooKeeper mirror's quick records share with the polls."""

from __future__ import annotations

import math
import threading
import time
from typing import Iterable, Mapping

from collectors.wire import MdPartition
from schemas.typed import Partition

NO_OLDER_WINDOW_S = 30.0  # far beyond a metadata propagation between the controller and the brokers

Key = tuple[str, int]  # (topic, partition)


class Published:
    """Per partition, the (leader epoch, leader, ISR) last published and when; the poll numbers; and, between
    a poll's Metadata answer and its records, that answer (quick records stamped meanwhile read it)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()  # quick records (the ZooKeeper watch's thread) and polls share the next two
        self._poll_id = 0
        self._arrived: Mapping[str, list[MdPartition]] | None = None
        # (topic, partition) -> (leader_epoch, leader, isr) last published: never go back (no_older)
        self.epochs: dict[Key, tuple[int, int, list[int]]] = {}
        # ... and when (time.monotonic()): apart, so that a steady partition's poll stores one float and
        # allocates nothing
        self.at: dict[Key, float] = {}

    def next_poll(self) -> int:
        with self._lock:
            self._poll_id += 1
            return self._poll_id

    def quick_stamp(self) -> tuple[int, int, Mapping[str, list[MdPartition]] | None]:
        """A quick record's poll number, time (epoch ms) and the Metadata answer newer than the records so far."""
        with self._lock:
            self._poll_id += 1
            return self._poll_id, int(time.time() * 1000), self._arrived

    def arrive(self, by_topic: Mapping[str, list[MdPartition]] | None) -> int:
        """A poll's Metadata answer is in: stamp the poll (epoch ms) and hand the answer to the quick records
        until its own records register their epochs (`settle`), under the lock quick records are stamped
        under: none stamped meanwhile republishes an older state after it (docs/collector.md)."""
        with self._lock:
            self._arrived = by_topic
            return int(time.time() * 1000)

    def settle(self) -> None:
        with self._lock:
            self._arrived = None

    @property
    def arrived(self) -> Mapping[str, list[MdPartition]] | None:
        return self._arrived

    def no_older(self, topic: str, part: Partition, key: Key | None = None, now: float | None = None) -> None:
        """A record never goes back in leader epoch: the brokers' metadata and the ZooKeeper mirror trail
        each other by a few ms, and epochs only grow, so a part older than what was already published
        takes the published leader and ISR (docs/collector.md)."""
        epoch = part.get("leader_epoch")
        if epoch is None:
            return
        key = key or (topic, part["partition"])
        newer = self.epochs.get(key)
        now = now if now is not None else time.monotonic()
        # Only for the lag between the views (ms to a metadata propagation), and only with the leader and
        # ISR among the replicas: a topic deleted and created again starts its epochs from 0.
        if (newer is not None and newer[0] > epoch and now - self.at.get(key, -math.inf) < NO_OLDER_WINDOW_S
                and set(newer[2]) | ({newer[1]} - {-1}) <= set(part["replicas"])):
            part["leader_epoch"], part["leader"], part["isr"] = newer[0], newer[1], list(newer[2])
            part.pop("zk_mtime_ms", None)
        else:
            self.epochs[key] = (epoch, part["leader"], part["isr"])  # (never changed in place)
            self.at[key] = now

    def forget_missing(self, present: Iterable[Key] | set[Key]) -> None:
        keep = present if isinstance(present, set) else set(present)
        for gone in [k for k in self.epochs if k not in keep]:
            del self.epochs[gone]
            self.at.pop(gone, None)
