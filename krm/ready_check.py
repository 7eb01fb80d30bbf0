"""`krm check ready --broker ID`: is a restarted broker back, so the next one of a rolling restart may
stop? Pure.

Ready means what Kafka's own rolling-restart advice asks for before the next broker: the broker is
registered (live in the controller's view) and is back in the ISR of every partition it is a full
replica of — until then its partitions run one copy short and the next stop may take them below
min ISR. A replica a reassignment is adding or removing is not counted (it is not a full replica).

Preferred leadership is reported, not waited for: a restarted broker leads nothing until a
preferred-replica election (`auto.leader.rebalance.enable`, on by default, runs one every
`leader.imbalance.check.interval.seconds`; or `kafka-leader-election --election-type preferred`),
and that does not make the next stop less safe.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Mapping, Sequence


@dataclass(frozen=True)
class Readiness:
    broker: int
    registered: bool
    out_of_isr: tuple[tuple[str, int], ...]  # partitions of which it is a full replica, not in the ISR
    preferred_not_leading: tuple[tuple[str, int], ...]  # its preferred partitions led by another broker
    replicas: int  # partitions of which it is a full replica

    @property
    def ready(self) -> bool:
        return self.registered and not self.out_of_isr

    def reason(self) -> str:
        if not self.registered:
            return f"broker {self.broker} is not registered with the controller"
        if self.out_of_isr:
            first = ", ".join(f"{t}/{p}" for t, p in self.out_of_isr[:5])
            more = f" and {len(self.out_of_isr) - 5} more" if len(self.out_of_isr) > 5 else ""
            return f"broker {self.broker} is not in the ISR of {len(self.out_of_isr)} partition(s): {first}{more}"
        return f"broker {self.broker} is registered and in the ISR of all its {self.replicas} partition(s)"


def readiness(broker: int, topics: Sequence[Mapping[str, Any]], live: set[int]) -> Readiness:
    out, not_leading, n = [], [], 0
    for t in topics:
        for p in t["partitions"]:
            replicas = p["replicas"]
            if broker not in replicas:
                continue
            if broker in (p.get("adding_replicas") or ()) or broker in (p.get("removing_replicas") or ()):
                continue
            n += 1
            if broker not in p["isr"]:
                out.append((t["topic"], p["partition"]))
            if replicas[0] == broker and p["leader"] != broker:  # preferred leader: the first replica
                not_leading.append((t["topic"], p["partition"]))
    return Readiness(broker, broker in live, tuple(sorted(out)), tuple(sorted(not_leading)), n)
