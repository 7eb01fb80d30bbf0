"""Each threshold the rules judge by is declared once, with its `[pipeline]` key, where it is used
(foundation/config.py `setting`): its default is the config's, and a loaded config fills it."""

import dataclasses

import pytest

from foundation.config import PipelineConfig
from pipelines.balance import BalanceSettings
from pipelines.findings import DetectorSettings
from schemas.quiet import Thresholds

pytestmark = pytest.mark.unit

DECLARED = (Thresholds, DetectorSettings, BalanceSettings)


@pytest.mark.parametrize("cls", DECLARED, ids=lambda c: c.__name__)
def test_every_threshold_names_a_pipeline_key_and_defaults_to_it(cls):
    for f in dataclasses.fields(cls):
        key = f.metadata["config"]  # none without its key
        assert key in PipelineConfig.model_fields, (cls.__name__, f.name, key)
    assert cls() == cls.of(PipelineConfig()), cls.__name__


def test_a_loaded_config_fills_every_threshold_in_its_unit():
    p = PipelineConfig(replica_lag_messages=7, replica_lag_seconds=1.5, hw_stall_window_s=2.5, planned_stop_max_s=60,
                       reassignment_stall_s=90, migration_copy_stuck_s=30, migration_dual_write_max_s=3600,
                       leader_skew_tolerance=0.3, replica_imbalance_tolerance=0.4)
    assert DetectorSettings.of(p) == DetectorSettings(
        lag_messages=7, lag_seconds=1.5, hw_stall_window_ms=2500, planned_stop_max_ms=60_000,
        reassignment_stall_ms=90_000, migration_copy_stuck_ms=30_000, migration_dual_write_max_ms=3_600_000)
    assert Thresholds.of(p) == Thresholds(7, 1.5, 2500)  # what the collectors leave out by: the same three
    assert BalanceSettings.of(p) == BalanceSettings(0.3, 0.4)
    assert Thresholds.of(PipelineConfig(hw_stall_window_s=None)).hw_stall_window_ms is None  # the cluster's own
