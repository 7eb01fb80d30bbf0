"""CONTROLLER_ANOMALY from the brokers' own JMX: more than one broker says it is the active controller.

Metadata answers name one controller; only the brokers themselves can reveal a split brain (a
deposed controller that has not noticed, e.g. after a long GC pause or a ZooKeeper partition):
`kafka.controller:type=KafkaController,name=ActiveControllerCount` is 1 on every broker that
believes it is the controller (KafkaController.scala, ZooKeeper mode; in KRaft mode the controller
quorum is separate processes and the brokers report 0). Judged on one scrape round, so a clean
fail-over between two rounds is not a split brain.
"""

from __future__ import annotations

TYPE = "CONTROLLER_ANOMALY"
SEVERITY = "critical"
MULTIPLE = "multiple_active_controllers"


def active_controllers(counts: dict[int, float]) -> list[int]:
    """`counts`: broker -> ActiveControllerCount from one scrape round (reachable brokers only)."""
    return sorted(b for b, n in counts.items() if n >= 1)


def split_brain(counts: dict[int, float]) -> list[int] | None:
    claimants = active_controllers(counts)
    return claimants if len(claimants) > 1 else None
