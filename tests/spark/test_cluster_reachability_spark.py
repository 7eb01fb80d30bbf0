"""CLUSTER_UNREACHABLE in the alert path's Spark plan against tests/golden_cluster_reachability.py: one
cluster record per case (each its own cluster), all in one batch; a failed poll carries no marker."""

import json

import pytest

from collectors.records import cluster_record
from pipelines.findings import alert_rows
from pipelines.ingest import parse, valid
from tests.golden_cluster_reachability import CASES
from lab.harness import observations_batch

pytestmark = pytest.mark.spark


def test_cluster_reachability_plan_matches_golden_cases(spark):
    records = [cluster_record(f"case-{n}", "admin", 1, 1000, controller_id=None if error else 1, brokers=brokers,
                              topic_count=0, partition_count=0, error=error, error_reason=reason)
               for n, error, reason, brokers, *_ in CASES]
    out = alert_rows(valid(parse(observations_batch(spark, records)))).collect()
    found = {r.cluster: r for r in out if r.row_type == "finding" and r.type == "CLUSTER_UNREACHABLE"}
    assert {c: r.cause for c, r in found.items()} == {f"case-{n}": expected for n, *_x, expected, _w in CASES if expected}
    for n, error, *_ in CASES:
        if f"case-{n}" in found:
            r = found[f"case-{n}"]
            assert (r.severity, r.scope, json.loads(r.details)) == ("critical", "cluster", {"error": error})
    markers = {r.cluster for r in out if r.row_type == "poll"}
    assert markers == {f"case-{n}" for n, error, *_ in CASES if error is None}, "a failed poll resolves nothing"
