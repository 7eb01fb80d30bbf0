"""`krm setup`: the pinned jars for an installed krm. Each command's parser beside its handler."""

from __future__ import annotations

import argparse
from pathlib import Path
from krm.commands.common import Subparsers


# The script spark-submit runs (`krm setup --spark-submit-args`): a path, not an import (it imports krm.cli)
DRIVER_SCRIPT = Path(__file__).resolve().parents[1] / "submit" / "krm_driver.py"

def cmd_setup(args: argparse.Namespace) -> int:
    from foundation.jars import LOCAL_CLUSTER_GROUPS, PIPELINE_GROUPS, fetch
    from foundation.paths import jars_dir

    if args.spark_submit_args:  # `--jars <the pipeline's jars> <krm's entry script>`, before krm's own arguments
        from pipelines.session import pipeline_jars

        print(" ".join(["--jars", ",".join(str(j) for j in pipeline_jars()), str(DRIVER_SCRIPT)]))
        return 0
    target = Path(args.jars_dir) if args.jars_dir else jars_dir()
    groups = PIPELINE_GROUPS + (LOCAL_CLUSTER_GROUPS if args.local_cluster else ())
    print(f"fetching the pinned jars ({', '.join(groups)}) from {args.repository} into {target} ...")
    fetch(groups, args.repository, target)
    if args.jars_dir:
        print(f"point krm at them with KRM_JARS_DIR={target}")
    return 0


# ---------------------------------------------------------------------------------------- parser


def add(sub: Subparsers) -> None:
    """Add these commands to `krm`'s subcommands."""
    su = sub.add_parser("setup", help="fetch the pinned jars (Spark's Kafka source, Delta; --local-cluster: Kafka) "
                                      "for an installed krm; a checkout uses `make jars`")
    su.add_argument("--local-cluster", action="store_true",
                    help="also Kafka 3.9.1 and 4.4.0 and the JMX exporter, for `krm local-cluster` and `krm demo`")
    su.add_argument("--repository", default="https://repo1.maven.org/maven2", metavar="URL",
                    help="Maven repository to fetch from (a mirror; file:// works)")
    su.add_argument("--jars-dir", metavar="DIR", help="where to put them (default: $KRM_JARS_DIR, else $KRM_HOME/jars)")
    su.add_argument("--spark-submit-args", action="store_true",
                    help="fetch nothing; print `--jars <the pipeline's jars> <krm's entry script>` for "
                         "`spark-submit [options] $(krm setup --spark-submit-args) run --config krm.toml`")
    su.set_defaults(func=cmd_setup)
