"""The offset detectors' Spark plan (findings.alert_rows) against tests/golden_offsets.py: one topic
record per golden case, all cases in one batch, so the collected findings also check the wiring
(type, subject broker, cause) and that partitions of other cases do not leak into each other."""

import json

import pytest

from collectors.records import topic_record
from pipelines.findings import DetectorSettings, alert_rows
from pipelines.ingest import parse, valid
from tests.golden_offsets import CHANGE, ELECTION, EMPTIED, EVIDENCE, LAG, STALL_MIN_ISR, stall_cases

pytestmark = pytest.mark.spark


def _batch(spark, records):
    rows = [(json.dumps(r).encode(), "krm.observations", 0, i) for i, r in enumerate(records)]
    return spark.createDataFrame(rows, "value binary, topic string, partition int, offset long").selectExpr(
        "*", "current_timestamp() as timestamp")


def _record(topic, now, leader, isr, replicas, unreachable_brokers=(), min_insync_replicas=1, **fields):
    part = {"partition": 0, "leader": leader, "leader_epoch": 5, "replicas": replicas, "isr": isr, **fields}
    return topic_record("c1", "admin", 1, now, topic=topic, live_brokers=replicas, partitions=[part],
                        min_insync_replicas=min_insync_replicas, unclean_leader_election=True,
                        unreachable_brokers=unreachable_brokers)


def _offsets(leos):
    return [{"broker": b, "log_end_offset": o} for b, o in sorted(leos.items())]


def _findings(spark, records, settings):
    rows = alert_rows(valid(parse(_batch(spark, records))), settings).collect()
    out = {}
    for r in rows:
        if r.row_type == "finding":
            out.setdefault(r.topic, []).append(r)
    return out


def test_hw_stall_plan_matches_golden_cases(spark):
    records = [_record(f"stall-{n}", now, leader, isr, [1, 2, 3], high_watermark=hw, replica_offsets=_offsets(leos),
                       hw_stalled_since_ms=since, unreachable_brokers=judged, stalled_followers=stalled or None)
               for n, leader, isr, hw, leos, since, now, _w, judged, stalled, _e, _r in stall_cases()]
    found = _findings(spark, records, DetectorSettings(hw_stall_window_ms=30_000))
    for n, *_rest, expected, reason in stall_cases():
        got = [f for f in found.get(f"stall-{n}", []) if f.type == "HW_STALL"]
        want = [] if expected is None else [expected]
        assert [(f.cause, json.loads(f.details)["holding_back"]) for f in got] == [tuple(w) for w in want], reason


def test_hw_stall_against_min_isr_matches_golden_cases(spark):
    records = [_record(f"stall-{n}", now, leader, isr, [1, 2, 3], high_watermark=hw, replica_offsets=_offsets(leos),
                       hw_stalled_since_ms=since, min_insync_replicas=min_isr)
               for n, leader, isr, hw, leos, since, now, min_isr, _e, _r in STALL_MIN_ISR]
    found = _findings(spark, records, DetectorSettings(hw_stall_window_ms=30_000))
    for n, *_rest, expected, reason in STALL_MIN_ISR:
        got = [f for f in found.get(f"stall-{n}", []) if f.type == "HW_STALL"]
        want = [] if expected is None else [expected]
        assert [(f.cause, json.loads(f.details)["holding_back"]) for f in got] == [tuple(w) for w in want], reason


@pytest.mark.parametrize("settings", sorted({(c[5], c[6]) for c in LAG}))
def test_replica_lag_plan_matches_golden_cases(spark, settings):
    cases = [c for c in LAG if (c[5], c[6]) == settings]
    records = [_record(f"lag-{n}", 1_000, leader, isr, sorted({*isr, *leos}), replica_offsets=_offsets(leos),
                       write_rate=rate)
               for n, leader, isr, leos, rate, *_ in cases]
    found = _findings(spark, records, DetectorSettings(lag_messages=settings[0], lag_seconds=settings[1]))
    for n, *_rest, expected, reason in cases:
        got = sorted((f.broker, json.loads(f.details)["lag_messages"], json.loads(f.details).get("lag_seconds"))
                     for f in found.get(f"lag-{n}", []) if f.type == "REPLICA_LAG")
        assert got == expected, reason


def test_changes_between_polls_plan_matches_golden_cases(spark):
    records = []
    for n, leader, pleader, pisr, hw, phw, leos, pleos, *_ in CHANGE:
        previous = {"leader": pleader, "leader_epoch": 4, "isr": pisr, "high_watermark": phw,
                    "max_high_watermark": phw, "replica_offsets": _offsets(pleos)}
        replicas = sorted({*pisr, *leos, *pleos} - {-1})
        isr = [leader] if leader >= 0 else pisr
        records.append(_record(f"change-{n}", 1_000, leader, isr, replicas, high_watermark=hw,
                               replica_offsets=_offsets(leos), previous=previous))
    found = _findings(spark, records, DetectorSettings())
    for n, *_rest, unclean, regression, truncs, reason in CHANGE:
        fs = found.get(f"change-{n}", [])
        types = {f.type for f in fs}
        assert ("UNCLEAN_LEADER_ELECTION" in types) is unclean, reason
        assert ("OFFSET_REGRESSION" in types) is regression, reason
        assert sorted((f.broker, f.cause) for f in fs if f.type == "LOG_TRUNCATION") == truncs, reason


def test_restarted_empty_plan_matches_golden_cases(spark):
    records = []
    for n, leader, hw, peak, log_start, local_start, leos, pleos, *_ in EMPTIED:
        previous = {"leader": leader, "leader_epoch": 5, "isr": sorted(leos), "high_watermark": peak,
                    "max_high_watermark": peak, "replica_offsets": _offsets(pleos)}
        extra = {} if local_start is None else {"local_log_start_offset": local_start}
        records.append(_record(f"emptied-{n}", 1_000, leader, [leader], sorted(leos), high_watermark=hw,
                               log_start_offset=log_start, replica_offsets=_offsets(leos), previous=previous, **extra))
    found = _findings(spark, records, DetectorSettings())
    for n, *_rest, truncs, reason in EMPTIED:
        fs = found.get(f"emptied-{n}", [])
        assert sorted((f.broker, f.cause) for f in fs if f.type == "LOG_TRUNCATION") == truncs, reason


def test_elections_with_elr_plan_matches_golden_cases(spark):
    records = []
    for n, leader, pleader, pisr, pelr, plk, hw, phw, *_ in ELECTION:
        previous = {"leader": pleader, "leader_epoch": 4, "isr": pisr, "high_watermark": phw, "max_high_watermark": phw}
        if pelr is not None:
            previous |= {"elr": pelr, "last_known_elr": plk}
        replicas = sorted({leader, 1, 2, 3} - {-1})
        records.append(_record(f"election-{n}", 1_000, leader, [leader], replicas, high_watermark=hw,
                               previous=previous, **({"elr": [], "last_known_elr": []} if pelr is not None else {})))
    found = _findings(spark, records, DetectorSettings())
    for n, *_rest, expected, reason in ELECTION:
        got = [(f.cause, f.severity) for f in found.get(f"election-{n}", []) if f.type == "UNCLEAN_LEADER_ELECTION"]
        assert got == ([] if expected is None else [expected]), f"case {n}: {reason}"


def test_unclean_evidence_plan_matches_golden_cases(spark):
    records = []
    for n, leader, pleader, pisr, hw, phw, leo, pmax, preplicas, padding, *_ in EVIDENCE:
        previous = {"leader": pleader, "leader_epoch": 4, "isr": pisr, "high_watermark": phw, "max_high_watermark": pmax,
                    "replicas": preplicas, **({"adding_replicas": padding} if padding else {})}
        replicas = sorted({leader, *pisr})
        records.append(_record(f"evidence-{n}", 1_000, leader, [leader], replicas, high_watermark=hw,
                               replica_offsets=_offsets({leader: leo} if leo is not None else {}), previous=previous))
    found = _findings(spark, records, DetectorSettings())
    for n, *_rest, expected, reason in EVIDENCE:
        got = [(f.cause, f.severity) for f in found.get(f"evidence-{n}", []) if f.type == "UNCLEAN_LEADER_ELECTION"]
        assert got == ([] if expected is None else [expected]), f"case {n}: {reason}"
