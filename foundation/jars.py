"""`krm setup`: the pinned jars of jvm/jars.lock fetched from a Maven repository (Maven Central by
default) into krm's jar folder, each checked against its SHA-256. No Maven needed, so an installed
krm (a wheel in any venv) gets the same jars a checkout gets from `make jars`. Idempotent: a jar
already present with the right digest is not fetched again.

Groups: `spark` and `objectstore` (what the pipeline needs: Delta, Spark's Kafka source, the S3A,
ABFS and GCS connectors for an object-store data_dir), and for `krm local-cluster`
and `krm demo` also `kafka` (3.9.1), `kafka-4.4.0` and `agent` (the JMX exporter).
"""

from __future__ import annotations

import hashlib
import json
import urllib.request
from pathlib import Path
from typing import Any, Callable

from foundation.errors import SetupError
from foundation.paths import JARS_LOCK, jars_dir

MAVEN_CENTRAL = "https://repo1.maven.org/maven2"
PIPELINE_GROUPS = ("spark", "objectstore")
LOCAL_CLUSTER_GROUPS = ("kafka", "kafka-4.4.0", "agent")


def load_lock(path: Path = JARS_LOCK) -> dict[str, list[dict[str, Any]]]:
    try:
        lock: dict[str, list[dict[str, Any]]] = json.loads(path.read_text())
        return lock
    except FileNotFoundError:
        raise SetupError(f"{path} is missing: this krm was installed without its jar list") from None


def _sha256(path: Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


def fetch(groups: tuple[str, ...], repository: str = MAVEN_CENTRAL, target: Path | None = None,
          progress: Callable[[str], None] = print) -> dict[str, int]:
    """Fetch every jar of `groups` into `target/<group>/`; returns {group: jars downloaded}."""
    lock = load_lock()
    target = target or jars_dir()
    unknown = [g for g in groups if g not in lock]
    if unknown:
        raise SetupError(f"unknown jar group(s) {unknown}; jvm/jars.lock has {sorted(lock)}")
    fetched: dict[str, int] = {}
    for group in groups:
        folder = target / group
        folder.mkdir(parents=True, exist_ok=True)
        entries = lock[group]
        wanted = {Path(e["path"]).name for e in entries}
        for stale in folder.glob("*.jar"):  # a jar of an older lock would sit on the classpath too
            if stale.name not in wanted:
                stale.unlink()
        total = sum(e["size"] for e in entries)
        done = n = 0
        for e in entries:
            dest = folder / Path(e["path"]).name
            done += e["size"]
            if dest.is_file() and dest.stat().st_size == e["size"] and _sha256(dest) == e["sha256"]:
                continue
            url = f"{repository.rstrip('/')}/{e['path']}"
            tmp = dest.with_suffix(".part")
            try:
                with urllib.request.urlopen(url, timeout=60) as r, open(tmp, "wb") as out:  # noqa: S310 - pinned URLs
                    while chunk := r.read(1 << 20):
                        out.write(chunk)
            except OSError as err:
                tmp.unlink(missing_ok=True)
                raise SetupError(f"could not fetch {url}: {err}") from None
            digest = _sha256(tmp)
            if digest != e["sha256"]:
                tmp.unlink()
                raise SetupError(f"{url}: SHA-256 {digest} is not the pinned {e['sha256']}; refusing it")
            tmp.replace(dest)
            n += 1
            progress(f"  {group}: {dest.name} ({done * 100 // max(total, 1)}% of {total / 1e6:.0f} MB)")
        fetched[group] = n
        progress(f"{group}: {len(entries)} jars in {folder} ({n} fetched)")
    return fetched
