"""Fault loops: a running monitor, a steady fault scenario in the monitored cluster, and one kind of
fault injected round after round at a random moment; then the incidents are audited against the
scenario's ground truth. Results go to RELIABILITY.md.

Scenario: topic `fault-loop` (RF 1, 6 partitions) on a real 3-broker cluster. Every round toggles
broker 2 (SIGKILL, or start again), so its RF-1 partitions go offline and come back. Each outage must
give exactly one OFFLINE_PARTITION incident per partition, kept under the same id through whatever
fault hits krm, and resolved once the broker is back. Observations go to a separate one-broker
cluster, as in production. A round: toggle the broker, wait 0-12 s, inject the fault, recover, wait
until /metrics and the incidents table both show the truth (the round's recovery time).

Faults (--fault):
  krm-run              SIGKILL of `krm run` (the driver and its Spark JVM), restarted at once
  collect / pipeline   `krm collect` and `krm pipeline` run separately; SIGKILL of the one named
  zookeeper            ZooKeeper SIGKILLed, back after 5-30 s (ZooKeeper mode)
  controller           the KRaft controller (the quorum's only voter) SIGKILLed, back after 5-30 s
  quorum-leader        KRaft with 3 controllers: the quorum's leader SIGKILLed, back after 5-30 s (the
                       other two elect a new leader: an ordinary fail-over, nothing to page about)
  observations         the observations cluster's broker SIGKILLed, back after 5-60 s
  cluster-down         every broker of the monitored cluster down for 60-150 s (ZooKeeper stays)
  checkpoint-delete    `krm run` SIGKILLed, one query's checkpoint folder deleted, restarted
  checkpoint-truncate  `krm run` SIGKILLed, the newest offsets/commits file of one query truncated
  disk-full            the data_dir's own filesystem (a tmpfs) filled for 20-60 s, then freed

Audit, per outage and partition: lost (no incident), duplicated (more than one), wrongly resolved
(resolved while the broker was still down), left open (still open after the broker returned), and
incidents of the topic that no outage explains; and critical incidents about anything the scenario
left healthy (other partitions, other brokers: false pages, unless the fault itself takes them
down, as cluster-down does). The config sets `flap_window_s = 0`, so that each
outage is its own incident (with the default window, outages a minute apart reopen one incident).

    .venv/bin/python benchmarks/fault_loops.py --fault krm-run --rounds 10 [--seed 1] [--json out.json]
"""

from __future__ import annotations

import argparse
import json
import os
import random
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

from foundation.config import load_config
from krm.scrape import scrape, series
from lab.local_cluster import LocalCluster
from lab.harness import KRM, create_topic, quorum_leader, stored_incidents, write_config

ROOT = Path(__file__).resolve().parents[1]

TOPIC, VICTIM = "fault-loop", 2
FAULTS = ("krm-run", "collect", "pipeline", "zookeeper", "controller", "quorum-leader", "observations",
          "cluster-down", "checkpoint-delete", "checkpoint-truncate", "disk-full")
ENV = {**os.environ, "SPARK_LOCAL_IP": "127.0.0.1"}


def log(msg: str) -> None:
    print(f"[{time.strftime('%H:%M:%S')}] {msg}", file=sys.stderr, flush=True)


class Krm:
    """The monitor's processes (`krm run`, or `krm collect` + `krm pipeline`), each SIGKILL-able."""

    def __init__(self, config: Path, logs: Path, split: bool) -> None:
        self.config, self.logs, self.split = config, logs, split
        self.procs: dict[str, subprocess.Popen] = {}
        self.starts = 0

    def start(self, *commands: str) -> None:
        for command in commands or (("collect", "pipeline") if self.split else ("run",)):
            self.starts += 1
            out = open(self.logs / f"{command}-{self.starts:02d}.log", "w")
            self.procs[command] = subprocess.Popen([KRM, command, "--config", str(self.config)], stdout=out,
                                                   stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                                   start_new_session=True, env=ENV)

    def kill(self, command: str) -> None:
        proc = self.procs.pop(command)
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()

    def stop(self) -> None:
        for command in list(self.procs):
            proc = self.procs.pop(command)
            proc.send_signal(signal.SIGTERM)
            try:
                proc.wait(timeout=90)
            except subprocess.TimeoutExpired:
                os.killpg(proc.pid, signal.SIGKILL)
                proc.wait()

    def exited(self) -> list[str]:
        return [f"{c} exited with {p.returncode}" for c, p in self.procs.items() if p.poll() is not None]


class Watch(threading.Thread):
    """Samples /metrics every second: what the operator saw during a round."""

    def __init__(self, url: str) -> None:
        super().__init__(daemon=True)
        self.url, self.samples, self.running = url, [], True

    def run(self) -> None:
        while self.running:
            t = time.time()
            try:
                text = scrape(self.url, timeout_s=2)
                up = [s.value for s in series(text, "krm_pipeline_up")]
                self.samples.append((t, "up" if up and up[0] == 1 else "pipeline_down"))
            except Exception:  # noqa: BLE001 - unreachable /metrics is what is being sampled
                self.samples.append((t, "metrics_unreachable"))
            time.sleep(max(0.0, 1.0 - (time.time() - t)))

    def seconds(self, since: float, what: str) -> int:
        return sum(1 for t, s in self.samples if t >= since and s == what)


def offline_on_metrics(url: str) -> set[int] | None:
    """The topic's offline partitions on /metrics, once the pipeline is up and what it shows is fresh
    (an observation less than 10 s old; polls are 1 s apart); None before that."""
    try:
        samples = scrape(url, timeout_s=2)
    except Exception:  # noqa: BLE001 - not up yet
        return None
    up = [s.value for s in series(samples, "krm_pipeline_up")]
    ages = [s.value for s in series(samples, "krm_observation_age_seconds")]
    if up != [1.0] or not ages or max(ages) > 10:
        return None
    return {int(s.labels["partition"]) for s in series(samples, "krm_partition_offline") if s.labels.get("topic") == TOPIC}


def open_incidents(config: Path) -> dict[int, list[str]] | None:
    try:
        out: dict[int, list[str]] = {}
        for i in stored_incidents("--open", "--type", "OFFLINE_PARTITION", "--config", str(config)):
            if i["topic"] == TOPIC:
                out.setdefault(i["partition"], []).append(i["incident_id"])
        return out
    except Exception:  # noqa: BLE001 - the table may not exist yet, or the disk may be full
        return None


def converge(url: str, config: Path, want: set[int], timeout_s: float) -> float | None:
    """Seconds until /metrics and the incidents table both show `want` offline (None: never)."""
    t0 = time.monotonic()
    while time.monotonic() - t0 < timeout_s:
        metrics = offline_on_metrics(url)
        stored = open_incidents(config) if metrics == want else None
        if stored is not None and set(stored) == want and all(len(v) == 1 for v in stored.values()):
            return time.monotonic() - t0
        time.sleep(1.0)
    return None


def merged(windows: list[tuple[float, float | None]]) -> list[tuple[float, float | None]]:
    """Overlapping outages of one partition as one: a partition already offline stays so, and keeps
    its one incident, when the whole cluster goes down around it."""
    out: list[tuple[float, float | None]] = []
    for start, end in sorted(windows, key=lambda w: w[0]):
        if out and (out[-1][1] is None or start <= out[-1][1] + 1):
            prev_end = out[-1][1]
            out[-1] = (out[-1][0], None if prev_end is None or end is None else max(prev_end, end))
        else:
            out.append((start, end))
    return out


def audit(config: Path, outages: list[tuple[float, float | None]], expected: set[int], partitions: set[int],
          cluster_down: list[tuple[float, float]]) -> dict[str, Any]:
    """Every OFFLINE_PARTITION incident of the topic against the outages (wall-clock seconds): the
    victim's outages for its partitions, the whole cluster's for every partition."""
    incidents = [i for i in stored_incidents("--type", "OFFLINE_PARTITION", "--config", str(config))
                 if i["topic"] == TOPIC]

    def ts(v: Any) -> float | None:
        if v is None:
            return None
        from datetime import datetime

        return datetime.fromisoformat(str(v).replace("Z", "+00:00")).timestamp()

    found = {"lost": 0, "duplicated": 0, "wrongly_resolved": 0, "left_open": 0, "unexplained": 0}
    explained: set[str] = set()
    for p in sorted(partitions):
        for start, end in merged((outages if p in expected else []) + list(cluster_down)):
            mine = [i for i in incidents if i["partition"] == p and start - 1 <= ts(i["opened_at"]) <= (end or 1e12)]
            explained |= {i["incident_id"] for i in mine}
            if not mine:
                found["lost"] += 1
            found["duplicated"] += max(0, len(mine) - 1)
            for i in mine:
                resolved = ts(i["resolved_at"])
                if resolved is not None and end is not None and resolved < end - 1:
                    found["wrongly_resolved"] += 1
                if end is not None and i["status"] == "open":
                    found["left_open"] += 1
    found["unexplained"] = len([i for i in incidents if i["incident_id"] not in explained])
    found["incidents"] = len(incidents)
    # pages about what the scenario left healthy: the other partitions, the other brokers (while the
    # whole cluster is down, everything is down)
    everything = stored_incidents("--config", str(config))
    false_pages = [i for i in everything if i["severity"] == "critical" and not (
        (i["topic"] == TOPIC and i["partition"] in expected) or (i["topic"] is None and i["broker"] == VICTIM)
        or any(a - 1 <= ts(i["opened_at"]) <= b + 5 for a, b in cluster_down))]
    found["critical_elsewhere"] = len(false_pages)
    found["critical_elsewhere_kinds"] = sorted({f"{i['type']}/{i['cause']}" for i in false_pages})
    return found


def history_written_after(data_dir: Path, t: float, timeout_s: float) -> bool:
    """The history tables still get appends after the last fault (a checkpoint deleted by hand once
    made Delta skip them: pipelines/checkpoints.py)."""
    from deltalake import DeltaTable

    table = data_dir / "tables" / "observations"
    deadline = time.time() + timeout_s
    while time.time() < deadline:
        try:
            newest = DeltaTable(str(table)).to_pyarrow_table(columns=["observed_at_ms"]).column(0).to_pylist()
            if newest and max(newest) >= t * 1000:
                return True
        except Exception:  # noqa: BLE001 - no table yet, or the disk still full
            pass
        time.sleep(5)
    return False


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--fault", choices=FAULTS, required=True)
    ap.add_argument("--rounds", type=int, default=10)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--converge-timeout", type=float, default=300.0)
    ap.add_argument("--json", type=Path, help="also write the result here")
    ap.add_argument("--keep", action="store_true", help="keep the work folder (logs, tables)")
    args = ap.parse_args()
    rng = random.Random(args.seed)
    work = Path(tempfile.mkdtemp(prefix=f"krm-faults-{args.fault}-"))
    mode = "kraft" if args.fault in ("controller", "quorum-leader") else "zk"
    monitored = LocalCluster(root=work / "monitored", mode=mode, brokers=3,
                             controllers=3 if args.fault == "quorum-leader" else 1).up()
    obs = LocalCluster(root=work / "observations", mode="kraft", brokers=1).up()
    tmpfs = work / "tmpfs"
    krm: Krm | None = None
    watch: Watch | None = None
    result: dict[str, Any] = {"fault": args.fault, "rounds": [], "seed": args.seed}
    try:
        assignment = create_topic(monitored, TOPIC, partitions=6, rf=1)
        expected = {p for p, r in assignment.items() if r == [VICTIM]}
        # flap_window_s = 0: every outage is its own incident, so the audit can count them exactly (with
        # the default window, outages a minute apart reopen one incident, as designed)
        config = write_config(monitored, work, poll_interval_s=1.0, observations_on=obs, history_trigger_s=10.0,
                              pipeline_extra="flap_window_s = 0.0\n")
        if args.fault == "disk-full":  # the data_dir on a filesystem of its own, to fill
            tmpfs.mkdir()
            subprocess.run(["mount", "-t", "tmpfs", "-o", "size=1536m", "tmpfs", str(tmpfs)], check=True)
            text = config.read_text()
            line = next(x for x in text.splitlines() if x.startswith("data_dir"))
            config.write_text(text.replace(line, f'data_dir = "{tmpfs / "data"}"'))
        pipeline = load_config(config).pipeline
        url = f"http://127.0.0.1:{pipeline.metrics_port}/metrics"
        data_dir = pipeline.data_dir.path
        (work / "logs").mkdir()
        krm = Krm(config, work / "logs", split=args.fault in ("collect", "pipeline"))
        krm.start()
        first = converge(url, config, set(), args.converge_timeout)
        if first is None:  # nothing to measure: say why (e.g. a process that could not start)
            raise SystemExit(f"krm did not converge within {args.converge_timeout}s before any fault "
                             f"({'; '.join(krm.exited()) or 'its processes are running'}); see {work / 'logs'}")
        log(f"krm up and converged in {first}s; expected offline while broker {VICTIM} is down: {sorted(expected)}")
        watch = Watch(url)
        watch.start()
        outages: list[tuple[float, float | None]] = []
        cluster_down: list[tuple[float, float]] = []  # every broker down (the cluster-down fault)
        down = False
        for n in range(1, args.rounds + 1):
            if down:
                monitored.start(VICTIM)
                outages[-1] = (outages[-1][0], time.time())
            else:
                monitored.kill(VICTIM)
                outages.append((time.time(), None))
            down = not down
            want = expected if down else set()
            time.sleep(rng.uniform(0, 12))
            t_fault = time.time()
            detail = inject(args.fault, rng, krm, monitored, obs, data_dir, tmpfs, cluster_down)
            took = converge(url, config, want, args.converge_timeout)
            row = {"round": n, "broker_down": down, "fault": detail, "converged_s": None if took is None else round(took, 1),
                   "since_fault_s": round(time.time() - t_fault, 1),
                   "metrics_unreachable_s": watch.seconds(t_fault, "metrics_unreachable"),
                   "pipeline_down_s": watch.seconds(t_fault, "pipeline_down"), "exited": krm.exited()}
            result["rounds"].append(row)
            log(json.dumps(row))
            if took is None:
                log(f"round {n} did not converge within {args.converge_timeout}s: stopping the loop")
                break
        if down:
            monitored.start(VICTIM)
            outages[-1] = (outages[-1][0], time.time())
            result["final_converged_s"] = converge(url, config, set(), args.converge_timeout)
        result["audit"] = audit(config, outages, expected, set(assignment), cluster_down)
        result["history_after_last_fault"] = history_written_after(pipeline.data_dir, t_fault, args.converge_timeout)
        result["outages"] = len(outages)
        result["outage_windows"] = [(round(a, 1), round(b, 1) if b else None) for a, b in outages]
        result["cluster_down_windows"] = [(round(a, 1), round(b, 1)) for a, b in cluster_down]
        logs = "".join(p.read_text(errors="replace") for p in sorted((work / "logs").glob("*.log")))
        result["tracebacks_in_logs"] = logs.count("Traceback")
        result["error_lines"] = sorted({line.split(" ", 3)[-1][:160] for line in logs.splitlines() if " ERROR " in line})[:20]
    finally:
        if watch is not None:
            watch.running = False
        if krm is not None:
            krm.stop()
        for c in (monitored, obs):
            c.down()
        if tmpfs.is_dir():
            subprocess.run(["umount", "-l", str(tmpfs)], check=False)
        if not args.keep:
            shutil.rmtree(work, ignore_errors=True)
        else:
            log(f"work folder kept: {work}")
    print(json.dumps(result))
    if args.json:
        args.json.write_text(json.dumps(result, indent=1) + "\n")
    return 0


def inject(fault: str, rng: random.Random, krm: Krm, monitored: LocalCluster, obs: LocalCluster,
           data_dir: Path, tmpfs: Path, cluster_down: list[tuple[float, float]]) -> str:
    """One fault, and the recovery an operator (or a supervisor such as systemd) would do; a
    whole-cluster outage's window appended to `cluster_down`."""
    if fault in ("krm-run", "collect", "pipeline"):
        command = "run" if fault == "krm-run" else fault
        krm.kill(command)
        krm.start(command)
        return f"SIGKILL krm {command}"
    if fault in ("checkpoint-delete", "checkpoint-truncate"):
        krm.kill("run")
        queries = sorted(p for p in (data_dir / "checkpoints").iterdir() if p.is_dir())
        query = rng.choice(queries)
        if fault == "checkpoint-delete":
            shutil.rmtree(query)
            what = f"deleted checkpoints/{query.name}"
        else:
            files = sorted((f for sub in ("offsets", "commits") for f in (query / sub).glob("[0-9]*")),
                           key=lambda f: f.stat().st_mtime)
            victim = files[-1]
            size = victim.stat().st_size
            with open(victim, "r+b") as f:
                f.truncate(rng.choice([0, size // 2]))
            what = f"truncated checkpoints/{query.name}/{victim.parent.name}/{victim.name} ({size} bytes)"
        krm.start("run")
        return what
    hold = {"zookeeper": (5, 30), "controller": (5, 30), "quorum-leader": (5, 30), "observations": (5, 60),
            "cluster-down": (60, 150), "disk-full": (20, 60)}[fault]
    seconds = rng.uniform(*hold)
    if fault == "zookeeper":
        monitored.kill_zookeeper()
        time.sleep(seconds)
        monitored.start_zookeeper()
    elif fault == "controller":
        (controller,) = monitored.controller_ids
        monitored.kill(controller)
        time.sleep(seconds)
        monitored.start(controller)
    elif fault == "quorum-leader":
        leader = quorum_leader(monitored)
        monitored.kill(leader)
        time.sleep(seconds)
        monitored.start(leader)
        return f"quorum leader {leader} down for {seconds:.0f}s"
    elif fault == "observations":
        obs.kill(1)
        time.sleep(seconds)
        obs.start(1)
    elif fault == "cluster-down":
        live = [b for b in monitored.broker_ids if monitored.status()["brokers"][str(b)]["state"] != "dead"]
        began = time.time()
        for b in live:
            monitored.kill(b)
        time.sleep(seconds)
        cluster_down.append((began, time.time()))
        for b in live:
            monitored.start(b, wait=False)
        monitored.wait_for_brokers(live, 120)
    elif fault == "disk-full":
        ballast = tmpfs / "ballast"
        with open(ballast, "wb") as f:  # in shrinking chunks: the pipeline writes while this fills
            size = 0
            for chunk in (64 << 20, 1 << 20, 4096):
                while True:
                    try:
                        os.posix_fallocate(f.fileno(), size, chunk)
                    except OSError:
                        break
                    size += chunk
        log(f"disk full: {shutil.disk_usage(tmpfs).free} bytes free")
        time.sleep(seconds)
        ballast.unlink()
    return f"{fault} for {seconds:.0f}s"


if __name__ == "__main__":
    sys.exit(main())
