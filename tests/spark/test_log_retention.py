"""Every table krm writes bounds its _delta_log (pipelines/log_retention.py): the soak found the
log growing for Delta's default 30 days, gigabytes per table at 10k partitions."""

import os
import time

import pyarrow as pa
import pytest
from deltalake import DeltaTable, write_deltalake

from foundation.config import parse_config
from pipelines import log_retention
from pipelines.incident_store import IncidentStore
from pipelines.incidents import Incident
from pipelines.job import Pipeline
from pipelines.tables import Tables

pytestmark = pytest.mark.spark


def _config(data_dir, hours):
    return parse_config({"clusters": [{"name": "c", "bootstrap_servers": "127.0.0.1:1"}],
                         "pipeline": {"data_dir": str(data_dir), "delta_log_retention_hours": hours}})


def _incident(n):
    return Incident(incident_id=f"i{n}", cluster="c", scope="partition", type="OFFLINE_PARTITION", severity="critical",
                    topic="t", partition=n, broker=None, cause="single_replica_on_dead_broker", details={},
                    opened_at_ms=1_000 * n, last_seen_at_ms=1_000 * n, resolved_at_ms=None, status="open")


@pytest.fixture
def spark_defaults_restored(spark):
    """The shared session without krm's table defaults, before and after (a pipeline started in
    this session earlier sets them)."""
    keys = [*log_retention.spark_defaults(log_retention.table_properties(1)),
            log_retention.SPARK_TABLE_DEFAULTS + "checkpointInterval"]
    for key in keys:
        spark.conf.unset(key)
    yield spark
    for key in keys:
        spark.conf.unset(key)


def test_pipeline_start_sets_the_retention_on_old_and_new_tables(spark_defaults_restored, tmp_path):
    spark = spark_defaults_restored
    tables = Tables(tmp_path)
    # tables an earlier release created: no property, 30 days of log by Delta's default
    IncidentStore(tables.incidents).upsert([_incident(1)])
    write_deltalake(str(tables.replica_lag), pa.table({"x": [1]}), mode="append")
    spark.range(1).write.format("delta").mode("append").save(str(tables.observations))  # Spark's protocol
    old = (tables.incidents, tables.replica_lag, tables.observations)
    old_versions = {p.name: p.table().version() for p in old}

    properties = Pipeline(_config(tmp_path, 6), spark).prepare_tables()
    assert properties == {"delta.logRetentionDuration": "interval 6 hours"}
    for path in old:
        table = path.table()
        assert table.metadata().configuration["delta.logRetentionDuration"] == "interval 6 hours"
        assert table.version() == old_versions[path.name] + 1  # one metadata commit
        assert table.to_pyarrow_table().num_rows == 1  # the data untouched

    # a table Spark creates from now on (the history path's appends) carries it from its first commit
    spark.range(3).write.format("delta").mode("append").save(str(tables.quarantine))
    assert DeltaTable(str(tables.quarantine)).metadata().configuration["delta.logRetentionDuration"] == "interval 6 hours"
    spark.range(3).write.format("delta").mode("append").save(str(tables.observations))  # Spark writes on after delta-rs
    assert spark.read.format("delta").load(str(tables.observations)).count() == 4
    # and one delta-rs creates (incidents on a new data_dir; data_quality likewise)
    fresh = Tables(tmp_path / "fresh")
    IncidentStore(fresh.incidents, properties).upsert([_incident(2)])
    assert fresh.incidents.table().metadata().configuration == properties

    # a second start changes nothing: no commit that a concurrent writer could lose to
    versions = {p.name: p.table().version() for p in tables.all() if p.is_table()}
    assert log_retention.apply(tables.all(), properties) == []
    assert {p.name: p.table().version() for p in tables.all() if p.is_table()} == versions


def _history_five_days_old(spark, path, log_dir):
    """Versions 0-4 written "five days ago" (file times set back), then 5-6 now; a checkpoint every
    2 commits instead of Delta's 10, to keep the test short."""
    spark.conf.set(log_retention.SPARK_TABLE_DEFAULTS + "checkpointInterval", "2")
    for i in range(5):  # versions 0-4, checkpoints at 2 and 4
        spark.range(i, i + 1).write.format("delta").mode("append").save(path)
    five_days_ago = time.time() - 5 * 86400
    for f in log_dir.iterdir():
        if f.name[0].isdigit():
            os.utime(f, (five_days_ago, five_days_ago))
    for i in range(5, 7):  # versions 5-6: a checkpoint at 6, then Delta's cleanup
        spark.range(i, i + 1).write.format("delta").mode("append").save(path)
    return sorted(f.name for f in log_dir.iterdir() if f.name.endswith(".json"))


def test_spark_deletes_commits_older_than_the_retention(spark_defaults_restored, tmp_path):
    """Delta's cleanup runs at each checkpoint and deletes the log files up to the newest checkpoint
    older than the cut-off (now - retention, at a day boundary): the commits of five days ago go,
    the table's rows stay."""
    spark = spark_defaults_restored
    for key, value in log_retention.spark_defaults(log_retention.table_properties(48)).items():
        spark.conf.set(key, value)
    left = _history_five_days_old(spark, str(tmp_path / "t"), tmp_path / "t" / "_delta_log")
    assert left == [f"{v:020d}.json" for v in (5, 6)]
    assert spark.read.format("delta").load(str(tmp_path / "t")).count() == 7


def test_without_the_property_delta_keeps_thirty_days(spark_defaults_restored, tmp_path):
    """The control: the same history without krm's property keeps every commit (Delta's default, 30 days)."""
    left = _history_five_days_old(spark_defaults_restored, str(tmp_path / "t"), tmp_path / "t" / "_delta_log")
    assert left == [f"{v:020d}.json" for v in range(7)]
