"""`krm maintain` on a real Delta table written in many small appends: old days deleted, each day's
files compacted, unreferenced files vacuumed, and the data `krm lag` reads unchanged."""

import datetime as dt

import pyarrow as pa
import pytest
from deltalake import DeltaTable, write_deltalake

from krm.lag import read_lag
from krm.maintain import maintain

pytestmark = pytest.mark.integration


def _append(path, day, n):
    t = dt.datetime.combine(day, dt.time(12), tzinfo=dt.timezone.utc)
    rows = {"cluster": ["c1"] * n, "topic": ["t"] * n, "partition": [0] * n, "broker": [2] * n,
            "observed_at": [t + dt.timedelta(seconds=i) for i in range(n)], "leader": [1] * n,
            "is_leader": [False] * n, "in_isr": [True] * n, "log_end_offset": list(range(n)),
            "leader_leo": [n] * n, "lag_messages": [n - i for i in range(n)], "lag_seconds": [1.0] * n,
            "date": [day] * n}
    write_deltalake(str(path), pa.table(rows), mode="append", partition_by=["date"])


def test_retention_compaction_vacuum(tmp_path):
    tables = tmp_path / "tables"
    path = tables / "replica_lag"
    today = dt.datetime.now(dt.timezone.utc).date()
    old, recent = today - dt.timedelta(days=40), today - dt.timedelta(days=1)
    for day in (old, recent, today):
        for _ in range(5):  # five micro-batches a day
            _append(path, day, 10)
    before = read_lag(path, "t", None, dt.timedelta(days=3))

    (report,) = maintain(tables, retention_days=30, vacuum_hours=0, today=today)
    assert report.error is None and report.deleted_rows == 50
    assert report.files_before == 15 and report.files_after == 2 and report.vacuumed_files >= 15

    table = DeltaTable(str(path)).to_pyarrow_table()
    assert sorted(set(table.column("date").to_pylist())) == [recent, today]
    assert read_lag(path, "t", None, dt.timedelta(days=3)) == before
