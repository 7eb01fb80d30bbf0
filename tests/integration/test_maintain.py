"""`krm maintain` on a real Delta table written in many small appends: old days deleted, each day's
files compacted, unreferenced files vacuumed, and the data `krm lag` reads unchanged."""

import dataclasses
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


def test_compacted_observations_keep_short_row_groups_that_a_time_filter_skips(tmp_path):
    """A day of observations compacted into one file must not be one row group: the data-quality
    thread reads "observed since the last run" and would decode the whole day every run."""
    import pyarrow.parquet as pq

    from krm.maintain import ROW_GROUP_ROWS
    from pipelines.quality import read_recent

    tables = tmp_path / "tables"
    path = tables / "observations"
    now_ms = int(dt.datetime.now(dt.timezone.utc).timestamp() * 1000)
    start = now_ms - 3_000_000
    part = {"partition": 0, "leader": 1, "replicas": [1, 2], "isr": [1, 2], "high_watermark": 5}
    for batch in range(30):  # one history micro-batch every 100 s, 100 topic records each
        times = [start + batch * 100_000 + i * 1000 for i in range(100)]
        write_deltalake(str(path), pa.Table.from_pylist([
            {"cluster": "c1", "kind": "topic", "observed_at_ms": t,
             "kafka_timestamp": dt.datetime.fromtimestamp(t / 1000, dt.timezone.utc),
             "topic_state": {"topic": f"t{i}", "partitions": [part]},
             "date": dt.datetime.fromtimestamp(t / 1000, dt.timezone.utc).date()} for i, t in enumerate(times)]),
            mode="append", partition_by=["date", "cluster"])
    before = read_recent(path, now_ms - 600_000, 10_000)[0].num_rows

    (report,) = maintain(tables, retention_days=30, vacuum_hours=0)
    assert report.error is None and report.files_after < report.files_before

    groups = []
    for uri in DeltaTable(str(path)).file_uris():
        meta = pq.ParquetFile(uri.removeprefix("file://")).metadata
        column = [meta.schema.column(i).path for i in range(meta.num_columns)].index("observed_at_ms")
        for g in range(meta.num_row_groups):
            rg = meta.row_group(g)
            assert rg.column(column).compression == "ZSTD"
            groups.append((rg.num_rows, rg.column(column).statistics.max - rg.column(column).statistics.min))
    assert sum(rows for rows, _ in groups) == 3000 and len(groups) >= 3
    assert max(rows for rows, _ in groups) <= ROW_GROUP_ROWS["observations"]
    assert max(span for _, span in groups) < 1_200_000  # at most ~11 of the 30 micro-batches, not the day
    assert read_recent(path, now_ms - 600_000, 10_000)[0].num_rows == before == 599


def test_incidents_are_vacuumed_and_kept_whole(tmp_path):
    """Each upsert rewrites the files holding its rows; the old ones were never removed (the soak:
    the incidents folder grew with every touch of an open incident). Vacuumed, not compacted (the
    alert path upserts it all the time), and no incident is dropped, however old."""
    from pipelines.incident_store import IncidentStore
    from pipelines.incidents import Incident

    tables = tmp_path / "tables"
    store = IncidentStore(tables / "incidents")
    long_ago = int((dt.datetime.now(dt.timezone.utc) - dt.timedelta(days=400)).timestamp() * 1000)
    incident = Incident(incident_id="i1", cluster="c", scope="partition", type="OFFLINE_PARTITION",
                        severity="critical", topic="t", partition=0, broker=None, cause="single_replica_on_dead_broker",
                        details={}, opened_at_ms=long_ago, last_seen_at_ms=long_ago, resolved_at_ms=None, status="open")
    for touch in range(6):
        store.upsert([dataclasses.replace(incident, last_seen_at_ms=long_ago + touch * 60_000)])
    on_disk = len(list((tables / "incidents").glob("*.parquet")))
    assert on_disk >= 6

    (report,) = maintain(tables, retention_days=30, vacuum_hours=0)
    assert report.table == "incidents" and report.error is None
    assert report.deleted_rows == 0 and report.files_after == report.files_before
    assert report.vacuumed_files == on_disk - report.files_after
    assert len(list((tables / "incidents").glob("*.parquet"))) == report.files_after
    (kept,) = store.read()
    assert kept.last_seen_at_ms == long_ago + 5 * 60_000 and kept.status == "open"


def test_past_days_of_partition_state_are_sorted_by_partition_today_clustered_by_topic(tmp_path):
    """A past day in many appends becomes one file sorted by (changed first, topic, partition, time)
    in row groups whose statistics let a one-partition reader skip the rest; today, which the
    pipeline appends to meanwhile, becomes one file clustered by topic; the rows are the same."""
    import pyarrow.parquet as pq

    tables = tmp_path / "tables"
    path = tables / "partition_state"
    today = dt.datetime.now(dt.timezone.utc).date()
    yesterday = today - dt.timedelta(days=1)
    for day in (yesterday, today):
        for batch in range(4):  # four history batches, each with every partition of three topics
            t = dt.datetime.combine(day, dt.time(1 + batch), tzinfo=dt.timezone.utc)
            rows = [{"cluster": "c1", "topic": f"t{i}", "partition": p, "observed_at": t, "leader": 1,
                     "leader_epoch": 0, "replicas": [1, 2], "isr": [1, 2], "changed": batch == 2 and p == 1,
                     "date": day} for i in (2, 0, 1) for p in range(3)]
            write_deltalake(str(path), pa.Table.from_pylist(rows), mode="append", partition_by=["date", "cluster"])
    before = DeltaTable(str(path)).to_pyarrow_table().sort_by([("date", "ascending"), ("topic", "ascending"),
                                                                ("partition", "ascending"), ("observed_at", "ascending")])

    (report,) = maintain(tables, retention_days=30, vacuum_hours=0, today=today)
    assert report.error is None and report.files_after == 2

    table = DeltaTable(str(path))
    after = table.to_pyarrow_table().sort_by([("date", "ascending"), ("topic", "ascending"),
                                              ("partition", "ascending"), ("observed_at", "ascending")])
    assert after.to_pylist() == before.to_pylist()
    (past,) = [u for u in table.file_uris() if f"date={yesterday}" in u]
    keys = pq.read_table(past.removeprefix("file://"), columns=["changed", "topic", "partition"]).to_pylist()
    assert [tuple(r.values()) for r in keys[:3]] == [(True, "t0", 1), (True, "t1", 1), (True, "t2", 1)]
    assert [(r["topic"], r["partition"]) for r in keys[3:]] == sorted((r["topic"], r["partition"]) for r in keys[3:])
    (present,) = [u for u in table.file_uris() if f"date={today}" in u]  # today: clustered by topic
    rows = pq.read_table(present.removeprefix("file://"), columns=["topic", "changed"]).to_pylist()
    assert [r["topic"] for r in rows] == sorted(r["topic"] for r in rows)
    assert [r["changed"] for r in rows].count(True) == 3
