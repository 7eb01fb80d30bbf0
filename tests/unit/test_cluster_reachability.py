import pytest

from pipelines.detectors.cluster_reachability import RULE
from tests.oracles.cluster import cluster_unreachable as judge
from tests.golden_cluster_reachability import CASES

pytestmark = pytest.mark.unit


@pytest.mark.parametrize("num,error,reason,brokers,expected,why", CASES, ids=[f"case{c[0]}" for c in CASES])
def test_cluster_reachability_golden(num, error, reason, brokers, expected, why):
    got = judge({"error": error, "error_reason": reason, "brokers": brokers})
    assert (got[0] if got else None) == expected, why
    if got:
        assert got[1] == {"error": error} and RULE.severity_of(got[0]) == "critical"
