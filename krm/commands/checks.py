"""`krm check shutdown` and `krm check ready`: the rolling-restart gates. Each command's parser beside its handler."""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable, TypeVar

from foundation.errors import KrmError
from krm.commands.common import Subparsers, resolve_config

if TYPE_CHECKING:
    from foundation.config import Config
    from krm.snapshot import ClusterSnapshot


T = TypeVar("T")

WAIT_INTERVAL_S = 2.0  # between two looks of `krm check ... --wait`


def _wait_until(look: Callable[[], tuple[bool, T, str]], wait_s: float, what: str) -> tuple[bool, T | None, str]:
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


def _broker_snapshot(config: Config, cluster: str | None, broker: int) -> ClusterSnapshot:
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


def add(sub: Subparsers) -> None:
    """Add these commands to `krm`'s subcommands."""
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
