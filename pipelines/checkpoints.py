"""What krm does about its Spark checkpoints when they are damaged or gone.

A query's checkpoint holds Spark's offset log (`offsets/N`: the Kafka offsets batch N covers, written
before the batch runs) and commit log (`commits/N`: written once it has run). krm keeps no Spark
state, and both of its queries are idempotent per batch (the incident book replays a batch to the
same incidents; each history append carries its batch's mark, pipelines/history_path.py), so:

- a newest offsets or commits entry that cannot be read (a truncated or empty file: a disk that
  filled up, a crash of the machine) is moved aside to `<checkpoint>/damaged/`, and Spark re-plans
  that batch from the previous one, instead of failing the query on every restart (`repair`);
- a checkpoint folder deleted by hand starts over from `[pipeline] starting_offsets`, with new batch
  ids from 0. The writer id in the history appends' marks is therefore tied to the checkpoint
  (`writer_id`, a token kept inside the checkpoint folder): with a fixed id, a restarted batch id
  would read as a batch already written, and appends would be skipped until the ids caught up.
"""

from __future__ import annotations

import json
import logging
import time
import uuid
from pathlib import Path
from typing import Any

from foundation.storage import Location

log = logging.getLogger(__name__)

WRITER_ID_FILE = "krm-writer-id"


def _readable(entry: Path, min_lines: int) -> bool:
    """Spark's log entry format: a version line (`v1`), then one JSON value (or `-`) per line."""
    try:
        lines = entry.read_text().splitlines()
        if len(lines) < min_lines or not lines[0].startswith("v"):
            return False
        for line in lines[1:]:
            if line != "-":
                json.loads(line)
        return True
    except (OSError, UnicodeDecodeError, ValueError):
        return False


def _newest(folder: Path) -> Path | None:
    ids = [int(p.name) for p in folder.iterdir() if p.name.isdigit()] if folder.is_dir() else []
    return folder / str(max(ids)) if ids else None


def repair(checkpoint: Location) -> list[str]:
    """Move aside the newest offsets / commits entries Spark could not read; returns what was moved.
    Only local checkpoints (on an object store the files are written whole or not at all)."""
    if not checkpoint.is_local:
        return []
    root = checkpoint.path
    moved: list[str] = []
    # offsets/N: the version line, the batch metadata, one line per source; commits/N: version, metadata
    for log_name, min_lines in (("offsets", 3), ("commits", 2)):
        while (entry := _newest(root / log_name)) is not None and not _readable(entry, min_lines):
            batches = [entry] + ([root / "commits" / entry.name] if log_name == "offsets" else [])
            for f in batches:
                for g in (f, f.with_name(f".{f.name}.crc")):  # Hadoop's checksum beside it (local FS)
                    if g.exists():
                        target = root / "damaged" / f"{g.parent.name}-{g.name}-{int(time.time())}"
                        target.parent.mkdir(exist_ok=True)
                        g.replace(target)
                        moved.append(f"{g.parent.name}/{g.name}")
    if moved:
        log.warning("checkpoint %s: moved aside what Spark could not read (%s) to %s; the batch is planned again "
                    "from the previous one", root, ", ".join(moved), root / "damaged")
    return moved


def writer_id(spark: Any, checkpoint: Location, legacy: str) -> str:
    """The writer id in a query's append marks, tied to its checkpoint (see above). A
    checkpoint from before this token existed keeps the fixed id it was written with (`legacy`).
    Read and written through Spark's Hadoop file system, so the same on a local disk, an object
    store or HDFS."""
    jvm = spark._jvm
    conf = spark._jsc.hadoopConfiguration()
    root = jvm.org.apache.hadoop.fs.Path(str(checkpoint))
    fs = root.getFileSystem(conf)
    token = jvm.org.apache.hadoop.fs.Path(root, WRITER_ID_FILE)
    if fs.exists(token):
        stream = fs.open(token)
        try:
            return str(jvm.org.apache.commons.io.IOUtils.toString(stream, "UTF-8")).strip()
        finally:
            stream.close()
    has_metadata = fs.exists(jvm.org.apache.hadoop.fs.Path(root, "metadata"))
    value = legacy if has_metadata else f"{legacy}-{uuid.uuid4().hex[:12]}"
    out = fs.create(token, True)
    try:
        out.write(bytearray((value + "\n").encode()))
    finally:
        out.close()
    return value
