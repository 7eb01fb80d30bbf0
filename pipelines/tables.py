"""Where the pipeline's Delta tables and checkpoints live under one data dir (a folder or an object-store URI)."""

from __future__ import annotations

from pathlib import Path

from foundation.paths import krm_home
from foundation.storage import Location, as_location


class Tables:
    """Paths of the Delta tables and checkpoints under one data dir."""

    def __init__(self, data_dir: Location | Path | str) -> None:
        self.root = as_location(data_dir)
        self.incidents = self.root / "tables" / "incidents"
        self.observations = self.root / "tables" / "observations"
        self.quarantine = self.root / "tables" / "quarantine"
        self.partition_state = self.root / "tables" / "partition_state"
        self.replica_lag = self.root / "tables" / "replica_lag"
        self.assignments = self.root / "tables" / "assignments"
        self.data_quality = self.root / "tables" / "data_quality"
        self.broker_state = self.root / "tables" / "broker_state"
        self.checkpoints = self.root / "checkpoints"

    def all(self) -> list[Location]:
        """Every Delta table krm writes."""
        return [self.incidents, self.observations, self.quarantine, self.partition_state, self.replica_lag,
                self.assignments, self.data_quality, self.broker_state]

    @property
    def logs(self) -> Path:
        """Spark's own log file is local: beside the tables, or under KRM_HOME for a remote data_dir."""
        if self.root.is_local:
            return self.root.path / "logs"
        return krm_home() / "logs"
