"""`krm maintain` beside a running pipeline: no failed batch, no lost row.

The pipeline appends a history micro-batch every second (many small files: what compaction is for)
while the test runs maintenance (retention, compaction, vacuum) over and over on the same local
tables. Delta's optimistic concurrency arbitrates: the pipeline's appends are blind appends, which
no compaction invalidates; a compaction that loses a race to an append fails its commit and is
retried at the next run (reported, never half-done). Afterwards every observation the history query
wrote (the offsets of the newest batch Delta marks as written, from the topic's start) is a row of
the observations table, exactly once.
"""

import json
import logging
import time

import pytest
from deltalake import DeltaTable

from foundation.config import load_config
from krm.maintain import maintain
from krm.runner import Monitor
from krm.scrape import scrape, series
from pipelines.tables import Tables
from lab.harness import wait_for, write_config

pytestmark = pytest.mark.e2e


def _written_batch(table_path, suffix):
    """The newest micro-batch id whose append is in the table (the mark in its commit's userMetadata,
    pipelines/history_path.py batch_mark).

    Not the checkpoint's last commit: a stop may land between a batch's Delta commit and Spark's commit
    log entry — the rows are in, and the batch, replayed at the next start, is skipped by that mark."""
    versions = []
    for entry in sorted((table_path / "_delta_log").glob("*.json")):
        for line in entry.read_text().splitlines():
            mark = (json.loads(line).get("commitInfo") or {}).get("userMetadata") or ""
            if f"{suffix}:" in mark:
                versions.append(int(mark.rsplit(":", 1)[1]))
    return max(versions)


def _planned_offsets(checkpoint, batch_id):
    """{partition: end offset} of a micro-batch as Spark planned it (its offset log entry)."""
    lines = (checkpoint / "offsets" / str(batch_id)).read_text().splitlines()
    (offsets,) = json.loads(lines[-1]).values()
    return {int(p): o for p, o in offsets.items()}


def test_maintenance_beside_the_pipeline_loses_nothing(zk_cluster, spark, tmp_path, caplog):
    caplog.set_level(logging.ERROR, logger="pipelines")
    # every poll published (none kept home: collectors/unchanged.py), so there is an append every second
    config_path = write_config(zk_cluster, tmp_path, poll_interval_s=0.5, history_trigger_s=1.0,
                               pipeline_extra='starting_offsets = "earliest"\n', collector_extra="unchanged_publish_s = 0\n")
    config = load_config(config_path)
    tables = Tables(config.pipeline.data_dir)
    monitor = Monitor(config, spark=spark).start()
    reports = []
    try:
        wait_for(lambda: [s for s in series(scrape(monitor.metrics_url), "krm_pipeline_up") if s.value == 1], 120,
                 "krm_pipeline_up 1")
        wait_for(lambda: tables.observations.is_table() and len(DeltaTable(str(tables.observations.path)).file_uris()) >= 5,
                 120, "five history appends")
        deadline = time.monotonic() + 25
        while time.monotonic() < deadline:  # every run overlaps appends
            reports += maintain(tables.root / "tables", retention_days=30, vacuum_hours=1)
            time.sleep(0.5)
    finally:
        monitor.stop()
    failed = [r.getMessage()[:300] for r in caplog.records if "failed" in r.getMessage()]
    assert not failed, failed  # no failed batch (a failed one stops its query, which the watchdog restarts)

    observations = [r for r in reports if r.table == "observations"]
    compacted = [r for r in observations if r.error is None and r.files_after < r.files_before]
    lost_races = [r for r in reports if r.error is not None]
    print(f"\n{len(reports)} table maintenances ({len(observations)} of observations, {len(compacted)} of them "
          f"compacting), {len(lost_races)} commits lost to a concurrent append: "
          f"{sorted({r.error.split(':')[0] for r in lost_races})}")
    assert compacted, [(r.files_before, r.files_after, r.error) for r in observations][:10]
    for r in lost_races:  # a lost race is a refused commit, nothing else
        assert "conflict" in r.error.lower() or "commit" in r.error.lower(), r.error

    batch_id = _written_batch(tables.observations.path, "-observations")
    offsets = _planned_offsets(tables.checkpoints.path / "history", batch_id)
    table = DeltaTable(str(tables.observations.path))
    rows = table.to_pyarrow_table(columns=["poll_id"])
    assert rows.num_rows == sum(offsets.values()), (rows.num_rows, offsets)  # the topic starts at offset 0
    assert not tables.quarantine.is_table() or DeltaTable(str(tables.quarantine.path)).to_pyarrow_table().num_rows == 0

