"""Where the project's installed pieces live (jars fetched by `make jars`, shipped conf files)."""

from __future__ import annotations

import os
from pathlib import Path

from krm.errors import SetupError

REPO_ROOT = Path(__file__).resolve().parents[1]
CONF_DIR = REPO_ROOT / "conf"


def jars_dir() -> Path:
    return Path(os.environ.get("KRM_JARS_DIR", REPO_ROOT / ".cache" / "jars"))


def jar_group(name: str) -> list[Path]:
    """The jars of one group (kafka, spark, agent), or a SetupError telling how to fetch them."""
    folder = jars_dir() / name
    jars = sorted(folder.glob("*.jar")) if folder.is_dir() else []
    if not jars:
        raise SetupError(f"no jars in {folder}: run `make jars` (fetches them from Maven Central once)")
    return jars
