"""Hostile records through the Spark side of ingest (parse -> valid / quarantine), on a sample of the
cases the Python side is fuzzed with (tests/fuzz_records.py): every record comes out exactly once,
as valid or quarantined with a reason; what the independent oracle refuses is quarantined; what a
correct collector publishes is never quarantined."""

import json

import pytest

from pipelines.ingest import parse, rejected
from tests.fuzz_records import NOT_JSON, collect, contract_error, expected_rejection, hostile_records, schema_error

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
    # wrong type is read as absent, and any JSON value in a string field as its text (so a mistyped
    # cluster or topic name is caught by the contract's name rules instead). Every other refusal
    # must be a quarantine.
    lenient = {i for i in should_reject & good if as_spark_reads(records[i]) is not None}
    assert should_reject - lenient <= set(bad), {i: expected_rejection(records[i]) for i in should_reject - lenient - set(bad)}
    print(f"\n{len(texts)} records: {len(good)} valid, {len(bad)} quarantined, "
          f"{len(lenient)} read leniently (a mistyped optional field as absent, a value as its text)")


def as_spark_reads(record, steps=5):
    """The record as Spark's JSON reader sees it, when that reading is a valid record (else None):
    a mistyped string field as the value's JSON text, any other mistyped optional field as absent."""
    import copy

    from schemas.observation import OBSERVATION, Scalar

    record = copy.deepcopy(record)
    for _ in range(steps):
        why = schema_error(record)
        if why is None:
            return record if contract_error(record) is None else None
        if not why.startswith("$.") or "required field is missing" in why:
            return None
        steps_ = [s for s in why.split(":", 1)[0][2:].replace("[", ".[").split(".") if s]
        node, holder = OBSERVATION, record
        for step in steps_[:-1]:
            if step.startswith("["):
                node, holder = node.element, holder[int(step[1:-1])]
            else:
                node, holder = next(ft for n, ft, _ in node.fields if n == step), holder[step]
        last = steps_[-1]
        if last.startswith("["):
            return None
        field = next((f for f in node.fields if f[0] == last), None)
        if field is None:
            return None
        if isinstance(field[1], Scalar) and field[1].name == "string":
            holder[last] = json.dumps(holder[last], separators=(",", ":"))
        elif not field[2]:
            holder.pop(last)
        else:
            return None
    return None
