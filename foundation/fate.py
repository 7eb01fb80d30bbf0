"""Whether the observations topic lives on a cluster krm watches, and so shares its fate.

A fault on that cluster (a broker nobody can reach, a partition without a leader) can then stop the
very records that would report it: the pipeline sees nothing new and, without this warning, says
nothing either. Two clusters are the same when their bootstrap addresses overlap once resolved
(`localhost:9092` and `127.0.0.1:9092` are one broker): every broker of a cluster knows every other,
so one address in common is one cluster.
"""

from __future__ import annotations

import socket
from functools import lru_cache
from typing import Any


@lru_cache(maxsize=256)
def _resolved(host: str, port: int) -> frozenset[tuple[str, int]]:
    try:
        return frozenset((str(info[4][0]), port) for info in socket.getaddrinfo(host, port, type=socket.SOCK_STREAM))
    except OSError:  # not resolvable from here: compared by name
        return frozenset({(host.lower(), port)})


def addresses(bootstrap_servers: str) -> frozenset[tuple[str, int]]:
    """Every (address, port) a bootstrap list names, resolved."""
    out: set[tuple[str, int]] = set()
    for entry in bootstrap_servers.split(","):
        entry = entry.strip()
        if not entry:
            continue
        host, _, port = entry.rpartition(":")
        host = host.strip("[]") or "localhost"
        if not port.isdigit():
            continue
        out |= _resolved(host, int(port))
    return frozenset(out)


def sharing_fate(config: Any) -> list[str]:
    """The watched clusters whose brokers hold the observations topic (by their bootstrap addresses)."""
    mine = addresses(config.observations.bootstrap_servers)
    return [c.name for c in config.clusters if addresses(c.bootstrap_servers) & mine]


WARNING = ("the observations topic %s lives on cluster %s, which krm watches: a fault on that cluster can stop "
           "the records that would report it (krm_observations_share_fate). Put it on a cluster krm does not "
           "watch (docs/deploying.md)")


class FateMetrics:
    """`krm_observations_share_fate{cluster} 1` for each such cluster (a prometheus-client collector,
    served by the pipeline and by a collector running alone)."""

    def __init__(self, clusters: list[str]) -> None:
        self.clusters = clusters

    def describe(self) -> list[Any]:
        return []

    def collect(self) -> Any:
        from prometheus_client.core import GaugeMetricFamily

        fam = GaugeMetricFamily("krm_observations_share_fate",
                                "1: the observations topic lives on this watched cluster, so a fault there can blind "
                                "krm to it (docs/deploying.md).", labels=["cluster"])
        for name in self.clusters:
            fam.add_metric([name], 1)
        yield fam
