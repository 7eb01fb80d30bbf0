"""`Rule.severity_column`, the Spark form every plan raises its findings with, says what `Rule.severity_of`
says, for every cause of every rule and each of its escalations' conditions holding, not holding, or unknown."""

import itertools

import pytest

from pipelines.detectors.registry import RULES

pytestmark = pytest.mark.spark


@pytest.mark.parametrize("rule", [r for r in RULES if r.subject != "driver"], ids=lambda r: r.type)
def test_the_spark_severity_is_severity_of(spark, rule):
    from pyspark.sql import functions as F

    names = sorted({e.when for e in rule.escalations})
    cases = [(cause, *held) for cause in rule.severity
             for held in itertools.product((True, False, None), repeat=len(names))]
    schema = ", ".join(["cause string"] + [f"{n} boolean" for n in names])
    df = spark.createDataFrame(cases, schema)
    got = df.select(rule.severity_column(F.col("cause"), **{n: F.col(n) for n in names}).alias("s")).collect()
    for case, row in zip(cases, got):
        holding = [n for n, held in zip(names, case[1:]) if held]
        assert row["s"] == rule.severity_of(case[0], holding), (rule.type, case)
