"""Kafka's replica assignment, reproduced exactly (ZooKeeper-mode code path; docs/cases/partition-expansion.md).

Source: `server-common/src/main/java/org/apache/kafka/admin/AdminUtils.java`
(`assignReplicasToBrokers`, Kafka 3.9; `kafka.admin.AdminUtils` in older releases). Topic creation,
partition expansion (`kafka-topics --alter --partitions`) and `kafka-reassign-partitions --generate`
all call it. What differs between them is the input (see `expansion_inputs`):

- creation passes the controller's broker list **unsorted**, with a random start index and shift;
- expansion passes the **sorted** broker list, start index = shift = position of partition 0's
  first replica in that list, and start partition = the current partition count.

KRaft controllers place new replicas with `StripedReplicaPlacer` instead
(`metadata/src/main/java/org/apache/kafka/metadata/placement/StripedReplicaPlacer.java`), so in a
KRaft cluster this module explains ZooKeeper-era assignments and `--generate` plans, not creation.
"""

from __future__ import annotations

import random
from typing import Mapping, Sequence

from foundation.errors import KrmError


class AssignmentError(KrmError):
    """Inputs Kafka itself would refuse (same conditions, same wording where it has one)."""


def replica_index(first: int, shift: int, j: int, n: int) -> int:
    """Broker index of replica j+1 (j = 0 for the second replica): `AdminUtils.replicaIndex`."""
    return (first + 1 + (shift + j) % (n - 1)) % n


def assign(brokers: Sequence[int], partitions: int, replication_factor: int, *, start_index: int = -1,
           replica_shift: int | None = None, start_partition: int = -1,
           racks: Mapping[int, str] | None = None, rng: random.Random | None = None) -> dict[int, list[int]]:
    """partition -> replicas (first = preferred leader), exactly as AdminUtils computes them.

    `start_index` < 0 means random, as in Kafka. Kafka uses the start index as the initial replica
    shift too; `replica_shift` may set it apart to replay a random creation whose two draws differ.
    `racks` must name every broker or none (Kafka's AdminOperationException otherwise).
    """
    if partitions <= 0:
        raise AssignmentError("Number of partitions must be larger than 0.")
    if replication_factor <= 0:
        raise AssignmentError("Replication factor must be larger than 0.")
    if replication_factor > len(brokers):
        raise AssignmentError(f"Replication factor: {replication_factor} larger than available brokers: {len(brokers)}.")
    if len(set(brokers)) != len(brokers):
        raise AssignmentError(f"broker list has duplicates: {list(brokers)}")
    rng = rng or random.Random()
    racks = dict(racks or {})
    if racks and set(racks) != set(brokers):
        raise AssignmentError("Not all brokers have rack information for replica rack aware assignment.")
    order = rack_alternated(racks) if racks else list(brokers)
    n = len(order)
    start = start_index if start_index >= 0 else rng.randrange(n)
    if replica_shift is not None:
        shift = replica_shift
    else:
        shift = start_index if start_index >= 0 else rng.randrange(n)
    if start_index >= n:
        raise AssignmentError(f"start index {start_index} is outside the broker list (size {n})")
    return _rack_aware(order, racks, partitions, replication_factor, start, shift, start_partition) if racks else \
        _rack_unaware(order, partitions, replication_factor, start, shift, start_partition)


def _rack_unaware(order: list[int], partitions: int, rf: int, start: int, shift: int, start_partition: int
                  ) -> dict[int, list[int]]:
    n = len(order)
    out: dict[int, list[int]] = {}
    p = max(0, start_partition)
    for _ in range(partitions):
        if p > 0 and p % n == 0:
            shift += 1
        first = (p + start) % n
        out[p] = [order[first]] + [order[replica_index(first, shift, j, n)] for j in range(rf - 1)]
        p += 1
    return out


def _rack_aware(order: list[int], racks: Mapping[int, str], partitions: int, rf: int, start: int, shift: int,
                start_partition: int) -> dict[int, list[int]]:
    """Second and later replicas prefer racks (then brokers) that hold no replica of the partition yet."""
    n = len(order)
    n_racks = len(set(racks.values()))
    out: dict[int, list[int]] = {}
    p = max(0, start_partition)
    for _ in range(partitions):
        if p > 0 and p % n == 0:
            shift += 1
        first = (p + start) % n
        leader = order[first]
        replicas = [leader]
        racks_used = {racks[leader]}
        brokers_used = {leader}
        k = 0
        for _j in range(rf - 1):
            while True:
                b = order[replica_index(first, shift * n_racks, k, n)]
                k += 1
                rack_ok = racks[b] not in racks_used or len(racks_used) == n_racks
                broker_ok = b not in brokers_used or len(brokers_used) == n
                if rack_ok and broker_ok:
                    replicas.append(b)
                    racks_used.add(racks[b])
                    brokers_used.add(b)
                    break
        out[p] = replicas
        p += 1
    return out


def rack_alternated(racks: Mapping[int, str]) -> list[int]:
    """Brokers taken one per rack in turn (racks sorted by name, brokers by id): Kafka's
    `getRackAlternatedBrokerList`, e.g. {0:r1,1:r3,2:r3,3:r2,4:r2,5:r1} -> [0, 3, 1, 5, 4, 2]."""
    by_rack: dict[str, list[int]] = {}
    for b, r in racks.items():
        by_rack.setdefault(r, []).append(b)
    queues = [sorted(by_rack[r]) for r in sorted(by_rack)]
    out: list[int] = []
    i = 0
    while len(out) < len(racks):
        q = queues[i % len(queues)]
        if q:
            out.append(q.pop(0))
        i += 1
    return out


def expansion_inputs(brokers: Sequence[int], partition0_replicas: Sequence[int], current_partitions: int
                     ) -> tuple[list[int], int, int]:
    """(broker list, start index, start partition) Kafka uses when adding partitions (docs/cases/partition-expansion.md).

    `core/src/main/scala/kafka/zk/AdminZkClient.scala`, `createNewPartitionsAssignment`: the broker
    list sorted by id, start index = max(0, first index whose id >= partition 0's first replica)
    (so a departed first replica's successor), start partition = current partition count."""
    ordered = sorted(brokers)
    first = partition0_replicas[0]
    start = next((i for i, b in enumerate(ordered) if b >= first), -1)
    return ordered, max(0, start), current_partitions
