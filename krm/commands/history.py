"""`krm sql`, `krm timeline`, `krm lag`: the history tables, read without Spark. Each command's parser beside its handler."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from krm.commands.common import Subparsers, resolve_config


def cmd_timeline(args: argparse.Namespace) -> int:
    import datetime as dt

    from foundation.config import load_config
    from krm.lag import parse_since
    from krm.timeline import plot, read_states, timeline
    from pipelines.incident_store import IncidentStore
    from pipelines.tables import Tables

    config = load_config(resolve_config(args.config))
    tables = Tables(config.pipeline.data_dir)
    since = parse_since(args.since)
    now = dt.datetime.now(dt.timezone.utc)
    states = read_states(tables.partition_state, args.topic, args.partition, since, now=now, cluster=args.cluster)
    incidents = [i for i in IncidentStore(tables.incidents).read() if args.cluster is None or i.cluster == args.cluster]
    events = timeline(states, incidents, args.topic, args.partition, now - since)
    if args.plot:
        plot(states, events, args.topic, args.partition, Path(args.plot))
        print(f"wrote {args.plot} ({len(states)} polls, {len(events)} events)", file=sys.stderr)
    if args.json:
        print(json.dumps([e.to_json() for e in events], indent=2, default=str))
        return 0
    if not events:
        print(f"no history of {args.topic}-{args.partition} in the last {args.since}")
        return 0
    for e in events:
        print(f"{e.at.isoformat(timespec='seconds')}  {e.kind:<9}{e.what}")
    return 0


def cmd_sql(args: argparse.Namespace) -> int:
    import csv

    from foundation.config import load_config
    from krm.sql import locations, run
    from pipelines.tables import Tables

    config = load_config(resolve_config(args.config))
    result = run(args.query, locations(Tables(config.pipeline.data_dir)))
    if args.json:
        print(json.dumps([dict(zip(result.columns, r)) for r in result.rows], indent=2, default=str))
    elif args.csv:
        w = csv.writer(sys.stdout)
        w.writerow(result.columns)
        w.writerows(result.rows)
    else:
        from krm.output import print_table

        numeric = [i for i in range(len(result.columns))
                   if result.rows and all(isinstance(r[i], (int, float)) or r[i] is None for r in result.rows)]
        print_table(result.columns, [["" if v is None else v for v in r] for r in result.rows], right=numeric)
        print(f"({len(result.rows)} row{'s' if len(result.rows) != 1 else ''})", file=sys.stderr)
    return 0


PLOT_POINTS = 800  # per follower on a plot: about one per pixel column of the axes (krm/lag.py plot)


def cmd_lag(args: argparse.Namespace) -> int:
    from foundation.config import load_config
    import datetime as dt

    from krm.lag import incident_windows, parse_since, plot, read_history, to_json_obj
    from pipelines.incident_store import IncidentStore
    from pipelines.tables import Tables

    config = load_config(resolve_config(args.config))
    tables = Tables(config.pipeline.data_dir)
    since = parse_since(args.since)
    now = dt.datetime.now(dt.timezone.utc)
    history = read_history(tables.replica_lag, args.topic, args.partition, since, now=now, cluster=args.cluster,
                           max_points=None if args.raw else (PLOT_POINTS if args.plot else 2000))
    rows = history.samples
    if args.plot:
        incidents = [i for i in IncidentStore(tables.incidents).read()
                     if args.cluster is None or i.cluster == args.cluster]
        windows = incident_windows(incidents, args.topic, args.partition, now - since, now)
        plot(rows, args.topic, Path(args.plot), windows)
        print(f"wrote {args.plot} ({len(rows)} samples, {len(windows)} incident windows)", file=sys.stderr)
    if args.json:
        print(json.dumps([to_json_obj(r) for r in rows], indent=2))
        return 0
    if not rows:
        print(f"no follower lag samples for {args.topic} in the last {args.since}")
        return 0
    if history.resolution_s:
        print(f"(samples shown per {history.resolution_s}s bucket, worst of each; --raw for all)", file=sys.stderr)
    from krm.output import print_table

    print_table(["cluster", "partition", "broker", "samples", "latest", "max", "max s", "out of ISR", "max at"],
                [[s["cluster"], s["partition"], s["broker"], s["samples"], s["latest_lag_messages"], s["max_lag_messages"],
                  "-" if s["max_lag_seconds"] is None else f"{s['max_lag_seconds']:.1f}", s["samples_out_of_isr"],
                  s["max_lag_at"]] for s in history.summary], right=range(1, 8))
    return 0


def add(sub: Subparsers) -> None:
    """Add these commands to `krm`'s subcommands."""
    sq = sub.add_parser("sql", help="SQL over krm's tables (DuckDB over the Delta tables; no Spark)",
                        description="Each table is registered under its name: observations, partition_state, "
                                    "replica_lag, assignments, incidents, quarantine, data_quality. docs/queries.md has "
                                    "the questions operators ask, with their SQL.")
    sq.add_argument("query", metavar="QUERY")
    sq.add_argument("--config")
    fmt = sq.add_mutually_exclusive_group()
    fmt.add_argument("--json", action="store_true", help="a list of objects")
    fmt.add_argument("--csv", action="store_true", help="CSV with a header row")
    sq.set_defaults(func=cmd_sql, hard_exit=True)

    tl = sub.add_parser("timeline", help="a partition's history from the tables: state changes and its incidents")
    tl.add_argument("--config")
    tl.add_argument("--topic", required=True)
    tl.add_argument("--partition", type=int, required=True)
    tl.add_argument("--cluster", help="only this cluster (default: every cluster in the tables)")
    tl.add_argument("--since", default="2h", help="how far back: 90s, 15m, 2h, 2d (default 2h)")
    tl.add_argument("--plot", metavar="FILE.png", help="also draw the leader and the ISR size over time, incidents shaded")
    tl.add_argument("--json", action="store_true")
    tl.set_defaults(func=cmd_timeline, hard_exit=True)
    lg = sub.add_parser("lag", help="replication-lag history of a topic (the replica_lag Delta table)")
    lg.add_argument("--config")
    lg.add_argument("--topic", required=True)
    lg.add_argument("--partition", type=int)
    lg.add_argument("--cluster", help="only this cluster (default: every cluster in the table)")
    lg.add_argument("--since", default="1h", help="how far back: 90s, 15m, 1h, 2d (default 1h)")
    lg.add_argument("--plot", metavar="FILE.png",
                    help=f"also draw lag over time into this PNG (at most {PLOT_POINTS} points per follower, the worst "
                         "of each time bucket; with --json those are the samples listed)")
    lg.add_argument("--json", action="store_true",
                    help="samples oldest first: at most 2000 per follower (the worst of each time bucket)")
    lg.add_argument("--raw", action="store_true", help="every sample, not bucketed (large for long ranges)")
    lg.set_defaults(func=cmd_lag, hard_exit=True)
