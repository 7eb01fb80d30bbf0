"""One look at a cluster's placement, for the offline commands (`check shutdown`, `assign explain`,
`plan rebalance`): from a live cluster (one collector poll) or from an assignment file.

Assignment files are the JSON `kafka-reassign-partitions` reads and prints
(`{"version": 1, "partitions": [{"topic", "partition", "replicas"}, ...]}`, e.g. the "Current
partition replica assignment" of `--generate`), or `krm assign simulate --json` output
(`{"<partition>": [brokers]}`, one topic, named by --topic).
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Mapping

from collectors.admin import AdminSource
from collectors.log_dirs import partition_sizes
from foundation.errors import KrmError

if TYPE_CHECKING:
    from foundation.config import Config


@dataclass
class ClusterSnapshot:
    name: str
    mode: str | None  # "zk", "kraft", or None when unknown (a file)
    live: set[int]
    racks: dict[int, str | None]
    known: set[int]  # every broker the cluster record names (live or not)
    topics: list[Mapping[str, Any]]  # topic_state dicts (collectors/records.py); from a file: replicas only
    sizes: dict[tuple[str, int], int] | None = None
    sizes_note: str = ""

    def assignment(self) -> dict[tuple[str, int], list[int]]:
        return {(t["topic"], p["partition"]): list(p["replicas"]) for t in self.topics for p in t["partitions"]}

    def topic(self, name: str) -> Mapping[str, Any]:
        for t in self.topics:
            if t["topic"] == name:
                return t
        known = ", ".join(sorted(t["topic"] for t in self.topics)) or "none"
        raise KrmError(f"topic {name!r} not found in {self.name} (topics: {known})")


def from_cluster(config: Config, cluster_name: str | None, with_sizes: bool = False) -> ClusterSnapshot:
    cluster = config.cluster(cluster_name) if cluster_name else config.clusters[0]
    src = AdminSource(cluster, config.collector)
    try:
        records = src.poll()
        state = next(r for r in records if r["kind"] == "cluster")["cluster_state"]
        if state.get("error"):
            raise KrmError(f"cluster {cluster.name} unreachable: {state['error']}")
        live = {b["id"] for b in state["brokers"] if b["live"]}
        racks = {b["id"]: b["rack"] for b in state["brokers"] if b.get("rack")}
        snap = ClusterSnapshot(cluster.name, "zk" if cluster.zookeeper else "kraft", live, racks,
                               {b["id"] for b in state["brokers"]},
                               [r["topic_state"] for r in records if r["kind"] == "topic"])
        if with_sizes:
            sizes, silent = partition_sizes(src._client()._client, live, config.collector.request_timeout_ms)
            snap.sizes = sizes
            snap.sizes_note = f" (brokers {silent} did not report sizes)" if silent else ""
        return snap
    finally:
        src.close()


def from_file(path: str, live: list[int] | None, topic: str | None = None,
              racks: dict[int, str] | None = None) -> ClusterSnapshot:
    try:
        doc = json.loads(Path(path).read_text())
    except (OSError, ValueError) as e:
        raise KrmError(f"assignment file {path}: {e}") from None
    by_topic: dict[str, list[dict[str, Any]]] = {}
    if isinstance(doc, dict) and isinstance(doc.get("partitions"), list):
        for i, p in enumerate(doc["partitions"]):
            try:
                by_topic.setdefault(str(p["topic"]), []).append({"partition": int(p["partition"]),
                                                                 "replicas": [int(b) for b in p["replicas"]]})
            except (KeyError, TypeError, ValueError):
                raise KrmError(f"assignment file {path}: partitions[{i}] needs topic, partition and replicas") from None
    elif isinstance(doc, dict) and doc and all(k.lstrip("-").isdigit() for k in doc):
        if not topic:
            raise KrmError(f"assignment file {path} has one topic's partitions without a name: pass --topic")
        by_topic[topic] = [{"partition": int(k), "replicas": [int(b) for b in v]} for k, v in doc.items()]
    else:
        raise KrmError(f"assignment file {path}: expected kafka-reassign-partitions JSON "
                       '({"version": 1, "partitions": [...]}) or krm assign simulate --json output')
    topics: list[Mapping[str, Any]] = [{"topic": t, "partitions": sorted(ps, key=lambda p: p["partition"])}
                                    for t, ps in sorted(by_topic.items())]
    for t in topics:
        ids = [p["partition"] for p in t["partitions"]]
        if ids != list(range(len(ids))):
            raise KrmError(f"assignment file {path}: topic {t['topic']} partitions are not 0..{len(ids) - 1}")
    holders = {b for t in topics for p in t["partitions"] for b in p["replicas"]}
    return ClusterSnapshot(Path(path).name, None, set(live) if live else holders, dict(racks or {}),
                           holders | set(live or ()), topics)
