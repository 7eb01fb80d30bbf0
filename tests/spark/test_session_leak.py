"""Persisting a batch must not leak a SparkSession (the soak's driver-heap growth, RELIABILITY.md).

Spark 4.0.0 clones the session to cache a plan when autoBucketedScan or the final-stage shuffle
optimizations would need turning off, and never frees the clone (SPARK-54753: its ArtifactManager's
Cleaner action holds the manager). krm's session is built so that no clone is made; the live
SparkSession objects of the driver JVM, counted after a full GC, must not grow with persists.
"""

import shutil
import subprocess

import pytest

pytestmark = pytest.mark.spark


def _live_sessions(spark) -> int:
    pid = spark._jvm.java.lang.ProcessHandle.current().pid()
    out = subprocess.run([shutil.which("jcmd") or "jcmd", str(pid), "GC.class_histogram"],
                         capture_output=True, text=True, check=True).stdout  # a full GC first: live objects only
    counts = [int(line.split()[1]) for line in out.splitlines()
              if line.split()[-1:] == ["org.apache.spark.sql.classic.SparkSession"]]
    return sum(counts)


def test_persisting_a_batch_does_not_leave_a_session_behind(spark):
    df = spark.range(100).selectExpr("id", "id % 7 AS k")
    before = _live_sessions(spark)
    for _ in range(5):
        cached = df.where("k > 1").persist()
        assert cached.count() > 0
        cached.unpersist(blocking=True)
    assert _live_sessions(spark) <= before, "each persist left a cloned SparkSession alive"
