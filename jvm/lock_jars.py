"""Write jvm/jars.lock from what `make jars` fetched: every jar of every group, by its path in the Maven
repository layout and its SHA-256. `krm setup` downloads exactly these (no Maven needed) for an
installed krm. Run after changing a pom: `.venv/bin/python jvm/lock_jars.py`."""

from __future__ import annotations

import hashlib
import json
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def main() -> int:
    jars, m2 = ROOT / ".cache" / "jars", ROOT / ".cache" / "m2"
    index = {p.name: p for p in m2.rglob("*.jar")}
    lock: dict[str, list[dict[str, object]]] = {}
    for group in sorted(p.name for p in jars.iterdir() if p.is_dir()):
        entries = []
        for jar in sorted((jars / group).glob("*.jar")):
            source = index.get(jar.name)
            if source is None:
                print(f"{jar.name}: not found under {m2}", file=sys.stderr)
                return 1
            entries.append({"path": source.relative_to(m2).as_posix(), "size": jar.stat().st_size,
                            "sha256": hashlib.sha256(jar.read_bytes()).hexdigest()})
        lock[group] = entries
    (ROOT / "jvm" / "jars.lock").write_text(json.dumps(lock, indent=1) + "\n")
    print(f"jvm/jars.lock: {sum(len(v) for v in lock.values())} jars in {len(lock)} groups")
    return 0


if __name__ == "__main__":
    sys.exit(main())
