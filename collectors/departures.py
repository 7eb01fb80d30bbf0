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

Limits: a broker that held nothing replicated when it went down (only single-replica partitions,
or none) gives no evidence either way and reads as a controlled stop: a warning, as its going hurts
no client beyond those partitions, which page on their own (OFFLINE_PARTITION). A crash first seen
after the controller already acted (a poll interval longer than the
broker session timeout) looks like a controlled shutdown; the pipeline still turns the incident
critical after `[pipeline] planned_stop_max_s`.
"""

from __future__ import annotations

from typing import Any, Iterable


def holders(partitions: Iterable[dict[str, Any]]) -> set[int]:
    """Brokers leading, or in the ISR of, some partition that has another replica."""
    out: set[int] = set()
    for p in partitions:
        if len(p["replicas"]) > 1:
            if p["leader"] >= 0:
                out.add(p["leader"])
            out.update(p["isr"])
    return out


class Departures:
    def __init__(self) -> None:
        self._down: dict[int, tuple[int, bool]] = {}  # broker -> (first seen down at ms, controlled)

    def annotate(self, brokers: list[dict[str, Any]], partitions: Any, at_ms: int) -> None:
        """Add `controlled_shutdown` and `down_since_ms` to each down broker (in place);
        `partitions` is a callable returning this poll's partitions, read only when a broker is newly down."""
        down = {b["id"]: b for b in brokers if not b["live"] or b.get("reachable") is False}
        for bid in [bid for bid in self._down if bid not in down]:
            del self._down[bid]  # back up: its next stop is judged afresh
        held: set[int] | None = None
        for bid, b in down.items():
            if bid not in self._down:
                if held is None:
                    held = holders(partitions())
                self._down[bid] = (at_ms, bid not in held)
            since, controlled = self._down[bid]
            b["down_since_ms"], b["controlled_shutdown"] = since, controlled
