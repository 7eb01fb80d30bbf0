"""Running partition reassignments (KIP-455), as the controller holds them.

While a reassignment moves a partition, Kafka's replica list holds the old and the new replicas
together; `adding_replicas` are not full replicas yet and `removing_replicas` are on their way out.
Kafka judges such a partition by its replication factor *minus the adding replicas*
(`TopicCommand.getReplicationFactor`, tools/src/main/java/org/apache/kafka/tools/TopicCommand.java;
the broker's `OngoingReassignmentState.replicationFactor`, core/.../cluster/Partition.scala), so
the pipeline must know them or it flags every moved partition under-replicated
(pipelines/detectors/isr.py applies the rule).

Where they come from:
- KRaft: ListPartitionReassignments (API 46, Kafka 2.4+), which any broker forwards to the active
  controller. One request per poll for every topic; an empty answer is a few bytes.
- ZooKeeper mode: the same request, to the controller (a ZooKeeper-mode broker answers NOT_CONTROLLER
  otherwise), on every full poll: the controller's view is ahead of the brokers' metadata caches. The
  topic znode's `adding_replicas` / `removing_replicas` (collectors/zookeeper.py), written in the same
  znode as the replica list, serve the ZooKeeper-triggered records between polls and a poll whose
  request failed; their watch can fire after the brokers' caches already list the new replicas.
"""

from __future__ import annotations

from typing import Any, Iterable

Moves = dict[tuple[str, int], tuple[tuple[int, ...], tuple[int, ...]]]  # (topic, partition) -> (adding, removing)


def request(timeout_ms: int) -> Any:
    """ListPartitionReassignments for every topic (topics null)."""
    from kafka.protocol.admin import ListPartitionReassignmentsRequest

    return ListPartitionReassignmentsRequest[0](timeout_ms=timeout_ms, topics=None, tags={})


def parse(response: dict[str, Any]) -> Moves:
    """The answer as (topic, partition) -> (adding, removing); raises on an error code."""
    code = response.get("error_code", 0)
    if code:
        from kafka.errors import for_code

        raise for_code(code)(response.get("error_message") or "ListPartitionReassignments refused")
    out: Moves = {}
    for t in response.get("topics") or ():
        for p in t.get("partitions") or ():
            adding, removing = tuple(p.get("adding_replicas") or ()), tuple(p.get("removing_replicas") or ())
            if adding or removing:
                out[(t["name"], p["partition_index"])] = (adding, removing)
    return out


def annotate(part: dict[str, Any], move: tuple[Iterable[int], Iterable[int]] | None) -> None:
    """Add `adding_replicas` / `removing_replicas` to a partition dict (in place) when it is being
    moved. A move whose replicas are not all in the partition's replica list belongs to another view
    of it (the two answers trail each other by a metadata propagation) and is left out."""
    if not move:
        return
    adding, removing = list(move[0]), list(move[1])
    replicas = set(part["replicas"])
    if (adding or removing) and set(adding) <= replicas and set(removing) <= replicas:
        if adding:
            part["adding_replicas"] = adding
        if removing:
            part["removing_replicas"] = removing
