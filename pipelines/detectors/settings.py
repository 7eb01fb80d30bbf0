"""The detectors' thresholds, baked into the alert plan (pipelines/findings.py) and read by the clock."""

from __future__ import annotations

from dataclasses import dataclass

from foundation.config import setting
from schemas.quiet import Thresholds


@dataclass(frozen=True)
class DetectorSettings(Thresholds):
    """Thresholds baked into the plan (it is built once per stream): the quiet test's (schemas/quiet.py:
    the lag and stall thresholds, which the collectors read too) and the cluster rules', each declared
    once with its `[pipeline]` key (`DetectorSettings.of(config.pipeline)`)."""

    planned_stop_max_ms: int = setting("planned_stop_max_s", 1000)
    reassignment_stall_ms: int = setting("reassignment_stall_s", 1000)
    migration_copy_stuck_ms: int = setting("migration_copy_stuck_s", 1000)
    migration_dual_write_max_ms: int = setting("migration_dual_write_max_s", 1000)
