import pytest

from pipelines.detectors.availability import leader_not_serving, leader_unreachable
from tests.golden_availability import CASES, NOT_SERVING_CASES

pytestmark = pytest.mark.unit


@pytest.mark.parametrize("num,leader,live,unreachable,expected,reason", CASES, ids=[f"case{c[0]}" for c in CASES])
def test_availability_golden(num, leader, live, unreachable, expected, reason):
    assert leader_unreachable(leader, live, unreachable) is expected, reason


@pytest.mark.parametrize("num,leader,live,unreachable,error,since,at,under_min,expected,reason", NOT_SERVING_CASES,
                         ids=[f"case{c[0]}" for c in NOT_SERVING_CASES])
def test_not_serving_golden(num, leader, live, unreachable, error, since, at, under_min, expected, reason):
    assert leader_not_serving(leader, live, unreachable, error, since, at, under_min) is expected, reason
