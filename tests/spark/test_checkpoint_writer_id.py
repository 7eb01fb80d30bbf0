"""A deleted history checkpoint must not silence the history tables (pipelines/checkpoints.py).

Found by the fault loops (benchmarks/fault_loops.py --fault checkpoint-delete): the history appends
carried the fixed Delta transaction id `krm-history-<table>` with the batch id as version; after the
checkpoint was deleted the batch ids restarted at 0 and Delta skipped every append as one it already
had. The id is now tied to the checkpoint."""

import shutil

import pytest

from foundation.storage import Location
from pipelines.checkpoints import WRITER_ID_FILE, writer_id
from pipelines.history_path import append, batch_mark, committed

pytestmark = pytest.mark.spark


def _append(spark, path, app_id, batch_id, n):
    """As the history path appends a batch to its observations table (pipelines/history_path.py)."""
    table = Location(str(path))
    if not committed(table, app_id, "observations", batch_id):
        append(spark.range(n), table, batch_mark(app_id, "observations", batch_id))


def test_a_new_checkpoint_gets_a_new_writer_id(spark, tmp_path):
    checkpoint = Location(str(tmp_path / "checkpoints" / "history"))
    first = writer_id(spark, checkpoint, legacy="krm-history")
    assert first.startswith("krm-history-") and writer_id(spark, checkpoint, legacy="krm-history") == first
    assert (tmp_path / "checkpoints" / "history" / WRITER_ID_FILE).read_text().strip() == first

    table = tmp_path / "observations"
    for batch in range(3):
        _append(spark, table, first, batch, 10)
    _append(spark, table, first, 0, 10)  # a replayed batch: its mark is found, skipped
    assert spark.read.format("delta").load(str(table)).count() == 30

    shutil.rmtree(tmp_path / "checkpoints" / "history")  # the operator deletes the checkpoint
    second = writer_id(spark, checkpoint, legacy="krm-history")
    assert second != first
    _append(spark, table, second, 0, 10)  # batch ids restart at 0: written, not skipped
    assert spark.read.format("delta").load(str(table)).count() == 40


def test_a_checkpoint_from_before_the_token_keeps_its_fixed_id(spark, tmp_path):
    root = tmp_path / "history"
    root.mkdir()
    (root / "metadata").write_text('{"id":"5a1c"}')  # Spark's own file: a running checkpoint
    assert writer_id(spark, Location(str(root)), legacy="krm-history") == "krm-history"
    assert (root / WRITER_ID_FILE).read_text().strip() == "krm-history"
