"""The v4 contract's promise (schemas/quiet.py): a partition the collector leaves out as quiet is one on
which no partition rule of the pipeline finds anything, and the counts it sends in their place
(`broker_load`) are the ones the pipeline counted from every partition. Checked against the alert
plan itself, over random partitions drawn near every rule's thresholds."""

import json
import random

import pytest

from collectors.records import leave_out_quiet, topic_record
from pipelines.findings import DetectorSettings, alert_rows
from pipelines.ingest import parse, valid
from schemas.quiet import SILENT_FOLLOWER_WINDOW_MS, Thresholds, is_quiet

pytestmark = pytest.mark.spark

NOW = 1_000_000
WINDOW_MS = 10_000  # the records' replica.lag.time.max.ms: the HW_STALL window
THRESHOLDS = Thresholds(lag_messages=1_000, lag_seconds=5.0)
SETTINGS = DetectorSettings(lag_messages=1_000, lag_seconds=5.0)


def _batch(spark, records):
    rows = [(json.dumps(r).encode(), "krm.observations", 0, i) for i, r in enumerate(records)]
    return spark.createDataFrame(rows, "value binary, topic string, partition int, offset long").selectExpr(
        "*", "current_timestamp() as timestamp")


def _partition(rng: random.Random, pid: int) -> dict:
    """A partition that is mostly healthy, with one or two things near a rule's edge."""
    replicas = rng.sample([1, 2, 3, 4, 5], rng.choice([1, 2, 3, 3, 3, 4]))
    leader = rng.choice(replicas) if rng.random() > 0.05 else -1
    isr = list(replicas) if rng.random() > 0.2 else [b for b in replicas if b == leader or rng.random() > 0.5]
    leader_leo = rng.randrange(10_000, 100_000)
    gap = rng.choice([0, 0, 0, 1, 999, 1_000, 5_000])
    offsets = [{"broker": b, "log_end_offset": leader_leo if b == leader else leader_leo - rng.choice([0, gap])}
               for b in replicas if rng.random() > 0.05]
    p = {"partition": pid, "leader": leader, "leader_epoch": 3, "replicas": replicas, "isr": isr,
         "offline_replicas": [], "high_watermark": leader_leo - rng.choice([0, 0, 5]) if leader >= 0 else None,
         "log_start_offset": 0, "replica_offsets": offsets}
    rate = rng.choice([None, 0.0, 100.0, 250.0, 10_000.0])
    if rate is not None:
        p["write_rate"] = rate
    p["hw_stalled_since_ms"] = rng.choice([None, None, NOW - 1, NOW - SILENT_FOLLOWER_WINDOW_MS + 1,
                                           NOW - SILENT_FOLLOWER_WINDOW_MS, NOW - WINDOW_MS + 1, NOW - WINDOW_MS,
                                           NOW - 60_000])
    if rng.random() < 0.05:
        p["offline_replicas"] = [replicas[-1]]
    if rng.random() < 0.05 and leader >= 0:
        p["previous"] = {"leader": leader, "leader_epoch": 2, "isr": isr, "high_watermark": leader_leo + 10,
                         "max_high_watermark": leader_leo + 10, "replica_offsets": offsets}
    if rng.random() < 0.05 and len(replicas) > 1:
        p["adding_replicas"] = [replicas[-1]]
        p["reassignment_progress_ms"] = NOW - 1_000
    if rng.random() < 0.05:
        p["lagging"] = [b for b in replicas if b != leader][:1]
    for mark in ("changed", "keyframe"):
        if rng.random() < 0.05:
            p[mark] = True
    return p


def test_a_partition_left_out_as_quiet_is_one_no_rule_judges(spark):
    rng = random.Random(47)
    records, quiet = [], {}
    for i in range(800):
        p = _partition(rng, 0)
        live = [1, 2, 3, 4, 5] if rng.random() > 0.1 else [1, 2, 3, 4]
        unreachable = [rng.choice([1, 2, 3, 4, 5])] if rng.random() < 0.1 else []
        topic = f"q-{i}"
        leos = {o["broker"]: o["log_end_offset"] for o in p["replica_offsets"]}
        quiet[topic] = is_quiet(p, leos, set(live), set(unreachable), NOW, WINDOW_MS, THRESHOLDS)
        records.append(topic_record("c1", "admin", 1, NOW, topic=topic, live_brokers=live, partitions=[p],
                                    min_insync_replicas=rng.choice([1, 2, 3]), unclean_leader_election=False,
                                    replica_lag_time_max_ms=WINDOW_MS, unreachable_brokers=unreachable))
    rows = alert_rows(valid(parse(_batch(spark, records))), SETTINGS).collect()
    markers = {r.topic for r in rows if r.row_type == "poll" and r.scope.startswith("topic:")}
    assert markers == set(quiet), "every record was valid and judged"
    found = {r.topic for r in rows if r.row_type == "finding"}
    wrongly_quiet = sorted(t for t in found if quiet[t])
    assert not wrongly_quiet, [r for r in records if r["topic_state"]["topic"] in wrongly_quiet[:3]]
    # the draw is not vacuous: a fair share is quiet, and most of the rest is something a rule finds
    assert 0.2 < sum(quiet.values()) / len(quiet) < 0.8
    assert len(found) > 0.5 * sum(1 for q in quiet.values() if not q)


def test_broker_load_is_what_the_pipeline_counts_from_every_partition(spark):
    rng = random.Random(11)
    full, compact = [], []
    for i in range(40):
        parts = [_partition(rng, pid) for pid in range(rng.randrange(1, 30))]
        for p in parts:  # the balance counts are about leaders and replicas only: keep most partitions quiet
            for k in ("changed", "keyframe", "previous", "lagging", "adding_replicas"):
                p.pop(k, None)
        for out, name in ((full, f"full-{i}"), (compact, f"full-{i}")):
            rec = topic_record("c1", "admin", 1, NOW, topic=name, live_brokers=[1, 2, 3, 4, 5],
                               partitions=[dict(p) for p in parts], min_insync_replicas=2, unclean_leader_election=False,
                               replica_lag_time_max_ms=WINDOW_MS)
            out.append(rec if out is full else leave_out_quiet(rec, THRESHOLDS))
    left_out = sum(r["topic_state"]["partition_count"] - len(r["topic_state"]["partitions"]) for r in compact)
    assert left_out > 100  # quiet partitions were in fact left out

    def counts(records):
        rows = alert_rows(valid(parse(_batch(spark, records))), SETTINGS).collect()
        return {r.topic: (d["partitions"], sorted(map(tuple, d["brokers"]))) for r in rows
                if r.row_type == "poll" and r.scope.startswith("topic:") for d in [json.loads(r.details)]}

    assert counts(compact) == counts(full)


def test_v4_counts_that_cannot_be_true_are_quarantined_with_the_reason(spark):
    from pipelines.ingest import rejected

    def record(topic, **topic_fields):
        part = {"partition": 0, "leader": 1, "leader_epoch": 0, "replicas": [1, 2], "isr": [1, 2]}
        rec = topic_record("c1", "admin", 1, NOW, topic=topic, live_brokers=[1, 2], partitions=[part],
                           min_insync_replicas=1, unclean_leader_election=False)
        rec["topic_state"].update(topic_fields)
        return rec

    good = {"partition_count": 3, "broker_load": [[1, 3, 3, 3, 0], [2, 0, 3, 0, 0]]}
    records = [
        record("fine", **good),
        record("short-count", partition_count=0, broker_load=good["broker_load"]),
        record("no-count", broker_load=good["broker_load"]),
        record("four-counts", partition_count=3, broker_load=[[1, 3, 3, 3]]),
        record("negative", partition_count=3, broker_load=[[1, -3, 3, 3, 0]]),
        record("assignment", assignment="snapshot", **good),
    ]
    reasons = {json.loads(r.raw)["topic_state"]["topic"]: r.reason
               for r in rejected(parse(_batch(spark, records))).collect()}
    assert "fine" not in reasons
    assert reasons["short-count"].startswith("contract: broker_load without a partition_count covering")
    assert reasons["no-count"].startswith("contract: broker_load without a partition_count covering")
    assert reasons["four-counts"].startswith("contract: a broker_load entry is not five counts")
    assert reasons["negative"].startswith("contract: a broker_load entry is not five counts")
    assert reasons["assignment"] == "contract: an assignment record leaves partitions out (topic assignment)"
