"""CONTROLLER_ANOMALY's migration causes in the alert path's Spark plan against tests/golden_migration.py:
one cluster record per case (each its own cluster), all in one batch."""

import json

import pytest

from collectors.records import cluster_record
from pipelines.findings import alert_rows
from pipelines.ingest import parse, valid
from tests.golden_migration import CASES
from lab.harness import observations_batch

pytestmark = pytest.mark.spark

NOW = 2_000_000_000_000


def test_migration_plan_matches_golden_cases(spark):
    records = [cluster_record(f"case-{n}", "admin", 1, NOW, controller_id=1, brokers=[{"id": 1, "live": True}],
                              topic_count=0, partition_count=0,
                              migration=None if phase is None else (phase, NOW - seconds * 1000))
               for n, phase, seconds, *_ in CASES]
    out = alert_rows(valid(parse(observations_batch(spark, records)))).collect()
    found = {r.cluster: r for r in out if r.row_type == "finding" and r.type == "CONTROLLER_ANOMALY"}
    assert {c: r.cause for c, r in found.items()} == {f"case-{n}": want for n, *_x, want, _r in CASES if want}
    for n, phase, seconds, want, _ in CASES:
        if want:
            r = found[f"case-{n}"]
            assert r.severity == "warning"
            assert json.loads(r.details) == {"migration_phase": phase, "migration_phase_since_ms": NOW - seconds * 1000}
