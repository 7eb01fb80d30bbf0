"""The collector daemon: one thread per monitored cluster, polling at a fixed rate, and at once
when a ZooKeeper watch says the cluster changed (ZooKeeper-mode clusters)."""

from __future__ import annotations

import logging
import threading
import time
from typing import Any

from collectors.admin import AdminSource
from collectors.publisher import Publisher
from collectors.zookeeper import ZkTrigger
from krm.config import Config

log = logging.getLogger(__name__)


class Collector:
    def __init__(self, config: Config, zookeeper_watches: bool = True) -> None:
        self.config = config
        self.publisher = Publisher(config.observations)
        self.sources = [AdminSource(c, config.collector) for c in config.clusters]
        self._wake = {c.name: threading.Event() for c in config.clusters}
        self._triggers = [ZkTrigger(c, self._wake[c.name].set) for c in config.clusters
                          if c.zookeeper and zookeeper_watches]
        self._stop = threading.Event()
        self._threads: list[threading.Thread] = []
        self.polls = 0
        self.last_poll_s: dict[str, float] = {}

    def start(self) -> Collector:
        self.publisher.start()
        for src in self.sources:
            t = threading.Thread(target=self._loop, args=(src,), name=f"krm-collect-{src.cluster.name}", daemon=True)
            t.start()
            self._threads.append(t)
        for trigger in self._triggers:
            trigger.start()
        return self

    def stop(self) -> None:
        self._stop.set()
        for trigger in self._triggers:
            trigger.stop()
        for wake in self._wake.values():
            wake.set()
        for t in self._threads:
            t.join(timeout=10)
        for src in self.sources:
            src.close()
        self.publisher.close()

    def _loop(self, src: Any) -> None:
        interval = self.config.collector.poll_interval_s
        wake = self._wake[src.cluster.name]
        next_at = time.monotonic()
        while not self._stop.is_set():
            wake.clear()
            t0 = time.monotonic()
            try:
                self.publisher.publish(src.poll())
            except Exception:  # noqa: BLE001 - keep polling; the failure is logged with its cause
                log.exception("poll of cluster %s failed", src.cluster.name)
            self.polls += 1
            self.last_poll_s[src.cluster.name] = time.monotonic() - t0
            next_at = max(next_at + interval, time.monotonic())  # fixed rate, no burst after a slow poll
            wake.wait(max(0.0, next_at - time.monotonic()))  # a ZooKeeper watch may cut the wait short
