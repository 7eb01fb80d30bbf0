"""Where a command's CPU goes, by kind of process: the test suite's Kafka brokers, its Spark drivers,
Kafka's command-line tools, `krm` subcommands and the rest.

Every process on the machine is read from /proc once a second; a process's CPU seconds
(utime + stime) are counted from its first sight (from zero when it started during the run) to its
last. A process that exec's another (Spark's launcher script becoming a JVM) is filed under what it
became. CPU a process spent in its last second is missed.

Usage: .venv/bin/python benchmarks/suite_cpu.py -- .venv/bin/python -m pytest -q -p no:cacheprovider
"""

from __future__ import annotations

import argparse
import os
import re
import subprocess
import threading
import time
from collections import defaultdict
from pathlib import Path

HZ = os.sysconf("SC_CLK_TCK")


def kind(argv: list[str]) -> str:
    """The kind of process an argument vector names."""
    exe = Path(argv[0]).name if argv else "?"
    cmd = " ".join(argv)
    if exe == "java":
        if "SparkSubmit" in cmd:
            return "spark driver JVM" if "pyspark-shell" in cmd else "spark JVM (other)"
        if "QuorumPeerMain" in cmd or "ZooKeeperServerMain" in cmd:
            return "zookeeper"
        if "kafka.Kafka " in cmd:
            return "kafka broker/controller"
        main = re.search(r" ((?:kafka|org\.apache)\.[\w.$]+)(?: |$)", cmd)
        return f"jvm {main.group(1).rsplit('.', 1)[-1]}" if main else "jvm (other)"
    if exe.startswith("python"):
        if len(argv) > 1 and argv[1].endswith("/krm"):
            return f"krm {argv[2] if len(argv) > 2 else ''}".strip()
        if "-m pytest" in cmd:
            return "pytest (tests, in-process pipelines' Python)"
        return f"python {Path(argv[1]).name if len(argv) > 1 else ''}".strip()
    return exe


class Sampler:
    def __init__(self) -> None:
        self.procs: dict[int, list] = {}  # pid -> [start ticks, kind, cpu at first sight, last cpu]
        self.stop = threading.Event()
        self.first = True

    def sample(self) -> None:
        for entry in os.scandir("/proc"):
            if not entry.name.isdigit():
                continue
            pid = int(entry.name)
            try:
                stat = Path(f"/proc/{pid}/stat").read_text()
                fields = stat[stat.rindex(")") + 2:].split()
                cpu = (int(fields[11]) + int(fields[12])) / HZ
                start = int(fields[19])
                known = self.procs.get(pid)
                if known is None or known[0] != start or known[1] in ("bash", "sh"):
                    argv = Path(f"/proc/{pid}/cmdline").read_text().split("\0")[:-1]
                    if not argv:
                        continue
                    if known is None or known[0] != start:  # new (or a reused pid)
                        self.procs[pid] = known = [start, kind(argv), cpu if self.first else 0.0, cpu]
                    known[1] = kind(argv)
                known[3] = cpu
            except (OSError, ValueError, IndexError):
                pass
        self.first = False

    def run(self) -> None:
        while not self.stop.is_set():
            self.sample()
            self.stop.wait(1.0)

    def report(self) -> str:
        cpu: dict[str, float] = defaultdict(float)
        count: dict[str, int] = defaultdict(int)
        for _, k, first, last in self.procs.values():
            cpu[k] += last - first
            count[k] += 1
        rows = sorted(cpu.items(), key=lambda kv: -kv[1])
        lines = [f"{'CPU s':>9} {'procs':>6}  kind"]
        lines += [f"{v:9.1f} {count[k]:6d}  {k}" for k, v in rows if v >= 0.5]
        lines.append(f"{sum(cpu.values()):9.1f} {len(self.procs):6d}  total")
        return "\n".join(lines)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("command", nargs="+", help="the command to run (after --)")
    args = ap.parse_args()
    sampler = Sampler()
    thread = threading.Thread(target=sampler.run, daemon=True)
    thread.start()
    t0 = time.monotonic()
    rc = subprocess.call(args.command)
    sampler.stop.set()
    thread.join()
    wall = time.monotonic() - t0
    print(f"\n{' '.join(args.command)}: exit {rc}, {wall:.0f} s wall, {os.cpu_count()} cores\n{sampler.report()}")
    raise SystemExit(rc)


if __name__ == "__main__":
    main()
