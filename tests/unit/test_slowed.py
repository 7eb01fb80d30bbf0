"""pipelines/slowed.py: the partitions whose pages wait on a critically slow broker's."""

import pytest

from pipelines.incidents import Incident
from pipelines.slowed import slowed

pytestmark = pytest.mark.unit


def _inc(type_, severity, opened, topic=None, partition=None, broker=None, details=None, status="open"):
    return Incident(incident_id=f"{type_}-{topic}-{partition}-{broker}", cluster="c", scope="x", type=type_, severity=severity,
                    topic=topic, partition=partition, broker=broker, cause="x", details=details or {},
                    opened_at_ms=opened, last_seen_at_ms=opened, resolved_at_ms=None, status=status)


def test_only_a_critical_slow_broker_holds_the_partitions_it_names():
    led = _inc("HW_STALL", "critical", 10_000, "t", 0, details={"leader": 2, "holding_back": [3]})
    followed = _inc("HW_STALL", "critical", 10_000, "t", 1, details={"leader": 1, "holding_back": [2]})
    elsewhere = _inc("HW_STALL", "critical", 10_000, "t", 2, details={"leader": 1, "holding_back": [3]})
    long_before = _inc("UNDER_MIN_ISR", "critical", 1_000, "t", 3, details={"leader": 2})
    canary = _inc("PARTITION_UNAVAILABLE", "critical", 12_000, "krm.canary", 1, details={"leader": 2})
    lag = _inc("REPLICA_LAG", "warning", 12_000, "t", 4, details={"leader": 2})
    others = [led, followed, elsewhere, long_before, canary, lag]
    assert slowed([_inc("BROKER_SLOW", "warning", 70_000, broker=2), *others]) == set(), "a warning holds nothing"
    got = slowed([_inc("BROKER_SLOW", "critical", 70_000, broker=2), *others])
    assert got == {("c", "t", 0, 2), ("c", "t", 1, 2), ("c", "krm.canary", 1, 2)}
    resolved = _inc("BROKER_SLOW", "critical", 70_000, broker=2, status="resolved")
    assert slowed([resolved, *others]) == set()
