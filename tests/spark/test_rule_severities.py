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


@pytest.mark.parametrize("rule", [r for r in RULES if any(e.since for e in r.escalations)], ids=lambda r: r.type)
def test_an_escalation_by_time_holds_in_spark_when_the_clock_says_it_is_due(spark, rule):
    """`Rule.timed` (the plans' form) and `Escalation.due_ms` (the clock's, pipelines/clock.py) agree to the
    millisecond: the condition holds from the due moment on, not a millisecond before."""
    from pyspark.sql import functions as F

    from pipelines.findings import DetectorSettings

    settings = DetectorSettings()
    for e in (e for e in rule.escalations if e.since):
        due = e.due_ms({e.since: 1_000}, settings)
        assert due is not None
        at = [due - 1, due, due + 5_000]
        df = spark.createDataFrame([(t, 1_000) for t in at], "observed long, since long")
        held = rule.timed(F.col("observed"), settings, **{e.since: F.col("since")})[e.when]
        assert [r["h"] for r in df.select(held.alias("h")).collect()] == [False, True, True], (rule.type, e.when)
