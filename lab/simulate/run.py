"""`krm simulate`: step the model every poll interval, inject the scripted faults, publish the
observations to the config's observations topic, and write the ground truth as JSON lines.

Two ways to run:
- live (default): each poll is built when it is due, on the wall clock;
- `prebuild`: every poll is built first, in simulated time, and stored on disk; then they are
  published on schedule with their timestamps moved to the moment of publication (`restamp`). On a
  small machine this keeps the simulator's CPU (seconds per poll at 200k partitions) from competing
  with the pipeline it feeds, so a benchmark measures the pipeline at the poll interval it claims.
"""

from __future__ import annotations

import json
import logging
import pickle
import re
import sys
import tempfile
import time
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, TextIO

from collectors.publisher import Publisher
from collectors.records import cluster_record
from foundation.cadence import next_slot
from lab.simulate.emit import Emitter
from lab.simulate.faults import Applied, Fault, apply
from lab.simulate.model import SimCluster, SimSettings
from schemas.observation import UNREACHABLE
from schemas.quiet import Thresholds
from schemas.typed import Observation

log = logging.getLogger(__name__)

# The absolute times in an observation record (schemas/observation.py); everything else is relative.
_STAMPS = re.compile(rb'"(observed_at_ms|hw_stalled_since_ms|zk_mtime_ms)":(\d+)')


@dataclass
class PollStats:
    build_s: list[float] = field(default_factory=list)
    bytes: list[int] = field(default_factory=list)
    late_s: list[float] = field(default_factory=list)  # how far behind the fixed-rate schedule a poll started


def restamp(value: bytes, shift_ms: int) -> bytes:
    """An encoded record as if observed `shift_ms` later. The model only uses time differences, so
    this equals building the record at the later time (tests/unit/test_simulate.py checks it)."""
    return _STAMPS.sub(lambda m: b'"%s":%d' % (m.group(1), int(m.group(2)) + shift_ms), value)


def build_cluster(cluster_name: str, settings: SimSettings, start_ms: int, unclean_topic: bool,
                  expand_topic: bool) -> SimCluster:
    sim = SimCluster(cluster_name, settings, start_ms=start_ms)
    if unclean_topic:  # RF 2, unclean election on, busy: where an unclean election truncates the log
        sim.create_topic("sim-unclean", 4, 2, sim.brokers(), unclean=True, min_isr=1)
        sim.rate[-4:] = 50.0
    if expand_topic:  # RF 1, fewer replicas than brokers: what a later expansion may leave uneven
        sim.create_topic("sim-expand", 20, 1, sim.brokers())
    return sim


def next_poll(sim: SimCluster, emitter: Emitter, pending: list[Fault], now_ms: int, elapsed_s: float,
              progress: TextIO) -> tuple[list[Observation], list[Applied]]:
    """Advance to `now_ms`, inject the faults due by `elapsed_s`, and build that poll's records."""
    sim.step(now_ms)
    applied = []
    while pending and pending[0].at_s <= elapsed_s:
        a = apply(sim, pending.pop(0))
        applied.append(a)
        print(f"[{elapsed_s:6.1f}s] fault {a.fault.kind} {a.fault.params}: {len(a.expected)} incidents expected",
              file=progress)
    return emitter.poll(), applied


@dataclass
class Member:
    """One cluster of a simulated fleet; from `hangs_at_s` (seconds into the run) on, it answers nothing."""

    sim: SimCluster
    emitter: Emitter
    hangs_at_s: float | None = None


def fleet_names(base: str, n: int) -> list[str]:
    """The simulated clusters' names: `base` alone, or base-001 ... base-N."""
    return [base] if n == 1 else [f"{base}-{i:03d}" for i in range(1, n + 1)]


def fleet_poll(members: list[Member], pending: list[Fault], now_ms: int, elapsed_s: float,
               progress: TextIO) -> tuple[list[Observation], list[Applied]]:
    """`next_poll` for every cluster of the fleet (the faults go to the first); a hung cluster's record is what
    its collector publishes once its poll times out: a cluster record saying no broker answered."""
    records, applied = next_poll(members[0].sim, members[0].emitter, pending, now_ms, elapsed_s, progress)
    if members[0].hangs_at_s is not None and elapsed_s >= members[0].hangs_at_s:
        records = [hung_record(members[0].emitter, now_ms)]
    for m in members[1:]:
        m.sim.step(now_ms)
        records += ([hung_record(m.emitter, now_ms)] if m.hangs_at_s is not None and elapsed_s >= m.hangs_at_s
                    else m.emitter.poll())
    return records, applied


def hung_record(emitter: Emitter, at_ms: int) -> Observation:
    emitter.poll_id += 1
    return cluster_record(emitter.sim.name, "admin", emitter.poll_id, at_ms, controller_id=None, brokers=[],
                          topic_count=0, partition_count=0, error_reason=UNREACHABLE,
                          error=f"cluster {emitter.sim.name}: no broker answered (simulated hang)")


def simulate(config: Any, cluster_name: str, settings: SimSettings, faults: list[Fault], poll_s: float,
             duration_s: float, truth: TextIO | None, progress: TextIO = sys.stderr,
             unclean_topic: bool = False, expand_topic: bool = False, prebuild: bool = False,
             share: Any = None, clusters: int = 1, hangs: dict[str, float] | None = None) -> PollStats:
    """Poll a simulated cluster every `poll_s` for `duration_s` and publish its records; `share`
    (collectors/topic_share.py TopicShare): only its topics' records, as one of N collector processes.
    `clusters` > 1: a fleet of that many (`fleet_names`), each its own seed, the faults in the first;
    `hangs`: cluster -> seconds into the run from which it answers nothing."""
    t0 = time.perf_counter()
    start_ms = int(time.time() * 1000)
    members = []
    for k, name in enumerate(fleet_names(cluster_name, clusters)):
        member = build_cluster(name, replace(settings, seed=settings.seed + k), start_ms, unclean_topic, expand_topic)
        members.append(Member(member, Emitter(member, Thresholds.of(config.pipeline), share), (hangs or {}).get(name)))
    sim = members[0].sim
    print(f"simulated cluster{'s' if clusters > 1 else ''} {', '.join(m.sim.name for m in members[:3])}"
          f"{' ...' if clusters > 3 else ''}: {len(sim.live)} brokers, {len(sim.topic_names)} topics, "
          f"{sim.partitions} partitions{' each' if clusters > 1 else ''} (built in {time.perf_counter() - t0:.1f}s)",
          file=progress)
    publisher = Publisher(config.observations, spool_max_bytes=1024 * 1024 * 1024, validate=False)
    stats = PollStats()
    in_step = share is not None and share.count > 1
    try:
        if prebuild:
            with tempfile.TemporaryDirectory(prefix="krm-simulate-") as spool_dir:
                polls = _prebuild(members, list(faults), publisher, poll_s, duration_s, Path(spool_dir), progress)
                publisher.start()
                _replay(polls, publisher, poll_s, truth, stats, progress, in_step)
        else:
            publisher.start()
            _live(members, list(faults), publisher, poll_s, duration_s, truth, stats, progress, in_step)
    finally:
        publisher.close(drain_timeout_s=60)
    return stats


def _live(members: list[Member], pending: list[Fault], publisher: Any, poll_s: float, duration_s: float,
          truth: TextIO | None, stats: PollStats, progress: TextIO, in_step: bool = False) -> None:
    start = _first_due(poll_s, in_step)
    time.sleep(max(0.0, start - time.time()))
    due = start
    while time.time() - start < duration_s:
        stats.late_s.append(max(0.0, time.time() - due))
        began = time.perf_counter()
        records, applied = fleet_poll(members, pending, int(time.time() * 1000), time.time() - start, progress)
        _write_truth(truth, applied, 0)
        size = publisher.publish(records)
        stats.build_s.append(time.perf_counter() - began)
        stats.bytes.append(size)
        _report(progress, time.time() - start, members[0].emitter.poll_id, len(records), size, stats, publisher)
        due += poll_s
        while due < time.time():  # never burst to catch up: skip, and say so
            due += poll_s
            print(f"poll skipped: building took longer than the {poll_s}s interval", file=progress)
        time.sleep(max(0.0, due - time.time()))


@dataclass
class _Built:
    path: Path
    at_ms: int  # simulated time of the poll
    records: int
    applied: list[Applied]


def _prebuild(members: list[Member], pending: list[Fault], publisher: Any, poll_s: float,
              duration_s: float, spool_dir: Path, progress: TextIO) -> list[_Built]:
    start_ms = members[0].sim.now_ms
    n = max(1, int(duration_s / poll_s + 0.999))
    polls = []
    t0 = time.perf_counter()
    for k in range(n):
        at_ms = start_ms + int(k * poll_s * 1000)
        records, applied = fleet_poll(members, pending, at_ms, k * poll_s, progress)
        path = spool_dir / f"poll-{k:05d}.pickle"
        path.write_bytes(pickle.dumps(publisher.encode(records), protocol=pickle.HIGHEST_PROTOCOL))
        polls.append(_Built(path, at_ms, len(records), applied))
        print(f"prebuilt poll {k + 1}/{n}: {len(records)} records ({time.perf_counter() - t0:.0f}s so far)",
              file=progress, flush=True)
    return polls


def _first_due(poll_s: float, in_step: bool) -> float:
    """Now; or, for one share of a split cluster, the wall clock's next multiple of the interval, where every
    share's poll falls (foundation/cadence.py next_slot), as `krm collect --topic-share` polls."""
    return next_slot(time.time(), poll_s) if in_step else time.time()


def _replay(polls: list[_Built], publisher: Any, poll_s: float, truth: TextIO | None, stats: PollStats,
            progress: TextIO, in_step: bool = False) -> None:
    start = _first_due(poll_s, in_step)
    shift_ms = int(start * 1000) - polls[0].at_ms
    for k, built in enumerate(polls):
        due = start + k * poll_s
        time.sleep(max(0.0, due - time.time()))
        stats.late_s.append(max(0.0, time.time() - due))
        began = time.perf_counter()
        items = [(key, restamp(value, shift_ms)) for key, value in pickle.loads(built.path.read_bytes())]
        built.path.unlink()
        _write_truth(truth, built.applied, shift_ms)
        size = publisher.publish_encoded(items)
        stats.build_s.append(time.perf_counter() - began)
        stats.bytes.append(size)
        _report(progress, time.time() - start, k + 1, built.records, size, stats, publisher)


def _write_truth(truth: TextIO | None, applied: list[Applied], shift_ms: int) -> None:
    if truth is None:
        return
    for a in applied:
        line = a.to_json()
        line["injected_at_ms"] += shift_ms
        truth.write(json.dumps(line) + "\n")
    truth.flush()


def _report(progress: TextIO, elapsed: float, poll_id: int, records: int, size: int, stats: PollStats,
            publisher: Any) -> None:
    print(f"[{elapsed:6.1f}s] poll {poll_id}: {records} records, {size / 1e6:.1f} MB, built in "
          f"{stats.build_s[-1]:.2f}s, late {stats.late_s[-1]:.2f}s, spool {publisher.spool.depth} records",
          file=progress, flush=True)


def open_truth(path: str | None) -> TextIO | None:
    return Path(path).open("w") if path else None
