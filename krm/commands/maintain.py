"""`krm maintain`: retention, compaction and vacuum of krm's tables. Each command's parser beside its handler."""

from __future__ import annotations

import argparse
import sys

from foundation.errors import ConfigError
from krm.commands.common import Subparsers, resolve_config


MIN_VACUUM_HOURS = 1.0  # far longer than any micro-batch's write-then-commit


def cmd_maintain(args: argparse.Namespace) -> int:
    from foundation.config import load_config
    from krm.maintain import VACUUM_ONLY, maintain
    from pipelines.tables import Tables

    if args.vacuum_hours < MIN_VACUUM_HOURS:
        raise ConfigError(f"--vacuum-hours must be at least {MIN_VACUUM_HOURS:g}, got {args.vacuum_hours:g}: a shorter "
                          "one could delete the files of a batch the pipeline is still committing (they are "
                          "unreferenced until its commit)")
    config = load_config(resolve_config(args.config))
    root = Tables(config.pipeline.data_dir).root / "tables"
    if not root.is_local:
        print(f"krm: {root} is on an object store, where Delta cannot arbitrate between this run's commits and the "
              "pipeline's: run `krm maintain` with the pipeline stopped", file=sys.stderr)
    reports = maintain(root, args.retention_days, args.vacuum_hours)
    if not reports:
        print(f"no history tables under {root} yet")
    for r in reports:
        kept = "kept whole" if r.table in VACUUM_ONLY else f"{r.deleted_rows} rows past retention deleted"
        state = f"ERROR {r.error}" if r.error else (f"{kept}, files {r.files_before} -> {r.files_after}, "
                                                    f"{r.vacuumed_files} vacuumed")
        print(f"{r.table:<16}{state}  ({r.seconds:.1f}s)")
    return 1 if any(r.error for r in reports) else 0


def add(sub: Subparsers) -> None:
    """Add these commands to `krm`'s subcommands."""
    mt = sub.add_parser("maintain", help="history tables: retention, compaction, vacuum; incidents: vacuum "
                                         "(run beside the pipeline)")
    mt.add_argument("--config")
    mt.add_argument("--retention-days", type=int, default=30, help="keep this many days of history (default 30)")
    mt.add_argument("--vacuum-hours", type=float, default=24.0,
                    help="remove unreferenced files older than this (default 24 h: readers in flight keep working)")
    mt.set_defaults(func=cmd_maintain, hard_exit=True)
