"""The collector daemon: one thread per monitored cluster, polling at a fixed rate. In ZooKeeper
mode a watch wakes the thread early: a partition state change publishes that topic at once from
the ZooKeeper mirror; a broker or controller change runs full polls. Without watches (KRaft), a
brokers-only Metadata request every `broker_check_s` between polls plays that part: a broker
fenced or back runs a full poll at once. In both modes, every `reach_probe_s` between polls each
live broker is asked a tiny question (collectors/reachability.py Probes): a broker nobody can
reach is silent from its last contact, not from the next poll (the KRaft check's own unanswered
request counts too), and one that answers a probe again is polled at once."""

from __future__ import annotations

import logging
import os
import sys
import threading
import time
import traceback
from typing import Any, Callable, Mapping

from collectors import gc_pause, topic_share
from collectors.admin import AdminSource
from collectors.canary import CanarySource
from collectors.jmx import JmxSource
from collectors.routine_hold import JmxRoutine, RoutineHold, answers_prompt, canary_routine
from collectors.publisher import Publisher
from collectors.unchanged import UnchangedPolls
from collectors.zookeeper import ZkState
from foundation.cadence import Cadence, next_slot
from foundation.config import Config
from schemas.quiet import Thresholds
from schemas.typed import Observation

log = logging.getLogger(__name__)

SLOW_POLL_INTERVALS = 2  # a poll longer than this many intervals is logged with its steps' times
SLOW_POLL_SAID_EVERY_S = 60.0  # at most once a minute per cluster
HURRIED_GAP_S = 1.0  # a hurried canary round starts at least this long after the last one began
# a canary round at rest starts no closer than this before its cluster's next poll, nor while a poll runs
# (`Collector._clear_of_poll`)
POLL_GUARD_S = 0.25
_ROOT = f"{os.path.dirname(os.path.dirname(os.path.abspath(__file__)))}{os.sep}"


def where(thread: threading.Thread | None, frames: int = 3) -> str:
    """Where a thread is now, innermost first ("kafka/conn.py:757 _recv_bytes_blocking <- ..."): a
    poll that does not end says what it waits on while it waits, not after."""
    frame = sys._current_frames().get(thread.ident) if thread is not None and thread.ident is not None else None
    if frame is None:
        return "unknown"
    out = []
    for f in reversed(traceback.extract_stack(frame)[-frames:]):
        path = f.filename
        if f"site-packages{os.sep}" in path:
            path = path.split(f"site-packages{os.sep}")[-1]  # kafka/conn.py
        elif path.startswith(_ROOT):
            path = path.removeprefix(_ROOT)  # collectors/offsets.py
        else:
            path = os.path.basename(path)  # the standard library's threading.py
        out.append(f"{path}:{f.lineno} {f.name}")
    return " <- ".join(out)


class Collector:
    _in_step = False  # one share of a split cluster: polls on the wall clock's slots (set in __init__)

    def __init__(self, config: Config, zookeeper_watches: bool = True) -> None:
        self.config = config
        self.publisher = Publisher(config.observations, int(config.collector.spool_max_mb * 1024 * 1024))
        self._wake = {c.name: threading.Event() for c in config.clusters}
        self._dirty = {c.name: threading.Event() for c in config.clusters}
        self._zk = {c.name: ZkState(c, self._wake[c.name].set, self._dirty[c.name].set) for c in config.clusters
                    if c.zookeeper and zookeeper_watches}
        quiet = Thresholds.of(config.pipeline)  # the pipeline's, from the same file: what records may leave out
        self.sources = [AdminSource(c, config.collector.for_cluster(c), self._zk.get(c.name), quiet)
                        for c in config.clusters]
        self.jmx_sources = [JmxSource(c.name, dict(c.jmx_exporter_urls), security=c.jmx_security)
                            for c in config.clusters if c.jmx_exporter_urls]
        # routine canary and JMX rounds go out together (collectors/routine_hold.py); the canary's early records at once
        self.routine = RoutineHold(self.publisher.publish, config.collector.routine_publish_s)
        self._jmx_routine = JmxRoutine()
        self.canaries = [CanarySource(c, config.collector, lambda records: self.routine.offer(records, routine=False))
                         for c in config.clusters if c.canary]
        by_name = {src.cluster.name: src for src in self.sources}
        self._answer_times = {name: src.parts.brokers.answer_times for name, src in by_name.items()}
        for canary in self.canaries:  # a broker answering late: clients' writes measure it now (answer_times.py)
            answer_times = by_name[canary.cluster.name].parts.brokers.answer_times
            answer_times.on_late, canary.suspects = canary.hurry, answer_times.late_now
        self.unchanged = UnchangedPolls(config.collector.unchanged_publish_s)
        # set by a pipeline in this process (krm/runner.py): told (cluster, last published poll id, observed_at_ms)
        # of each poll kept home (collectors/unchanged.py); None: every poll is published
        self.vouch: Callable[[str, int, int], None] | None = None
        # a share other than the first: its poll ids are not the ones the pipeline's view of the cluster
        # counts (collectors/topic_share.py), so its polls cannot vouch for it
        share = config.collector.topic_share
        self._share_kept_out = share is not None and not topic_share.parse(share).speaks_for_cluster
        self._in_step = share is not None and topic_share.parse(share).count > 1  # polls on the wall clock's slots
        self.canary_rounds = 0
        self.jmx_scrapes = 0
        self.quick_publishes = 0
        self._stop = threading.Event()
        self._threads: list[threading.Thread] = []
        self.polls = 0
        self.last_poll_s: dict[str, float] = {}
        self.last_poll_at: dict[str, float] = {}  # cluster -> time.time() the last poll ended
        self.poll_started_at: dict[str, float] = {}  # cluster -> time.time() the current or last poll began
        self.next_poll_due: dict[str, float] = {}  # cluster -> time.monotonic() its next scheduled poll begins
        self.last_published: dict[str, tuple[int, float]] = {}  # cluster -> (poll id, time.time()) spooled
        self._poll_threads: dict[str, threading.Thread] = {}  # cluster -> its poll loop's thread

    def migration_phases(self) -> dict[str, tuple[int, int | None]]:
        """cluster -> (ZkMigrationState-numbered phase, brokers still registered in ZooKeeper)."""
        return {name: (zk.migration_phase(), zk.zk_brokers()) for name, zk in self._zk.items() if zk.connected}

    def zookeeper_connected(self) -> dict[str, bool]:
        """cluster -> whether its ZooKeeper session is up (clusters watched through ZooKeeper only)."""
        return {name: zk.connected for name, zk in self._zk.items()}

    def start(self) -> Collector:
        self.publisher.start()
        for src in self.sources:
            t = threading.Thread(target=self._loop, args=(src,), name=f"krm-collect-{src.cluster.name}", daemon=True)
            t.start()
            self._threads.append(t)
            self._poll_threads[src.cluster.name] = t
            if src.cluster.name in self._zk:
                q = threading.Thread(target=self._publish_changes, args=(src,), daemon=True,
                                     name=f"krm-zk-publish-{src.cluster.name}")
                q.start()
                self._threads.append(q)
        for canary in self.canaries:
            t = threading.Thread(target=self._canary_loop, args=(canary,), name=f"krm-canary-{canary.cluster.name}",
                                 daemon=True)
            t.start()
            self._threads.append(t)
        for jmx in self.jmx_sources:
            t = threading.Thread(target=self._scrape_loop, args=(jmx,), name=f"krm-jmx-{jmx.cluster}", daemon=True)
            t.start()
            self._threads.append(t)
        for zk in self._zk.values():
            zk.start()
        watch = threading.Thread(target=self._watch_polls, name="krm-collect-watch", daemon=True)
        watch.start()
        self._threads.append(watch)
        return self

    def stuck_polls(self, now: float, said: dict[str, float]) -> list[str]:
        """Log lines for polls running longer than their cadence's `stuck_after_s`, each poll once
        (`said`: cluster -> the start of the poll last said; updated): where its thread waits and the
        steps it finished, while it still waits."""
        out = []
        for src in self.sources:
            name = src.cluster.name
            started, ended = self.poll_started_at.get(name), self.last_poll_at.get(name, 0.0)
            limit = Cadence(src.settings.poll_interval_s).stuck_after_s
            if started is None or started <= ended or now - started < limit or said.get(name) == started:
                continue
            said[name] = started
            out.append(f"poll of cluster {name} has run for {now - started:.0f} s and not ended; its thread is at "
                       f"{where(self._poll_threads.get(name))} (steps done: {src.phases_said()})")
        return out

    def _watch_polls(self) -> None:
        said: dict[str, float] = {}
        while not self._stop.wait(1.0):
            for line in self.stuck_polls(time.time(), said):
                log.warning("%s", line)

    def request_stop(self) -> None:
        """Tell every loop to end after its current round, without waiting for them."""
        self._stop.set()
        for wake in (*self._wake.values(), *self._dirty.values(), *(c.hurried for c in self.canaries)):
            wake.set()

    def stop(self, timeout_s: float = 10.0) -> None:
        """Stop and close everything; the loops share one `timeout_s` (a round waiting on a dead broker
        is left to its daemon thread rather than holding up the shutdown)."""
        self.request_stop()
        for zk in self._zk.values():
            zk.stop()
        deadline = time.monotonic() + timeout_s
        for t in self._threads:
            t.join(timeout=max(0.0, deadline - time.monotonic()))
        late = [t.name for t in self._threads if t.is_alive()]
        if late:
            log.info("collector threads still in a round at shutdown: %s", ", ".join(late))
        for src in self.sources:
            src.close()
        for jmx in self.jmx_sources:
            jmx.close()
        for canary in self.canaries:
            canary.close()
        self.routine.flush()
        self.publisher.close()

    def _loop(self, src: AdminSource) -> None:
        interval = src.settings.poll_interval_s  # the cluster's own, else [collector]'s
        wake = self._wake[src.cluster.name]
        zk = self._zk.get(src.cluster.name)
        probe_every = src.settings.reach_probe_s
        next_at = next_probe = time.monotonic()
        if self._in_step:  # a split cluster's shares poll together (foundation/cadence.py next_slot)
            next_at += next_slot(time.time(), interval) - time.time()
        slow_said_at = float("-inf")
        while not self._stop.is_set():
            self.next_poll_due[src.cluster.name] = next_at
            wake.clear()
            # KRaft (and a ZooKeeper-mode cluster a KRaft controller took over): no watch on the
            # brokers' registrations, so a cheap check between polls
            check_every = src.settings.broker_check_s if src.zk is None else 0.0
            tick = min([t for t in (check_every, probe_every) if t > 0], default=0.0)
            poll_asked = zk.take_poll_request() if zk is not None else False
            scheduled = time.monotonic() >= next_at
            if not poll_asked and not scheduled and probe_every > 0 and time.monotonic() >= next_probe:
                poll_asked = src.probe()  # True: a broker called unreachable answers again
                next_probe = time.monotonic() + probe_every
            if not poll_asked and not scheduled and check_every > 0:
                poll_asked = src.brokers_changed()
            if not poll_asked and not scheduled:
                wait = next_at - time.monotonic()
                wake.wait(max(0.0, min(wait, tick) if tick > 0 else wait))
                continue
            t0 = time.monotonic()
            self.poll_started_at[src.cluster.name] = time.time()
            try:
                with gc_pause.paused():  # the records are freed by reference counting once spooled
                    records = src.poll()
                    if not self._kept_home(src.cluster.name, records, interval, src.parts.brokers.usual_ms):
                        self.publisher.publish(records)
                        self._published(src.cluster.name, records)
            except Exception:  # noqa: BLE001 - keep polling; the failure is logged with its cause
                log.exception("poll of cluster %s failed", src.cluster.name)
            self.polls += 1
            took = self.last_poll_s[src.cluster.name] = time.monotonic() - t0
            self.last_poll_at[src.cluster.name] = time.time()
            if took > SLOW_POLL_INTERVALS * interval and time.monotonic() - slow_said_at > SLOW_POLL_SAID_EVERY_S:
                slow_said_at = time.monotonic()  # (the pipeline's view of the cluster ages meanwhile)
                log.warning("poll of cluster %s took %.1f s (one every %.0f s): %s", src.cluster.name, took, interval,
                            src.phases_said())
            if scheduled:  # fixed rate, no burst after a slow poll; extra (watch-triggered) polls never delay it
                next_at += interval
                if self._in_step:  # a slow poll skips to the next slot, in step with the other shares
                    while next_at < time.monotonic():
                        next_at += interval
                next_at = max(next_at, time.monotonic())

    def _published(self, cluster: str, records: list[Observation]) -> None:
        """Noted for `said`: the poll id every record carries (a full poll's or ZooKeeper's quick records)."""
        if records:
            self.last_published[cluster] = (records[0]["poll_id"], time.time())

    def said(self, cluster: str, now: float) -> str:
        """This collector's side of a blind moment (pipelines/state.py `blindness_said`): its poll of
        `cluster` (running, or when it ended), the last poll it published, and where the records are."""
        started, ended = self.poll_started_at.get(cluster), self.last_poll_at.get(cluster)
        if started is None:
            poll = "has not polled it yet"
        elif ended is None or started > ended:
            poll = f"is in a poll of it for {now - started:.1f} s (at {where(self._poll_threads.get(cluster), 1)})"
        else:
            poll = f"last polled it {now - ended:.1f} s ago (took {self.last_poll_s.get(cluster, 0.0):.1f} s)"
        published = self.last_published.get(cluster)
        sent = (f"published poll {published[0]} {now - published[1]:.1f} s ago, kept the steady ones since home"
                if published else "published no poll of it yet")
        return f"the collector here {poll}, {sent}; {self.publisher.said(now)}"

    def _kept_home(self, cluster: str, records: list[Observation], interval_s: float,
                   usual_ms: Mapping[int, float]) -> bool:
        """A steady poll that found what the last published one did: not published (collectors/unchanged.py).
        A pipeline in this process is told at once; one apart reads how long a steady record holds in the
        record itself: until the next poll published, at most a resend and a poll later."""
        vouch = self.vouch
        if self.publisher.in_outage or self._share_kept_out:
            return False
        holds_s = None if vouch is not None else Cadence(interval_s, self.unchanged.resend_s).steady_hold_s
        repeats = self.unchanged.offer(cluster, records, time.monotonic(), holds_s, usual_ms)
        if repeats is None:
            return False
        if vouch is not None:
            vouch(cluster, repeats, next(r for r in records if r["kind"] == "cluster")["observed_at_ms"])
        return True

    def _canary_loop(self, canary: CanarySource) -> None:
        """Canary rounds on their own thread and cadence: a round waiting on a dead leader never
        delays a poll."""
        name = canary.cluster.name
        self._fixed_rate(self.config.collector.canary_interval_s, canary.poll, "canary_rounds",
                         f"canary round of cluster {name}", canary.hurried,
                         lambda records: all(canary_routine(r) for r in records) and self._prompt(name),
                         before=lambda: self._clear_of_poll(name))

    def _clear_of_poll(self, cluster: str) -> None:
        """Wait until the cluster's poll is neither running nor due within POLL_GUARD_S (at most twice that: a
        poll taking longer waits on something, and the round must not): a canary write caught mid-replication by
        the poll's offsets round reads as a follower lagging, and such a poll and the next, which finds it caught
        up, both go out instead of staying home (collectors/unchanged.py)."""
        deadline = time.monotonic() + 2 * POLL_GUARD_S
        while not self._stop.is_set() and time.monotonic() < deadline:
            started, ended = self.poll_started_at.get(cluster), self.last_poll_at.get(cluster)
            due = self.next_poll_due.get(cluster)
            running = started is not None and (ended is None or started > ended)
            if not running and (due is None or not 0.0 <= due - time.monotonic() < POLL_GUARD_S):
                return
            self._stop.wait(0.02)

    def _scrape_loop(self, jmx: JmxSource) -> None:
        """JMX scrapes on their own thread and cadence: a slow exporter never delays a poll."""
        self._fixed_rate(self.config.collector.jmx_interval_s, jmx.poll, "jmx_scrapes",
                         f"JMX scrape of cluster {jmx.cluster}",
                         routine=lambda records: self._jmx_routine(records) and self._prompt(jmx.cluster))

    def _prompt(self, cluster: str) -> bool:
        """Every broker of the cluster answers krm's probes promptly now (collectors/routine_hold.py)."""
        times = self._answer_times.get(cluster)
        return times is None or answers_prompt(times.answers()[1])

    def _fixed_rate(self, interval: float, poll: Any, counter: str, what: str,
                    hurried: threading.Event | None = None, routine: Callable[[list[Any]], bool] | None = None,
                    before: Callable[[], None] | None = None) -> None:
        """Publish `poll()` every `interval` seconds until stopped; a failure is logged and the next runs. `hurried`,
        when set, runs the next one early (at most one a HURRIED_GAP_S), and the cadence goes on from it. `routine`:
        whether a round's records may wait for the others (collectors/routine_hold.py). `before`: called before each
        round that was not hurried (a hurried one measures a late broker now)."""
        next_at = time.monotonic()
        rushed = False  # this round was hurried
        while not self._stop.is_set():
            if before is not None and not rushed:
                before()
            started = time.monotonic()
            try:
                records = poll()
                if routine is None:
                    self.publisher.publish(records)
                else:
                    self.routine.offer(records, routine(records))
                setattr(self, counter, getattr(self, counter) + 1)
            except Exception:  # noqa: BLE001 - keep going
                log.exception("%s failed", what)
            next_at = max(next_at + interval, time.monotonic())
            if hurried is None:
                self._stop.wait(max(0.0, next_at - time.monotonic()))
                continue
            hurried.clear()  # a round just ran: what it asked for before is measured
            rushed = hurried.wait(max(0.0, next_at - time.monotonic())) and not self._stop.is_set()
            if rushed:
                next_at = max(time.monotonic(), started + HURRIED_GAP_S)
                self._stop.wait(max(0.0, next_at - time.monotonic()))

    def _publish_changes(self, src: Any) -> None:
        """ZooKeeper mode: publish topics whose state znodes changed, at once and beside the full
        polls (which may be waiting on a dead broker's offsets)."""
        zk = self._zk[src.cluster.name]
        dirty_event = self._dirty[src.cluster.name]
        while not self._stop.is_set():
            dirty_event.wait(1.0)
            dirty_event.clear()
            dirty = zk.take_dirty()
            if not dirty or src.zk is None:  # ZooKeeper no longer holds the metadata: no quick records
                continue
            try:
                self.unchanged.forget(src.cluster.name)  # the pipeline's view moves past the last full poll
                records = src.quick_records(dirty)
                self.publisher.publish(records)
                self._published(src.cluster.name, records)
                self.quick_publishes += 1
            except Exception:  # noqa: BLE001 - the next full poll covers it
                log.exception("ZooKeeper-triggered publish for cluster %s failed", src.cluster.name)
