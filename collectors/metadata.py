"""Asking one broker, and the Metadata questions every poll starts with.

`ask` bounds a request by one deadline, connecting included (a SIGSTOPped broker accepts the TCP
connection and then answers nothing); `metadata` asks all topics of the broker that answered last,
then the next ones; `live_brokers` asks for the live brokers only.
"""

from __future__ import annotations

import logging
import time
from typing import Any

from collectors import wire
from collectors.kafka_client import Client, NodeId
from foundation.config import ClusterConfig, CollectorConfig
from foundation.security import kafka_python_kwargs

log = logging.getLogger(__name__)

# kafka-python refuses an answer over 1 MB by default, and a Metadata answer passes that at about
# 20,000 partitions (Kafka's Java clients put no limit on a response's size); the stand-in broker of
# benchmarks/collector_poll.py found it.
MAX_ANSWER_BYTES = 1 << 30


def ask(client: Client, node: NodeId, request: object, timeout_ms: int) -> Any:
    """One request to one broker, waiting at most `timeout_ms` in all (connecting included)."""
    from kafka.errors import KafkaConnectionError, KafkaTimeoutError

    deadline = time.monotonic() + timeout_ms / 1000
    while not client.ready(node, metadata_priority=False):
        if client.connection_failed(node):
            raise KafkaConnectionError(f"connection to broker {node} refused")
        if time.monotonic() >= deadline:
            raise KafkaTimeoutError(f"broker {node} not ready within {timeout_ms} ms")
        client.poll(timeout_ms=20)
    remaining_ms = max(1, int((deadline - time.monotonic()) * 1000))
    future = client.send(node, request, wakeup=False, request_timeout_ms=remaining_ms)
    while not future.is_done:
        client.poll(timeout_ms=min(50, remaining_ms))
        if time.monotonic() > deadline + 1.0:  # the client fails it at the deadline; never spin past it
            raise KafkaTimeoutError(f"broker {node} did not answer within {timeout_ms} ms")
    if future.failed():
        raise future.exception or KafkaConnectionError(f"broker {node}: the request failed")
    return future.value


def admin_client(cluster: ClusterConfig, settings: CollectorConfig, first: list[str]) -> Any:
    """The poll's client: `first` (brokers seen live lately) ahead of the configured bootstrap servers."""
    from kafka.admin import KafkaAdminClient

    return KafkaAdminClient(
        bootstrap_servers=first + cluster.bootstrap_servers.split(","),
        client_id=f"krm-collector-{cluster.name}",
        request_timeout_ms=settings.request_timeout_ms,
        api_version_auto_timeout_ms=settings.request_timeout_ms,
        reconnect_backoff_max_ms=1000,  # a restarted broker is asked again within a second
        receive_message_max_bytes=MAX_ANSWER_BYTES,
        **kafka_python_kwargs(cluster.security),
    )


def metadata(client: Client, last_node: NodeId | None, silent: set[int], timeout_ms: int,
             timed_out: dict[int, float] | None = None,
             memory: wire.TopicBlocks | None = None) -> tuple[NodeId, wire.MdAnswer]:
    """(the broker that answered, its answer) to one MetadataRequest for all topics: the broker that
    answered last first, those `silent` in the last offsets round last; on a failure or after
    `timeout_ms`, the next broker the client knows. A dead or paused broker costs one poll at most
    that timeout once, not a failed poll. `timed_out` (filled in): broker -> time.monotonic() the
    request went out, for each broker asked that did not answer in time (not one that refused):
    silence krm saw, the earliest sign of a broker nobody can reach. `memory`: the cluster's last
    answer's healthy topics (collectors/wire.py TopicBlocks), handed back undecoded when unchanged."""
    from kafka.errors import KafkaTimeoutError, RequestTimedOutError
    from kafka.protocol.metadata import MetadataRequest

    version = client.api_version(MetadataRequest, max_version=8)
    if version >= 8:  # (8 at most) decoded by hand: see collectors/wire.py
        request = wire.MetadataRequestV8(topics=None, allow_auto_topic_creation=False,
                                         include_cluster_authorized_operations=False,
                                         include_topic_authorized_operations=False)
        if memory is not None:
            request.remembering(memory)
    else:
        request = MetadataRequest[version](topics=None, allow_auto_topic_creation=False)
    known: list[NodeId] = [b.nodeId for b in client.cluster.brokers()]
    if not known and (any_node := client.least_loaded_node()) is not None:
        known = [any_node]
    order = sorted(known, key=lambda n: (n in silent, n != last_node, n))
    last_error: Exception | None = None
    for node in order:
        asked_at = time.monotonic()
        try:
            response = ask(client, node, request, timeout_ms)
        except Exception as e:  # noqa: BLE001 - try the next broker
            last_error = e
            if timed_out is not None and isinstance(node, int) and isinstance(e, (KafkaTimeoutError, RequestTimedOutError)):
                timed_out[node] = asked_at  # silence; a refusal or an error answer is not
            continue
        try:
            client.cluster.update_metadata(response)  # so the offsets round can reach new brokers
        except Exception as e:  # noqa: BLE001 - the client's own refresh will catch up
            log.debug("client metadata not updated: %s", e)
        answer: wire.MdAnswer = response.to_object()  # (kafka-python's, below v8: the same keys)
        return node, answer
    raise last_error or RuntimeError("no broker to ask")


def brokers_request(client: Client) -> object:
    """A Metadata request for no topic: the live brokers only, a few hundred bytes at any cluster size."""
    from kafka.protocol.metadata import MetadataRequest

    version = client.api_version(MetadataRequest, max_version=8)
    return (MetadataRequest[version](topics=[], allow_auto_topic_creation=False,
                                     include_cluster_authorized_operations=False,
                                     include_topic_authorized_operations=False) if version >= 8
            else MetadataRequest[version](topics=[], allow_auto_topic_creation=False))


def live_brokers(client: Client, node: NodeId, timeout_ms: int) -> set[int]:
    """The live brokers `node` knows (`brokers_request`). A KRaft broker names a random live broker
    as "controller" (KIP-590): not asked."""
    return {b["node_id"] for b in ask(client, node, brokers_request(client), timeout_ms).to_object()["brokers"]}
