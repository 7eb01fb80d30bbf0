"""CONTROLLER_ANOMALY's migration causes, the Python judge against tests/golden_migration.py."""

import pytest

from pipelines.detectors.controllers import RULE
from tests.oracles.cluster import migration_stuck
from pipelines.findings import DetectorSettings
from tests.golden_migration import CASES

pytestmark = pytest.mark.unit


@pytest.mark.parametrize("case", CASES, ids=[f"migration-{c[0]}" for c in CASES])
def test_a_migration_left_half_way(case):
    _n, phase, seconds, expected, reason = case
    s = DetectorSettings()
    now = 2_000_000_000_000
    got = migration_stuck(phase, now - seconds * 1000, now, s.migration_copy_stuck_ms, s.migration_dual_write_max_ms)
    assert got == expected, reason
    if expected:
        assert RULE.severity_of(expected) == "warning", "a migration left half-way pages nobody"
