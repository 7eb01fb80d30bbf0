"""krm lag's pure parts: --since parsing and the per-follower summary."""

import datetime as dt

import pytest

from foundation.errors import KrmError
from krm.lag import LagRow, downsample, parse_since, summarize

pytestmark = pytest.mark.unit


@pytest.mark.parametrize("text,seconds", [("90s", 90), ("15m", 900), ("1h", 3600), ("2d", 172800), ("1.5h", 5400)])
def test_since_units(text, seconds):
    assert parse_since(text).total_seconds() == seconds


@pytest.mark.parametrize("text", ["1", "h", "1w", "-1h", ""])
def test_since_refuses_what_it_cannot_read(text):
    with pytest.raises(KrmError, match="expected a number and a unit"):
        parse_since(text)


def _row(t, broker, lag, in_isr=True, seconds=None):
    at = dt.datetime(2026, 11, 22, 12, 0, t, tzinfo=dt.timezone.utc)
    return LagRow(at, "c1", 0, broker, 1, in_isr, lag, seconds, 100 - lag, 100)


def _table(rows):
    import pyarrow as pa

    return pa.Table.from_pylist([r.__dict__ for r in rows]).sort_by("observed_at")


def test_summary_per_follower_with_worst_moment():
    rows = [_row(1, 2, 10), _row(1, 3, 0), _row(2, 2, 500, in_isr=False, seconds=12.5), _row(3, 2, 40)]
    by_broker = {s["broker"]: s for s in summarize(_table(rows))}
    assert by_broker[2]["samples"] == 3 and by_broker[2]["latest_lag_messages"] == 40
    assert by_broker[2]["max_lag_messages"] == 500 and by_broker[2]["max_lag_at"] == "2026-11-22T12:00:02.000Z"
    assert by_broker[2]["max_lag_seconds"] == 12.5 and by_broker[2]["samples_out_of_isr"] == 1
    assert by_broker[3]["max_lag_messages"] == 0 and by_broker[3]["max_lag_seconds"] is None


def test_incident_windows_of_the_topic_within_the_range():
    from krm.lag import incident_windows
    from pipelines.incidents import Incident

    base = dt.datetime(2026, 11, 22, 12, 0, 0, tzinfo=dt.timezone.utc)
    ms = lambda minutes: int((base + dt.timedelta(minutes=minutes)).timestamp() * 1000)  # noqa: E731
    incidents = [
        Incident("a", "c1", "offsets:t", "REPLICA_LAG", "warning", "t", 0, 2, None, {}, ms(10), ms(20), ms(20), "resolved"),
        Incident("b", "c1", "topic:t", "UNDER_REPLICATED", "warning", "t", 0, None, None, {}, ms(30), ms(40), None, "open"),
        Incident("c", "c1", "topic:u", "UNDER_REPLICATED", "warning", "u", 0, None, None, {}, ms(30), ms(40), None, "open"),
        Incident("d", "c1", "offsets:t", "REPLICA_LAG", "warning", "t", 0, 2, None, {}, ms(-90), ms(-80), ms(-80),
                 "resolved"),
    ]
    now = base + dt.timedelta(minutes=45)
    windows = incident_windows(incidents, "t", None, base, now)
    assert [(w.label, w.start, w.end) for w in windows] == [
        ("REPLICA_LAG p0 broker 2", base + dt.timedelta(minutes=10), base + dt.timedelta(minutes=20)),
        ("UNDER_REPLICATED p0", base + dt.timedelta(minutes=30), now)]


def test_downsampling_keeps_the_worst_of_each_bucket():
    rows = [_row(t, 2, lag, in_isr=(t != 7)) for t, lag in enumerate([1, 9, 2, 3, 4, 5, 6, 80, 7, 8])]
    samples, step = downsample(_table(rows), max_points=5)
    assert step == 2 and len(samples) == 5
    assert [s.lag_messages for s in samples] == [9, 3, 5, 80, 8]
    assert [s.in_isr for s in samples] == [True, True, True, False, True]
    raw, none = downsample(_table(rows), max_points=None)
    assert none is None and len(raw) == 10
