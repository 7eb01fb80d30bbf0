"""What krm can ask a cluster's brokers, by the API versions they announce, so a gap is said, not silent.

Each capability is one request a detection needs beyond Metadata and ListOffsets:
- `elr`: DescribeTopicPartitions (API 75, Kafka 3.8+, KRaft): Eligible Leader Replicas (KIP-966);
  without it an offline partition's ELR is unknown and it is judged by its ISR alone;
- `quorum`: DescribeQuorum (API 55, Kafka 3.3+, KRaft): the controller quorum (CONTROLLER_ANOMALY);
- `reassignments`: ListPartitionReassignments (API 46, Kafka 2.4+): the moves (PARTITION_REASSIGNING;
  without it a moved partition is judged by its whole replica list).
- `tiered_offsets` (said only while the cluster has a tiered topic): ListOffsets v9 (Kafka 3.9+): a
  tiered partition's local log start and highest remote offset (collectors/tiered.py).
ZooKeeper-mode clusters have no ELR and no quorum to ask: only `reassignments` applies to them.
"""

from __future__ import annotations


from collectors.kraft_protocol import DESCRIBE_QUORUM_KEY, DESCRIBE_TOPIC_PARTITIONS_KEY

LIST_PARTITION_REASSIGNMENTS_KEY = 46

KRAFT = {"elr": DESCRIBE_TOPIC_PARTITIONS_KEY, "quorum": DESCRIBE_QUORUM_KEY,
         "reassignments": LIST_PARTITION_REASSIGNMENTS_KEY}
ZOOKEEPER = {"reassignments": LIST_PARTITION_REASSIGNMENTS_KEY}


def of(api_versions: dict[int, tuple[int, int]] | None, kraft: bool) -> dict[str, bool]:
    """capability -> whether the broker that answered announces its request; {} when unknown."""
    if not api_versions:
        return {}
    return {name: key in api_versions for name, key in (KRAFT if kraft else ZOOKEEPER).items()}
