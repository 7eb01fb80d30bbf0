"""The cyclic garbage collector held off while a poll builds its records.

A poll of a large cluster allocates a few dicts and lists per partition, and most of them live on
(the records until they are published, the collector's per-partition memory). Each burst of
allocations triggers Python's cyclic collector, which walks every young object and, as the
partition memory ages, the old ones too: measured on the stand-in cluster (benchmarks/
BENCHMARKS.md), more than half of a 100k-partition poll. These objects form no reference cycles, so
reference counting frees them all; the cyclic collector runs again when the last poll in flight
ends. Process-wide (gc.disable is), so several clusters' polls in parallel count themselves in.
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
