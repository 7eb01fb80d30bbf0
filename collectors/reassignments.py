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

from schemas.typed import Partition

Moves = dict[tuple[str, int], tuple[tuple[int, ...], tuple[int, ...]]]  # (topic, partition) -> (adding, removing)


def request(timeout_ms: int) -> object:
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


def inferred(replicas: list[int], isr: Iterable[int], before: Iterable[int] | None
             ) -> tuple[tuple[int, ...], tuple[int, ...]] | None:
    """The move a replica list shows against the list of the previous poll (`before`), or None.

    During a move Kafka lists the target replicas first, then the original ones not in the target
    (ZooKeeper mode: ReplicaAssignment.fromOldAndNewReplicas, core/src/main/scala/kafka/controller/
    ReplicaAssignment.scala; KRaft: PartitionReassignmentReplicas, metadata/src/main/java/org/apache/
    kafka/controller/PartitionReassignmentReplicas.java). A list that grew into that shape from
    `before` is a move that started: its adding replicas are the target's new ones, its removing
    ones the original ones left out of the target. This covers the poll whose Metadata answer shows
    a move the reassignments answer does not list yet (it arrives after the offsets round; the adding
    replicas, empty, would read as lagging followers)."""
    if before is None:
        return None
    origin = list(before)
    if not origin or list(replicas) == origin or not set(origin) <= set(replicas):
        return None
    for k in range(1, len(replicas) + 1):
        target = replicas[:k]
        if replicas[k:] == [o for o in origin if o not in target]:
            adding = tuple(r for r in target if r not in origin)
            removing = tuple(o for o in origin if o not in target)
            # a move already finished (every adding replica in the ISR, none left to remove) is no move
            unfinished = bool(removing) or not set(adding) <= set(isr)
            return (adding, removing) if adding and unfinished else None
    return None


def annotate(part: Partition, move: tuple[Iterable[int], Iterable[int]] | None,
             last: tuple[Iterable[int], Iterable[int]] | None = None,
             before: Iterable[int] | None = None) -> tuple[tuple[int, ...], tuple[int, ...]] | None:
    """Add `adding_replicas` / `removing_replicas` to a partition dict (in place) when it is being
    moved, and return the move applied (None when none).

    A move whose replicas are not all in the partition's replica list belongs to a later view of it
    (the two answers trail each other by a metadata propagation) and is left out. The other way round:
    the answer arrives after the Metadata answer, so it can say "done" while the replica list still
    shows the move's middle. `last` (the move applied at the previous poll) is then kept while the
    list proves the move unfinished: Kafka ends a move in one change that drops the removing replicas
    and needs every adding replica in the ISR (`PartitionChangeBuilder.completeReassignmentIfNeeded`,
    metadata/src/main/java/org/apache/kafka/controller/PartitionChangeBuilder.java); a cancelled move
    drops the adding ones. Without it, a finished move's last poll flags the partition
    under-replicated (replicas old + new, ISR not yet all of them). Neither answer nor last move:
    `before` (the replica list of the previous poll) may still show a move that started (`inferred`)."""
    if not move and not last:
        move = inferred(part["replicas"], part.get("isr") or (), before)
    if not move and last:
        adding, removing = tuple(last[0]), tuple(last[1])
        replicas, isr = set(part["replicas"]), set(part.get("isr") or ())
        unfinished = bool(removing) or not set(adding) <= isr
        if not (set(adding) | set(removing) <= replicas and unfinished):
            return None
        move = (adding, removing)
    if not move:
        return None
    adding_t, removing_t = tuple(move[0]), tuple(move[1])
    replicas = set(part["replicas"])
    if not (adding_t or removing_t) or not (set(adding_t) <= replicas and set(removing_t) <= replicas):
        return None
    if adding_t:
        part["adding_replicas"] = list(adding_t)
    if removing_t:
        part["removing_replicas"] = list(removing_t)
    return adding_t, removing_t


class Carried:
    """The move each partition's last record carried (`annotate`'s `last`), kept per partition."""

    def __init__(self) -> None:
        self.applied: Moves = {}

    def carry(self, topic: str, part: Partition, move: tuple[Iterable[int], Iterable[int]] | None,
              before: Iterable[int] | None, key: tuple[str, int] | None = None) -> None:
        """`before`: the partition's replicas as the last full poll published them; `key`: (topic, partition)."""
        key = key or (topic, part["partition"])
        applied = annotate(part, move, self.applied.get(key), before)
        if applied:
            self.applied[key] = applied
        else:
            self.applied.pop(key, None)
