"""`krm`: the command line. Subcommands parse arguments and call library code; no logic lives here.

Each command imports the code it runs inside its function: kafka-python, numpy and the pipeline load only
for the commands that need them, so `krm --help` and the light commands start at once. These imports are
not hiding circles: import-linter counts them like any other (pyproject.toml, "no circles")."""

from __future__ import annotations

import argparse
import json
import logging
import os
import sys
import time
from pathlib import Path
from typing import Any, Sequence

from foundation.errors import ConfigError, KrmError

log = logging.getLogger("krm")

# The script spark-submit runs (`krm setup --spark-submit-args`): a path, not an import (it imports this module)
DRIVER_SCRIPT = Path(__file__).resolve().parent / "submit" / "krm_driver.py"


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


def cmd_run(args: argparse.Namespace) -> int:
    from foundation.config import load_config
    from krm.runner import Monitor

    import faulthandler
    import signal

    config = load_config(resolve_config(args.config))
    if getattr(args, "cluster", None) or getattr(args, "shard", None):  # `krm collect`: this process's clusters
        config = config.only(args.cluster, args.shard)
    faulthandler.register(signal.SIGUSR1, all_threads=True)  # `kill -USR1`: every thread's stack on stderr
    collect, pipeline = {"run": (True, True), "collect": (True, False), "pipeline": (False, True)}[args.command]
    monitor = Monitor(config, collect=collect, pipeline=pipeline).start()
    parts = [n for n, on in (("collector", collect), ("pipeline", pipeline)) if on]
    log.info("%s running for clusters %s%s", " + ".join(parts), ", ".join(c.name for c in config.clusters),
             f"; metrics at {monitor.metrics_url}")
    monitor.run_forever()
    return 0


def cmd_incidents(args: argparse.Namespace) -> int:
    from foundation.config import load_config
    from pipelines.incident_store import IncidentStore, to_json_obj
    from pipelines.tables import Tables

    from pipelines.detectors.registry import INCIDENT_TYPES

    if args.action:
        if args.action[0] != "show" or len(args.action) != 2:
            raise KrmError(f"unknown incidents action {' '.join(args.action)!r}: use `krm incidents show INCIDENT_ID`")
        return cmd_incident_show(args, args.action[1])

    unknown = sorted(set(args.type or ()) - set(INCIDENT_TYPES))
    if unknown:
        raise KrmError(f"unknown incident type {', '.join(unknown)}; the types are {', '.join(INCIDENT_TYPES)}")
    config = load_config(resolve_config(args.config))
    incidents = IncidentStore(Tables(config.pipeline.data_dir).incidents).read(open_only=args.open, types=args.type)
    if args.json:
        print(json.dumps([to_json_obj(i) for i in incidents], indent=2))
        return 0
    if not incidents:
        print("no incidents" + (" open" if args.open else ""))
        return 0
    from krm.output import print_table

    rows = []
    for i in incidents:
        o = to_json_obj(i)
        subject = f"{i.topic}/{i.partition}" if i.topic is not None else (f"broker {i.broker}" if i.broker is not None else "-")
        if i.topic is not None and i.broker is not None:
            subject += f" broker {i.broker}"
        root = i.details.get("root_cause")
        cause = (i.cause or "") + (f" (root: {root})" if root and root != i.cause else "")
        rows.append([o["status"], i.severity, i.type, i.cluster, subject, cause, o["opened_at"], o["resolved_at"] or ""])
    print_table(["status", "severity", "type", "cluster", "subject", "cause", "opened", "resolved"], rows,
                styled=(0, 1))
    return 0


SHOW_CHANGES = 10  # state changes of the partition `krm incidents show` prints, up to the incident's opening and after


def cmd_incident_show(args: argparse.Namespace, incident_id: str) -> int:
    import datetime as dt

    from foundation.config import load_config
    from krm.timeline import changes, read_states
    from pipelines.detectors.registry import BY_TYPE
    from pipelines.incident_store import IncidentStore, to_json_obj
    from pipelines.tables import Tables

    config = load_config(resolve_config(args.config))
    tables = Tables(config.pipeline.data_dir)
    found = [i for i in IncidentStore(tables.incidents).read() if i.incident_id == incident_id]
    if not found:
        raise KrmError(f"no incident {incident_id!r} in {tables.incidents} (`krm incidents --json` lists them)")
    inc = found[0]
    rule = BY_TYPE.get(inc.type)
    history: list[Any] = []
    if inc.topic is not None and inc.partition is not None and tables.partition_state.is_table():
        now = dt.datetime.now(dt.timezone.utc)
        opened = dt.datetime.fromtimestamp(inc.opened_at_ms / 1000, dt.timezone.utc)
        states = read_states(tables.partition_state, inc.topic, inc.partition, now - opened + dt.timedelta(hours=1),
                             now=now, cluster=inc.cluster)
        history = changes(states)
        before = [e for e in history if e.at <= opened][-SHOW_CHANGES:]
        history = before + [e for e in history if e.at > opened][:SHOW_CHANGES]
    obj = to_json_obj(inc) | {"summary": rule.summary if rule else None, "routine": rule.routine if rule else None,
                              "changes": [e.to_json() for e in history]}
    if args.json:
        print(json.dumps(obj, indent=2, default=str))
        return 0
    where = f"{inc.topic}-{inc.partition}" if inc.topic is not None else (f"broker {inc.broker}" if inc.broker is not None
                                                                         else "cluster")
    print(f"{inc.severity.upper()} {inc.type} ({inc.cause or '-'}) on {inc.cluster} {where}  [{inc.status}]")
    print(f"  id          {inc.incident_id}")
    print(f"  opened      {obj['opened_at']}   last seen {obj['last_seen_at']}   resolved {obj['resolved_at'] or '-'}")
    if inc.broker is not None:
        print(f"  broker      {inc.broker}")
    for key in ("must_return", "holding_back", "out_of_sync", "leader", "isr", "elr", "replicas", "root_cause"):
        if inc.details.get(key) is not None:
            print(f"  {key:<12}{inc.details[key]}")
    if rule:
        print(f"  means       {rule.summary}")
        print(f"  routine     {rule.routine}")
    print("  details     " + json.dumps({k: v for k, v in inc.details.items()}, default=str))
    if history:
        print(f"  the partition's changes around the opening (up to {SHOW_CHANGES} before and after):")
        for e in history:
            print(f"    {e.at.isoformat(timespec='seconds')}  {e.what}")
    return 0


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


WAIT_INTERVAL_S = 2.0  # between two looks of `krm check ... --wait`


def _wait_until(look: Any, wait_s: float, what: str) -> Any:
    """Call `look()` -> (done, result, reason) until done or `wait_s` has passed; a failed look (the
    cluster briefly unreachable mid-restart) counts as not done. Progress goes to stderr each time the
    reason changes. Returns the last (done, result, reason)."""
    deadline = time.monotonic() + wait_s
    said = None
    while True:
        try:
            done, result, reason = look()
        except KrmError as e:
            done, result, reason = False, None, str(e)
        if done or time.monotonic() >= deadline:
            return done, result, reason
        if reason != said:
            print(f"waiting for {what}: {reason} ({deadline - time.monotonic():.0f}s left)", file=sys.stderr)
            said = reason
        time.sleep(min(WAIT_INTERVAL_S, max(0.0, deadline - time.monotonic())))


def _broker_snapshot(config: Any, cluster: str | None, broker: int) -> Any:
    """One look at the cluster (krm/snapshot.py) that knows `broker`, or a KrmError naming the known ones."""
    from krm.snapshot import from_cluster

    snap = from_cluster(config, cluster)
    if broker not in snap.known:
        raise KrmError(f"broker {broker} is not part of cluster {snap.name} (brokers: {sorted(snap.known)})")
    return snap


def cmd_check_shutdown(args: argparse.Namespace) -> int:
    from foundation.config import load_config
    from krm.shutdown_check import ORDER, UNSAFE, check, drain_plan

    config = load_config(resolve_config(args.config))

    def look() -> tuple[bool, Any, str]:
        snap = _broker_snapshot(config, args.cluster, args.broker)
        verdicts = check(args.broker, snap.topics, snap.live)
        unsafe = [v for v in verdicts if v.verdict in UNSAFE]
        reason = (f"{len(unsafe)} partition(s) would go offline or below min ISR, e.g. {unsafe[0].topic}/"
                  f"{unsafe[0].partition}: {unsafe[0].reason}" if unsafe else "safe")
        return not unsafe, (snap, verdicts), reason

    if args.wait is None:
        _, (snap, verdicts), _ = look()
    else:
        done, found, reason = _wait_until(look, args.wait, f"broker {args.broker} to be safe to stop")
        if found is None:  # never got a look at the cluster
            print(f"krm: not safe to stop broker {args.broker} after {args.wait:g}s: {reason}", file=sys.stderr)
            return 1
        snap, verdicts = found
        if not done:
            print(f"krm: not safe to stop broker {args.broker} after {args.wait:g}s: {reason}", file=sys.stderr)
    live, topics = snap.live, snap.topics
    plan = drain_plan(args.broker, verdicts, topics, live)
    unsafe = [v for v in verdicts if v.verdict in UNSAFE]
    if args.drain_plan:
        Path(args.drain_plan).write_text(json.dumps(plan, indent=2) + "\n")
    if args.json:
        print(json.dumps({"cluster": snap.name, "broker": args.broker, "safe": not unsafe,
                          "partitions": [{"topic": v.topic, "partition": v.partition, "verdict": v.verdict,
                                          "leader": v.leader, "new_leader": v.new_leader, "replicas": list(v.replicas),
                                          "isr": list(v.isr), "isr_after": list(v.isr_after),
                                          "effective_min_isr": v.effective_min_isr, "reason": v.reason}
                                         for v in verdicts],
                          "drain_plan": plan}, indent=2))
    else:
        counts = {k: sum(1 for v in verdicts if v.verdict == k) for k in ORDER}
        print(f"stopping broker {args.broker} of {snap.name}: " + ", ".join(f"{n} {k}" for k, n in counts.items() if n))
        for v in verdicts:
            if v.verdict != "follower_only":
                print(f"  {v.verdict:<28}{v.topic}/{v.partition:<6} {v.reason}")
        if unsafe:
            where = args.drain_plan or "FILE (with --drain-plan FILE)"
            print(f"UNSAFE: {len(unsafe)} partition(s). Drain first: kafka-reassign-partitions --execute "
                  f"--reassignment-json-file {where} ({len(plan['partitions'])} move(s))")
        else:
            print("safe to stop: no partition goes offline or below min ISR")
    return 1 if unsafe else 0


def cmd_check_ready(args: argparse.Namespace) -> int:
    from foundation.config import load_config
    from krm.ready_check import readiness

    config = load_config(resolve_config(args.config))

    def look() -> tuple[bool, Any, str]:
        snap = _broker_snapshot(config, args.cluster, args.broker)
        r = readiness(args.broker, snap.topics, snap.live)
        return r.ready, (snap, r), r.reason()

    if args.wait is None:
        done, found, reason = look()
    else:
        done, found, reason = _wait_until(look, args.wait, f"broker {args.broker} to be ready")
    if found is None:
        print(f"krm: broker {args.broker} not ready after {args.wait or 0:g}s: {reason}", file=sys.stderr)
        return 1
    snap, r = found
    if args.json:
        print(json.dumps({"cluster": snap.name, "broker": r.broker, "ready": r.ready, "registered": r.registered,
                          "partitions": r.replicas,
                          "out_of_isr": [{"topic": t, "partition": p} for t, p in r.out_of_isr],
                          "preferred_not_leading": [{"topic": t, "partition": p} for t, p in r.preferred_not_leading],
                          "reason": reason}, indent=2))
    else:
        print(("ready: " if r.ready else "NOT READY: ") + reason)
        if r.ready and r.preferred_not_leading:
            print(f"  it is the preferred leader of {len(r.preferred_not_leading)} partition(s) led elsewhere: Kafka's "
                  "auto leader rebalance moves them back, or run kafka-leader-election --election-type preferred")
    if not done and args.wait is not None:
        print(f"krm: broker {args.broker} not ready after {args.wait:g}s: {reason}", file=sys.stderr)
    return 0 if r.ready else 1


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


def _shard(text: str) -> tuple[int, int]:
    i, _, n = text.partition("/")
    if not (i.isdigit() and n.isdigit() and 1 <= int(i) <= int(n)):
        raise argparse.ArgumentTypeError(f"expected I/N with 1 <= I <= N, such as 2/3; got {text!r}")
    return int(i), int(n)


def _int_list(text: str) -> list[int]:
    try:
        return [int(x) for x in text.split(",") if x.strip()]
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected comma-separated broker ids, got {text!r}") from None


def _racks(text: str) -> dict[int, str]:
    try:
        return {int(b): r for b, r in (item.split(":", 1) for item in text.split(",") if item.strip())}
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected BROKER:RACK pairs like 0:a,1:b, got {text!r}") from None


def cmd_assign_simulate(args: argparse.Namespace) -> int:
    from collections import Counter

    from krm.assignment import assign

    result = assign(args.brokers, args.partitions, args.replication_factor, start_index=args.start_index,
                    replica_shift=args.replica_shift, start_partition=args.start_partition, racks=args.racks)
    if args.json:
        print(json.dumps({str(p): r for p, r in sorted(result.items())}))
        return 0
    for p, r in sorted(result.items()):
        print(f"partition {p:>4}: {r}")
    from krm.output import print_table

    leaders = Counter(r[0] for r in result.values())
    replicas = Counter(b for r in result.values() for b in r)
    print_table(["broker", "leaders", "replicas"], [[b, leaders[b], replicas[b]] for b in args.brokers],
                right=(0, 1, 2))
    return 0


def _snapshot(args: argparse.Namespace, with_sizes: bool = False):
    from krm import snapshot

    if args.assignment:
        return snapshot.from_file(args.assignment, args.brokers, getattr(args, "topic_name", None), args.racks)
    from foundation.config import load_config

    return snapshot.from_cluster(load_config(resolve_config(args.config)), args.cluster, with_sizes=with_sizes)


def cmd_assign_explain(args: argparse.Namespace) -> int:
    from pipelines.assignment_history import broker_joins, topic_history
    from krm.explain import explain

    args.topic_name = args.topic
    snap = _snapshot(args)
    t = snap.topic(args.topic)
    assignment = {p["partition"]: list(p["replicas"]) for p in t["partitions"]}
    leaders = {p["partition"]: p["leader"] for p in t["partitions"] if "leader" in p}
    history, joins = [], {}
    if not args.assignment:
        from foundation.config import load_config
        from pipelines.incident_store import IncidentStore
        from pipelines.tables import Tables

        tables = Tables(load_config(resolve_config(args.config)).pipeline.data_dir)
        history = topic_history(tables.assignments, snap.name, args.topic)
        joins = broker_joins(IncidentStore(tables.incidents).read(), snap.name)
    e = explain(args.topic, assignment, sorted(snap.live), mode=snap.mode, leaders=leaders or None,
                history=history, broker_joins=joins, next_n=args.next,
                first_seen=history[0]["observed_at"] if history else None)
    if args.json:
        print(json.dumps({"topic": e.topic, "cluster": snap.name, "partitions": e.partitions,
                          "replication_factor": e.replication_factor, "balanced": e.balanced, "brokers": e.brokers,
                          "segments": [{"first": s.first, "last": s.last, "origin": s.origin, "evidence": s.evidence,
                                        "replicas_by_broker": {str(b): n for b, n in sorted(s.replicas_by_broker.items())}}
                                       for s in e.segments],
                          "findings": e.findings,
                          "growth": [{"at": g["at"].isoformat(), "from": g["from"], "to": g["to"]} for g in e.history],
                          "next_partitions": {str(p): r for p, r in e.next_partitions.items()},
                          "next_note": e.next_note}, indent=2))
        return 0
    print(f"topic {e.topic} on {snap.name}: {e.partitions} partitions, replication factor {e.replication_factor}, "
          + ("balanced" if e.balanced else "UNEVEN"))
    from krm.output import print_table

    has_leaders = any("leaders" in b for b in e.brokers)
    print_table(["broker", "live", "replicas", "preferred"] + (["leading"] if has_leaders else []),
                [[b["id"], "yes" if b["live"] else "NO", b["replicas"], b["preferred_leaders"]]
                 + ([b.get("leaders", 0)] if has_leaders else []) for b in e.brokers],
                right=(0, 2, 3, 4), styled=(1,))
    print("placement:")
    for s in e.segments:
        print(f"  partitions {s.first}-{s.last}: {s.origin} - {s.evidence}")
    for g in e.history:
        print(f"  history: grew {g['from']} -> {g['to']} partitions at {g['at']:%Y-%m-%d %H:%M:%S} UTC")
    print("why:")
    for f in e.findings:
        print(f"  - {f}")
    if e.next_partitions:
        print(f"next {len(e.next_partitions)} partition(s) if expanded now ({e.next_note}):")
        for p, r in e.next_partitions.items():
            print(f"  partition {p}: {r}")
    return 0


def cmd_plan_rebalance(args: argparse.Namespace) -> int:
    from krm.rebalance import broker_counts, plan_rebalance

    args.topic_name = args.topic[0] if args.topic and len(args.topic) == 1 else None
    snap = _snapshot(args, with_sizes=not args.assignment)
    exclude = set(args.exclude_broker or [])
    unknown = exclude - snap.live - {b for r in snap.assignment().values() for b in r}
    if unknown:
        raise KrmError(f"--exclude-broker {sorted(unknown)}: not a broker of {snap.name}")
    plan = plan_rebalance(snap.assignment(), snap.live, exclude=exclude, topics=args.topic,
                          racks=snap.racks, sizes=snap.sizes)
    doc = plan.kafka_json()
    if args.output:
        Path(args.output).write_text(json.dumps(doc, indent=2) + "\n")
    brokers = sorted(snap.live | exclude)
    b0, b1 = broker_counts(plan.before, brokers), broker_counts(plan.after, brokers)
    summary = {"cluster": snap.name, "partitions_changed": len(plan.changed), "replica_moves": plan.replica_moves,
               "minimum_moves": plan.lower_bound, "bytes_moved": plan.bytes_moved,
               "preferred_leader_changes": plan.leader_changes, "unresolved": plan.unresolved,
               "brokers": [{"id": b, "replicas_before": b0[b][0], "replicas_after": b1[b][0],
                            "preferred_before": b0[b][1], "preferred_after": b1[b][1]} for b in b0]}
    if args.json:
        print(json.dumps({**summary, "plan": doc}, indent=2))
        return 0
    size = "unknown (from a file)" if plan.bytes_moved is None else _human_bytes(plan.bytes_moved) + snap.sizes_note
    print(f"{snap.name}: {plan.replica_moves} replica move(s) (minimum {plan.lower_bound}) in {len(plan.changed)} "
          f"partition(s), data to copy {size}, {plan.leader_changes} preferred-leader change(s)")
    from krm.output import print_table

    print_table(["broker", "replicas", "preferred leaders", ""],
                [[b, f"{b0[b][0]} -> {b1[b][0]}", f"{b0[b][1]} -> {b1[b][1]}", "(excluded)" if b in exclude else ""]
                 for b in b0], right=(0, 1, 2))
    for u in plan.unresolved:
        print(f"  not reached: {u}")
    if args.output:
        print(f"wrote {args.output}: kafka-reassign-partitions --execute --reassignment-json-file {args.output} "
              "(add --throttle BYTES/S for large moves), then --verify; preferred leaders take effect at the next "
              "preferred election (kafka-leader-election --election-type PREFERRED)")
    elif plan.changed:
        print("(nothing written: --output FILE writes the plan)")
    return 0


def _human_bytes(n: int) -> str:
    size = float(n)
    for unit in ("B", "KiB", "MiB", "GiB", "TiB"):
        if size < 1024 or unit == "TiB":
            return f"{size:.0f} {unit}" if unit == "B" else f"{size:.1f} {unit}"
        size /= 1024
    return str(size)


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


def _placement_source(p: argparse.ArgumentParser) -> None:
    p.add_argument("--config", help="krm TOML config: read the live cluster (default: $KRM_CONFIG or ./krm.toml)")
    p.add_argument("--cluster", help="which cluster of the config (default: the first)")
    p.add_argument("--assignment", metavar="FILE", help="read an assignment file instead of a live cluster "
                   "(kafka-reassign-partitions JSON, or krm assign simulate --json output)")
    p.add_argument("--brokers", type=_int_list, help="with --assignment: the live brokers (default: those holding replicas)")
    p.add_argument("--racks", type=_racks, help="with --assignment: rack of every broker, e.g. 0:a,1:a,2:b")


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
    p = argparse.ArgumentParser(prog="krm",
                                description="kafka-replication-monitor: Kafka replication health, live and historical.")
    p.add_argument("--version", action="version", version=f"krm {_version()}")
    p.add_argument("--log-level", default="INFO", choices=["DEBUG", "INFO", "WARNING", "ERROR"])
    p.add_argument("--log-format", default="text", choices=["text", "json"],
                   help="json: one JSON object per log line (ts, level, logger, message, exception)")
    sub = p.add_subparsers(dest="command", required=True, metavar="COMMAND")

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
        r.set_defaults(func=cmd_run)

    asg = sub.add_parser("assign", help="Kafka's replica assignment, reproduced exactly")
    asub = asg.add_subparsers(dest="action", required=True, metavar="ACTION")
    sim = asub.add_parser("simulate", help="where AdminUtils.assignReplicasToBrokers puts each replica",
                          description="Kafka's ZooKeeper-mode assignment (topic creation, partition expansion, "
                                      "reassignment --generate). The broker list order matters: creation uses the "
                                      "controller's unsorted list, expansion a sorted one (docs/cases/partition-expansion.md).")
    sim.add_argument("--brokers", type=_int_list, required=True, help="broker ids in Kafka's order, e.g. 0,1,4,2,3")
    sim.add_argument("--partitions", type=int, required=True, help="how many partitions to place")
    sim.add_argument("--replication-factor", type=int, required=True)
    sim.add_argument("--start-index", type=int, default=-1, help="first replica's start index (default: random, as Kafka)")
    sim.add_argument("--replica-shift", type=int, help="initial replica shift (default: the start index, as Kafka)")
    sim.add_argument("--start-partition", type=int, default=-1, help="first partition id (expansion: current count)")
    sim.add_argument("--racks", type=_racks, help="rack of every broker, e.g. 0:a,1:a,2:b (rack-aware placement)")
    sim.add_argument("--json", action="store_true")
    sim.set_defaults(func=cmd_assign_simulate)
    ex = asub.add_parser("explain", help="a topic's replicas and preferred leaders per broker, and why they are uneven",
                         description="Per-broker counts, which partitions Kafka's expansion rule placed "
                                     "(docs/cases/partition-expansion.md) and "
                                     "which brokers joined later (assignment history, when the pipeline has it), and "
                                     "where the next partitions would land.")
    _placement_source(ex)
    ex.add_argument("--topic", required=True)
    ex.add_argument("--next", type=int, default=3, metavar="N", help="show where the next N partitions would go (default 3)")
    ex.add_argument("--json", action="store_true")
    ex.set_defaults(func=cmd_assign_explain, hard_exit=True)

    pl = sub.add_parser("plan", help="plans for kafka-reassign-partitions")
    pls = pl.add_subparsers(dest="action", required=True, metavar="ACTION")
    rb = pls.add_parser("rebalance", help="even replicas and preferred leaders per broker with the fewest replica moves",
                        description="Per topic and cluster-wide; racks respected; --exclude-broker drains brokers "
                                    "before maintenance. Writes the JSON kafka-reassign-partitions --execute reads.")
    _placement_source(rb)
    rb.add_argument("--topic", action="append", help="only move partitions of this topic (repeatable; default all)")
    rb.add_argument("--exclude-broker", type=int, action="append", metavar="ID",
                    help="move every replica off this broker and place none on it (repeatable)")
    rb.add_argument("--output", metavar="FILE", help="write the reassignment JSON here")
    rb.add_argument("--json", action="store_true", help="print the summary and the plan as JSON")
    rb.set_defaults(func=cmd_plan_rebalance, hard_exit=True)

    i = sub.add_parser("incidents", help="incidents from the Delta table; `incidents show ID`: one incident whole",
                       description="List incidents, or `krm incidents show INCIDENT_ID` for one: its fields, what its "
                                   "type means, and its partition's state changes around its opening.")
    i.add_argument("action", nargs="*", metavar="show INCIDENT_ID", help="show one incident whole")
    i.add_argument("--config")
    i.add_argument("--open", action="store_true", help="only open incidents")
    i.add_argument("--type", action="append", help="only this incident type (repeatable)")
    i.add_argument("--json", action="store_true")
    i.set_defaults(func=cmd_incidents, hard_exit=True)

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

    chk = sub.add_parser("check", help="pre-maintenance checks")
    chks = chk.add_subparsers(dest="action", required=True, metavar="ACTION")
    sd = chks.add_parser("shutdown", help="what stopping one broker would do to each of its partitions "
                                          "(exit 1 when unsafe)")
    sd.add_argument("--broker", type=int, required=True, metavar="ID")
    sd.add_argument("--config")
    sd.add_argument("--cluster", help="which configured cluster (default: the first)")
    sd.add_argument("--drain-plan", metavar="FILE", help="write the suggested kafka-reassign-partitions JSON here")
    sd.add_argument("--wait", type=float, metavar="SECONDS",
                    help="block until stopping the broker is safe (exit 0) or SECONDS have passed (exit 1, with the "
                         "reason): the gate of a rolling restart")
    sd.add_argument("--json", action="store_true")
    sd.set_defaults(func=cmd_check_shutdown)
    rd = chks.add_parser("ready", help="is the broker registered and back in every ISR it belongs to (exit 1 when not)",
                         description="After a broker restart: ready when the broker is registered and in the ISR of "
                                     "every partition it is a full replica of, so the next broker of a rolling restart "
                                     "may stop. Preferred leadership is reported, not waited for.")
    rd.add_argument("--broker", type=int, required=True, metavar="ID")
    rd.add_argument("--config")
    rd.add_argument("--cluster", help="which configured cluster (default: the first)")
    rd.add_argument("--wait", type=float, metavar="SECONDS", help="block until ready (exit 0) or SECONDS have passed "
                                                                  "(exit 1, with the reason)")
    rd.add_argument("--json", action="store_true")
    rd.set_defaults(func=cmd_check_ready)

    mt = sub.add_parser("maintain", help="history tables: retention, compaction, vacuum; incidents: vacuum "
                                         "(run beside the pipeline)")
    mt.add_argument("--config")
    mt.add_argument("--retention-days", type=int, default=30, help="keep this many days of history (default 30)")
    mt.add_argument("--vacuum-hours", type=float, default=24.0,
                    help="remove unreferenced files older than this (default 24 h: readers in flight keep working)")
    mt.set_defaults(func=cmd_maintain, hard_exit=True)

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
