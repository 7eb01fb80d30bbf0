"""How each down broker went down: a controlled shutdown, or a crash/hang. Pure.

A broker stopped cleanly (SIGTERM, `kafka-server-stop`) first asks the controller to move its
leaderships and take it out of the ISRs (ZooKeeper mode: ControlledShutdownRequest,
KafkaController.doControlledShutdown; KRaft: a heartbeat with wantShutDown,
ReplicationControlManager's controlled-shutdown handling), and only then closes its ports and
deregisters. A broker that crashes or hangs goes silent still holding them, and keeps them until the
controller notices (ZooKeeper session expiry, KRaft broker session timeout).

So the evidence is what the broker held when krm first saw it down (not registered, or registered
but unreachable): a broker that then led no partition with another replica and sat in no ISR of
one had handed everything over — a controlled shutdown. One that still held any went down without
handing over. Single-replica partitions do not count: nothing can take them over, so a controlled
shutdown leaves them led by the broker (they go offline either way and OFFLINE_PARTITION pages).

The view is the suspect for a moment, though: the brokers' metadata caches and krm's ZooKeeper
mirror trail the controller's writes, by more on a loaded machine (CI saw clean rolling restarts
judged crashes: a broker first seen registered but refusing connections, its ports closed before
ZooKeeper dropped its session, or already deregistered, while the mirror still showed the
leaderships the controller had just moved). So a broker first seen down while the view shows it
holding is judged again at every look (every poll, and in ZooKeeper mode every ZooKeeper-triggered
record) for SETTLE_MS: seen holding nothing at any of them, it handed over (controlled); seen
holding at every one of them, it did not (a crash or hang), final at the first look after
SETTLE_MS. Meanwhile its verdict follows its registration: still registered reads as unreachable
(a warning), deregistered as stopped (a warning), so nothing pages on a view that may be behind. SETTLE_MS is shorter than
any broker session (ZooKeeper enforces at least two ticks, 4 s by default; KRaft's
broker.session.timeout.ms defaults to 9 s), and before its session expires nothing moves a crashed
broker's leaderships away, so a crash still holds them at the final look.

Limits: a broker that held nothing replicated when it went down (only single-replica partitions,
or none) gives no evidence either way and reads as a controlled stop: a warning, as its going hurts
no client beyond those partitions, which page on their own (OFFLINE_PARTITION). A crash first seen
after the controller already acted (a poll interval longer than the
broker session timeout) looks like a controlled shutdown; the pipeline still turns the incident
critical after `[pipeline] planned_stop_max_s`.
"""

from __future__ import annotations

import threading
from typing import Any, Callable, Iterable


def holders(partitions: Iterable[dict[str, Any]]) -> set[int]:
    """Brokers leading, or in the ISR of, some partition that has another replica."""
    out: set[int] = set()
    for p in partitions:
        if len(p["replicas"]) > 1:
            if p["leader"] >= 0:
                out.add(p["leader"])
            out.update(p["isr"])
    return out


SETTLE_MS = 3000


class Departures:
    """Thread-safe: in ZooKeeper mode the ZooKeeper-triggered records look too, from their own thread."""

    def __init__(self, settle_ms: int = SETTLE_MS) -> None:
        # broker -> (first seen down at ms, controlled, final); not final: judged again at each look
        self._down: dict[int, tuple[int, bool, bool]] = {}
        self.settle_ms = settle_ms
        self._lock = threading.Lock()

    def annotate(self, brokers: list[dict[str, Any]], partitions: Callable[[], Iterable[dict[str, Any]]],
                 at_ms: int) -> None:
        """Add `controlled_shutdown` and `down_since_ms` to each down broker (in place);
        `partitions` is a callable returning the partitions as this look sees them, called only when
        a broker is newly down or its judgement is not final yet."""
        down = {b["id"]: b for b in brokers if not b["live"] or b.get("reachable") is False}
        with self._lock:
            for bid in [bid for bid in self._down if bid not in down]:
                del self._down[bid]  # back up: its next stop is judged afresh
            held: set[int] | None = None
            for bid, b in down.items():
                known = self._down.get(bid)
                if known is None or not known[2]:
                    if held is None:
                        held = holders(partitions())
                    since = known[0] if known is not None else at_ms
                    if at_ms - since >= self.settle_ms:
                        # held at every look so far, and the view has had time to catch up; what it
                        # shows now proves nothing more (the controller may have moved a crash's load)
                        self._down[bid] = (since, False, True)
                    elif bid not in held:
                        self._down[bid] = (since, True, True)  # handed everything over
                    else:  # the view may trail: meanwhile a warning either way (see the module docstring)
                        self._down[bid] = (since, not b["live"], False)
                since, controlled, _ = self._down[bid]
                b["down_since_ms"], b["controlled_shutdown"] = since, controlled
