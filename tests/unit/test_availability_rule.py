import pytest

from pipelines.detectors.availability import leader_unreachable
from tests.golden_availability import CASES

pytestmark = pytest.mark.unit


@pytest.mark.parametrize("num,leader,live,unreachable,expected,reason", CASES, ids=[f"case{c[0]}" for c in CASES])
def test_availability_golden(num, leader, live, unreachable, expected, reason):
    assert leader_unreachable(leader, live, unreachable) is expected, reason
