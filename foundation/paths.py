"""Where the project's installed pieces live: the jars (`make jars` in a checkout, `krm setup` for an
installed krm), the shipped conf files, and krm's home for local clusters.

A git checkout keeps everything beside the code (`.cache/jars`, `conf/`, `.krm/`). An installed
package (wheel) carries `conf/` and `jvm/jars.lock` inside (`foundation/conf`, `foundation/jvm`) and keeps jars and
local clusters under KRM_HOME (default `~/.krm`).
"""

from __future__ import annotations

import os
from pathlib import Path

from foundation.errors import SetupError

PACKAGE_DIR = Path(__file__).resolve().parent
REPO_ROOT = PACKAGE_DIR.parent
IN_CHECKOUT = (REPO_ROOT / "pyproject.toml").is_file() and (REPO_ROOT / "conf").is_dir()
CONF_DIR = REPO_ROOT / "conf" if IN_CHECKOUT else PACKAGE_DIR / "conf"
JVM_DIR = REPO_ROOT / "jvm" if IN_CHECKOUT else PACKAGE_DIR / "jvm"
JARS_LOCK = JVM_DIR / "jars.lock"


def krm_home() -> Path:
    """Local clusters and (installed krm) jars: $KRM_HOME, else `.krm` in a checkout, else ~/.krm."""
    if os.environ.get("KRM_HOME"):
        return Path(os.environ["KRM_HOME"])
    return REPO_ROOT / ".krm" if IN_CHECKOUT else Path.home() / ".krm"


def clusters_root() -> Path:
    """Where `krm local-cluster` keeps each cluster (and its krm.toml, which the CLI offers when no config is given)."""
    return krm_home() / "clusters"


def jars_dir() -> Path:
    if os.environ.get("KRM_JARS_DIR"):
        return Path(os.environ["KRM_JARS_DIR"])
    return REPO_ROOT / ".cache" / "jars" if IN_CHECKOUT else krm_home() / "jars"


def jar_group(name: str) -> list[Path]:
    """The jars of one group (kafka, spark, agent), or a SetupError telling how to fetch them."""
    folder = jars_dir() / name
    jars = sorted(folder.glob("*.jar")) if folder.is_dir() else []
    if not jars:
        pipeline = name in ("spark", "objectstore")
        how = "`make jars`" if IN_CHECKOUT else "`krm setup`" + ("" if pipeline else " --local-cluster")
        raise SetupError(f"no jars in {folder}: run {how} (fetches them from Maven Central once)")
    return jars
