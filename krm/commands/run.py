"""`krm run`, `krm collect`, `krm pipeline`: the long-running processes. Each command's parser beside its handler."""

from __future__ import annotations

import argparse
import logging

from krm.commands.common import Subparsers, resolve_config

log = logging.getLogger("krm")


def cmd_run(args: argparse.Namespace) -> int:
    from foundation.config import load_config
    from krm.runner import Monitor

    import faulthandler
    import signal

    config = load_config(resolve_config(args.config))
    if getattr(args, "cluster", None) or getattr(args, "shard", None):  # `krm collect`: this process's clusters
        config = config.only(args.cluster, args.shard)
    if getattr(args, "topic_share", None):  # `krm collect`: a share of each cluster's topics
        i, n = args.topic_share
        config = config.model_copy(update={"collector": config.collector.model_copy(update={"topic_share": f"{i}/{n}"})})
    faulthandler.register(signal.SIGUSR1, all_threads=True)  # `kill -USR1`: every thread's stack on stderr
    collect, pipeline = {"run": (True, True), "collect": (True, False), "pipeline": (False, True)}[args.command]
    monitor = Monitor(config, collect=collect, pipeline=pipeline).start()
    parts = [n for n, on in (("collector", collect), ("pipeline", pipeline)) if on]
    log.info("%s running for clusters %s%s", " + ".join(parts), ", ".join(c.name for c in config.clusters),
             f"; metrics at {monitor.metrics_url}")
    monitor.run_forever()
    return 0


def _shard(text: str) -> tuple[int, int]:
    i, _, n = text.partition("/")
    if not (i.isdigit() and n.isdigit() and 1 <= int(i) <= int(n)):
        raise argparse.ArgumentTypeError(f"expected I/N with 1 <= I <= N, such as 2/3; got {text!r}")
    return int(i), int(n)


def add(sub: Subparsers) -> None:
    """Add these commands to `krm`'s subcommands."""
    for name, helptext in (("run", "collectors + pipeline + /metrics in one process"),
                           ("collect", "only the collectors: poll clusters, publish observations"),
                           ("pipeline", "only the pipeline: observations -> incidents, Delta tables, /metrics")):
        r = sub.add_parser(name, help=helptext)
        r.add_argument("--config", help="krm TOML config (default: $KRM_CONFIG or ./krm.toml)")
        if name == "collect":
            r.add_argument("--cluster", action="append", metavar="NAME",
                           help="poll only this cluster of the config (repeatable): several collector processes, "
                                "on several hosts, share one observations topic and one pipeline")
            r.add_argument("--shard", type=_shard, metavar="I/N",
                           help="poll the I-th of N shares of the config's clusters (sorted by name, every N-th): "
                                "N processes with the same config and shards 1/N ... N/N poll each cluster once")
            r.add_argument("--topic-share", type=_shard, metavar="I/N",
                           help="poll only the I-th of N shares of each cluster's topics (by a hash of the name): N "
                                "processes with --topic-share 1/N ... N/N poll one cluster too large for one "
                                "(docs/scale.md); share 1 also speaks for the cluster (brokers, controller)")
        r.set_defaults(func=cmd_run)
