"""The Spark form of the OFFLINE_PARTITION rule against the same golden table as the Python form."""

import pytest

from pipelines.detectors.offline import offline_columns
from tests.golden_offline import CASES, WITH_DIR_REPORTS

pytestmark = pytest.mark.spark


def test_offline_columns_match_golden_cases(spark):
    from pyspark.sql import functions as F

    rows = [(num, leader, replicas, isr, elr, lk, sorted(live), offline)
            for num, leader, replicas, isr, elr, lk, live, offline, *_ in CASES]
    df = spark.createDataFrame(rows, "num int, leader int, replicas array<int>, isr array<int>, elr array<int>, "
                                     "lk array<int>, live array<int>, offline array<int>")
    c = offline_columns(F.col("leader"), F.col("replicas"), F.col("isr"), F.col("live"), F.col("elr"), F.col("lk"),
                        F.col("offline"))
    got = {r.num: r for r in df.select("num", c["is_offline"].alias("off"), c["cause"].alias("cause"),
                                      c["must_return"].alias("must")).collect()}
    for num, *_x, _live, _offline, cause, must_return, reason in CASES:
        r = got[num]
        if cause is None:
            assert not r.off, f"case {num}: {reason}"
        else:
            assert r.off and (r.cause, tuple(r.must)) == (cause, must_return), f"case {num}: {reason}"


def test_offline_columns_with_dir_reports(spark):
    """The brokers' own word on their directories (failed_log_dir_brokers) filters Metadata's offline replicas;
    a null list (an older collector's record) leaves them as they are (the golden table above)."""
    from pyspark.sql import functions as F

    rows = [(num, leader, replicas, isr, sorted(live), offline, failed)
            for num, leader, replicas, isr, live, offline, failed, *_ in WITH_DIR_REPORTS]
    df = spark.createDataFrame(rows, "num int, leader int, replicas array<int>, isr array<int>, live array<int>, "
                                     "offline array<int>, failed array<int>")
    null = F.lit(None).cast("array<int>")
    c = offline_columns(F.col("leader"), F.col("replicas"), F.col("isr"), F.col("live"), null, null, F.col("offline"),
                        F.col("failed"))
    got = {r.num: r for r in df.select("num", c["is_offline"].alias("off"), c["cause"].alias("cause"),
                                      c["must_return"].alias("must")).collect()}
    for num, *_x, cause, must_return, reason in WITH_DIR_REPORTS:
        r = got[num]
        assert r.off and (r.cause, tuple(r.must)) == (cause, must_return), f"case {num}: {reason}"
