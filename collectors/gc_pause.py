"""The cyclic garbage collector held off while a poll builds and publishes its records.

A poll of a large cluster allocates a few dicts and lists per partition, and most of them live on
(the records until they are spooled, the collector's per-partition memory). Each burst of
allocations triggers Python's cyclic collector, which walks every young object again, and, as the
partition memory ages, the old ones too (benchmarks/BENCHMARKS.md has what it cost). The records
hold no reference cycles, so reference counting frees them; whatever cycles a poll does leave (a
client's futures, an exception's frames) are collected when the last poll in flight ends and the
collector runs again. Process-wide (gc.disable is), so parallel polls of several clusters count
themselves in.
"""

from __future__ import annotations

import gc
import threading
from contextlib import contextmanager
from typing import Iterator

_lock = threading.Lock()
_inside = 0


@contextmanager
def paused() -> Iterator[None]:
    global _inside
    with _lock:
        _inside += 1
        if _inside == 1:
            gc.disable()
    try:
        yield
    finally:
        with _lock:
            _inside -= 1
            if _inside == 0:
                gc.enable()
