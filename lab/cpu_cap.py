"""`krm local-cluster slow BROKER --cpu PCT`: a broker's JVM capped at PCT % of one core by a CPU cgroup (the v1
cpu controller's CFS quota), the fault of a noisy neighbour or a throttled container. The broker stays
registered and answers, late. `fast` moves it back to the root group. Root only; a host without the v1 cpu
controller says so (this machine has it at /sys/fs/cgroup/cpu; cgroup v2's cpu.max is not written here)."""

from __future__ import annotations

from pathlib import Path

from foundation.errors import ClusterError

CPU_V1 = Path("/sys/fs/cgroup/cpu")
PERIOD_US = 100_000  # the CFS period: the quota is PCT % of it
MIN_QUOTA_US = 1_000  # the kernel's floor


def _group(name: str) -> Path:
    return CPU_V1 / "krm" / name


def available() -> str | None:
    """Why no cap can be set here (None: it can)."""
    if not (CPU_V1 / "cpu.cfs_quota_us").exists():
        return (f"no cgroup v1 cpu controller at {CPU_V1} (a cgroup v2-only host: caps by cpu.max are not "
                "supported by the lab yet)")
    if not (CPU_V1 / "cgroup.procs").stat().st_mode & 0o200 or not _writable(CPU_V1):
        return f"{CPU_V1} is not writable: run as root"
    return None


def _writable(path: Path) -> bool:
    import os

    return os.access(path, os.W_OK)


def cap(name: str, pid: int, pct: float) -> int:
    """Put process `pid` (every thread of it) in the group `name`, capped at `pct` % of one core; returns the
    quota in µs per period."""
    if not 0 < pct <= 100:
        raise ClusterError(f"--cpu {pct}: a share of one core, in percent (0 < PCT <= 100)")
    why = available()
    if why is not None:
        raise ClusterError(f"cannot cap a broker's CPU: {why}")
    group = _group(name)
    group.mkdir(parents=True, exist_ok=True)
    quota = max(MIN_QUOTA_US, int(PERIOD_US * pct / 100))
    (group / "cpu.cfs_period_us").write_text(str(PERIOD_US))
    (group / "cpu.cfs_quota_us").write_text(str(quota))
    (group / "cgroup.procs").write_text(str(pid))
    return quota


def capped_pct(name: str) -> float | None:
    """The cap of group `name` in % of one core, while it holds a process (None: no cap)."""
    group = _group(name)
    try:
        if not (group / "cgroup.procs").read_text().split():
            return None
        quota = int((group / "cpu.cfs_quota_us").read_text())
        period = int((group / "cpu.cfs_period_us").read_text())
    except (OSError, ValueError):
        return None
    return None if quota < 0 else round(100 * quota / period, 2)


def uncap(name: str) -> bool:
    """Move every process of group `name` back to the root group and remove it; False if there was none."""
    group = _group(name)
    if not group.exists():
        return False
    for pid in (group / "cgroup.procs").read_text().split():
        try:
            (CPU_V1 / "cgroup.procs").write_text(pid)
        except OSError:  # gone meanwhile
            pass
    group.rmdir()
    return True
