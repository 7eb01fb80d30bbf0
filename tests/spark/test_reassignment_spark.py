"""PARTITION_REASSIGNING in the alert path's Spark plan against tests/golden_reassignment.py: one topic
record per case, all in one batch."""

import json

import pytest

from collectors.records import topic_record
from pipelines.findings import DetectorSettings, alert_rows
from pipelines.ingest import parse, valid
from tests.golden_reassignment import CASES
from lab.harness import observations_batch

pytestmark = pytest.mark.spark


def test_reassignment_plan_matches_golden_cases(spark):
    records = []
    for n, replicas, isr, adding, removing, leos, progress_ms, *_ in CASES:
        part = {"partition": 0, "leader": 1, "leader_epoch": 3, "replicas": replicas, "isr": isr,
                "high_watermark": 90_000, "reassignment_progress_ms": progress_ms,
                "replica_offsets": [{"broker": b, "log_end_offset": o} for b, o in leos.items()]}
        if adding is not None:
            part["adding_replicas"] = adding
        if removing is not None:
            part["removing_replicas"] = removing
        records.append(topic_record("c1", "admin", 7, 1_000_000, topic=f"case-{n}", live_brokers=[1, 2, 3],
                                    partitions=[part], min_insync_replicas=1, unclean_leader_election=False))
    rows = alert_rows(valid(parse(observations_batch(spark, records))), DetectorSettings(reassignment_stall_ms=300_000))
    found = {r.topic: r for r in rows.collect() if r.row_type == "finding" and r.type == "PARTITION_REASSIGNING"}
    for n, *_x, expected, left, reason in CASES:
        f = found.get(f"case-{n}")
        assert (None if f is None else (f.cause, f.severity)) == expected, f"case {n}: {reason}"
        if f is not None:
            progress = {p["broker"]: p["messages_to_copy"] for p in json.loads(f.details)["progress"]}
            assert progress == left, f"case {n}: {reason}"
