"""Hostile records through the Spark side of ingest (parse -> valid / quarantine), on a sample of the
cases the Python side is fuzzed with (lab/fuzz_records.py): every record comes out exactly once,
as valid or quarantined with a reason; what the independent oracle refuses is quarantined; what a
correct collector publishes is never quarantined."""

import json

import pytest

from pipelines.ingest import parse, rejected
from lab.fuzz_records import NOT_JSON, as_spark_reads, collect, expected_rejection, hostile_records

pytestmark = pytest.mark.spark


def _batch(spark, values):
    rows = [(v.encode("utf-8", "surrogatepass"), "krm.observations", 0, i) for i, v in enumerate(values)]
    return spark.createDataFrame(rows, "value binary, topic string, partition int, offset long").selectExpr(
        "*", "current_timestamp() as timestamp")


def test_a_hostile_sample_is_sorted_exactly(spark):
    records = collect(hostile_records(), 600, seed=17)
    texts = [json.dumps(r) for r in records] + NOT_JSON
    parsed = parse(_batch(spark, texts)).persist()
    try:
        good = {r["kafka_offset"] for r in parsed.where("reject_reason IS NULL").select("kafka_offset").collect()}
        bad = {r["kafka_offset"]: r["reason"] for r in rejected(parsed).select("kafka_offset", "reason").collect()}
    finally:
        parsed.unpersist()
    assert len(good) + len(bad) == len(texts) and not good & set(bad)  # each record exactly once
    assert all(bad.values())  # every quarantined record says why
    assert set(range(len(records), len(texts))) <= set(bad)  # not JSON objects at all
    should_reject = {i for i, r in enumerate(records) if expected_rejection(r)}
    must_pass = {i for i, r in enumerate(records) if not expected_rejection(r)}
    assert must_pass <= good, {i: bad[i] for i in must_pass - good}
    # Spark's JSON reader is lenient in two ways the Python check is not: an optional field of the
    # wrong type (or an optional array with an element of the wrong type) is read as absent, and any
    # JSON value in a string field as its text (so a mistyped cluster or topic name is caught by the
    # contract's name rules instead). Every other refusal must be a quarantine.
    lenient = {i for i in should_reject & good if as_spark_reads(records[i]) is not None}
    assert should_reject - lenient <= set(bad), {i: expected_rejection(records[i]) for i in should_reject - lenient - set(bad)}
    print(f"\n{len(texts)} records: {len(good)} valid, {len(bad)} quarantined, "
          f"{len(lenient)} read leniently (a mistyped optional field as absent, a value as its text)")


def test_a_null_array_element_is_quarantined(spark):
    """Found by the 100k run (RELIABILITY.md): Spark's reader keeps a JSON null inside an array, so
    `elr: [1, null]` reached the detectors with a null broker. Every array, at every depth, now refuses
    a null element, as the Python check does."""
    from lab.fuzz_records import valid_records

    base = next(r for r in collect(valid_records(), 200, seed=5)
                if r["kind"] == "topic" and r["topic_state"]["partitions"])
    cases = {}
    for where in ("live_brokers", "replicas", "isr", "elr", "replica_offsets"):
        r = json.loads(json.dumps(base))
        if where == "live_brokers":
            r["topic_state"]["live_brokers"].append(None)
        else:
            r["topic_state"]["partitions"][0].setdefault(where, []).append(None)
        assert expected_rejection(r), where  # the Python side refuses it too
        cases[where] = json.dumps(r)
    texts = list(cases.values()) + [json.dumps(base)]
    parsed = parse(_batch(spark, texts)).select("kafka_offset", "reject_reason").collect()
    reasons = {row["kafka_offset"]: row["reject_reason"] for row in parsed}
    assert reasons[len(texts) - 1] is None  # the record without the null passes
    for i, where in enumerate(cases):
        assert reasons[i] and ("element" in reasons[i] or "required field" in reasons[i]), (where, reasons[i])
