"""The data-quality suite (pipelines/quality.py) on rows and on a real Delta observations table,
with great-expectations doing the validating (no JVM: delta-rs writes the table)."""

import datetime as dt
import math
import random

import pytest

from pipelines.metrics import KrmCollector
from pipelines.state import PipelineState
from pipelines.quality import QualityRunner, Suite, partition_rows


def _record(topic, parts, observed_at_ms=1_000_000, delay_ms=30, cluster="c1"):
    return {"cluster": cluster, "kind": "topic", "observed_at_ms": observed_at_ms,
            "kafka_timestamp": dt.datetime.fromtimestamp((observed_at_ms + delay_ms) / 1000, dt.timezone.utc),
            "topic_state": {"topic": topic, "partitions": parts}}


def _p(partition, leader=1, replicas=(1, 2), isr=(1, 2), hw=100, log_start=0, leos=((1, 100), (2, 100)), rate=5.0):
    return {"partition": partition, "leader": leader, "leader_epoch": 3, "replicas": list(replicas), "isr": list(isr),
            "high_watermark": hw, "log_start_offset": log_start, "write_rate": rate,
            "replica_offsets": [{"broker": b, "log_end_offset": o} for b, o in leos]}


@pytest.fixture(scope="module")
def suite():
    return Suite()


def test_derived_columns():
    (row,) = partition_rows([_record("t", [_p(0, leader=3, isr=(1, 4), leos=((1, 90), (2, 120)))])])
    assert row["leader_in_replicas"] is False and row["isr_in_replicas"] is False
    assert row["leader_leo"] is None and row["max_follower_leo"] == 120 and row["publish_delay_s"] == pytest.approx(0.03)
    (offline,) = partition_rows([_record("t", [_p(0, leader=-1, isr=(), hw=None, leos=())])])
    assert offline["leader_in_replicas"] is True and offline["leader_leo"] is None


def _rows_by_definition(records):
    """The derived columns written out record by record: what partition_rows computes column-wise."""
    out = []
    for r in records:
        ts = r.get("topic_state") or {}
        delay = (r["kafka_timestamp"].timestamp() * 1000 - r["observed_at_ms"]) / 1000
        for p in ts.get("partitions") or []:
            replicas = p.get("replicas") or []
            leos = {o["broker"]: o["log_end_offset"] for o in (p.get("replica_offsets") or [])}
            leader = p.get("leader")
            followers = [v for b, v in leos.items() if b != leader]
            out.append({
                "cluster": r["cluster"], "topic": ts.get("topic"), "partition": p.get("partition"),
                "observed_at_ms": r["observed_at_ms"], "leader": leader, "leader_epoch": p.get("leader_epoch"),
                "replica_count": len(replicas), "leader_in_replicas": leader == -1 or leader in replicas,
                "isr_in_replicas": set(p.get("isr") or []) <= set(replicas),
                "high_watermark": p.get("high_watermark"), "log_start_offset": p.get("log_start_offset"),
                "write_rate": p.get("write_rate"), "leader_leo": leos.get(leader),
                "max_follower_leo": max(followers) if followers else None, "publish_delay_s": delay,
            })
    return out


def test_columnar_rows_equal_the_per_record_definition():
    rng = random.Random(7)
    records = []
    for i in range(200):
        parts = []
        for p in range(rng.randint(0, 12)):
            replicas = rng.sample(range(1, 8), rng.randint(1, 4))
            leader = rng.choice([-1, replicas[0], rng.choice(replicas), 9])
            isr = rng.sample(replicas, rng.randint(0, len(replicas))) + ([8] if rng.random() < 0.1 else [])
            answered = rng.sample(replicas + [9], rng.randint(0, len(replicas)))
            parts.append({**_p(p, leader=leader, replicas=replicas, isr=isr, hw=rng.choice([None, 50, 100]),
                               leos=[(b, rng.randint(0, 200)) for b in answered]),
                          **({"replica_offsets": None} if rng.random() < 0.1 else {})})
        records.append(_record(f"t{i % 7}", parts, observed_at_ms=1_000_000 + i * 1000, delay_ms=rng.randint(-50, 900)))
    records.append({**_record("gone", []), "topic_state": None})

    got, want = partition_rows(records), _rows_by_definition(records)
    assert len(got) == len(want) > 800
    for g, w in zip(got, want):
        assert list(g) == list(w)
        assert {k: v for k, v in g.items() if k != "publish_delay_s"} == \
            {k: v for k, v in w.items() if k != "publish_delay_s"}
        assert math.isclose(g["publish_delay_s"], w["publish_delay_s"], abs_tol=1e-9)
    assert {r["leader_in_replicas"] for r in got} == {True, False} and {r["isr_in_replicas"] for r in got} == {True, False}
    assert any(r["leader_leo"] is None for r in got) and any(r["max_follower_leo"] is None for r in got)


def test_clean_observations_pass_every_expectation(suite):
    rows = partition_rows([_record("t", [_p(i) for i in range(20)] + [_p(20, leader=-1, isr=(), hw=None, leos=())])])
    report = suite.run(rows)
    assert report.rows == 21 and len(report.outcomes) >= 14
    assert report.failed == [], [(o.expectation, o.column, o.examples, o.error) for o in report.failed]


def test_each_breach_fails_its_expectation_and_names_the_partition(suite):
    good = [_p(i) for i in range(200)]
    bad = [
        _p(200, leader=9),  # leader not among replicas
        _p(201, isr=(1, 7)),  # ISR member not a replica
        _p(202, hw=50, log_start=60),  # log start above HW
        _p(203, hw=-1),
    ] + [_p(300 + i, hw=500, leos=((1, 400), (2, 400))) for i in range(5)]  # HW above the leader's LEO, 5 of 209
    report = suite.run(partition_rows([_record("orders", good + bad)]))
    failed = {(o.expectation, o.column): o for o in report.failed}
    assert failed[("expect_column_values_to_be_in_set", "leader_in_replicas")].examples[0]["partition"] == 200
    assert failed[("expect_column_values_to_be_in_set", "isr_in_replicas")].unexpected_count == 1
    assert ("expect_column_pair_values_a_to_be_greater_than_b", "high_watermark >= log_start_offset") in failed
    assert ("expect_column_values_to_be_between", "high_watermark") in failed
    hw_leo = failed[("expect_column_pair_values_a_to_be_greater_than_b", "leader_leo >= high_watermark")]
    assert hw_leo.unexpected_count == 5 and hw_leo.examples[0]["topic"] == "orders"  # 5/209 > 1 %: fails
    assert ("expect_column_values_to_be_between", "publish_delay_s") not in failed


def test_sampling_noise_within_mostly_passes(suite):
    rows = partition_rows([_record("t", [_p(i) for i in range(300)] + [_p(300, hw=101)])])  # 1 of 301 < 1 %
    assert suite.run(rows).failed == []


def test_runner_reads_the_delta_table_stores_results_and_publishes_metrics(tmp_path):
    import pyarrow as pa
    from deltalake import DeltaTable, write_deltalake

    now_ms = int(dt.datetime.now(dt.timezone.utc).timestamp() * 1000)
    records = [_record("t", [_p(0), _p(1, leader=5)], observed_at_ms=now_ms),
               {**_record("t", [], observed_at_ms=now_ms), "kind": "cluster", "topic_state": None}]
    for r in records:
        r["date"] = dt.datetime.fromtimestamp(r["observed_at_ms"] / 1000, dt.timezone.utc).date()
    obs = tmp_path / "observations"
    write_deltalake(str(obs), pa.Table.from_pylist(records), partition_by=["date", "cluster"])
    state = PipelineState()
    runner = QualityRunner(obs, tmp_path / "data_quality", state, interval_s=60, max_rows=1000)
    report = runner.run_once()
    assert report.rows == 2
    assert [(o.column, o.examples[0]["partition"]) for o in report.failed] == [("leader_in_replicas", 1)]
    stored = DeltaTable(str(tmp_path / "data_quality")).to_pyarrow_table().to_pylist()
    assert len(stored) == len(report.outcomes) and sum(not r["success"] for r in stored) == 1
    assert runner.run_once().rows == 0  # nothing new since the last run: nothing validated twice

    text = {(s.name, tuple(sorted(s.labels.items()))): s.value for m in KrmCollector(state).collect() for s in m.samples}
    assert text[("krm_data_quality_runs_total", ())] == 2
    assert text[("krm_data_quality_expectation_failing",
                 (("column", "leader_in_replicas"), ("expectation", "expect_column_values_to_be_in_set")))] == 1
    assert text[("krm_data_quality_unexpected_rows_total",
                 (("column", "leader_in_replicas"), ("expectation", "expect_column_values_to_be_in_set")))] == 1


def test_a_broken_run_is_counted_not_raised(tmp_path):
    state = PipelineState()
    obs = tmp_path / "observations" / "_delta_log"
    obs.mkdir(parents=True)
    (obs / "00000000000000000000.json").write_text("not a delta log")
    assert QualityRunner(obs.parent, tmp_path / "dq", state, 60, 10).run_once() is None
    assert state.snapshot.quality.run_errors == 1
