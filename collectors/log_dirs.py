"""Partition sizes on disk, from DescribeLogDirs (API key 35) sent to each live broker.

Used by `krm plan rebalance` to say how much data a plan copies. A partition's size is the largest of
its replicas' (a lagging follower holds less than the leader; the copy is of the leader's log).
A broker that does not answer leaves its partitions out; the caller reports sizes as partial.
"""

from __future__ import annotations

import logging
from typing import Any, Iterable

from collectors.metadata import ask

log = logging.getLogger(__name__)


def partition_sizes(client: Any, brokers: Iterable[int], timeout_ms: int) -> tuple[dict[tuple[str, int], int], list[int]]:
    """((topic, partition) -> bytes, brokers that did not answer)."""
    from kafka.protocol.admin import DescribeLogDirsRequest

    sizes: dict[tuple[str, int], int] = {}
    silent: list[int] = []
    for b in sorted(brokers):
        try:
            resp = ask(client, b, DescribeLogDirsRequest[0](topics=None), timeout_ms)
        except Exception as e:  # noqa: BLE001 - sizes are advisory: a plan without them is still a plan
            log.warning("broker %s: log dir sizes unavailable (%s)", b, e)
            silent.append(b)
            continue
        for error_code, _dir, topics in resp.log_dirs:
            if error_code:
                continue
            for name, parts in topics:
                for index, size, _lag, is_future in parts:
                    if not is_future:
                        key = (name, index)
                        sizes[key] = max(size, sizes.get(key, 0))
    return sizes, silent
