"""What the commands share: where the config file is."""

from __future__ import annotations

import argparse
import os
from pathlib import Path

from foundation.errors import KrmError

Subparsers = argparse._SubParsersAction  # the `krm` parser's subcommands, which each module's add() extends


def resolve_config(path: str | None) -> Path:
    """--config, else $KRM_CONFIG, else ./krm.toml; otherwise an error listing local cluster configs."""
    from foundation.paths import clusters_root

    if path:
        if not Path(path).exists():
            raise KrmError(f"config file {path} does not exist")
        return Path(path)
    for candidate in (os.environ.get("KRM_CONFIG"), "krm.toml"):
        if candidate and Path(candidate).exists():
            return Path(candidate)
    local = sorted(clusters_root().glob("*/krm.toml"))
    hint = "".join(f"\n  --config {p}" for p in local) or "\n  (none: `krm local-cluster up` writes one)"
    raise KrmError("no config: pass --config FILE, set KRM_CONFIG, or create ./krm.toml. Local clusters:" + hint)


# ---------------------------------------------------------------------------------------- commands
