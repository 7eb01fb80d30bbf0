"""`krm`: the command line. Subcommands parse arguments and call library code; no logic lives here.
The commands live in krm/commands/, a module per group, each parser beside its handler; the lab's come
through the `krm.commands` entry point (add_commands_from_outside).

Each command imports the code it runs inside its function: kafka-python, numpy and the pipeline load only
for the commands that need them, so `krm --help` and the light commands start at once. These imports are
not hiding circles: import-linter counts them like any other (pyproject.toml, "no circles")."""

from __future__ import annotations

import argparse
import json
import logging
import os
import sys
from typing import Any, Sequence

from foundation.errors import KrmError

log = logging.getLogger("krm")


class JsonFormatter(logging.Formatter):
    """One JSON object per line (`--log-format json`), for log shippers: ts, level, logger, message,
    and the exception's type and text when there is one."""

    def format(self, record: logging.LogRecord) -> str:
        import datetime as dt

        out = {"ts": dt.datetime.fromtimestamp(record.created, dt.timezone.utc).isoformat(timespec="milliseconds"),
               "level": record.levelname, "logger": record.name, "message": record.getMessage()}
        if record.exc_info and record.exc_info[1] is not None:
            out["exception"] = f"{type(record.exc_info[1]).__name__}: {record.exc_info[1]}"
            out["traceback"] = self.formatException(record.exc_info)
        return json.dumps(out, ensure_ascii=False)


def _setup_logging(level: str, fmt: str = "text") -> None:
    handler = logging.StreamHandler()
    handler.setFormatter(JsonFormatter() if fmt == "json" else
                         logging.Formatter("%(asctime)s %(levelname)s %(name)s: %(message)s"))
    logging.basicConfig(level=getattr(logging, level.upper()), handlers=[handler])
    # kafka-python reports every refused connection; krm logs the degraded state once instead.
    logging.getLogger("kafka").setLevel(logging.CRITICAL)
    logging.getLogger("kazoo").setLevel(logging.WARNING)
    # great-expectations logs hundreds of INFO lines on import and on every run: only when asked (DEBUG)
    logging.getLogger("great_expectations").setLevel(logging.DEBUG if level.upper() == "DEBUG" else logging.WARNING)
    logging.getLogger("py4j").setLevel(logging.WARNING)

def _version() -> str:
    """The installed distribution's version (pyproject.toml), also from a checkout installed with -e."""
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("kafka-replication-monitor")
    except PackageNotFoundError:
        return "unknown (not installed)"


def add_commands_from_outside(sub: Any) -> None:
    """Commands other packages plug in through the `krm.commands` entry point (pyproject.toml): the lab's
    `local-cluster`, `simulate` and `demo` (lab/commands.py). The product never imports them; a package
    that fails to load costs its own commands, said on stderr, not the others."""
    from importlib.metadata import entry_points

    for ep in entry_points(group="krm.commands"):
        try:
            ep.load()(sub)
        except Exception as e:  # noqa: BLE001 - e.g. the lab's optional dependencies missing
            print(f"krm: commands of {ep.value} not available ({type(e).__name__}: {e})", file=sys.stderr)

def build_parser() -> argparse.ArgumentParser:
    from krm.commands import GROUPS

    p = argparse.ArgumentParser(prog="krm",
                                description="kafka-replication-monitor: Kafka replication health, live and historical.")
    p.add_argument("--version", action="version", version=f"krm {_version()}")
    p.add_argument("--log-level", default="INFO", choices=["DEBUG", "INFO", "WARNING", "ERROR"])
    p.add_argument("--log-format", default="text", choices=["text", "json"],
                   help="json: one JSON object per log line (ts, level, logger, message, exception)")
    sub = p.add_subparsers(dest="command", required=True, metavar="COMMAND")

    for group in GROUPS:
        group.add(sub)
    add_commands_from_outside(sub)
    return p


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    _setup_logging(args.log_level, args.log_format)
    try:
        rc = int(args.func(args) or 0)
    except KrmError as e:
        print(f"krm: error: {e}", file=sys.stderr)
        rc = 2
    except KeyboardInterrupt:
        rc = 130
    if getattr(args, "hard_exit", False) and argv is None:
        _exit_now(rc)
    return rc


def _exit_now(rc: int) -> None:
    """Exit without running native destructors, for commands that read Delta tables through pyarrow.

    pyarrow's worker threads can still be joinable when the interpreter tears down its C++ statics,
    which aborts with "terminate called without an active exception" *after* the output was printed
    (delta-io/delta-rs#2184, apache/arrow#34314): seen here as a flaky non-zero exit of
    `krm incidents`. Nothing is left to flush once stdout and stderr are.
    """
    sys.stdout.flush()
    sys.stderr.flush()
    logging.shutdown()
    os._exit(rc)


if __name__ == "__main__":
    sys.exit(main())
