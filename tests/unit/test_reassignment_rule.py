"""PARTITION_REASSIGNING's copy progress, the reference oracle (tests/oracles/cluster.py) against
tests/golden_reassignment.py."""

import pytest

from tests.golden_reassignment import CASES
from tests.oracles.cluster import copy_left

pytestmark = pytest.mark.unit


@pytest.mark.parametrize("case", CASES, ids=[f"reassignment-{c[0]}" for c in CASES])
def test_copy_left(case):
    _n, _replicas, _isr, adding, _removing, leos, _progress, _expected, left, reason = case
    assert copy_left(1, leos, adding) == left, reason
