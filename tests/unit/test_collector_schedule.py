"""The collector's poll loop: polls asked for by ZooKeeper watches come on top of the fixed-rate
schedule and never push it back (a burst of them once left a 9 s gap without polls)."""

import threading
import time
from types import SimpleNamespace

import pytest

from collectors.daemon import Collector

pytestmark = pytest.mark.unit


class Source:
    def __init__(self, poll_interval_s=0.5, broker_check_s=0.2, reach_probe_s=0.0):
        self.cluster = SimpleNamespace(name="c1")
        self.settings = SimpleNamespace(poll_interval_s=poll_interval_s, broker_check_s=broker_check_s,
                                        reach_probe_s=reach_probe_s)
        self.at: list[float] = []
        self.probed: list[float] = []
        self.zk = SimpleNamespace()  # ZooKeeper holds the metadata: its watches wake the loop

    def poll(self):
        self.at.append(time.monotonic())
        return []

    def probe(self):
        self.probed.append(time.monotonic())


class Watches:
    """Asks for a full poll every 20 ms for the first 0.6 s, like a burst after broker changes."""

    def __init__(self, wake):
        self.until = time.monotonic() + 0.6
        self.wake = wake

    def take_poll_request(self):
        return time.monotonic() < self.until


def test_watch_triggered_polls_do_not_delay_the_schedule():
    c = Collector.__new__(Collector)
    wake = threading.Event()
    src = Source()
    c.publisher = SimpleNamespace(publish=lambda records: None)
    c._wake = {"c1": wake}
    c._zk = {"c1": Watches(wake)}
    c._stop = threading.Event()
    c.polls, c.last_poll_s, c.last_poll_at, c.poll_started_at, c.last_published = 0, {}, {}, {}, {}
    c.next_poll_due = {}
    t = threading.Thread(target=c._loop, args=(src,), daemon=True)
    start = time.monotonic()
    t.start()
    ticker = threading.Thread(target=lambda: [wake.set() or time.sleep(0.02) for _ in range(30)], daemon=True)
    ticker.start()
    time.sleep(2.0)
    c._stop.set()
    wake.set()
    t.join(timeout=5)
    late = [a for a in src.at if a - start > 0.7]  # after the burst: the plain schedule
    assert len([a for a in src.at if a - start <= 0.7]) > 5, "the burst polls ran"
    assert late and late[0] - start < 1.1, f"first scheduled poll after the burst came {late[0] - start:.2f}s in"
    assert len(late) >= 2


class KraftSource(Source):
    """No ZooKeeper watches: the loop asks brokers_changed() between polls; the broker set changes
    once, 0.7 s in (a broker fenced)."""

    def __init__(self, start):
        super().__init__(poll_interval_s=5.0, broker_check_s=0.05)
        self.zk = None
        self.change_at = start + 0.7
        self.checks = 0

    def brokers_changed(self):
        self.checks += 1
        if self.change_at is not None and time.monotonic() >= self.change_at:
            self.change_at = None
            return True
        return False


def test_without_watches_a_broker_change_polls_at_once():
    c = Collector.__new__(Collector)
    wake = threading.Event()
    start = time.monotonic()
    src = KraftSource(start)
    c.publisher = SimpleNamespace(publish=lambda records: None)
    c._wake, c._zk, c._stop = {"c1": wake}, {}, threading.Event()
    c.polls, c.last_poll_s, c.last_poll_at, c.poll_started_at, c.last_published = 0, {}, {}, {}, {}
    c.next_poll_due = {}
    t = threading.Thread(target=c._loop, args=(src,), daemon=True)
    t.start()
    time.sleep(1.2)
    c._stop.set()
    wake.set()
    t.join(timeout=5)
    offsets = [round(a - start, 2) for a in src.at]
    assert len(offsets) == 2, f"the scheduled first poll and one for the change, nothing else: {offsets}"
    assert 0.7 <= offsets[1] < 0.85, f"the change was polled {offsets[1]}s in, not within a check interval"
    assert src.checks > 10


def _run_without_watch_requests(src, seconds):
    """The poll loop over `src` for `seconds`, in ZooKeeper mode with no watch asking for a poll."""
    c = Collector.__new__(Collector)
    wake = threading.Event()
    c.publisher = SimpleNamespace(publish=lambda records: None)
    c._wake, c._stop = {"c1": wake}, threading.Event()
    c._zk = {"c1": SimpleNamespace(take_poll_request=lambda: False)}
    c.polls, c.last_poll_s, c.last_poll_at, c.poll_started_at, c.last_published = 0, {}, {}, {}, {}
    c.next_poll_due = {}
    t = threading.Thread(target=c._loop, args=(src,), daemon=True)
    t.start()
    time.sleep(seconds)
    c._stop.set()
    wake.set()
    t.join(timeout=5)


def test_brokers_are_probed_between_polls_with_watches_too():
    """ZooKeeper mode has no brokers-only check, but the reachability probes run between polls at
    their own cadence, and never stand in for a poll."""
    src = Source(poll_interval_s=1.0, reach_probe_s=0.1)
    _run_without_watch_requests(src, 1.5)
    assert len(src.at) == 2, f"the two scheduled polls only: {src.at}"
    between = [a for a in src.probed if src.at[0] < a < src.at[1]]
    assert 4 <= len(between) <= 10, f"about one probe per 0.1 s between the polls: {len(between)}"
    gaps = [b - a for a, b in zip(src.probed, src.probed[1:])]
    assert min(gaps) >= 0.09, f"no faster than reach_probe_s: {min(gaps):.3f}s"


def test_a_probe_answered_by_a_broker_called_unreachable_polls_at_once():
    """The path to a broker krm called unreachable is back when it answers a probe: a poll runs then,
    not at the next interval, so its partitions are cleared that much sooner."""
    src = Source(poll_interval_s=5.0, reach_probe_s=0.05)
    start = time.monotonic()
    back_at = [start + 0.6]

    def probe():
        src.probed.append(time.monotonic())
        if back_at and time.monotonic() >= back_at[0]:
            back_at.clear()
            return True
        return False

    src.probe = probe
    _run_without_watch_requests(src, 1.2)
    offsets = [round(a - start, 2) for a in src.at]
    assert len(offsets) == 2 and 0.6 <= offsets[1] < 0.9, f"the scheduled poll, then one at the answer: {offsets}"


class WallSource(Source):
    def poll(self):
        self.at.append(time.time())
        return []


def test_a_share_of_a_split_cluster_polls_on_the_wall_clock_s_slots():
    """Two shares started apart poll at the same wall-clock moments (multiples of the interval), so a poll's
    shares are observed together; a cluster polled whole polls at once from its start."""
    shares = []
    for delay in (0.0, 0.23):
        time.sleep(delay)
        src = WallSource(poll_interval_s=1.0)
        c = Collector.__new__(Collector)
        wake = threading.Event()
        c.publisher = SimpleNamespace(publish=lambda records: None)
        c._wake, c._stop, c._in_step = {"c1": wake}, threading.Event(), True
        c._zk = {"c1": SimpleNamespace(take_poll_request=lambda: False)}
        c.polls, c.last_poll_s, c.last_poll_at, c.poll_started_at, c.last_published = 0, {}, {}, {}, {}
        c.next_poll_due = {}
        threading.Thread(target=c._loop, args=(src,), daemon=True).start()
        shares.append((c, wake, src))
    time.sleep(2.6)
    for c, wake, _ in shares:
        c._stop.set()
        wake.set()
    for _, _, src in shares:
        assert len(src.at) >= 2, src.at
        for at in src.at:  # on a whole second, some scheduling milliseconds after it (a loaded machine)
            assert (at % 1.0) < 0.25, f"{at % 1.0:.3f} s past a slot"
    first, second = (int(src.at[0]) for _, _, src in shares)
    assert second - first in (0, 1), "the later share's first poll is a slot too, not 0.23 s after the first's"
