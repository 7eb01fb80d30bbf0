"""What krm uses of kafka-python's network client, as Protocols: kafka-python ships no types, and these let
mypy check every call the collectors make on it (the classes themselves are kafka-python's)."""

from __future__ import annotations

from typing import Any, Callable, Protocol


class Future(Protocol):
    """kafka.future.Future: a request's answer (`value`: its decoded response) or failure (`exception`)."""

    is_done: bool
    value: Any  # the response object, one class per request (kafka.protocol); collectors/wire.py decodes some
    exception: BaseException | None

    def succeeded(self) -> bool: ...

    def failed(self) -> bool: ...

    def add_callback(self, f: Callable[..., object], *args: object, **kwargs: object) -> Future: ...

    def add_errback(self, f: Callable[..., object], *args: object, **kwargs: object) -> Future: ...


NodeId = int | str  # a broker's id; the bootstrap addresses' stand-ins are strings ("bootstrap-0")


class Node(Protocol):
    nodeId: int


class ClusterMetadata(Protocol):
    def brokers(self) -> set[Node]: ...

    def broker_metadata(self, broker_id: NodeId) -> Node | None: ...

    def update_metadata(self, metadata: object) -> object: ...


class Client(Protocol):
    """kafka.client_async.KafkaClient."""

    cluster: ClusterMetadata
    config: dict[str, Any]  # its constructor's keyword arguments (values of every type)
    _conns: dict[NodeId, object]  # broker -> its BrokerConnection (offsets.py reads a socket's state)

    def send(self, node_id: NodeId, request: object, wakeup: bool = True, request_timeout_ms: int | None = None) -> Future: ...

    def poll(self, timeout_ms: int | float | None = None, future: Future | None = None) -> list[object]: ...

    def ready(self, node_id: NodeId, metadata_priority: bool = True) -> bool: ...

    def close(self, node_id: NodeId | None = None) -> None: ...

    def connection_failed(self, node_id: NodeId) -> bool: ...

    def api_version(self, operation: object, max_version: int | None = None) -> int: ...

    def get_api_versions(self) -> dict[int, tuple[int, int]] | None: ...

    def least_loaded_node(self) -> NodeId | None: ...


class AdminClient(Protocol):
    """kafka.admin.KafkaAdminClient, of which krm uses the network client only."""

    _client: Client

    def close(self) -> None: ...
