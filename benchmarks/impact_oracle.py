"""Pages against client harm over random faults: does krm page exactly when clients are hurt?

A real 4-broker cluster at Kafka's default sessions (ZooKeeper 18 s, KRaft broker session 9 s), a
topic of 8 partitions (RF 3, min.insync.replicas 2), krm run in-process (the default 2 s poll) with
its observations on a 1-broker cluster of their own, and a real Prometheus evaluating the shipped
rules every second. The judge is one acks=all producer writing to every partition every 200 ms
(lab/client_judge.py): a partition is hurt in a step when its writes fail or take longer than 2 s
for 3 s or more in a row. The first step starts once krm's view of the cluster has been fresh in
Prometheus for WATCHING_S, so no fault is timed against krm's own start-up.

Each step picks, at random (seeded): SIGKILL a broker then restart it, SIGSTOP then SIGCONT (2-15 s),
a controlled stop then start, a gray cut of its listener (nftables, 15 s), or nothing (quiet); with
`--faults` also `repl_cut` (the broker's packets to the other brokers dropped for 30 s while everything
else reaches it: lab/packet_filter.py, cgroup v2 and nftables), `disk_fill` (every broker's only log
directory on a 128 MB tmpfs of its own; a step writes a file beside the broker's logs at 2 MB/s until the
filesystem is full, Kafka fails the directory and halts the broker; then the file goes and the broker is
started again) and `slow_cpu` (the broker's JVM capped at `--slow-cpu-pct` % of a core for 30 s, lab/cpu_cap.py:
it stays registered and answers, late; harmful at 2 %, harmless at 10 % on this machine) and `slow_disk` (each
write and sync of the broker's log directory waits `--slow-disk-ms` for 30 s: every broker's log directory
on the lab's FUSE delay layer, lab/slow_disk.py). Then
it waits until the clients are fine again and Kafka's view is settled (every ISR whole), and until
no critical alert fires. Per step: hurt & paged, hurt & silent, paged & nobody hurt, quiet (neither);
per hurt partition, whether a critical page named it (its topic and partition, or its leader or an ISR
member as the broker); and the time from the clients' recovery to the last page resolving, with the
pages seen last and the step's moments (fault undone, clients last hurt, page last seen) to explain it.

Per fault kind (`by_fault`): its steps and verdicts, and the time from the first hurt write to the first
critical page (p50 / max; negative: paged before the harm). For the slow kinds also: whether BROKER_SLOW named
the step's broker at any severity (`krm_broker_slow` in Prometheus), how soon after the fault, with which causes,
and any other broker it named.

Usage: .venv/bin/python benchmarks/impact_oracle.py --mode zk|kraft --steps N --seed S [--faults KIND,...] [--json]
(or `--plan KIND:BROKER[:SECONDS],...` to replay chosen steps, e.g. the ones a random run found wanting)
(the last stdout line with --json: one JSON object; needs root and nftables for the cuts). The kinds:
kill, pause, stop, gray, none (the default draw: a seed keeps its steps), repl_cut, disk_fill, slow_cpu
(a plan's `slow_cpu:BROKER:PCT`), slow_disk (`slow_disk:BROKER:MS`). `--hurt-latency S` (default 2): a write
slower than this is a hurt one, and it is krm's latency objective for the cluster too.
"""

from __future__ import annotations

import argparse
import json
import logging
import random
import shutil
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any


import requests

from foundation.config import load_config
from krm.runner import Monitor
from lab.client_judge import ClientJudge
from lab.harness import kafka_admin
from lab.local_cluster import LocalCluster, free_port

TOPIC = "oracle"
PARTITIONS = 8
ACTIONS = ("kill", "pause", "stop", "cut", "quiet")  # the default draw, in this order (a seed keeps its steps)
FAULTS = {"kill": "kill", "pause": "pause", "stop": "stop", "gray": "cut", "none": "quiet", "repl_cut": "repl_cut",
          "disk_fill": "disk_fill", "slow_cpu": "slow_cpu", "slow_disk": "slow_disk"}
SLOW_S = 30.0  # how long a slow_cpu or slow_disk step keeps the broker slow
KIND_OF = {action: kind for kind, action in FAULTS.items()}
REPL_CUT_S = 30.0
DISK_MB = 128  # each broker's log directory, with --faults disk_fill
FILL_MB_S = 2.0
RULES = Path(__file__).resolve().parents[1] / "dashboards" / "prometheus" / "krm-alerts.yml"
HURT_RUN_S = 3.0


@dataclass
class Step:
    n: int
    action: str
    broker: int | None
    controller: int | None = None  # ZooKeeper mode: the active controller when the step began
    cpu_pct: float | None = None  # slow_cpu: the cap
    disk_ms: int | None = None  # slow_disk: the delay
    slow_first_s: float | None = None  # krm_broker_slow first named the step's broker (any severity)
    slow_said: list[str] = field(default_factory=list)  # every krm_broker_slow seen: broker:cause:severity
    hurt: list[int] = field(default_factory=list)
    named: list[int] = field(default_factory=list)
    pages: list[str] = field(default_factory=list)
    verdict: str = ""
    page_resolved_after_recovery_s: float | None = None  # from the clients' last hurt write's send time
    page_resolved_after_acks_resumed_s: float | None = None  # from their first quick acknowledgement after it
    last_pages: list[str] = field(default_factory=list)  # the pages still firing when the last one was seen
    # each page's first and last sight, seconds from the fault: a page beside the step's cause, early or in its tail
    page_seen_s: dict[str, list[float]] = field(default_factory=dict)
    fault_s: float | None = None  # seconds from the step's start: the fault undone (restart, SIGCONT, heal)
    recovered_s: float | None = None  # the clients' last hurt write
    acks_resumed_s: float | None = None  # the clients fine again (ClientJudge.recovered_at)
    last_page_s: float | None = None  # a critical page last seen firing
    writes: dict[int, tuple[int, int]] = field(default_factory=dict)  # partition -> (quick, hurt) writes in the step
    first_hurt_s: float | None = None  # the first hurt write's send time
    first_page_s: float | None = None  # a critical page first seen firing
    page_delay_s: float | None = None  # first hurt write -> first critical page (negative: paged before the harm)


def kafka_view(cluster: LocalCluster, avoid: int | None = None) -> dict[int, tuple[int, list[int]]]:
    from kafka.admin import KafkaAdminClient

    others = ",".join(f"127.0.0.1:{cluster.broker(b).port}" for b in cluster.broker_ids if b != avoid)
    admin = KafkaAdminClient(bootstrap_servers=others, client_id="krm-oracle", request_timeout_ms=5000)
    try:
        (t,) = admin.describe_topics([TOPIC])
        return {p["partition"]: (p["leader"], list(p["isr"])) for p in t["partitions"]}
    finally:
        admin.close()


def settled(cluster: LocalCluster) -> bool:
    try:
        view = kafka_view(cluster)
    except Exception:  # noqa: BLE001 - a broker still starting
        return False
    return len(view) == PARTITIONS and all(leader >= 0 and len(isr) == 3 for leader, isr in view.values())


def critical_firing(prometheus: str) -> list[dict[str, str]]:
    alerts = requests.get(f"{prometheus}/api/v1/alerts", timeout=5).json()["data"]["alerts"]
    return [a["labels"] for a in alerts if a["state"] == "firing" and a["labels"].get("severity") == "critical"]


WATCHING_S = 20.0  # krm watching this long before the first fault: a deployed pipeline runs long before one


def watching(prometheus: str) -> bool:
    """krm's view of the cluster is fresh and Prometheus has it: the pipeline has run its first micro-batches,
    which come a while after Monitor.start returns."""
    answer = requests.get(f"{prometheus}/api/v1/query", params={"query": 'krm_cluster_view_stale{cluster="oracle"}'},
                          timeout=5).json()["data"]["result"]
    return [r["value"][1] for r in answer] == ["0"]


def wait(check: Any, timeout_s: float, every_s: float = 0.5) -> bool:
    end = time.monotonic() + timeout_s
    while time.monotonic() < end:
        if check():
            return True
        time.sleep(every_s)
    return False


def names(labels: dict[str, str], partition: int, before: dict[int, tuple[int, list[int]]]) -> bool:
    """A page names a partition: by topic and partition, or by a broker that led it or sat in its ISR."""
    if labels.get("topic") == TOPIC and labels.get("partition") == str(partition):
        return True
    broker = labels.get("broker")
    leader, isr = before.get(partition, (-1, []))
    return broker is not None and broker.isdigit() and (int(broker) == leader or int(broker) in isr)


@dataclass(frozen=True)
class Fault:
    """One step's fault: the action (FAULTS' values), its broker, and how long a pause lasts."""

    action: str
    broker: int | None
    pause_s: float | None = None
    cpu_pct: float | None = None  # slow_cpu: the cap, in % of one core
    disk_ms: int | None = None  # slow_disk: the delay of each data operation on its log directory


def draw(rng: random.Random, brokers: list[int], actions: tuple[str, ...] = ACTIONS, cpu_pct: float = 2.0,
         disk_ms: int = 500) -> Fault:
    """A random fault (the draw order keeps a seed's steps: action, broker, a pause's length)."""
    action = rng.choice(actions)
    broker = rng.choice(brokers) if action != "quiet" else None
    return Fault(action, broker, rng.uniform(2, 15) if action == "pause" else None,
                 cpu_pct if action == "slow_cpu" else None, disk_ms if action == "slow_disk" else None)


CONTROLLER = -1  # a plan's broker `c`: the active controller when the step begins (ZooKeeper mode)


def parse_plan(text: str) -> list[Fault]:
    """`--plan`: KIND:BROKER[:SECONDS],... (a pause's length; `none` takes no broker; BROKER `c`: the active
    controller, ZooKeeper mode), e.g. repl_cut:c,stop:3."""
    out = []
    for item in (i.strip() for i in text.split(",") if i.strip()):
        kind, *rest = item.split(":")
        if (kind not in FAULTS or (kind != "none" and not rest)
                or len(rest) > (2 if kind in ("pause", "slow_cpu", "slow_disk") else 1)
                or (rest and rest[0] != "c" and not rest[0].isdigit())):
            raise ValueError(f"{item!r}: expected KIND:BROKER (pause:BROKER:SECONDS, slow_cpu:BROKER:PCT, "
                             "slow_disk:BROKER:MS; BROKER a number "
                             f"or c), KIND one of {', '.join(FAULTS)}")
        broker = (CONTROLLER if rest[0] == "c" else int(rest[0])) if rest else None
        more = float(rest[1]) if len(rest) > 1 else None
        out.append(Fault(FAULTS[kind], broker, (more or 5.0) if kind == "pause" else None,
                         (more or 2.0) if kind == "slow_cpu" else None,
                         int(more or 500) if kind == "slow_disk" else None))
    return out


def _said(p: dict[str, Any], at_ms: int) -> str:
    """One partition of a topic record, short: leader, ISR, HW, each replica's LEO, what the stall rules read."""
    leos = {o["broker"]: o["log_end_offset"] for o in p.get("replica_offsets") or ()}
    out = f"{p['partition']}:L{p['leader']} isr{p['isr']} hw{p.get('high_watermark')} leo{leos}"
    if p.get("stalled_followers"):
        out += f" stalled{p['stalled_followers']}"
    if p.get("hw_stalled_since_ms") is not None:
        out += f" held{at_ms - p['hw_stalled_since_ms']}ms"
    if p.get("leader_error"):
        out += f" {p['leader_error']}{at_ms - p['leader_error_since_ms']}ms"
    return out


def tap_records(bootstrap_servers: str, topic: str, stop: threading.Event) -> None:
    """Log what krm's collector published about the oracle's topic, a line per record (with --log): what
    a page, or its absence, rested on."""
    from kafka import KafkaConsumer

    log = logging.getLogger("oracle.records")
    consumer = KafkaConsumer(topic, bootstrap_servers=bootstrap_servers, auto_offset_reset="latest",
                             consumer_timeout_ms=500, client_id="krm-oracle-tap")
    try:
        while not stop.is_set():
            for msg in consumer:
                rec = json.loads(msg.value)
                ts = rec.get("topic_state")
                if rec.get("kind") != "topic" or not ts or ts.get("topic") != TOPIC:
                    continue
                parts = " ".join(_said(p, rec["observed_at_ms"]) for p in ts.get("partitions") or ())
                log.info("%s poll %s at %s live %s unreachable %s: %s", rec.get("source"), rec.get("poll_id"),
                         rec.get("observed_at_ms"), ts.get("live_brokers"), ts.get("unreachable_brokers"), parts)
    finally:
        consumer.close()


def controller_of(cluster: LocalCluster) -> int | None:
    """The active controller as a client sees it (KRaft: a broker standing in for it in the answer)."""
    try:
        admin = kafka_admin(cluster, timeout_s=10, client_id="krm-oracle")
    except Exception:  # noqa: BLE001 - informational only
        return None
    try:
        return int(admin.describe_cluster()["controller_id"])
    except Exception:  # noqa: BLE001
        return None
    finally:
        admin.close()


def slow_firing(prometheus: str) -> list[dict[str, str]]:
    """The brokers BROKER_SLOW names now, at any severity (its series, not an alert: a warning's alert waits)."""
    answer = requests.get(f"{prometheus}/api/v1/query", params={"query": "krm_broker_slow == 1"},
                          timeout=5).json()["data"]["result"]
    return [r["metric"] for r in answer]


def run_step(n: int, fault: Fault, cluster: LocalCluster, judge: ClientJudge, prometheus: str) -> Step:
    action, broker = fault.action, fault.broker
    controller = controller_of(cluster) if cluster.zookeeper else None
    if broker == CONTROLLER:
        if controller is None:
            raise SystemExit(f"step {n}: no active controller to {action} (a plan's `c` is for ZooKeeper mode)")
        broker = controller
    step = Step(n, action, broker, controller=controller, cpu_pct=fault.cpu_pct, disk_ms=fault.disk_ms)
    before = kafka_view(cluster)
    pages: list[tuple[float, dict[str, str]]] = []
    slow: list[tuple[float, dict[str, str]]] = []

    def watch(seconds: float) -> None:
        end = time.monotonic() + seconds
        while time.monotonic() < end:
            now = time.monotonic()
            pages.extend((now, labels) for labels in critical_firing(prometheus))
            slow.extend((now, labels) for labels in slow_firing(prometheus))
            time.sleep(0.5)

    t0 = time.monotonic()
    logging.getLogger("oracle").info("step %d: %s of broker %s starts", n, action, broker)
    if action == "kill":
        cluster.kill(broker)  # type: ignore[arg-type]
        watch(20)
        cluster.start(broker, wait=False)  # type: ignore[arg-type]
    elif action == "pause":
        cluster.pause(broker)  # type: ignore[arg-type]
        watch(fault.pause_s)  # type: ignore[arg-type]
        cluster.resume(broker)  # type: ignore[arg-type]
    elif action == "stop":
        cluster.stop(broker)  # type: ignore[arg-type]
        watch(10)
        cluster.start(broker, wait=False)  # type: ignore[arg-type]
    elif action == "cut":
        cluster.cut(broker)  # type: ignore[arg-type]
        watch(15)
        cluster.heal(broker)  # type: ignore[arg-type]
    elif action == "repl_cut":
        cluster.cut_replication(broker)  # type: ignore[arg-type]
        try:
            watch(REPL_CUT_S)
        finally:
            cluster.heal_replication(broker)  # type: ignore[arg-type]
    elif action == "disk_fill":
        fill_disk(cluster, broker, watch)  # type: ignore[arg-type]
    elif action in ("slow_cpu", "slow_disk"):
        cluster.slow(broker, cpu_pct=fault.cpu_pct, disk_delay_ms=fault.disk_ms)  # type: ignore[arg-type]
        try:
            watch(SLOW_S)
        finally:
            cluster.fast(broker)  # type: ignore[arg-type]
    else:
        watch(20)
    fault_end = time.monotonic()
    # recovered: clients fine, Kafka settled, no critical page; watched meanwhile
    deadline = time.monotonic() + 180
    recovered_at = None
    while time.monotonic() < deadline:
        watch(1.0)
        if recovered_at is None and judge.all_ok_since(time.monotonic() - 2.0) and settled(cluster):
            recovered_at = judge.last_hurt(t0) or fault_end
        if recovered_at is not None and not critical_firing(prometheus):
            break
    last_page = max((t for t, _ in pages), default=None)
    end = time.monotonic()
    hurt = judge.hurt_between(t0, end, min_run_s=HURT_RUN_S)
    step.writes = judge.counts_between(t0, end)
    step.hurt = sorted(hurt)
    step.named = sorted(p for p in hurt if any(names(labels, p, before) for _, labels in pages))
    step.pages = sorted({_page(labels) for _, labels in pages})
    step.slow_said = sorted({f"{m.get('broker')}:{m.get('cause')}:{m.get('severity')}" for _, m in slow})
    named_slow = [t for t, m in slow if m.get("broker") == str(broker)]
    step.slow_first_s = round(min(named_slow) - t0, 1) if named_slow else None
    step.last_pages = sorted({_page(labels) for t, labels in pages if t == last_page})
    for t, labels in pages:
        seen = step.page_seen_s.setdefault(_page(labels), [round(t - t0, 1), round(t - t0, 1)])
        seen[0], seen[1] = min(seen[0], round(t - t0, 1)), max(seen[1], round(t - t0, 1))
    step.verdict = ("hurt_and_paged" if hurt and pages else "hurt_silent" if hurt else
                    "paged_unhurt" if pages else "quiet")
    step.fault_s = round(fault_end - t0, 1)
    step.recovered_s = round(recovered_at - t0, 1) if recovered_at is not None else None
    resumed = judge.recovered_at(t0) if hurt else None
    step.acks_resumed_s = round(resumed - t0, 1) if resumed is not None else None
    step.last_page_s = round(last_page - t0, 1) if last_page is not None else None
    first_hurt = judge.first_hurt(t0, end, hurt) if hurt else None
    first_page = min((t for t, _ in pages), default=None)
    step.first_hurt_s = round(first_hurt - t0, 1) if first_hurt is not None else None
    step.first_page_s = round(first_page - t0, 1) if first_page is not None else None
    if first_hurt is not None and first_page is not None:
        step.page_delay_s = round(first_page - first_hurt, 1)
    if pages and recovered_at is not None and last_page is not None:
        step.page_resolved_after_recovery_s = round(max(0.0, last_page - recovered_at), 1)
        if resumed is not None:
            step.page_resolved_after_acks_resumed_s = round(max(0.0, last_page - resumed), 1)
    return step


def fill_disk(cluster: LocalCluster, broker: int, watch: Any) -> None:
    """A file beside the broker's logs grows at FILL_MB_S until its filesystem is full; Kafka fails the
    directory on its next write and halts the broker (its only one). Then the file goes, and the broker starts."""
    ballast = cluster.log_dir_paths(broker)[0] / "krm-oracle-ballast"
    stop = threading.Event()

    def grow() -> None:
        chunk = b"\0" * (64 << 10)
        with open(ballast, "wb", buffering=0) as f:
            while not stop.is_set():
                try:
                    f.write(chunk)
                except OSError:
                    return  # full
                stop.wait(len(chunk) / (FILL_MB_S * (1 << 20)))

    writer = threading.Thread(target=grow, daemon=True)
    writer.start()
    try:
        deadline = time.monotonic() + DISK_MB / FILL_MB_S + 120
        while time.monotonic() < deadline and cluster.status()["brokers"][str(broker)]["state"] != "dead":
            watch(1.0)
        watch(20)  # the harm of a halted broker lasts until the controller notices
    finally:
        stop.set()
        writer.join(10)
        ballast.unlink(missing_ok=True)
    if cluster.status()["brokers"][str(broker)]["state"] == "dead":
        cluster.start(broker, wait=False)


def small_disks(cluster: LocalCluster) -> None:
    """Every broker's only log directory on a DISK_MB tmpfs of its own, one broker at a time."""
    for b in cluster.broker_ids:
        cluster.stop(b)
        cluster.small_log_dir(b, 0, DISK_MB)
        cluster.start(b)


def by_fault(steps: list[Step]) -> dict[str, dict[str, Any]]:
    """Per fault kind: its steps, verdicts, and first hurt write -> first critical page (p50 / max)."""
    out: dict[str, dict[str, Any]] = {}
    for kind in dict.fromkeys(KIND_OF[s.action] for s in steps):
        mine = [s for s in steps if KIND_OF[s.action] == kind]
        delays = [s.page_delay_s for s in mine if s.page_delay_s is not None]
        out[kind] = {"steps": len(mine),
                     **{v: sum(1 for s in mine if s.verdict == v) for v in ("hurt_and_paged", "hurt_silent",
                                                                           "paged_unhurt", "quiet")},
                     "hurt_partitions": sum(len(s.hurt) for s in mine),
                     "hurt_partitions_named": sum(len(s.named) for s in mine),
                     "page_delay_p50_s": statistics.median(delays) if delays else None,
                     "page_delay_max_s": max(delays) if delays else None}
        if kind in ("slow_cpu", "slow_disk"):
            named = [s.slow_first_s for s in mine if s.slow_first_s is not None]
            out[kind] |= {"slow_named": len(named), "slow_named_p50_s": statistics.median(named) if named else None,
                          "slow_named_max_s": max(named) if named else None,
                          "slow_causes": sorted({c.split(":")[1] for s in mine for c in s.slow_said
                                                 if c.split(":")[0] == str(s.broker)}),
                          "slow_other_brokers": sum(1 for s in mine for c in s.slow_said
                                                    if c.split(":")[0] != str(s.broker))}
    return out


def _page(labels: dict[str, str]) -> str:
    return labels["alertname"] + "".join(f" {k}={labels[k]}" for k in ("broker", "topic", "partition", "cause")
                                         if k in labels)


def start_prometheus(folder: Path, target: str) -> tuple[subprocess.Popen, str]:
    prometheus = shutil.which("prometheus")
    if prometheus is None:
        raise SystemExit("prometheus is missing: `make setup` installs Debian's prometheus")
    port = free_port()
    (folder / "prom.yml").write_text(
        "global:\n  scrape_interval: 1s\n  evaluation_interval: 1s\n"
        f"rule_files:\n  - {RULES}\n"
        f"scrape_configs:\n  - job_name: krm\n    static_configs:\n        - targets: ['{target}']\n")
    proc = subprocess.Popen([prometheus, f"--config.file={folder / 'prom.yml'}", f"--storage.tsdb.path={folder / 'tsdb'}",
                             f"--web.listen-address=127.0.0.1:{port}"], stdout=open(folder / "prom.log", "w"),
                            stderr=subprocess.STDOUT)
    url = f"http://127.0.0.1:{port}"

    def ready() -> bool:  # (it answers 503 while it loads the rules)
        try:
            return requests.get(f"{url}/-/ready", timeout=2).status_code == 200
        except requests.RequestException:
            return False
    if not wait(ready, 60):
        raise SystemExit(f"prometheus did not get ready: {folder / 'prom.log'}")
    return proc, url


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--mode", choices=["zk", "kraft"], default="zk")
    ap.add_argument("--steps", type=int, default=20)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--faults", default="kill,pause,stop,gray,none",
                    help=f"fault kinds drawn from, comma separated: {', '.join(FAULTS)}")
    ap.add_argument("--plan", help="replay these steps instead of drawing them: KIND:BROKER[:SECONDS],... "
                    "(e.g. repl_cut:1,stop:3,pause:3:5.1); --steps and --seed are then ignored")
    ap.add_argument("--slow-cpu-pct", type=float, default=2.0, help="slow_cpu steps: the cap, in %% of one core")
    ap.add_argument("--slow-disk-ms", type=int, default=500, help="slow_disk steps: the delay, in ms")
    ap.add_argument("--hurt-latency", type=float, default=2.0, metavar="S",
                    help="a write slower than this many seconds hurts; also krm's latency_objective_s for the cluster")
    ap.add_argument("--jmx", action="store_true", help="krm scrapes the brokers' JMX exporters too (what BROKER_SLOW "
                    "reads a slow disk from: each broker's Produce LocalTime); default: the collector's own evidence only")
    ap.add_argument("--canary", action="store_true", help="krm's canary too (acks=all writes to a partition each "
                    "broker leads, every canary_interval_s)")
    ap.add_argument("--json", action="store_true")
    ap.add_argument("--log", type=Path, help="krm's log (the alert path's and the collector's at DEBUG, with each "
                    "step's start) in this file: what a late page waited for")
    args = ap.parse_args()
    if args.log:
        logging.basicConfig(filename=args.log, level=logging.INFO,
                            format="%(asctime)s.%(msecs)03d %(threadName)s %(name)s %(levelname)s %(message)s",
                            datefmt="%H:%M:%S")
        for name in ("pipelines.alert_path", "collectors.admin", "collectors.canary", "pipelines.slow_view"):
            logging.getLogger(name).setLevel(logging.DEBUG)
    kinds = [k.strip() for k in args.faults.split(",") if k.strip()]
    unknown = [k for k in kinds if k not in FAULTS]
    if unknown or not kinds:
        ap.error(f"--faults: unknown {unknown}; choose from {', '.join(FAULTS)}")
    actions = tuple(FAULTS[k] for k in kinds)
    try:
        plan = parse_plan(args.plan) if args.plan else None
    except ValueError as e:
        ap.error(f"--plan: {e}")
    if plan:
        kinds = list(dict.fromkeys(KIND_OF[f.action] for f in plan))
    rng = random.Random(args.seed)
    root = Path(tempfile.mkdtemp(prefix="krm-oracle-"))
    session_ms = 18000 if args.mode == "zk" else 9000  # Kafka's own defaults
    cluster = LocalCluster(root=root / "watched", mode=args.mode, brokers=4, session_timeout_ms=session_ms,
                           disk_layer="slow_disk" in kinds)
    obs = LocalCluster(root=root / "obs", mode="kraft", brokers=1)
    monitor = judge = prom = None
    tapped = threading.Event()  # set: the record tap stops
    steps: list[Step] = []
    try:
        print(f"starting a 4-broker {args.mode} cluster (sessions {session_ms} ms) and the observations' cluster ...",
              file=sys.stderr)
        cluster.up()
        if "disk_fill" in kinds:
            small_disks(cluster)
        obs.up()
        from kafka.admin import KafkaAdminClient, NewTopic

        admin = KafkaAdminClient(bootstrap_servers=cluster.bootstrap_servers, client_id="krm-oracle")
        admin.create_topics([NewTopic(TOPIC, PARTITIONS, 3, topic_configs={"min.insync.replicas": "2"})])
        admin.close()
        config_path = root / "krm.toml"
        zk = f'zookeeper = "{cluster.zookeeper}"\n' if cluster.zookeeper else ""
        if args.jmx:
            zk += "jmx_exporter_urls = [" + ", ".join(f'"{u}"' for u in cluster.jmx_exporter_urls) + "]\n"
        if args.canary:
            zk += "canary = true\n"
        config_path.write_text(
            f'[[clusters]]\nname = "oracle"\nbootstrap_servers = "{cluster.bootstrap_servers}"\n{zk}'
            f'latency_objective_s = {args.hurt_latency}\n\n'
            f'[observations]\nbootstrap_servers = "{obs.bootstrap_servers}"\ntopic = "krm.obs"\nreplication_factor = 1\n\n'
            f'[pipeline]\ndata_dir = "{root / "data"}"\nmetrics_port = {free_port()}\n')
        monitor = Monitor(load_config(config_path)).start()
        if args.log:
            threading.Thread(target=tap_records, args=(obs.bootstrap_servers, "krm.obs", tapped), daemon=True,
                             name="oracle-tap").start()
        prom, prometheus = start_prometheus(root, monitor.metrics_url.split("//")[1].split("/")[0])
        if not wait(lambda: settled(cluster), 120):
            raise SystemExit("the cluster did not settle")
        judge = ClientJudge(cluster.bootstrap_servers, TOPIC, set(range(PARTITIONS)), slow_s=args.hurt_latency)
        fresh_since: list[float] = []  # krm watching without a break since then

        def watched_for(seconds: float) -> bool:
            if not watching(prometheus):
                fresh_since.clear()
                return False
            fresh_since[:] = fresh_since or [time.monotonic()]
            return time.monotonic() - fresh_since[0] >= seconds
        if not wait(lambda: watched_for(WATCHING_S), 240):
            raise SystemExit(f"krm's view of the cluster not fresh in Prometheus for {WATCHING_S:.0f} s in a row")
        if not wait(lambda: judge.all_ok_since(time.monotonic() - 2.0) and not critical_firing(prometheus), 180):
            raise SystemExit("no healthy start: clients failing or a critical page firing")
        for n in range(1, (len(plan) if plan else args.steps) + 1):
            fault = plan[n - 1] if plan else draw(rng, cluster.broker_ids, actions, args.slow_cpu_pct, args.slow_disk_ms)
            step = run_step(n, fault, cluster, judge, prometheus)
            steps.append(step)
            paused = (f" {fault.pause_s:.1f}s" if fault.pause_s else f" {fault.cpu_pct:g}%" if fault.cpu_pct
                      else f" {fault.disk_ms}ms" if fault.disk_ms else "")
            controller = f" (controller {step.controller})" if step.controller is not None else ""
            print(f"step {n:2d} {KIND_OF[step.action]:8s} broker {step.broker}{paused}{controller}: {step.verdict:14s} "
                  f"hurt {step.hurt} "
                  f"named {step.named} pages {step.pages} resolved +{step.page_resolved_after_recovery_s}s"
                  f"{f' (last: {step.last_pages})' if step.last_pages else ''}; fault undone {step.fault_s}s, clients' last "
                  f"hurt {step.recovered_s}s, acks resumed {step.acks_resumed_s}s, last page {step.last_page_s}s, "
                  f"first hurt -> first page {step.page_delay_s}s"
                  + (f"; BROKER_SLOW {step.slow_said} (this broker first at {step.slow_first_s}s)"
                     if step.action in ("slow_cpu", "slow_disk") else "")
                  + (f"; pages seen (s) {step.page_seen_s}" if len(step.pages) > 1 else ""),
                  file=sys.stderr, flush=True)
    finally:
        tapped.set()
        if judge is not None:
            judge.stop()
        if monitor is not None:
            monitor.stop()
        if prom is not None:
            prom.terminate()
        cluster.down()
        obs.down()
    count = {v: sum(1 for s in steps if s.verdict == v) for v in ("hurt_and_paged", "hurt_silent", "paged_unhurt",
                                                                   "quiet")}
    resolved = [s.page_resolved_after_recovery_s for s in steps if s.page_resolved_after_recovery_s is not None]
    after_acks = [s.page_resolved_after_acks_resumed_s for s in steps if s.page_resolved_after_acks_resumed_s is not None]
    result = {"mode": args.mode, "kafka_version": cluster.kafka_version, "steps": len(steps), "seed": args.seed,
              "hurt_latency_s": args.hurt_latency, "jmx": args.jmx, "canary": args.canary,
              **count, "hurt_partitions": sum(len(s.hurt) for s in steps),
              "hurt_partitions_named": sum(len(s.named) for s in steps),
              "page_resolved_after_recovery_p50_s": statistics.median(resolved) if resolved else None,
              "page_resolved_after_recovery_max_s": max(resolved) if resolved else None,
              "page_resolved_after_acks_resumed_p50_s": statistics.median(after_acks) if after_acks else None,
              "page_resolved_after_acks_resumed_max_s": max(after_acks) if after_acks else None,
              "faults": kinds, "by_fault": by_fault(steps), "per_step": [asdict(s) for s in steps]}
    if args.json:
        print(json.dumps(result))
    else:
        print(json.dumps({k: v for k, v in result.items() if k != "per_step"}, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
