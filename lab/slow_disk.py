"""A disk that answers late, for the lab: a pass-through FUSE file system over a broker's log directory whose writes
and syncs each wait a delay set at run time (`krm local-cluster slow BROKER --disk-delay
MS`). Device-mapper's delay target would be the closer model, but kernels without device-mapper are common
(this project's CI machine among them), and FUSE is everywhere /dev/fuse is.

What Kafka meets on it: every append is a write(2) that reaches the layer (FUSE without a write-back cache sends
each write through), so a broker's Produce LocalTime grows by the delay per batch, as on a disk whose writes are
slow. The index files' memory maps are written back through the layer too. Reads are not delayed: on a real disk
what Kafka reads back (followers and consumers at the tail, the indexes) is in the page cache, while through FUSE the
kernel keeps less of it (a page written in part is not kept), so delaying those reads would slow what a slow disk
leaves fast: the followers' fetches, read by the leader's network threads, and with them every request. Locks
stay the kernel's (the layer implements none), which Kafka's `.lock` files need.

Runs as its own process (`python -m lab.slow_disk BACKING MOUNT CONTROL`), so a broker's restart keeps its
disk; the delay in ms is the CONTROL file's content, read at most every CHECK_S. Needs root, /dev/fuse and
libfuse 2 (Debian's libfuse2; `make test` installs it), and the `fusepy` binding.
"""

from __future__ import annotations

import errno
import os
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

CHECK_S = 0.1  # how often the layer rereads its delay
MOUNT_WAIT_S = 10.0


class LayerError(RuntimeError):
    pass


def available() -> str | None:
    """None when this machine can run the layer, else why not (named for the operator)."""
    if not Path("/dev/fuse").exists():
        return "no /dev/fuse on this machine (the FUSE kernel module is not loaded)"
    if os.geteuid() != 0:
        return "mounting the delay layer needs root"
    try:
        import fuse  # noqa: F401 - the binding loads libfuse.so.2 at import
    except (ImportError, OSError, EnvironmentError) as e:
        return f"the FUSE binding cannot load ({e}): install Debian's libfuse2 and the fusepy package (`make venv`)"
    return None


def set_delay(control: Path, delay_ms: int) -> None:
    """The delay every data operation on the layer waits from now on (0: none). Written whole, then renamed."""
    if delay_ms < 0:
        raise LayerError(f"a disk delay must be 0 or more ms, got {delay_ms}")
    tmp = control.with_name(control.name + ".tmp")
    tmp.write_text(f"{delay_ms}\n")
    tmp.replace(control)


def delay_of(control: Path) -> int:
    try:
        return int(control.read_text().strip() or 0)
    except (OSError, ValueError):
        return 0


def mount(backing: Path, mountpoint: Path, control: Path, log: Path) -> int:
    """Start the layer's process over `backing` at `mountpoint` (an empty directory) and wait until it is
    mounted. Returns its pid."""
    why = available()
    if why is not None:
        raise LayerError(why)
    backing.mkdir(parents=True, exist_ok=True)
    mountpoint.mkdir(parents=True, exist_ok=True)
    if not control.exists():
        set_delay(control, 0)
    with open(log, "ab") as out:
        p = subprocess.Popen([sys.executable, "-m", "lab.slow_disk", str(backing), str(mountpoint), str(control)],
                             stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, start_new_session=True,
                             cwd=Path(__file__).resolve().parent.parent)
    deadline = time.monotonic() + MOUNT_WAIT_S
    while not os.path.ismount(mountpoint):
        if p.poll() is not None or time.monotonic() > deadline:
            p.kill()
            raise LayerError(f"the delay layer at {mountpoint} did not mount (exit {p.poll()}); see {log}")
        time.sleep(0.05)
    return p.pid


def unmount(mountpoint: Path, pid: int | None) -> None:
    """Stop the layer (its files stay in the backing directory). Unmounted first: the layer's loop then ends at
    once, where a signal waits for its next request."""
    if os.path.ismount(mountpoint) and subprocess.run(["umount", str(mountpoint)], capture_output=True).returncode:
        subprocess.run(["umount", "-l", str(mountpoint)], capture_output=True)  # busy: detached now, gone when idle
    if pid is None:
        return
    deadline = time.monotonic() + 5
    while time.monotonic() < deadline:
        try:
            if os.waitpid(pid, os.WNOHANG)[0] == pid:
                return
        except ChildProcessError:  # not ours (another `krm` started it): is it still there?
            try:
                os.kill(pid, 0)
            except ProcessLookupError:
                return
        time.sleep(0.05)
    try:
        os.kill(pid, 9)
    except ProcessLookupError:
        pass


def unmount_under(root: Path) -> None:
    """Lazily unmount every file system mounted below `root` (a layer left behind by a process that died: its
    directory cannot be removed while it is mounted)."""
    prefix = str(Path(root).resolve()) + "/"
    with open("/proc/mounts") as f:
        points = [line.split()[1] for line in f if line.split()[1].startswith(prefix)]
    for point in sorted(points, reverse=True):
        subprocess.run(["umount", "-l", point], capture_output=True)


def _layer(backing: str, control: Path) -> Any:
    """The file system's operations: each path is the backing directory's, each data operation waits."""
    from fuse import FuseOSError, Operations  # loads libfuse: only in the layer's own process

    class Delayed(Operations):  # type: ignore[misc]
        use_ns = True

        def __init__(self) -> None:
            self.delay_s = delay_of(control) / 1000
            self.checked = time.monotonic()
            self.guard = threading.Lock()  # not `lock`: an attribute by an operation's name is taken for it

        def _wait(self) -> None:
            now = time.monotonic()
            if now - self.checked >= CHECK_S:
                with self.guard:
                    self.delay_s, self.checked = delay_of(control) / 1000, now
            if self.delay_s > 0:
                time.sleep(self.delay_s)

        def _p(self, path: str) -> str:
            return backing + path

        def __call__(self, op: str, *args: Any) -> Any:
            try:
                return super().__call__(op, *args)
            except OSError as e:  # the backing file system's own errors, passed on as the kernel's
                raise FuseOSError(e.errno or errno.EIO) from None

        def access(self, path: str, amode: int) -> int:
            if not os.access(self._p(path), amode):
                raise FuseOSError(errno.EACCES)
            return 0

        def chmod(self, path: str, mode: int) -> None:
            os.chmod(self._p(path), mode)

        def chown(self, path: str, uid: int, gid: int) -> None:
            os.chown(self._p(path), uid, gid)

        def getattr(self, path: str, fh: int | None = None) -> dict[str, Any]:
            st = os.fstat(fh) if fh is not None else os.lstat(self._p(path))
            return {k: getattr(st, k) for k in ("st_mode", "st_nlink", "st_uid", "st_gid", "st_size", "st_blocks")} | {
                "st_atime": st.st_atime_ns, "st_mtime": st.st_mtime_ns, "st_ctime": st.st_ctime_ns}  # use_ns

        def readdir(self, path: str, fh: int) -> list[str]:
            return [".", "..", *os.listdir(self._p(path))]

        def readlink(self, path: str) -> str:
            return os.readlink(self._p(path))

        def mknod(self, path: str, mode: int, dev: int) -> None:
            os.mknod(self._p(path), mode, dev)

        def mkdir(self, path: str, mode: int) -> None:
            os.mkdir(self._p(path), mode)

        def rmdir(self, path: str) -> None:
            os.rmdir(self._p(path))

        def unlink(self, path: str) -> None:
            os.unlink(self._p(path))

        def symlink(self, target: str, source: str) -> None:
            os.symlink(source, self._p(target))

        def link(self, target: str, source: str) -> None:
            os.link(self._p(source), self._p(target))

        def rename(self, old: str, new: str) -> None:
            os.rename(self._p(old), self._p(new))

        def utimens(self, path: str, times: tuple[int, int] | None = None) -> None:
            os.utime(self._p(path), ns=times) if times else os.utime(self._p(path))

        def statfs(self, path: str) -> dict[str, int]:
            st = os.statvfs(self._p(path))
            return {k: getattr(st, k) for k in ("f_bavail", "f_bfree", "f_blocks", "f_bsize", "f_favail", "f_ffree",
                                                "f_files", "f_flag", "f_frsize", "f_namemax")}

        def open(self, path: str, flags: int) -> int:
            if flags & os.O_ACCMODE == os.O_WRONLY:  # as in create: the kernel may read through it
                flags = (flags & ~os.O_ACCMODE) | os.O_RDWR
            return os.open(self._p(path), flags & ~os.O_APPEND)  # the kernel gives each write its offset

        def create(self, path: str, mode: int, fi: Any = None) -> int:
            # read-write whatever the caller asked: the kernel reads pages through this handle too (a memory map of
            # a file opened to write faults its pages in with reads)
            return os.open(self._p(path), os.O_RDWR | os.O_CREAT, mode)

        def read(self, path: str, size: int, offset: int, fh: int) -> bytes:
            return os.pread(fh, size, offset)

        def write(self, path: str, data: bytes, offset: int, fh: int) -> int:
            self._wait()
            return os.pwrite(fh, data, offset)

        def truncate(self, path: str, length: int, fh: int | None = None) -> None:
            if fh is not None:
                os.ftruncate(fh, length)
            else:
                os.truncate(self._p(path), length)

        def flush(self, path: str, fh: int) -> int:
            return 0  # close(2) of one descriptor of many: nothing to write, the data went through already

        def release(self, path: str, fh: int) -> int:
            os.close(fh)
            return 0

        def fsync(self, path: str, datasync: int, fh: int) -> int:
            self._wait()
            os.fdatasync(fh) if datasync else os.fsync(fh)
            return 0

        def fsyncdir(self, path: str, datasync: int, fh: int) -> int:
            self._wait()
            return 0

    return Delayed()


def main(argv: list[str]) -> int:
    if len(argv) != 3:
        print("usage: python -m lab.slow_disk BACKING MOUNTPOINT CONTROL", file=sys.stderr)
        return 2
    from fuse import FUSE

    backing, mountpoint, control = os.path.realpath(argv[0]), argv[1], Path(argv[2])
    # big_writes: writes of up to 128 KiB reach the layer whole (libfuse 2 splits them into pages otherwise);
    # allow_other: the broker's JVM may run as another user than the layer
    FUSE(_layer(backing, control), mountpoint, foreground=True, nothreads=False, big_writes=True, allow_other=True,
         fsname="krm-slow-disk")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
