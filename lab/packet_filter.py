"""Gray failures for the local clusters: the kernel drops every packet that arrives on a port.

A broker whose listener is cut this way keeps its process, its ZooKeeper session and its KRaft
heartbeats (all connections it opens itself), so Kafka goes on counting it alive and its leader,
while no client, follower or controller request reaches it: what a host behind a broken switch
port or a wrong firewall rule looks like. Nothing is refused (a refusal would be a clear signal);
connection attempts and requests simply go unanswered.

One nftables table per cut port (`krm_cut_<port>`), so a cut is undone by deleting its table and
`heal_all` finds every cut of a cluster by its ports. Needs root and Debian's `nftables` (`make
setup` installs it).
"""

from __future__ import annotations

import logging
import os
import shutil
import subprocess

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
