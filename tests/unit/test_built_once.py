"""pipelines/columns.built_once: a plan's Columns are built once per Spark JVM."""

import pytest
from pyspark import SparkContext

from pipelines.columns import built_once

pytestmark = pytest.mark.unit


def test_built_once_per_key_and_gateway(monkeypatch):
    made = []

    def build(tag):
        made.append(tag)
        return object()

    monkeypatch.setattr(SparkContext, "_gateway", object())
    first = built_once(("test", 1), lambda: build(1))
    assert built_once(("test", 1), lambda: build(1)) is first
    assert built_once(("test", 2), lambda: build(2)) is not first  # another key (e.g. other settings)
    assert made == [1, 2]
    monkeypatch.setattr(SparkContext, "_gateway", object())  # a new JVM: its own Columns
    assert built_once(("test", 1), lambda: build(1)) is not first
    assert made == [1, 2, 1]
