"""krm/timeline.py over a partition_state table written at changes and keyframes: a window opens with
the state the partition was in at its start, read from the newest row before it."""

import datetime as dt

import pyarrow as pa
import pytest
from deltalake import write_deltalake

from foundation.storage import Location
from krm.timeline import changes, read_states

pytestmark = pytest.mark.unit


def _row(at, isr, changed):
    return {"cluster": "prod", "topic": "orders", "partition": 0, "observed_at": at, "leader": 1, "leader_epoch": 3,
            "replicas": [1, 2], "isr": isr, "high_watermark": 10, "leader_leo": 10, "changed": changed,
            "date": at.date()}


def test_a_window_starts_with_the_state_written_before_it(tmp_path):
    now = dt.datetime(2026, 11, 26, 12, 0, tzinfo=dt.timezone.utc)
    rows = [_row(now - dt.timedelta(hours=30), [1, 2], True),  # beyond the lookback: not read
            _row(now - dt.timedelta(hours=2), [1, 2], False),  # a keyframe
            _row(now - dt.timedelta(minutes=30), [1], True)]  # the ISR shrank
    write_deltalake(str(tmp_path / "ps"), pa.Table.from_pylist(rows), partition_by=["date", "cluster"])
    table = Location(str(tmp_path / "ps"))

    hour = read_states(table, "orders", 0, dt.timedelta(hours=1), now=now)
    assert [(r["observed_at"], r["isr"]) for r in hour] == [(now - dt.timedelta(hours=2), [1, 2]),
                                                           (now - dt.timedelta(minutes=30), [1])]
    assert [e.fields["isr"] for e in changes(hour)] == [[1, 2], [1]]
    # a window shorter than the keyframe interval, with no row in it: the state it was in all along
    (last,) = read_states(table, "orders", 0, dt.timedelta(minutes=10), now=now)
    assert last["isr"] == [1]
    assert read_states(table, "orders", 1, dt.timedelta(hours=1), now=now) == []
