"""Gray failures for the local clusters: the kernel drops every packet that arrives on a port, or
(a replication cut) every packet one broker sends to the other brokers' ports.

A broker whose listener is cut this way keeps its process, its ZooKeeper session and its KRaft
heartbeats (all connections it opens itself), so Kafka goes on counting it alive and its leader,
while no client, follower or controller request reaches it: what a host behind a broken switch
port or a wrong firewall rule looks like. Nothing is refused (a refusal would be a clear signal);
connection attempts and requests simply go unanswered.

One nftables table per cut port (`krm_cut_<port>`), so a cut is undone by deleting its table and
`heal_all` finds every cut of a cluster by its ports. Needs root and Debian's `nftables` (`make
setup` installs it).

A replication cut: each broker of a local cluster runs in a cgroup (v2) of its own, `krm-<port>`, from
its first instruction (`in_cgroup`), so every socket it opens belongs to it; a rule on the output hook
then drops what that cgroup's sockets send to the other brokers' listeners (`cut_outgoing`): its replica
fetchers stall, while clients, krm, ZooKeeper, the KRaft controller and the followers that fetch from it
still reach it (their connections are theirs: its answers go to their ephemeral ports). Without a
writable cgroup v2 hierarchy the brokers run as before and `cut_outgoing` says why it cannot.
"""

from __future__ import annotations

import logging
import os
import shutil
import subprocess
import time
from pathlib import Path

from foundation.errors import ClusterError

log = logging.getLogger(__name__)


def _binary() -> str | None:
    return shutil.which("nft") or next((p for p in ("/usr/sbin/nft", "/sbin/nft") if os.path.exists(p)), None)


def _nft(*args: str, script: str | None = None) -> subprocess.CompletedProcess[str]:
    nft = _binary()
    if nft is None:
        raise ClusterError("cutting a broker off needs nftables' `nft` (apt-get install nftables; `make setup` does)")
    return subprocess.run([nft, *args], input=script, capture_output=True, text=True, timeout=30)


def _table(port: int) -> str:
    return f"krm_cut_{port}"


def cut(port: int) -> None:
    """Drop every TCP packet to `port` (on any address, loopback included) from now on."""
    script = (f"table inet {_table(port)} {{\n"
              f"  chain input {{ type filter hook input priority -10; policy accept;\n"
              f"    tcp dport {port} drop\n  }}\n}}\n")
    done = _nft("-f", "-", script=script)
    if done.returncode != 0:
        raise ClusterError(f"could not cut port {port} off with nftables: {done.stderr.strip() or done.stdout.strip()}"
                           " (needs root)")
    log.debug("port %d cut off", port)


def heal(port: int) -> bool:
    """Let packets to `port` through again; False if it was not cut."""
    done = _nft("delete", "table", "inet", _table(port))
    log.debug("port %d healed", port)
    return done.returncode == 0


def is_cut(port: int) -> bool:
    return _nft("list", "table", "inet", _table(port)).returncode == 0


def heal_all(ports: list[int]) -> None:
    """Undo every cut of these ports (a cluster going down leaves none behind)."""
    if _binary() is None:
        return
    for port in ports:
        heal(port)


def _cgroup2_root() -> Path | None:
    """Where the cgroup v2 hierarchy is mounted (/sys/fs/cgroup, or /sys/fs/cgroup/unified on a hybrid
    host), if it is and this process may create groups in it."""
    try:
        mounts = Path("/proc/mounts").read_text().splitlines()
    except OSError:
        return None
    for line in mounts:
        fields = line.split()
        if len(fields) > 2 and fields[2] == "cgroup2":
            root = Path(fields[1])
            return root if os.access(root, os.W_OK) else None
    return None


def cgroup_name(port: int) -> str:
    return f"krm-{port}"


def prepare_cgroup(name: str) -> Path | None:
    """The group's cgroup.procs, the group created if missing; None without a writable cgroup v2."""
    root = _cgroup2_root()
    if root is None:
        return None
    try:
        (root / name).mkdir(exist_ok=True)
    except OSError as e:
        log.debug("no cgroup %s: %s", name, e)
        return None
    return root / name / "cgroup.procs"


def release_cgroup(name: str, tries: int = 10) -> None:
    """Remove the group once its process is gone (an empty group only; anything else is left as it is).
    The kernel empties a group a moment after its last process is reaped: a few tries, 20 ms apart."""
    root = _cgroup2_root()
    if root is None or not (root / name).is_dir():
        return
    for _ in range(tries):
        try:
            (root / name).rmdir()
            return
        except OSError:
            time.sleep(0.02)


def in_cgroup(procs: Path, cmd: list[str]) -> list[str]:
    """`cmd` started inside the group: a shell writes its own pid to the group's cgroup.procs, then execs
    `cmd` (the same process), so the command's first socket is the group's already."""
    return ["sh", "-c", 'echo $$ > "$0" && exec "$@"', str(procs), *cmd]


def _repl_table(name: str) -> str:
    return f"krm_repl_{name.replace('-', '_')}"


def cut_outgoing(name: str, ports: list[int]) -> None:
    """Drop every TCP packet the cgroup's sockets send to `ports` from now on (established connections too)."""
    root = _cgroup2_root()
    if root is None or not (root / name).is_dir():
        raise ClusterError(f"a replication cut needs the broker in cgroup {name} of a writable cgroup v2 hierarchy "
                           "(root, cgroup2 mounted); the broker was started without it")
    rel = root.relative_to("/sys/fs/cgroup") / name if root.is_relative_to("/sys/fs/cgroup") else None
    if rel is None:
        raise ClusterError(f"nftables finds cgroups under /sys/fs/cgroup; cgroup2 is mounted at {root}")
    script = (f"table inet {_repl_table(name)} {{\n"
              f"  chain output {{ type filter hook output priority -10; policy accept;\n"
              f"    socket cgroupv2 level 1 \"{rel}\" "  # (a group at the hierarchy's top: level 1)
              f"tcp dport {{ {', '.join(str(p) for p in sorted(ports))} }} drop\n  }}\n}}\n")
    done = _nft("-f", "-", script=script)
    if done.returncode != 0:
        raise ClusterError(f"could not cut {name}'s outgoing connections: {done.stderr.strip() or done.stdout.strip()}")
    log.debug("%s cut off from ports %s", name, ports)


def heal_outgoing(name: str) -> bool:
    """Let the cgroup's packets through again; False if it was not cut."""
    return _nft("delete", "table", "inet", _repl_table(name)).returncode == 0


def is_cut_outgoing(name: str) -> bool:
    return _binary() is not None and _nft("list", "table", "inet", _repl_table(name)).returncode == 0
