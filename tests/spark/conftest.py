"""Every finding a Spark golden test collects from the alert projection is also held to its type's declared
details shape (pipelines/detectors/details.py): a rule writing a key its model does not declare, or a value of
another shape, fails the test that produced it."""

from __future__ import annotations

import json
from typing import Any

import pytest

from pipelines.detectors.details import problems
from pipelines.detectors.registry import BY_TYPE


class _Declared:
    """The alert rows' DataFrame, whose collect() checks each finding's details against its declaration."""

    def __init__(self, df: Any) -> None:
        self._df = df

    def collect(self) -> list[Any]:
        rows = self._df.collect()
        for r in rows:
            if r.row_type == "finding" and r.type in BY_TYPE:
                said = problems(BY_TYPE[r.type].details, json.loads(r.details or "{}"))
                assert said == [], f"{r.type} ({r.cause}) wrote details its model does not declare: {said}"
        return rows

    def __getattr__(self, name: str) -> Any:
        return getattr(self._df, name)


@pytest.fixture(autouse=True)
def declared_details(request: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    alert_rows = getattr(request.module, "alert_rows", None)
    if alert_rows is not None:
        monkeypatch.setattr(request.module, "alert_rows", lambda *a, **k: _Declared(alert_rows(*a, **k)))
