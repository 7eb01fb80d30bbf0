"""Damaged Spark checkpoints (pipelines/checkpoints.py): the newest unreadable offsets / commits entry
is moved aside so Spark re-plans that batch, and nothing else is touched. Found by the fault loops
(benchmarks/fault_loops.py --fault checkpoint-truncate): a truncated offsets file failed the alert
query on every restart."""

import json

import pytest

from foundation.storage import Location
from pipelines.checkpoints import repair

pytestmark = pytest.mark.unit

OFFSETS = 'v1\n{"batchWatermarkMs":0,"batchTimestampMs":1}\n{"krm.obs":{"0":%d}}\n'
COMMIT = 'v1\n{"nextBatchWatermarkMs":0}\n'


def _checkpoint(root, batches, committed):
    (root / "offsets").mkdir(parents=True)
    (root / "commits").mkdir()
    (root / "metadata").write_text(json.dumps({"id": "q"}))
    for n in range(batches):
        (root / "offsets" / str(n)).write_text(OFFSETS % (10 * n))
        (root / "offsets" / f".{n}.crc").write_bytes(b"crc")
    for n in range(committed):
        (root / "commits" / str(n)).write_text(COMMIT)
    return Location(str(root))


def _names(folder):
    return sorted(p.name for p in folder.iterdir() if p.name.isdigit())


def test_a_sound_checkpoint_is_left_alone(tmp_path):
    cp = _checkpoint(tmp_path / "alerts", 4, 4)
    assert repair(cp) == []
    assert _names(tmp_path / "alerts" / "offsets") == ["0", "1", "2", "3"]
    assert repair(Location(str(tmp_path / "never-started"))) == []


@pytest.mark.parametrize("damage", ["truncated", "empty", "garbage"])
def test_the_newest_unreadable_offsets_entry_is_moved_aside_with_its_commit(tmp_path, damage):
    cp = _checkpoint(tmp_path / "alerts", 4, 4)
    newest = tmp_path / "alerts" / "offsets" / "3"
    text = newest.read_text()
    newest.write_text({"truncated": text[: len(text) // 2], "empty": "", "garbage": "\x00\x01"}[damage])
    moved = repair(cp)
    assert moved == ["offsets/3", "offsets/.3.crc", "commits/3"]
    assert _names(tmp_path / "alerts" / "offsets") == ["0", "1", "2"]
    assert _names(tmp_path / "alerts" / "commits") == ["0", "1", "2"]
    assert len(list((tmp_path / "alerts" / "damaged").iterdir())) == 3  # kept for a post-mortem


def test_an_unreadable_commit_is_moved_aside_and_the_batch_runs_again(tmp_path):
    cp = _checkpoint(tmp_path / "history", 3, 3)
    (tmp_path / "history" / "commits" / "2").write_text("v1\n{\"nextBatch")
    assert repair(cp) == ["commits/2"]
    assert _names(tmp_path / "history" / "offsets") == ["0", "1", "2"]  # planned, to be run again
    assert _names(tmp_path / "history" / "commits") == ["0", "1"]


def test_a_delta_log_folder_without_a_commit_is_no_table(tmp_path):
    """A writer killed before its first commit leaves `_delta_log/` empty: that is no table yet (the
    history path used to open it and fail on every batch)."""
    table = tmp_path / "assignments"
    (table / "_delta_log").mkdir(parents=True)
    assert not Location(str(table)).is_table()
    (table / "_delta_log" / "00000000000000000000.json").write_text("{}")
    assert Location(str(table)).is_table()
