"""`krm simulate`: step the model every poll interval, inject the scripted faults, publish the
observations to the config's observations topic, and write the ground truth as JSON lines."""

from __future__ import annotations

import json
import logging
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TextIO

from krm.simulate.emit import Emitter
from krm.simulate.faults import Fault, apply
from krm.simulate.model import SimCluster, SimSettings

log = logging.getLogger(__name__)


@dataclass
class PollStats:
    build_s: list[float] = field(default_factory=list)
    bytes: list[int] = field(default_factory=list)
    late_s: list[float] = field(default_factory=list)  # how far behind the fixed-rate schedule a poll started


def simulate(config: Any, cluster_name: str, settings: SimSettings, faults: list[Fault], poll_s: float,
             duration_s: float, truth: TextIO | None, progress: TextIO = sys.stderr,
             unclean_topic: bool = False, expand_topic: bool = False) -> PollStats:
    from collectors.publisher import Publisher

    t0 = time.perf_counter()
    sim = SimCluster(cluster_name, settings)
    if unclean_topic:  # RF 2, unclean election on, busy: where an unclean election truncates the log
        sim.create_topic("sim-unclean", 4, 2, sim.brokers(), unclean=True, min_isr=1)
        sim.rate[-4:] = 50.0
    if expand_topic:  # RF 1, fewer replicas than brokers: what a later expansion may leave uneven
        sim.create_topic("sim-expand", 20, 1, sim.brokers())
    print(f"simulated cluster {cluster_name}: {len(sim.live)} brokers, {len(sim.topic_names)} topics, "
          f"{sim.partitions} partitions (built in {time.perf_counter() - t0:.1f}s)", file=progress)
    emitter = Emitter(sim)
    publisher = Publisher(config.observations, spool_max_bytes=1024 * 1024 * 1024, validate=False).start()
    stats = PollStats()
    pending = list(faults)
    start = time.time()
    next_poll = start
    try:
        while time.time() - start < duration_s:
            late = time.time() - next_poll
            stats.late_s.append(max(0.0, late))
            began = time.perf_counter()
            sim.step(int(time.time() * 1000))
            while pending and pending[0].at_s <= time.time() - start:
                applied = apply(sim, pending.pop(0))
                print(f"[{time.time() - start:6.1f}s] fault {applied.fault.kind} {applied.fault.params}: "
                      f"{len(applied.expected)} incidents expected", file=progress)
                if truth is not None:
                    truth.write(json.dumps(applied.to_json()) + "\n")
                    truth.flush()
            records = emitter.poll()
            size = publisher.publish(records)
            stats.build_s.append(time.perf_counter() - began)
            stats.bytes.append(size)
            print(f"[{time.time() - start:6.1f}s] poll {emitter.poll_id}: {len(records)} records, "
                  f"{size / 1e6:.1f} MB, built in {stats.build_s[-1]:.2f}s, late {stats.late_s[-1]:.2f}s, "
                  f"spool {publisher.spool.depth} records", file=progress)
            next_poll += poll_s
            while next_poll < time.time():  # never burst to catch up: skip, and say so
                next_poll += poll_s
                print(f"poll skipped: building took longer than the {poll_s}s interval", file=progress)
            time.sleep(max(0.0, next_poll - time.time()))
    finally:
        publisher.close(drain_timeout_s=60)
    return stats


def open_truth(path: str | None) -> TextIO | None:
    return Path(path).open("w") if path else None
