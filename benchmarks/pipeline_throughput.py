"""Pipeline throughput against partition count: the real pipeline (Spark local[2], Kafka source,
Delta) fed by `krm simulate` at a 10 s poll.

For each size: a simulated cluster of 30 brokers, RF 3, 100 partitions per topic, publishing to a
real 1-broker KRaft observations cluster; the pipeline (`krm pipeline`'s Monitor, in this process)
reads it. Reports per size, after a warm-up of 3 batches: alert-path micro-batch duration p50/p95
and input rows, the history path's, how late the simulator's polls were, the driver JVM's peak heap
and the process' peak RSS, and the state store (none: the pipeline keeps no Spark state).

`--shares N`: the cluster's topics split over N simulator processes (`krm simulate --topic-share I/N`,
as N `krm collect --topic-share` processes split a cluster too large for one), one pipeline reading them all;
`--shares 1,4,4` with `--sizes 200000,200000,1000000` compares the layouts in one run.
`--fault-at S`: the leader of an RF-1 partition is killed S seconds in (in one share's topics when split), and
the time from the poll that showed it to /metrics is reported.
`--clusters N`: a fleet, N simulated clusters of each size (6 brokers each) from one `krm simulate --clusters`;
`--hang-at S` hangs the first of them S seconds in. Reported per fleet: poll -> /metrics over every cluster and
for the worst one, the others' before and after the hang, the pipeline's CPU at rest (cores, this process and
the driver JVM), and how long the console's fleet and incidents pages and `krm incidents` take.

Usage: .venv/bin/python benchmarks/pipeline_throughput.py [--sizes 10000,50000,200000] [--minutes 3]
       [--history-trigger S] [--prebuild] [--shares N[,N...]] [--fault-at S] [--clusters N [--hang-at S]] [--json]
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import re
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

from collectors.publisher import ensure_topic
from foundation.config import load_config
from krm.runner import Monitor
from krm.scrape import scrape, series
from lab.harness import create_topic
from lab.local_cluster import LocalCluster, free_port
from pipelines.session import build_session

ROOT = Path(__file__).resolve().parents[1]
FAULT_TOPIC = "sim-rf1-00000"  # `--fault-at`: its partition 0's leader is killed


def pct(values, q):
    s = sorted(values)
    return s[min(len(s) - 1, int(round(q * (len(s) - 1))))] if s else float("nan")


def rss_mb(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return 0.0


def java_children(pid: int) -> list[int]:
    out = []
    for p in Path("/proc").iterdir():
        if p.name.isdigit():
            try:
                stat = (p / "stat").read_text()
                ppid = int(stat[stat.rindex(")") + 2:].split()[1])  # after "(comm)", which may hold spaces
                if ppid == pid and b"java" in (p / "cmdline").read_bytes():
                    out.append(int(p.name))
            except OSError:
                continue
    return out


def spark_driver(pid: int) -> list[int]:
    """The Spark driver JVM among `pid`'s children (a LocalCluster's brokers are children too)."""
    return [j for j in java_children(pid) if b"org.apache.spark.deploy.SparkSubmit" in Path(f"/proc/{j}/cmdline").read_bytes()]


def cpu_s(pid: int) -> float:
    """CPU seconds (user + system) a process has used so far."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def run_size(spark, obs: LocalCluster, size: int, minutes: float, poll_s: float, work: Path,
             history_trigger_s: float, prebuild: bool, history_tasks: int = 0, quality_interval_s: float = 60.0,
             shares: int = 1, clusters: int = 1, hang_at_s: float | None = None,
             fault_at_s: float | None = None, real: list[LocalCluster] | None = None) -> dict:
    """`size` partitions per cluster; `clusters` > 1: a fleet of that many from one simulator (`krm simulate
    --clusters`), the first of them hung from `hang_at_s` seconds into the run."""
    topics = size // 100
    # one run's own names: the same size under another layout reads neither its topic nor its tables
    tag = f"{size}" + (f"x{shares}" if shares > 1 else "") + (f"c{clusters}" if clusters > 1 else "")
    cfg = work / f"sim-{tag}.toml"
    # real clusters among a fleet's simulated ones: polled by krm's own collector in this process
    reals = "".join(f'[[clusters]]\nname = "{c.name}"\nbootstrap_servers = "{c.bootstrap_servers}"\n'
                    f'poll_interval_s = {poll_s}\n\n' for c in real or [])
    cfg.write_text(
        (reals or f'[[clusters]]\nname = "sim"\nbootstrap_servers = "{obs.bootstrap_servers}"\n\n') +
        f'[observations]\nbootstrap_servers = "{obs.bootstrap_servers}"\ntopic = "krm.sim.{tag}"\npartitions = 4\n\n'
        f'[pipeline]\ndata_dir = "{work / f"data-{tag}"}"\nmetrics_port = {free_port()}\nspark_master = "local[2]"\n'
        f"history_trigger_s = {history_trigger_s}\nhw_stall_window_s = 10.0\nquality_interval_s = {quality_interval_s}\n"
        f"history_tasks = {history_tasks}\n")
    ensure_topic(load_config(cfg).observations)  # before the pipeline subscribes
    debug_log = work / f"pipeline-{tag}.log"  # the handlers' own timings (pipelines/alert_path.py, history_path.py, DEBUG)
    handler = logging.FileHandler(debug_log)
    handler.setFormatter(logging.Formatter("%(created).3f %(message)s"))
    logging.getLogger("pipelines").addHandler(handler)
    logging.getLogger("pipelines").setLevel(logging.DEBUG)
    monitor = Monitor(load_config(cfg), collect=bool(real), spark=spark).start()
    logs = [work / (f"sim-{tag}.log" if shares == 1 else f"sim-{tag}-{i}.log") for i in range(1, shares + 1)]
    fleet = ["--clusters", str(clusters)] if clusters > 1 else []
    hung = "sim-001" if clusters > 1 and hang_at_s is not None else None
    if hung:
        fleet += ["--hang", f"{hung}@{hang_at_s}"]
    if fault_at_s is not None:  # the leader of an RF-1 partition lost: its topic is in one share only
        script = work / f"faults-{tag}.json"
        script.write_text(json.dumps([{"at_s": fault_at_s, "kind": "kill_broker", "broker": f"leader:{FAULT_TOPIC}/0"}]))
        fleet += ["--rf1-topics", "1", "--faults", str(script)]
    sims = [subprocess.Popen([str(ROOT / ".venv/bin/krm"), "simulate", "--config", str(cfg), "--cluster-name", "sim",
                              "--topics", str(topics),
                              "--brokers", "30" if clusters == 1 else "6", "--poll-interval", str(poll_s),
                              "--duration", str(minutes * 60)] + fleet
                             + (["--prebuild"] if prebuild else [])
                             + ([f"--topic-share={i}/{shares}"] if shares > 1 else []),
                             stdout=subprocess.DEVNULL, stderr=open(log, "w")) for i, log in enumerate(logs, 1)]
    peak_heap = peak_rss = 0.0
    ages: list[float] = []  # krm_observation_age_seconds: how fresh what /metrics shows is
    seen: list[tuple[float, float]] = []  # (newest observation stamp on /metrics, when a sample showed it)
    seen_by: dict[str, list[tuple[float, float]]] = {}  # the same per cluster
    hung_seen: list[float] = []  # when /metrics first said the hung cluster unreachable
    fault_seen: list[float] = []  # when /metrics first showed the injected fault's partition offline
    cpu: dict[str, float] = {}  # CPU seconds of this process and the driver JVM at the sampling's start and end
    quality_runs: list[tuple[float, float]] = []  # (end, duration) of each data-quality run seen ending
    runs_before: float | None = None
    stop = threading.Event()

    def publishing() -> bool:  # a prebuilding simulator publishes nothing for minutes
        return all("] poll " in log.read_text() for log in logs)

    def sample() -> None:
        nonlocal peak_heap, peak_rss, runs_before
        rt = spark._jvm.java.lang.Runtime.getRuntime()
        while not stop.wait(1.0) and not publishing():
            pass
        began = time.time()
        counted = False
        while not stop.wait(1.0):
            peak_heap = max(peak_heap, (rt.totalMemory() - rt.freeMemory()) / 2**20)
            peak_rss = max(peak_rss, rss_mb(os.getpid()) + sum(rss_mb(j) for j in spark_driver(os.getpid())))
            # after the warm-up, while polls come: once the simulator is done the age only grows (the
            # 2 polls' wait below), which once put a 20 s tail into the age's p95
            if time.time() - began > 60 and all(s.poll() is None for s in sims):
                if not counted:  # the cost at rest: CPU from here to the end of the sampling
                    cpu["t0"], cpu["cpu0"] = time.time(), cpu_s(os.getpid()) + sum(cpu_s(j) for j in spark_driver(os.getpid()))
                    counted = True
                try:
                    text, now = scrape(monitor.metrics_url), time.time()
                except Exception:  # noqa: BLE001 - a slow scrape is skipped
                    continue
                cpu["t1"], cpu["cpu1"] = now, cpu_s(os.getpid()) + sum(cpu_s(j) for j in spark_driver(os.getpid()))
                for s in series(text, "krm_observation_age_seconds"):
                    if s.labels.get("cluster") == hung:
                        continue  # a hung cluster's view only ages; the others' are the measure
                    ages.append(s.value)
                    seen.append((now - s.value, now))
                    seen_by.setdefault(s.labels.get("cluster", ""), []).append((now - s.value, now))
                if hung and not hung_seen and any(s.labels.get("cluster") == hung and s.value == 0
                                                  for s in series(text, "krm_cluster_reachable")):
                    hung_seen.append(now)
                runs = sum(s.value for s in series(text, "krm_data_quality_runs_total"))
                if runs_before is not None and runs > runs_before:
                    quality_runs.append((now, sum(s.value for s in series(text, "krm_data_quality_last_run_seconds"))))
                runs_before = runs

    def watch_fault() -> None:
        """The fault's first sight on /metrics: only its family (`?name[]=`, prometheus-client's filter), four times a
        second. The full sampler above parses tens of thousands of series a scrape on cores the pipeline is using,
        which once added 5 to 8 s to this figure."""
        while not stop.wait(0.25):
            try:
                text, now = scrape(f"{monitor.metrics_url}?name[]=krm_partition_offline", 5.0), time.time()
            except Exception:  # noqa: BLE001 - a slow scrape is skipped
                continue
            if any(s.labels.get("topic") == FAULT_TOPIC and s.value == 1 for s in series(text, "krm_partition_offline")):
                fault_seen.append(now)
                return

    sampler = threading.Thread(target=sample, daemon=True)
    sampler.start()
    if fault_at_s is not None:
        threading.Thread(target=watch_fault, daemon=True).start()
    try:
        deadline = time.time() + minutes * 60 * 3 + 600 * shares  # a prebuild first takes up to ~the duration
        for s in sims:
            s.wait(timeout=max(1.0, deadline - time.time()))
        time.sleep(2 * poll_s)  # the last polls through the pipeline
    finally:
        stop.set()
        progress = {q.name: q.recentProgress for q in monitor.pipeline.queries}
        state_ops = [p.get("stateOperators") for ps in progress.values() for p in ps if p.get("stateOperators")]
        quality = quality_figures(monitor.metrics_url)
        readers = fleet_readers(monitor.metrics_url, cfg) if clusters > 1 else {}
        opened = offline_opened_ms(cfg) if fault_at_s is not None else None
        monitor.stop()
        for s in sims:
            if s.poll() is None:
                s.kill()
    logging.getLogger("pipelines").removeHandler(handler)
    lines = [line for log in logs for line in log.read_text().splitlines()]
    late = [float(line.split("late ")[1].split("s")[0]) for line in lines if "late " in line]
    published = [(int(m.group(1)), float(m.group(2))) for line in lines
                 for m in [re.search(r"\] poll \d+: (\d+) records, ([\d.]+) MB", line)] if m]
    out = {"size": size, "tag": tag, "shares": shares, "clusters": clusters, "peak_heap_mb": peak_heap, "peak_rss_mb": peak_rss,
           "state_operators": len(state_ops),
           "sim_late_p95": pct(late, 0.95) if late else 0.0, "age_p50": pct(ages, 0.5), "age_p95": pct(ages, 0.95),
           "age_max": max(ages, default=float("nan")), "polls": len(late), "quality": quality,
           "records_published": sum(n for n, _ in published),
           # a steady poll (the first carries every partition): the median over the rest
           "bytes_per_partition": round(sum(statistics.median([mb for _, mb in steady] or [0.0])
                                            for steady in _steady_mb(logs)) * 1e6 / size, 1)}
    for name, ps in progress.items():
        batches = [p for p in ps if p.get("numInputRows", 0) > 0][3:]
        out[name + "_rows_total"] = sum(p["numInputRows"] for p in ps)
        durs = [p["durationMs"]["triggerExecution"] / 1000 for p in batches]
        out[name] = {"batches": len(durs), "p50": pct(durs, 0.5), "p95": pct(durs, 0.95),
                     "rows": statistics.mean(p["numInputRows"] for p in batches) if batches else 0,
                     # where a batch's time goes (Spark's own split: addBatch = the foreachBatch handler)
                     "phases_p50_s": {k: pct([p["durationMs"].get(k, 0) / 1000 for p in batches], 0.5)
                                      for k in (batches[0]["durationMs"] if batches else {})}}
    out["split"] = handler_split(debug_log.read_text())
    if clusters > 1:  # one poll per cluster: each cluster's stamps apart (they fall in the same 0.5 s)
        per = {c: poll_delays(v, quality_runs) for c, v in seen_by.items()}
        delays = [d for c, v in seen_by.items() for d in stamp_delays(v)]
        out.update({"poll_delay_p50": pct(delays, 0.5) if delays else 0.0,
                    "poll_delay_p95": pct(delays, 0.95) if delays else 0.0, "poll_delay_max": max(delays, default=0.0),
                    "polls_seen": len(delays), "late_polls": sum(d > 3.0 for d in delays), "late_during_quality": 0,
                    "quality_runs_seen": len(quality_runs), "clusters_seen": len(per),
                    "worst_cluster_poll_delay_p95": max((r["poll_delay_p95"] for r in per.values()), default=0.0)})
        if hung:
            at = hung_seen[0] if hung_seen else None
            before = [d for v in seen_by.values() for t, d in stamp_delays_at(v) if at is None or t < at]
            after = [d for v in seen_by.values() for t, d in stamp_delays_at(v) if at is not None and t >= at]
            out["hung"] = {"cluster": hung, "seen_unreachable": at is not None,
                           "others_poll_delay_p95_before": pct(before, 0.95) if before else None,
                           "others_poll_delay_p95_after": pct(after, 0.95) if after else None,
                           "others_polls_before": len(before), "others_polls_after": len(after)}
    else:
        out.update(poll_delays(seen, quality_runs))
    out["readers"] = readers
    if fault_at_s is not None:  # the poll that first showed it (the incident's opening) -> /metrics
        out["fault_to_metrics_s"] = (round(fault_seen[0] - opened / 1000, 2) if fault_seen and opened is not None
                                     else None)
    if cpu.get("t1", 0) > cpu.get("t0", 0):
        out["cpu_cores_at_rest"] = round((cpu["cpu1"] - cpu["cpu0"]) / (cpu["t1"] - cpu["t0"]), 3)
    return out


def _steady_mb(logs: list[Path]) -> list[list[tuple[int, float]]]:
    """Each simulator's polls after its first (which carries every partition): (records, MB)."""
    out = []
    for log in logs:
        polls = [(int(m.group(1)), float(m.group(2))) for line in log.read_text().splitlines()
                 for m in [re.search(r"\] poll \d+: (\d+) records, ([\d.]+) MB", line)] if m]
        out.append(polls[1:])
    return out


def stamp_delays_at(seen: list[tuple[float, float]]) -> list[tuple[float, float]]:
    """(poll stamp, stamp -> first sight on /metrics) of one cluster's samples (see poll_delays)."""
    first_seen: dict[float, float] = {}
    for stamp, at in sorted(seen):
        poll = next((t for t in first_seen if abs(t - stamp) < 0.5), stamp)
        first_seen[poll] = min(first_seen.get(poll, at), at)
    return [(t, first_seen[t] - t) for t in sorted(first_seen)[1:]]  # the first may predate the sampling


def stamp_delays(seen: list[tuple[float, float]]) -> list[float]:
    return [d for _, d in stamp_delays_at(seen)]


def poll_delays(seen: list[tuple[float, float]], quality_runs: list[tuple[float, float]]) -> dict:
    """How long each poll took from its stamp to /metrics (to the 1 s sampling), and which of the
    late ones (> 3 s) overlapped a data-quality run: the age's p95 is a poll interval plus these.
    Samples of one stamp differ by the scrape's own time (ms), so stamps within 0.5 s are one poll."""
    timed = stamp_delays_at(seen)
    delays = [d for _, d in timed]
    late = [(t, d) for t, d in timed if d > 3.0]
    overlapping = [d for t, d in late if any(end - dur - 1 <= t + d and t <= end for end, dur in quality_runs)]
    return {"poll_delay_p50": pct(delays, 0.5) if delays else 0.0, "poll_delay_p95": pct(delays, 0.95) if delays else 0.0,
            "poll_delay_max": max(delays, default=0.0), "polls_seen": len(delays), "late_polls": len(late),
            "late_during_quality": len(overlapping), "quality_runs_seen": len(quality_runs)}


def offline_opened_ms(cfg: Path) -> int | None:
    """When the injected fault's OFFLINE_PARTITION opened: the stamp of the poll that first showed it."""
    done = subprocess.run([str(ROOT / ".venv/bin/krm"), "incidents", "--config", str(cfg), "--type", "OFFLINE_PARTITION",
                           "--json"], capture_output=True, text=True, timeout=300)
    try:
        found = [i for i in json.loads(done.stdout) if i.get("topic") == FAULT_TOPIC and i.get("opened_at")]
    except ValueError:
        print(f"krm incidents: {done.stderr[-300:]}", file=sys.stderr)
        return None
    import datetime as dt

    return min((int(dt.datetime.fromisoformat(i["opened_at"].replace("Z", "+00:00")).timestamp() * 1000)
                for i in found), default=None)


def fleet_readers(metrics_url: str, cfg: Path) -> dict[str, float]:
    """What an on-call opens first, at the fleet's size: the console's fleet page and incidents page (time and
    size), and `krm incidents --open --json` (time, incidents)."""
    import urllib.request

    out: dict[str, float] = {}
    base = metrics_url.removesuffix("/metrics")
    for name, path in (("fleet_page", "/"), ("incidents_page", "/incidents")):
        t0 = time.perf_counter()
        try:
            with urllib.request.urlopen(base + path, timeout=60) as r:
                body = r.read()
        except Exception as e:  # noqa: BLE001 - said in the figures
            print(f"{path}: {e}", file=sys.stderr)
            continue
        out[f"{name}_s"], out[f"{name}_kb"] = round(time.perf_counter() - t0, 3), round(len(body) / 1024, 1)
    t0 = time.perf_counter()
    done = subprocess.run([str(ROOT / ".venv/bin/krm"), "incidents", "--config", str(cfg), "--open", "--json"],
                          capture_output=True, text=True, timeout=300)
    out["krm_incidents_s"] = round(time.perf_counter() - t0, 2)
    if done.returncode == 0:
        try:
            out["krm_incidents_open"] = len(json.loads(done.stdout))
        except ValueError:
            pass
    return out


def quality_figures(metrics_url: str) -> dict[str, float]:
    """The data-quality suite's own figures (it runs beside the alert path on the same cores)."""
    try:
        text = scrape(metrics_url, 10.0)
    except Exception:  # noqa: BLE001 - reported as missing
        return {}
    names = ("krm_data_quality_runs_total", "krm_data_quality_last_run_seconds", "krm_data_quality_rows_validated_total")
    return {n: sum(s.value for s in series(text, n)) for n in names}


def handler_split(text: str) -> dict[str, float]:
    """p50 of each step the handlers log: the alert batch's Spark job (collect) and its driver work, and
    each history table's append."""
    steps: dict[str, list[float]] = {}
    for line in text.splitlines():
        line = re.sub(r"^\d+\.\d+ ", "", line)  # the record's time (the log's format)
        m = re.match(r"alert batch \d+: \d+ rows, collect ([\d.]+)s, [\d.]+s to /metrics, ([\d.]+)s total", line)
        if m:
            steps.setdefault("alert collect", []).append(float(m.group(1)))
            steps.setdefault("alert driver", []).append(float(m.group(2)) - float(m.group(1)))
        elif line.startswith("history batch"):
            for name, secs in re.findall(r"(\w+) ([\d.]+)s", line.split(":", 1)[1]):
                steps.setdefault(f"history {name}", []).append(float(secs))
    return {k: round(pct(v[3:] or v, 0.5), 3) for k, v in steps.items()}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--sizes", default="10000,50000,200000")
    ap.add_argument("--minutes", type=float, default=3.0)
    ap.add_argument("--poll", type=float, default=10.0)
    ap.add_argument("--driver-memory", default="4g")
    ap.add_argument("--history-trigger", type=float, default=10.0)
    ap.add_argument("--history-tasks", type=int, default=0,
                    help="[pipeline] history_tasks (0: krm's default, N-1 in local[N]; 64: not capped)")
    ap.add_argument("--prebuild", action="store_true",
                    help="the simulator builds every poll before publishing (krm simulate --prebuild), so its CPU "
                         "does not compete with the pipeline on this machine")
    ap.add_argument("--quality-interval", type=float, default=60.0,
                    help="[pipeline] quality_interval_s (0: the data-quality suite off)")
    ap.add_argument("--shares", default="1",
                    help="simulator processes, each publishing one share of the topics (krm simulate --topic-share); "
                         "a list (1,4,4) gives each size its own, so that one run compares layouts")
    ap.add_argument("--clusters", type=int, default=1,
                    help="a fleet: that many simulated clusters of each size (partitions per cluster), from one "
                         "simulator process (krm simulate --clusters)")
    ap.add_argument("--real", type=int, default=0, metavar="N",
                    help="with --clusters: N real local KRaft clusters (1 broker, a 10-partition topic) among the fleet, "
                         "polled by krm's own collector in this process")
    ap.add_argument("--hang-at", type=float, default=None, metavar="S",
                    help="with --clusters: the first cluster answers nothing from S seconds into the run (krm simulate "
                         "--hang); the others' poll -> /metrics before and after are reported")
    ap.add_argument("--fault-at", type=float, default=None, metavar="S",
                    help="S seconds into the simulated run, kill the leader of an RF-1 partition (its topic is in one "
                         "share when split): reports its poll -> /metrics (fault_to_metrics_s)")
    ap.add_argument("--json", action="store_true",
                    help="print one JSON object as the last stdout line: per size, the figures the budgets are set on")
    args = ap.parse_args()
    work = Path(tempfile.mkdtemp(prefix="krm-throughput-"))
    os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    obs = LocalCluster(root=work / "obs", mode="kraft", brokers=1).up()
    real = [LocalCluster(root=work / f"real-{i}", mode="kraft", brokers=1).up() for i in range(1, args.real + 1)]
    for c in real:
        create_topic(c, "fleet-real", partitions=10, rf=1)
    spark = build_session("local[2]", log_dir=work / "logs", extra={"spark.driver.memory": args.driver_memory,
                                                                    "spark.sql.streaming.numRecentProgressUpdates": "1000"})
    results = []
    try:
        sizes = [int(x) for x in args.sizes.split(",")]
        shares = [int(x) for x in args.shares.split(",")]
        if len(shares) not in (1, len(sizes)):
            ap.error(f"--shares {args.shares}: one value, or one per size ({len(sizes)})")
        for size, n in zip(sizes, shares * len(sizes) if len(shares) == 1 else shares):
            print(f"--- {size} partitions, {n} share(s), {args.minutes} min ...", file=sys.stderr, flush=True)
            r = run_size(spark, obs, size, args.minutes, args.poll, work, args.history_trigger, args.prebuild,
                         args.history_tasks, args.quality_interval, n, args.clusters, args.hang_at, args.fault_at, real)
            print(r, file=sys.stderr, flush=True)
            results.append(r)
    finally:
        spark.stop()
        obs.down()
        for c in real:
            c.down()
    print("| partitions | alert batch p50 | alert batch p95 | rows/batch | observation age on /metrics p50 / p95 / max | "
          "records: published / alert path / history | history batch p50 | history p95 | driver heap peak | "
          "process RSS peak | state store |")
    print("|---|---|---|---|---|---|---|---|---|---|---|")
    for r in results:
        a, h = r.get("krm-alerts", {}), r.get("krm-history", {})
        published = r["records_published"]
        print(f"| {r['size']:,}{layout(r)} | {a.get('p50', 0):.2f} s | {a.get('p95', 0):.2f} s | {a.get('rows', 0):.0f} | "
              f"{r['age_p50']:.1f} / {r['age_p95']:.1f} / {r['age_max']:.1f} s | "
              f"{published:,} / {r.get('krm-alerts_rows_total', 0):,} / {r.get('krm-history_rows_total', 0):,} | "
              f"{h.get('p50', 0):.2f} s | {h.get('p95', 0):.2f} s | "
              f"{r['peak_heap_mb']:.0f} MiB | {r['peak_rss_mb']:.0f} MiB | "
              f"{'none' if not r['state_operators'] else r['state_operators']} |")
    print("\nData-quality suite beside the pipeline (at the end of each size):")
    for r in results:
        q = r.get("quality", {})
        print(f"- {r['size']:,}{layout(r)}: runs {q.get('krm_data_quality_runs_total', 0):.0f}, last run "
              f"{q.get('krm_data_quality_last_run_seconds', 0):.2f} s, rows validated in all "
              f"{q.get('krm_data_quality_rows_validated_total', 0):,.0f}")
    print("\nPoll stamp -> /metrics (1 s sampling; late = over 3 s):")
    for r in results:
        print(f"- {r['size']:,}{layout(r)}: p50 {r['poll_delay_p50']:.1f} s, p95 {r['poll_delay_p95']:.1f} s, max "
              f"{r['poll_delay_max']:.1f} s over {r['polls_seen']} polls; {r['late_polls']} late, "
              f"{r['late_during_quality']} of them during a data-quality run ({r['quality_runs_seen']} runs)")
    print("\nWhere the time goes (p50 per batch, from the handlers' DEBUG log):")
    for r in results:
        print(f"- {r['size']:,}{layout(r)}: " + ", ".join(f"{k} {v:.2f} s" for k, v in r.get("split", {}).items()))
    for r in results:
        if r.get("fault_to_metrics_s", "absent") != "absent":
            print(f"- {r['size']:,}{layout(r)}: the RF-1 leader loss from its poll to /metrics: {r['fault_to_metrics_s']} s")
        if r.get("clusters", 1) > 1:
            print(f"- {r['size']:,}{layout(r)}: {r.get('clusters_seen')} clusters on /metrics, the worst one's poll -> "
                  f"/metrics p95 {r.get('worst_cluster_poll_delay_p95', 0):.1f} s; CPU at rest "
                  f"{r.get('cpu_cores_at_rest')} cores; readers {r.get('readers')}; hung {r.get('hung')}")
    if args.json:
        print(json.dumps(last_line(results)))


def layout(r: dict) -> str:
    """How a size was laid out, when not one collector for one cluster: " over 4 shares", " x 100 clusters"."""
    return ((f" over {r['shares']} shares" if r.get("shares", 1) > 1 else "")
            + (f" x {r['clusters']} clusters" if r.get("clusters", 1) > 1 else ""))


def last_line(results: list[dict]) -> dict:
    """The `--json` line: `sizes`, a list with each size's `partitions` and figures (what other tools
    read), and each size's figures under its count too (as records before 2026-11-28 have them)."""
    return {"sizes": [{"partitions": r["size"], "shares": r.get("shares", 1), **summary(r)} for r in results],
            **{r.get("tag", str(r["size"])): summary(r) for r in results}}


def summary(r: dict) -> dict:
    """The figures of one size that budgets are set on (BENCHMARKS.md; `make bench-smoke`)."""
    a = r.get("krm-alerts", {})
    out = {"alert_p50_s": a.get("p50"), "alert_p95_s": a.get("p95"), "poll_to_metrics_p95_s": r["poll_delay_p95"],
           "poll_to_metrics_p50_s": r.get("poll_delay_p50"), "fault_to_metrics_s": r.get("fault_to_metrics_s"),
           "age_p95_s": r["age_p95"], "history_records_reached": r.get("krm-history_rows_total", 0),
           "records_published": r["records_published"], "heap_peak_mb": round(r["peak_heap_mb"]),
           "bytes_per_partition": r["bytes_per_partition"], "history_p95_s": r.get("krm-history", {}).get("p95")}
    if r.get("clusters", 1) > 1:  # a fleet: the same keys, for the whole set of clusters, and these
        out.update({"clusters": r["clusters"], "clusters_seen": r.get("clusters_seen"), "readers": r.get("readers"),
                    "worst_cluster_poll_to_metrics_p95_s": r.get("worst_cluster_poll_delay_p95"),
                    "cpu_cores_at_rest": r.get("cpu_cores_at_rest"), "hung": r.get("hung")})
    return out


if __name__ == "__main__":
    main()
