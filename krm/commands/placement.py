"""`krm assign simulate|explain` and `krm plan rebalance`: Kafka's placement, reproduced and planned.
Each command's parser beside its handler."""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from foundation.errors import KrmError
from krm.commands.common import Subparsers, resolve_config


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


def _placement_source(p: argparse.ArgumentParser) -> None:
    p.add_argument("--config", help="krm TOML config: read the live cluster (default: $KRM_CONFIG or ./krm.toml)")
    p.add_argument("--cluster", help="which cluster of the config (default: the first)")
    p.add_argument("--assignment", metavar="FILE", help="read an assignment file instead of a live cluster "
                   "(kafka-reassign-partitions JSON, or krm assign simulate --json output)")
    p.add_argument("--brokers", type=_int_list, help="with --assignment: the live brokers (default: those holding replicas)")
    p.add_argument("--racks", type=_racks, help="with --assignment: rack of every broker, e.g. 0:a,1:a,2:b")


def add(sub: Subparsers) -> None:
    """Add these commands to `krm`'s subcommands."""
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
