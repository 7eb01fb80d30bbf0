"""How each down broker went down: a controlled shutdown, a crash/hang, or not known. Pure.

A broker stopped cleanly (SIGTERM, `kafka-server-stop`) first asks the controller to move its
leaderships and take it out of the ISRs (ZooKeeper mode: ControlledShutdownRequest,
KafkaController.doControlledShutdown; KRaft: a heartbeat with wantShutDown,
ReplicationControlManager's controlled-shutdown handling), and only then closes its ports and
deregisters. A broker that crashes or hangs goes silent still holding them, and keeps them until the
controller notices (ZooKeeper session expiry, KRaft broker session timeout).

So the evidence is what the broker held just before and when krm first saw it down (not registered,
or registered but unreachable):
- it held a leadership or ISR place of a partition with another replica at a look shortly before
  (`DRAIN_WINDOW_MS`), and holds none now: it handed everything over — a controlled shutdown;
- it holds some at every look for SETTLE_MS after krm first saw it down: it went down without handing
  over — a crash or a hang;
- it held none before either (only single-replica partitions, or none; or krm never saw it up): no
  evidence either way — `unknown`, never guessed a clean stop. Single-replica partitions do not count:
  nothing can take them over, so a controlled shutdown leaves them led by the broker (they go
  offline either way and OFFLINE_PARTITION pages).

The view is the suspect for a moment: the brokers' metadata caches and krm's ZooKeeper mirror trail
the controller's writes, by more on a loaded machine: a clean stop can be first seen registered but
refusing connections, or already deregistered, while the view still shows the leaderships the
controller has just moved. So a broker first seen down while the view shows it
holding is judged again at every look (every poll, and in ZooKeeper mode every ZooKeeper-triggered
record) for SETTLE_MS; meanwhile its verdict is `unknown`. SETTLE_MS is shorter than any broker
session (ZooKeeper enforces at least two ticks; KRaft's broker.session.timeout.ms), and before its
session expires nothing moves a crashed broker's leaderships away, so a crash still holds them at the
final look.

A verdict, once final, holds for the whole departure: until a full poll sees the broker registered
and answering again (a broker holding no replica is not asked, so its departure lasts until it holds
one and answers; holding nothing, it could only be judged `unknown` again). The controller's
reaction (a crash's leaderships moved at session expiry) and a restart (registered again before its
ports open; a ZooKeeper-triggered record that carries no reachability) never re-judge it: a crash
stays a crash from the first page to the resolution.

Limits: a crash first seen after the controller already acted (a poll interval longer than the
broker session timeout) holds nothing at first sight: `controlled` if krm saw it holding within
DRAIN_WINDOW_MS, else `unknown`; the pipeline turns both critical after `[pipeline] planned_stop_max_s`.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass
from typing import Any, Callable, Iterable, Mapping

from schemas.typed import Broker

CONTROLLED = "controlled"
CRASH = "crash"
UNKNOWN = "unknown"

SETTLE_MS = 3000
# A controlled shutdown moves a broker's leaderships within seconds (a large broker's in a minute or
# two); a broker seen holding nothing for longer than this before it went was drained earlier (or
# held nothing), and its going proves nothing about how it went.
DRAIN_WINDOW_MS = 300_000


def holders(partitions: Iterable[Mapping[str, Any]]) -> set[int]:
    """Brokers leading, or in the ISR of, some partition that has another replica."""
    out: set[int] = set()
    for p in partitions:
        if len(p["replicas"]) > 1:
            if p["leader"] >= 0:
                out.add(p["leader"])
            out.update(p["isr"])
    return out


@dataclass(frozen=True)
class _Departure:
    since_ms: int  # when krm first saw it down
    verdict: str  # CONTROLLED, CRASH or UNKNOWN
    final: bool  # not final: judged again at the next look


class Departures:
    """Thread-safe: in ZooKeeper mode the ZooKeeper-triggered records look too, from their own thread."""

    def __init__(self, settle_ms: int = SETTLE_MS, drain_window_ms: int = DRAIN_WINDOW_MS) -> None:
        self._down: dict[int, _Departure] = {}
        self._held_at: dict[int, int] = {}  # broker -> last look (ms) that saw it up and holding
        self.settle_ms = settle_ms
        self.drain_window_ms = drain_window_ms
        self._lock = threading.Lock()

    def annotate(self, brokers: list[Broker], partitions: Callable[[], Iterable[Mapping[str, Any]]],
                 at_ms: int, full: bool = True, held: set[int] | None = None) -> None:
        """Add `departure`, `controlled_shutdown` and `down_since_ms` to each down broker (in place).

        `partitions` returns the partitions as this look sees them; called only when needed (a broker
        newly down or not judged yet, or `full` without `held`). `full`: a full poll, whose
        reachability is this look's own; only a full poll that sees a broker registered and answering
        ends its departure: not one whose views disagree for a moment (the brokers' caches dropped a
        dead broker, so it was not asked, while the ZooKeeper mirror still has it registered: live,
        reachability unknown). `held`: this look's holders() when the caller has
        them already."""
        down = {b["id"]: b for b in brokers if not b["live"] or b.get("reachable") is False}
        with self._lock:
            if full:
                serving = {b["id"] for b in brokers if b["live"] and b.get("reachable") is True}
                for bid in [bid for bid in self._down if bid in serving]:
                    del self._down[bid]  # back and serving: its next stop is judged afresh
                if held is None and len(down) < len(brokers):
                    held = holders(partitions())
                for bid in held or ():
                    if bid not in down:
                        self._held_at[bid] = at_ms
            for bid, b in down.items():
                known = self._down.get(bid)
                if known is None or not known.final:
                    if held is None:
                        held = holders(partitions())
                    self._down[bid] = self._judge(bid, known, bid in held, at_ms)
                d = self._down[bid]
                b["departure"], b["down_since_ms"] = d.verdict, d.since_ms
                b["controlled_shutdown"] = {CONTROLLED: True, CRASH: False}.get(d.verdict)

    def _judge(self, bid: int, known: _Departure | None, holding: bool, at_ms: int) -> _Departure:
        since = known.since_ms if known is not None else at_ms
        if known is not None and at_ms - since >= self.settle_ms:
            # held at every look so far, and the view has had time to catch up: what it shows now
            # proves nothing more (the controller may have moved a crash's load)
            return _Departure(since, CRASH, True)
        if holding:
            return _Departure(since, UNKNOWN, False)  # the view may trail (see the module docstring)
        if known is not None:
            return _Departure(since, CONTROLLED, True)  # seen holding at first sight, handed over since
        last_held = self._held_at.get(bid)
        if last_held is not None and since - last_held <= self.drain_window_ms:
            return _Departure(since, CONTROLLED, True)  # held shortly before, handed everything over
        return _Departure(since, UNKNOWN, True)  # held nothing to hand over: no evidence either way
