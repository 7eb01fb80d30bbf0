"""The Spark form of the ISR rules against the same golden table as the Python form."""

import pytest

from pipelines.detectors.isr import AT_MIN_ISR, UNDER_MIN_ISR, UNDER_REPLICATED, isr_columns
from tests.golden_isr import CASES

pytestmark = pytest.mark.spark


def test_isr_columns_match_golden_cases(spark):
    from pyspark.sql import functions as F

    rows = [(num, replicas, isr, min_isr) for num, replicas, isr, min_isr, *_ in CASES]
    df = spark.createDataFrame(rows, "num int, replicas array<int>, isr array<int>, min_isr int")
    c = isr_columns(F.col("replicas"), F.col("isr"), F.col("min_isr"))
    got = {r.num: r for r in df.select("num", *[c[k].alias(k) for k in c]).collect()}
    for num, _r, _i, _m, types, eff, cli, reason in CASES:
        r = got[num]
        found = tuple(t for t, flag in ((UNDER_REPLICATED, r.under_replicated), (UNDER_MIN_ISR, r.under_min_isr),
                                        (AT_MIN_ISR, r.at_min_isr)) if flag)
        assert (found, r.effective_min_isr) == (types, eff), f"case {num}: {reason}"
        for key, value in cli.items():
            assert getattr(r, f"cli_{key}") is value, f"case {num}: {reason}"


def test_isr_columns_during_reassignment_match_golden_cases(spark):
    from pyspark.sql import functions as F

    from tests.golden_isr import REASSIGNING

    rows = [(n, replicas, isr, min_isr, adding, removing) for n, replicas, isr, min_isr, adding, removing, *_ in REASSIGNING]
    df = spark.createDataFrame(rows, "num int, replicas array<int>, isr array<int>, min_isr int, adding array<int>, "
                                     "removing array<int>")
    c = isr_columns(F.col("replicas"), F.col("isr"), F.col("min_isr"), F.col("adding"), F.col("removing"))
    got = {r.num: r for r in df.select("num", *[c[k].alias(k) for k in c]).collect()}
    for num, *_rest, types, reason in REASSIGNING:
        r = got[num]
        found = tuple(t for t, flag in ((UNDER_REPLICATED, r.under_replicated), (UNDER_MIN_ISR, r.under_min_isr),
                                        (AT_MIN_ISR, r.at_min_isr)) if flag)
        assert found == types, f"case {num}: {reason}"
