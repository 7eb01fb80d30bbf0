"""The history path's derived tables on a static batch: partition_state and replica_lag are written
idempotently and `krm lag`'s reader finds the followers' lag in them."""

import datetime as dt
import json
import zlib

import pytest

from collectors.records import topic_record
from krm.lag import read_lag
from pipelines.ingest import parse
from pipelines.history_path import HistoryPath
from pipelines.tables import Tables
from pipelines.state import PipelineState

pytestmark = pytest.mark.spark


def _batch(spark, records):
    rows = [(json.dumps(r).encode(), "krm.observations", 0, i) for i, r in enumerate(records)]
    return spark.createDataFrame(rows, "value binary, topic string, partition int, offset long").selectExpr(
        "*", "current_timestamp() as timestamp")


def test_partition_state_and_replica_lag(spark, tmp_path):
    now_ms = int(dt.datetime.now(dt.timezone.utc).timestamp() * 1000)
    part = {"partition": 0, "leader": 1, "leader_epoch": 2, "replicas": [1, 2, 3], "isr": [1, 2],
            "high_watermark": 900, "write_rate": 100.0, "changed": True,  # a collector's first sight
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



def test_a_batch_replayed_after_a_stop_appends_only_what_it_had_not(spark, tmp_path, monkeypatch):
    """A stop between two of a batch's appends: Spark plans the batch again at the next start, and
    only the tables it had not reached get its rows. Tables written by a release that used Delta's
    transaction ids are recognized too."""
    from pipelines import history_path

    now_ms = int(dt.datetime.now(dt.timezone.utc).timestamp() * 1000)
    part = {"partition": 0, "leader": 1, "leader_epoch": 2, "replicas": [1, 2], "isr": [1, 2], "high_watermark": 5,
            "changed": True, "replica_offsets": [{"broker": 1, "log_end_offset": 5}, {"broker": 2, "log_end_offset": 5}]}
    batch = parse(_batch(spark, [topic_record("c1", "admin", 1, now_ms, topic="orders", live_brokers=[1, 2],
                                              partitions=[part], min_insync_replicas=1,
                                              unclean_leader_election=False)]))
    tables = Tables(tmp_path)
    HistoryPath(PipelineState(), tables, app_id="t")(batch, 0)
    lag_rows = spark.read.format("delta").load(str(tables.replica_lag)).count()

    real = history_path.append

    def stopped_after_observations(frame, path, mark, partition_by=()):
        if ":1" in mark and "-observations:" not in mark:
            raise RuntimeError("the driver stopped here")
        real(frame, path, mark, partition_by)

    monkeypatch.setattr(history_path, "append", stopped_after_observations)
    with pytest.raises(RuntimeError):
        HistoryPath(PipelineState(), tables, app_id="t")(batch, 1)
    monkeypatch.undo()

    def rows(path):
        return spark.read.format("delta").load(str(path)).count()

    assert (rows(tables.observations), rows(tables.partition_state)) == (2, 1)
    HistoryPath(PipelineState(), tables, app_id="t")(batch, 1)  # the next start replays batch 1
    assert (rows(tables.observations), rows(tables.partition_state), rows(tables.replica_lag)) == (2, 2, 2 * lag_rows)

    # batch 2 appended by an earlier release, with Delta's transaction id: not appended again
    (batch.write.format("delta").mode("append").option("mergeSchema", "true")
     .option("txnAppId", "t-quarantine").option("txnVersion", 2).save(str(tables.quarantine)))
    assert history_path.committed(tables.quarantine, "t", "quarantine", 2)
    assert not history_path.committed(tables.quarantine, "t", "quarantine", 3)


def _poll(memory, t0, i, isr, follower_leo):
    """Poll i (every 2 s) as the collector publishes it: annotated by its memory of the polls before."""
    part = {"partition": 0, "leader": 1, "leader_epoch": 2, "replicas": [1, 2, 3], "isr": isr,
            "high_watermark": 1000 + i,
            "replica_offsets": [{"broker": 1, "log_end_offset": 1000 + i}, {"broker": 2, "log_end_offset": 1000 + i},
                                {"broker": 3, "log_end_offset": follower_leo}]}
    at = t0 + i * 2000
    return topic_record("c1", "admin", i, at, topic="orders", live_brokers=[1, 2, 3],
                        partitions=[memory.annotate("orders", part, at)], min_insync_replicas=2,
                        unclean_leader_election=False)


def test_history_keeps_changes_keyframes_and_lagging_followers_only(spark, tmp_path):
    """Polls every 2 s, keyframes every 10 s: an unchanged partition is a row per keyframe; an ISR
    shrink and its return are rows at the polls they happened, whichever batch they fall in; a follower
    out of the ISR is a replica_lag row at every poll, one in sync only at its partition's changes. A
    v2 record (a collector that does not mark polls) is written whole, as before."""
    from collectors.memory import PartitionMemory
    from foundation.storage import Location
    from krm.sql import run

    # on the topic's keyframe boundary: its intervals start at an offset of its own (collectors/memory.py)
    t0 = (int(dt.datetime.now(dt.timezone.utc).timestamp() * 1000) // 10_000 - 30) * 10_000 - zlib.crc32(b"orders") % 10_000
    memory = PartitionMemory(keyframe_s=10)
    full, short = [1, 2, 3], [1, 2]
    polls = [_poll(memory, t0, i, full, 1000 + i) for i in range(7)]  # 0..12 s in sync
    polls += [_poll(memory, t0, i, short, 1000) for i in range(7, 11)]  # 14..20 s: broker 3 out, 7..10 behind
    polls += [_poll(memory, t0, i, full, 1000 + i) for i in range(11, 14)]  # 22..26 s: back
    tables = Tables(tmp_path)
    history = HistoryPath(PipelineState(), tables, app_id="t")
    for batch_id, chunk in enumerate((polls[:4], polls[4:7], polls[7:11], polls[11:])):  # changes open batches
        history(parse(_batch(spark, chunk)), batch_id)

    state = spark.read.format("delta").load(str(tables.partition_state)).orderBy("observed_at").collect()
    seconds = [((int(r.observed_at.timestamp() * 1000) - t0) // 1000, r.changed, list(r.isr)) for r in state]
    assert seconds == [(0, True, full), (10, False, full), (14, True, short), (20, False, short),
                       (22, True, full)], seconds
    lag = spark.read.format("delta").load(str(tables.replica_lag)).where("broker = 3").orderBy("observed_at").collect()
    assert [((int(r.observed_at.timestamp() * 1000) - t0) // 1000, r.in_isr, r.lag_messages) for r in lag] == [
        (0, True, 0), (14, False, 7), (16, False, 8), (18, False, 9), (20, False, 10), (22, True, 0)]

    # krm sql over the Spark-written table: a pushed-down boolean comparison keeps every file that holds
    # a changed row (delta-rs has pruned on boolean statistics wrongly before: foundation/storage.py)
    where = {"partition_state": Location(str(tables.partition_state))}
    changed = run("SELECT count(*) FROM partition_state WHERE changed = true", where).rows
    unchanged = run("SELECT count(*) FROM partition_state WHERE changed = false", where).rows
    assert (changed, unchanged) == ([(3,)], [(2,)]), (changed, unchanged)

    old = []
    for i in (30, 31):  # a v2 collector's records: no marks
        rec = _poll(PartitionMemory(), t0, i, full, 1000 + i)
        rec["v"] = 2
        rec["topic_state"]["partitions"][0].pop("changed", None)
        old.append(rec)
    history(parse(_batch(spark, old)), 4)
    assert spark.read.format("delta").load(str(tables.partition_state)).where("changed").count() == 3 + 2


def test_what_a_batch_holds_for_each_table(spark):
    """One job says which derived tables a batch can add rows to (pipelines/history.contents): a quiet
    poll none, a change all but assignments, a lagging follower only replica_lag, an assignment record
    assignments, a v2 record (no marks) every partition; refused records are counted."""
    from pipelines.history import contents

    now_ms = int(dt.datetime.now(dt.timezone.utc).timestamp() * 1000)

    def rec(v=4, assignment=None, **marks):
        part = {"partition": 0, "leader": 1, "leader_epoch": 2, "replicas": [1, 2], "isr": [1, 2],
                "high_watermark": 5, **marks}
        r = topic_record("c1", "admin", 1, now_ms, topic="orders", live_brokers=[1, 2], partitions=[part],
                         min_insync_replicas=1, unclean_leader_election=False)
        r["v"] = v
        if assignment:
            r["topic_state"]["assignment"] = assignment
        return r

    def holds(*records, raw=()):
        rows = [(json.dumps(r).encode(), "krm.observations", 0, i) for i, r in enumerate(records)]
        rows += [(text, "krm.observations", 0, 100 + i) for i, text in enumerate(raw)]
        frame = spark.createDataFrame(rows, "value binary, topic string, partition int, offset long").selectExpr(
            "*", "current_timestamp() as timestamp")
        h = contents(parse(frame)).first()
        return h.keep, h.lag, h.assignment, h.rejected

    assert holds(rec()) == (False, False, False, 0)
    assert holds(rec(changed=True)) == (True, True, False, 0)
    assert holds(rec(keyframe=True)) == (True, False, False, 0)
    assert holds(rec(lagging=[2])) == (False, True, False, 0)
    assert holds(rec(assignment="snapshot")) == (False, False, True, 0)
    assert holds(rec(v=2)) == (True, True, False, 0)
    assert holds(rec(), raw=[b"{not json", b'{"v": 99}']) == (False, False, False, 2)
