"""lab/slow_disk.py, the lab's slow disk, mounted for real (root, /dev/fuse, libfuse2): what Kafka does to its log
directory works through it (appends, renames, a memory-mapped index, a lock file), and each write waits the delay
set at run time while reads do not."""

import fcntl
import mmap
import os
import time

import pytest

from lab import slow_disk

pytestmark = pytest.mark.integration


@pytest.fixture()
def layer(tmp_path):
    why = slow_disk.available()
    assert why is None, why  # `make setup` installs libfuse2; the suite runs as root
    mounted = tmp_path / "data"
    control = tmp_path / "delay-ms"
    pid = slow_disk.mount(tmp_path / "data.under-layer", mounted, control, tmp_path / "layer.log")
    yield mounted, control, tmp_path / "data.under-layer"
    slow_disk.unmount(mounted, pid)
    assert not os.path.ismount(mounted)


def _append_s(path, times=5):
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND)
    try:
        t0 = time.monotonic()
        for _ in range(times):
            os.write(fd, b"x" * 512)
        return (time.monotonic() - t0) / times
    finally:
        os.close(fd)


def test_what_kafka_does_to_its_log_directory_works_through_it(layer):
    mounted, _, backing = layer
    _append_s(mounted / "00000.log")
    os.rename(mounted / "00000.log", mounted / "00000.log.deleted")  # Kafka renames segments it deletes
    assert sorted(os.listdir(mounted)) == ["00000.log.deleted"]
    assert (backing / "00000.log.deleted").stat().st_size == 5 * 512
    fd = os.open(mounted / "00000.index", os.O_RDWR | os.O_CREAT)  # an index: preallocated, then mapped
    os.ftruncate(fd, 4096)
    with mmap.mmap(fd, 4096) as m:
        m[:8] = b"offset01"
        m.flush()
    os.close(fd)
    assert (backing / "00000.index").read_bytes()[:8] == b"offset01"
    fd = os.open(mounted / ".lock", os.O_RDWR | os.O_CREAT)  # the log directory's lock (FileChannel.tryLock)
    fcntl.lockf(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    os.close(fd)


def test_each_write_waits_the_delay_set_at_run_time(layer):
    mounted, control, _ = layer
    assert _append_s(mounted / "seg.log") < 0.05
    slow_disk.set_delay(control, 150)
    time.sleep(2 * slow_disk.CHECK_S)
    assert _append_s(mounted / "seg.log") >= 0.15
    t0 = time.monotonic()
    (mounted / "seg.log").read_bytes()
    assert time.monotonic() - t0 < 0.15  # reads are not delayed (what a real disk's page cache serves)
    slow_disk.set_delay(control, 0)
    time.sleep(2 * slow_disk.CHECK_S)
    assert _append_s(mounted / "seg.log") < 0.05
