"""ZooKeeper watches (ZooKeeper-mode clusters, any chroot): poll *now* when the cluster changes.

The controller reacts to a broker's registration vanishing from /brokers/ids (its session expired)
by electing new leaders and writing them to the partition state znodes, then telling the brokers.
Watching /brokers/ids and /controller lets the collector run its Admin API poll within
milliseconds of such a change instead of at the next tick; the poll is repeated a few times over
the following second because the brokers' metadata caches trail the controller's ZooKeeper writes
(KafkaController.onBrokerFailure -> elections -> UpdateMetadata requests).

The Admin API stays the one source of partition state, so two sources never disagree about a
partition; ZooKeeper only says *when* to look.
"""

from __future__ import annotations

import logging
import threading
from typing import Any, Callable

from krm.config import ClusterConfig

log = logging.getLogger(__name__)

BURST_S = (0.05, 0.3, 1.0, 2.5)  # re-polls after a change: the controller and brokers catch up within these


class ZkTrigger:
    """Construct opens nothing; start() connects and sets the watches. Never raises for a dead
    ZooKeeper: the collector keeps its regular polls, and the condition is logged once."""

    def __init__(self, cluster: ClusterConfig, poll_now: Callable[[], None]) -> None:
        if not cluster.zookeeper:
            raise ValueError(f"cluster {cluster.name} has no zookeeper address")
        self.cluster = cluster
        self.poll_now = poll_now
        self._zk: Any = None
        self._timers: list[threading.Timer] = []
        self._lock = threading.Lock()
        self.events = 0

    def start(self) -> ZkTrigger:
        from kazoo.client import KazooClient

        self._zk = KazooClient(hosts=self.cluster.zookeeper, timeout=6.0, read_only=True)
        self._zk.add_listener(self._on_state)
        try:
            self._zk.start(timeout=10)
        except Exception as e:  # noqa: BLE001 - degrade to plain polling
            log.warning("cluster %s: ZooKeeper %s unreachable (%s); polling without watches", self.cluster.name,
                        self.cluster.zookeeper, e)
            return self
        self._watch()
        return self

    def stop(self) -> None:
        with self._lock:
            for t in self._timers:
                t.cancel()
            self._timers = []
        if self._zk is not None:
            try:
                self._zk.stop()
                self._zk.close()
            except Exception:  # noqa: BLE001
                pass
            self._zk = None

    def _watch(self) -> None:
        zk = self._zk
        first = {"ids": True, "controller": True}

        def on_ids(children: list[str]) -> None:
            if not first.pop("ids", False):
                log.info("cluster %s: broker registrations changed: %s", self.cluster.name, sorted(children))
                self._burst()

        def on_controller(data: bytes | None, _stat: Any) -> None:
            if not first.pop("controller", False):
                log.info("cluster %s: /controller changed", self.cluster.name)
                self._burst()

        zk.ChildrenWatch("/brokers/ids", on_ids)
        zk.DataWatch("/controller", on_controller)

    def _burst(self) -> None:
        self.events += 1
        with self._lock:
            for delay in BURST_S:
                t = threading.Timer(delay, self.poll_now)
                t.daemon = True
                t.start()
                self._timers.append(t)
            self._timers = [t for t in self._timers if t.is_alive()]

    def _on_state(self, state: str) -> None:
        if state == "LOST":
            log.warning("cluster %s: ZooKeeper session lost; watches resume on reconnect", self.cluster.name)
        elif state == "CONNECTED" and self._zk is not None and self.events:
            self._burst()  # whatever happened while disconnected: look now
