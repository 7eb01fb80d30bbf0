"""The history path's derived tables on a static batch: partition_state and replica_lag are written
idempotently and `krm lag`'s reader finds the followers' lag in them."""

import datetime as dt
import json

import pytest

from collectors.records import topic_record
from krm.lag import read_lag
from pipelines.ingest import parse
from pipelines.history_path import HistoryPath
from pipelines.tables import Tables
from pipelines.metrics import PipelineState

pytestmark = pytest.mark.spark


def _batch(spark, records):
    rows = [(json.dumps(r).encode(), "krm.observations", 0, i) for i, r in enumerate(records)]
    return spark.createDataFrame(rows, "value binary, topic string, partition int, offset long").selectExpr(
        "*", "current_timestamp() as timestamp")


def test_partition_state_and_replica_lag(spark, tmp_path):
    now_ms = int(dt.datetime.now(dt.timezone.utc).timestamp() * 1000)
    part = {"partition": 0, "leader": 1, "leader_epoch": 2, "replicas": [1, 2, 3], "isr": [1, 2],
            "high_watermark": 900, "write_rate": 100.0,
            "replica_offsets": [{"broker": 1, "log_end_offset": 1000}, {"broker": 2, "log_end_offset": 990},
                                {"broker": 3, "log_end_offset": 400}]}
    rec = topic_record("c1", "admin", 5, now_ms, topic="orders", live_brokers=[1, 2, 3], partitions=[part],
                       min_insync_replicas=2, unclean_leader_election=False)
    rec["topic_state"]["assignment"] = "changed"
    tables = Tables(tmp_path)
    history = HistoryPath(PipelineState(), tables, app_id="t")
    batch = parse(_batch(spark, [rec]))
    history(batch, 0)
    history(batch, 0)  # a replayed batch: idempotent

    state = spark.read.format("delta").load(str(tables.partition_state)).collect()
    assert [(r.topic, r.partition, r.leader, r.high_watermark, r.leader_leo) for r in state] == [("orders", 0, 1, 900, 1000)]
    (a,) = spark.read.format("delta").load(str(tables.assignments)).collect()
    assert (a.topic, a.reason, a.partition_count, [(p.partition, list(p.replicas)) for p in a.partitions]) == (
        "orders", "changed", 1, [(0, [1, 2, 3])])
    rows = read_lag(tables.replica_lag, "orders", None, dt.timedelta(hours=1))
    assert [(r.broker, r.lag_messages, r.lag_seconds, r.in_isr) for r in rows] == [(2, 10, 0.1, True), (3, 600, 6.0, False)]
