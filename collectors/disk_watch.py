"""Each broker's log directories over time, and when each will be full at its recent growth rate.

Every `[collector] log_dir_poll_s` the poll asks each live broker for its directories (DescribeLogDirs
with no topic, collectors/log_dirs.py; sent before the offsets round, read after it, never waited for):
failed or not, and the filesystem's total and usable bytes.
The used bytes (total - usable) of the last `log_dir_window_s` give a growth rate; the forecast is the
usable bytes over that rate, from the faster of the whole window's trend and the last three samplings',
so a disk that starts filling after a quiet hour is seen within three samplings, and a rate that eases
off keeps the longer trend. A directory that is not growing (or further out than `log_dir_horizon_s`) has no
forecast: docs/disks.md says how the alerts read it.

A broker whose every directory has failed shuts itself down (Kafka halts when its last log directory
goes offline: `LogManager.handleLogDirFailure`, core/src/main/scala/kafka/log/LogManager.scala: "Shutdown
broker because all log dirs in ... have failed"), and then answers nothing: the last word krm had of its
disks is all there is. So when a broker stops
serving, its last sampling is kept as a verdict: every directory failed or forecast full by then (its
forecast ran out by this moment, give or take GONE_FULL_SLACK_S) is a full disk, and the broker's
departure says so (`disk_full`, pipelines/detectors/brokers.py) until it serves again.
Pure but for the samples it keeps.
"""

from __future__ import annotations

from collections import deque
from typing import Iterable, Sequence

from collectors.log_dirs import LogDir
from schemas import typed

# A broker that stops serving within this long of its forecast fill (or a sampling interval, if longer) went
# down on a full disk: Kafka fails the directory on the first write that does not fit, a segment's worth of
# bytes before the filesystem's last byte, and the rate is an estimate
GONE_FULL_SLACK_S = 30.0
MIN_SAMPLES = 3  # spanning at least two sampling intervals: no trend from one step


def growth_rate(samples: Sequence[tuple[float, int]]) -> float | None:
    """Bytes per second by least squares over (seconds, used bytes); None with fewer than MIN_SAMPLES."""
    n = len(samples)
    if n < MIN_SAMPLES:
        return None
    mt = sum(t for t, _ in samples) / n
    mu = sum(u for _, u in samples) / n
    var = sum((t - mt) ** 2 for t, _ in samples)
    if var <= 0:
        return None
    return sum((t - mt) * (u - mu) for t, u in samples) / var


def full_in(samples: Sequence[tuple[float, int]], usable: int, step_s: float) -> float | None:
    """Seconds until `usable` bytes are used at the faster of the whole trend and the last three
    samplings' (`step_s` apart); None while not growing or known for less than two steps."""
    min_span = 2 * step_s * 0.9  # (a sampling waits for its poll: steps are a little uneven)
    if len(samples) < MIN_SAMPLES or samples[-1][0] - samples[0][0] < min_span:
        return None
    recent = [s for s in samples if s[0] >= samples[-1][0] - 3 * step_s]
    rates = [r for r in (growth_rate(samples), growth_rate(recent)) if r is not None and r > 0]
    if not rates:
        return None
    return max(0.0, usable / max(rates))


class DiskWatch:
    """The samples of every directory of one cluster's brokers, and what the records say of them."""

    def __init__(self, poll_s: float, window_s: float, horizon_s: float) -> None:
        self.poll_s = poll_s  # 0: never sampled
        self.window_s = window_s
        self.horizon_s = horizon_s
        self._at = float("-inf")
        self._samples: dict[tuple[int, str], deque[tuple[float, int]]] = {}
        self._latest: dict[int, list[typed.LogDir]] = {}  # broker -> its directories for the record
        self._sampled_at: dict[int, float] = {}  # broker -> when its directories in _latest were asked
        # a broker not serving -> its directories' last word when they were full as it stopped, else None
        self._gone: dict[int, list[typed.LogDir] | None] = {}

    def due(self, now: float) -> bool:
        """Time to sample again; True marks the sampling as started."""
        if self.poll_s <= 0 or now - self._at < self.poll_s:
            return False
        self._at = now
        return True

    def note(self, reports: dict[int, tuple[list[LogDir], float]], live: Iterable[int],
             serving: Iterable[int] | None = None, now: float | None = None) -> None:
        """Answers in (broker -> (directories, when asked)); brokers not live any more are forgotten, a live
        one that did not answer keeps its last word until it answers again. `serving`: the live brokers
        that answered this poll (default: every live one); one that stops serving is judged on its last
        word at `now` (went_full)."""
        live = set(live)
        serving = live if serving is None else set(serving)
        for b in list(self._gone):
            if b in serving:
                del self._gone[b]  # back: its next departure is judged afresh
        if now is not None:
            for b in self._latest:
                if b not in serving and b not in self._gone:
                    self._gone[b] = self._latest[b] if self._full_at(b, now) else None
        for b in [b for b in self._latest if b not in live]:
            del self._latest[b]
            self._sampled_at.pop(b, None)
        for key in [k for k in self._samples if k[0] not in live]:
            del self._samples[key]
        for broker, (dirs, asked) in reports.items():
            out: list[typed.LogDir] = []
            for d in sorted(dirs, key=lambda d: d.path):
                entry: typed.LogDir = {"path": d.path, "failed": d.failed}
                key = (broker, d.path)
                if d.failed or d.total_bytes is None or d.usable_bytes is None:
                    self._samples.pop(key, None)
                else:
                    entry["total_bytes"], entry["usable_bytes"] = d.total_bytes, d.usable_bytes
                    samples = self._samples.setdefault(key, deque())
                    samples.append((asked, d.total_bytes - d.usable_bytes))
                    while samples and samples[0][0] < asked - self.window_s:
                        samples.popleft()
                    eta = full_in(samples, d.usable_bytes, self.poll_s)
                    if eta is not None and eta <= self.horizon_s:
                        entry["full_in_s"] = round(eta, 1)
                out.append(entry)
            self._latest[broker] = out
            self._sampled_at[broker] = asked

    def dirs(self, broker: int) -> list[typed.LogDir] | None:
        return self._latest.get(broker)

    def went_full(self, broker: int) -> list[typed.LogDir] | None:
        """The directories' last word of a broker that stopped serving with every one failed or full by its
        last sampling; None for any other broker."""
        return self._gone.get(broker)

    def _full_at(self, broker: int, now: float) -> bool:
        dirs, at = self._latest.get(broker), self._sampled_at.get(broker)
        if not dirs or at is None:
            return False

        def full(d: typed.LogDir) -> bool:
            if d["failed"] or d.get("usable_bytes") == 0:
                return True
            eta = d.get("full_in_s")  # (slack: it went between two samplings, and Kafka fails a little early)
            return eta is not None and at + eta <= now + max(self.poll_s, GONE_FULL_SLACK_S)
        return all(full(d) for d in dirs)
