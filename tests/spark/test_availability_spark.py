"""PARTITION_UNAVAILABLE in the alert path's Spark plan against tests/golden_availability.py: one topic
record per case, all in one batch, so the wiring (type, cause, scope) is checked with the rule."""

import json

import pytest

from collectors.records import topic_record
from pipelines.findings import alert_rows
from pipelines.ingest import parse, valid
from tests.golden_availability import CASES, NOT_SERVING_CASES
from lab.harness import observations_batch

pytestmark = pytest.mark.spark


def test_unreachable_leaders_plan_matches_golden_cases(spark):
    records = []
    for n, leader, live, unreachable, *_ in CASES:
        part = {"partition": 0, "leader": leader, "leader_epoch": 1, "replicas": [1, 2, 3], "isr": [1, 2, 3]}
        records.append(topic_record("c1", "admin", 1, 1000, topic=f"case-{n}", live_brokers=live, partitions=[part],
                                    min_insync_replicas=1, unclean_leader_election=False,
                                    unreachable_brokers=unreachable or ()))
    batch = observations_batch(spark, records)
    found = [r for r in alert_rows(valid(parse(batch))).collect()
             if r.row_type == "finding" and r.type == "PARTITION_UNAVAILABLE"]
    assert sorted(r.topic for r in found) == sorted(f"case-{n}" for n, *_x, expected, _r in CASES if expected)
    for r in found:
        assert (r.cause, r.severity, r.scope) == ("leader_unreachable", "critical", f"offsets:{r.topic}")
        assert json.loads(r.details)["unreachable_brokers"] == [2]


def test_leaders_not_serving_plan_matches_golden_cases(spark):
    records = []
    for n, leader, live, unreachable, error, since, at, under_min, *_ in NOT_SERVING_CASES:
        # under min ISR: the ISR the leader alone, min.insync.replicas 2
        isr = [leader] if under_min else [1, 2, 3]
        part = {"partition": 0, "leader": leader, "leader_epoch": 1, "replicas": [1, 2, 3], "isr": isr}
        if error is not None:
            part["leader_error"], part["leader_error_since_ms"] = error, since
        records.append(topic_record("c1", "admin", 1, at, topic=f"case-{n}", live_brokers=live, partitions=[part],
                                    min_insync_replicas=2 if under_min else 1, unclean_leader_election=False,
                                    unreachable_brokers=unreachable or ()))
    batch = observations_batch(spark, records)
    found = {r.topic: r for r in alert_rows(valid(parse(batch))).collect()
             if r.row_type == "finding" and r.type == "PARTITION_UNAVAILABLE"}
    expected = {f"case-{n}" for n, *_x, expected, _r in NOT_SERVING_CASES if expected}
    assert {t for t, r in found.items() if r.cause == "leader_not_serving"} == expected
    assert {t for t, r in found.items() if r.cause != "leader_not_serving"} == {"case-107"}  # leader_unreachable wins
    for n, *_x, error, since, _at, _under_min, expected, _r in NOT_SERVING_CASES:
        if expected:
            r = found[f"case-{n}"]
            details = json.loads(r.details)
            assert (r.severity, details["leader_error"], details["leader_error_since_ms"]) == ("critical", error, since)
