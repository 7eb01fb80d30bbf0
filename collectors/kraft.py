"""What a KRaft cluster tells beyond the Metadata response: ELR per partition and the quorum's health.

Both are asked of the broker that just answered the Metadata request, once per poll, and only when
that broker advertises the API (ApiVersions): ZooKeeper-mode brokers have neither, KRaft brokers
before 3.8 no DescribeTopicPartitions (benchmarks/compat.py: 3.7.2 does not advertise it, 3.8.1 does),
and the poll then goes on with Metadata alone (fields absent, never guessed).

- `partition_overlay`: DescribeTopicPartitions pages -> per (topic, partition) the leader, epoch,
  replicas, ISR, offline replicas *and* `elr` / `last_known_elr`, all from one PartitionRegistration
  of the broker's metadata image, so they are consistent with each other (the Metadata response is
  read from the same image, but possibly at another offset). Asked only for topics whose Metadata
  shows a partition without a leader or with a short ISR (`needs_elr`); the others have none.
- `quorum_state`: DescribeQuorum -> the leader, its epoch and high watermark, each voter's log end
  offset and last fetch / caught-up times (the leader's clock), the number of observers (brokers).
"""

from __future__ import annotations

import logging
from typing import Any, Callable, TypedDict

from collectors import kraft_protocol as kp
from collectors.wire import MdPartition, MdTopic
from schemas.typed import Quorum

log = logging.getLogger(__name__)

# A broker forwards DescribeQuorum to the active controller and holds it while there is none: the
# client must not time it out (kafka-python then drops the connection, failing the poll's other
# requests to that broker); the poll judges the wait instead, after the patience below, longer than a
# normal controller fail-over (election timeout 1 s + fetch timeout 2 s by default).
QUORUM_REQUEST_TIMEOUT_MS = 300_000
QUORUM_PATIENCE_MS = 5_000
PAGE_PARTITIONS = 2000  # brokers cap a page at max.request.partition.size.limit (2000 by default)
MAX_PAGES = 10_000  # a cursor that never ends is a broker bug; stop rather than loop

Send = Callable[[Any], Any]


def supports(api_versions: dict[int, tuple[int, int]] | None, api_key: int) -> bool:
    return bool(api_versions) and api_key in api_versions  # type: ignore[operator]


class PartitionOverlay(TypedDict):
    """What DescribeTopicPartitions says of a partition, in the Metadata answer's names (collectors/wire.py)."""
    leader: int
    leader_epoch: int
    replicas: list[int]
    isr: list[int]
    offline_replicas: list[int]
    elr: list[int]
    last_known_elr: list[int]


def needs_elr(partitions: list[MdPartition]) -> bool:
    """Whether a topic's ELR can be anything but empty, judged on its Metadata: Kafka keeps an ELR
    only while the ISR is below min ISR (maybePopulateTargetElr clears it otherwise, and min ISR
    is at most the replication factor), and a last known ELR only while there is no leader
    (cleared at the next election). A topic whose every partition has a leader and a full ISR has
    neither, so only the others are described: the request grows with problems, not with size."""
    return any(p["leader"] < 0 or len(p["isr"]) < len(p["replicas"]) for p in partitions)


def describe_partitions(send: Send, topics: list[str]) -> dict[tuple[str, int], PartitionOverlay]:
    """Every partition of these topics, page by page. Raises what `send` raises."""
    out: dict[tuple[str, int], PartitionOverlay] = {}
    cursor: tuple[str, int] | None = None
    for _ in range(MAX_PAGES):
        response = send(kp.describe_topic_partitions_request(topics, PAGE_PARTITIONS, cursor))
        out.update(partition_overlay(response.to_object()["topics"]))
        nxt = response.next_cursor
        if nxt is None:
            return out
        cursor = (nxt[0], nxt[1])
    raise RuntimeError(f"DescribeTopicPartitions still paging after {MAX_PAGES} pages")


def partition_overlay(topics: list[dict[str, Any]]) -> dict[tuple[str, int], PartitionOverlay]:
    """Response topics -> {(topic, partition): fields of the observation's partition}. Pure."""
    out: dict[tuple[str, int], PartitionOverlay] = {}
    for t in topics:
        if t["error_code"] != 0:
            continue
        for p in t["partitions"]:  # a leaderless partition answers with an error code and still says it all
            out[(t["name"], p["partition_index"])] = {
                "leader": p["leader_id"], "leader_epoch": p["leader_epoch"],
                "replicas": list(p["replica_nodes"] or ()), "isr": list(p["isr_nodes"] or ()),
                "offline_replicas": list(p["offline_replicas"] or ()),
                # null on the wire when the controller keeps no ELR (feature off): say "none", not "unknown"
                "elr": list(p["eligible_leader_replicas"] or ()),
                "last_known_elr": list(p["last_known_elr"] or ()),
            }
    return out


def apply_elr(topics: list[MdTopic], overlay: dict[tuple[str, int], PartitionOverlay], described: set[str]) -> None:
    """The described topics' partitions take DescribeTopicPartitions' fields (in place); one it did
    not name has an empty ELR and last known ELR."""
    for t in topics:
        if t["topic"] not in described:
            continue
        for p in t["partitions"]:
            known = overlay.get((t["topic"], p["partition"]))
            if known:
                p["leader"], p["leader_epoch"], p["replicas"] = known["leader"], known["leader_epoch"], known["replicas"]
                p["isr"], p["offline_replicas"] = known["isr"], known["offline_replicas"]
                p["elr"], p["last_known_elr"] = known["elr"], known["last_known_elr"]
            else:
                p["elr"], p["last_known_elr"] = [], []


CLUSTER_AUTHORIZATION_FAILED = 31


def quorum_state(response: dict[str, Any]) -> Quorum:
    """DescribeQuorum response -> the cluster record's `quorum`. Pure. An error (no leader known) is
    kept as `error` with leader_id -1; a refusal (no DESCRIBE on the cluster) raises PermissionError:
    it says nothing about the quorum."""
    partition = next((p for t in response.get("topics") or () if t["topic_name"] == kp.METADATA_TOPIC
                      for p in t["partitions"] if p["partition_index"] == 0), None)
    code = response.get("error_code") or (partition["error_code"] if partition else 0)
    if code == CLUSTER_AUTHORIZATION_FAILED:
        raise PermissionError("DescribeQuorum refused: the principal lacks DESCRIBE on the cluster")
    if partition is None or code:
        return {"leader_id": -1, "voters": [], "error": f"DescribeQuorum error code {code}" if code
                else "no __cluster_metadata partition in the DescribeQuorum answer"}

    def ts(v: int) -> int | None:
        return v if v is not None and v >= 0 else None

    return {
        "leader_id": partition["leader_id"], "leader_epoch": partition["leader_epoch"],
        "high_watermark": partition["high_watermark"],
        "voters": [{"id": v["replica_id"], "log_end_offset": v["log_end_offset"],
                    "last_fetch_ms": ts(v["last_fetch_timestamp"]),
                    "last_caught_up_ms": ts(v["last_caught_up_timestamp"])}
                   for v in sorted(partition["current_voters"], key=lambda v: v["replica_id"])],
        "observers": len(partition["observers"]),
    }
