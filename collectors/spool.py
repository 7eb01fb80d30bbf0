"""A bounded, in-order buffer between the poll loops and the observations topic. Pure (no I/O).

Every record goes through it: the poll loop appends and returns at once; the sender takes records
from the head in order and removes them only once Kafka acknowledged them. While the observations
topic is unreachable the spool grows up to `max_bytes`; beyond that the *oldest* records are
dropped (and counted): when it comes back, the newest state of each cluster matters most. A record
is never dropped silently: `dropped` counts every one, and the first drop of an outage is logged.
"""

from __future__ import annotations

import threading
from collections import deque
from typing import Iterable

Item = tuple[bytes, bytes]  # key, value (serialized JSON)


class Spool:
    def __init__(self, max_bytes: int) -> None:
        self.max_bytes = max_bytes
        self._items: deque[Item] = deque()
        self._bytes = 0
        self._cond = threading.Condition()
        self.dropped = 0
        self._closed = False

    def put(self, items: Iterable[Item]) -> int:
        """Append in order; returns how many old records had to be dropped to make room."""
        dropped = 0
        with self._cond:
            for item in items:
                self._items.append(item)
                self._bytes += _size(item)
            while self._bytes > self.max_bytes and len(self._items) > 1:
                old = self._items.popleft()
                self._bytes -= _size(old)
                dropped += 1
            self.dropped += dropped
            self._cond.notify_all()
        return dropped

    def peek(self, n: int, timeout_s: float) -> list[Item]:
        """Up to `n` records from the head, without removing them; waits for one up to `timeout_s`."""
        with self._cond:
            if not self._items and not self._closed:
                self._cond.wait(timeout_s)
            return [self._items[i] for i in range(min(n, len(self._items)))]

    def pop(self, sent: list[Item]) -> None:
        """Remove `sent` from the head; records dropped meanwhile (overflow) are not removed twice."""
        with self._cond:
            for item in sent:
                if self._items and self._items[0] is item:
                    self._items.popleft()
                    self._bytes -= _size(item)

    def close(self) -> None:
        with self._cond:
            self._closed = True
            self._cond.notify_all()

    @property
    def depth(self) -> int:
        return len(self._items)

    @property
    def size_bytes(self) -> int:
        return self._bytes


def _size(item: Item) -> int:
    return len(item[0]) + len(item[1])
