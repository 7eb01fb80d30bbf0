"""How long things last, counted in a cluster's polls: the one place every multiple of the poll interval is
decided. A view is stale after three polls; a poll is stuck after five; a steady poll kept home holds until
the next one published; a page's live part reloads once a poll; a pipeline starting reads back one resend
window; the shares of a split cluster poll in step, on the wall clock's multiples of the interval. The
collectors, the pipeline, the runner and the console ask here, never multiply for themselves."""

from __future__ import annotations

from dataclasses import dataclass

STALE_AFTER_POLLS = 3  # a view this many polls old is stale (one slow poll or micro-batch is not blindness)
STALE_MIN_S = 6.0  # ... and never before this (nor, without a poll interval, after it)
STUCK_AFTER_POLLS = 5  # a poll still running this many intervals in is logged while it runs
STUCK_MIN_S = 10.0
READY_POLLS = 5  # /readyz wants a batch or a poll at least this many polls recent ...
READY_MIN_S = 30.0  # ... at least this, and two published polls of a cluster at rest


@dataclass(frozen=True)
class Cadence:
    """One cluster's cadence: its poll interval and how often an unchanged poll is published anyway
    (`[collector] unchanged_publish_s`, 0: every poll is)."""

    poll_interval_s: float
    resend_s: float = 0.0

    def __post_init__(self) -> None:
        if self.poll_interval_s <= 0 or self.resend_s < 0:
            raise ValueError(f"a cadence needs poll_interval_s > 0 and resend_s >= 0, got {self}")

    @property
    def stale_after_s(self) -> float:
        """The age past which the cluster's view is stale (krm_cluster_view_stale, the console's banner)."""
        return max(STALE_MIN_S, STALE_AFTER_POLLS * self.poll_interval_s)

    @property
    def stuck_after_s(self) -> float:
        """A poll running this long is logged while it runs, with where its thread waits."""
        return max(STUCK_MIN_S, STUCK_AFTER_POLLS * self.poll_interval_s)

    @property
    def steady_hold_s(self) -> float:
        """How long a steady poll published vouches for the polls that repeat it and stay home: until the next
        poll published, at most a resend and a poll later."""
        return self.resend_s + self.poll_interval_s


def reload_every_s(stale_after_s: float) -> float:
    """How often a page's live part reloads for a view that turns stale after `stale_after_s`: once a poll,
    at least once a second."""
    return max(1.0, stale_after_s / STALE_AFTER_POLLS)


def ready_window_s(slowest_poll_s: float, resend_s: float) -> float:
    """/readyz and krm_pipeline_up want a batch (or a poll) at least this recent."""
    return max(READY_MIN_S, READY_POLLS * slowest_poll_s, 2 * resend_s)


def read_back_s(slowest_poll_s: float, resend_s: float) -> float | None:
    """How far back a new alert query reads the observations topic: one resend window and a poll, where the
    last published poll of a cluster at rest is (None: every poll is published, read from the end)."""
    return resend_s + slowest_poll_s if resend_s > 0 else None


def next_slot(now_s: float, interval_s: float) -> float:
    """The first multiple of `interval_s` on the wall clock (epoch seconds) at or after `now_s`. The collector
    processes of one split cluster (collectors/topic_share.py) poll at these moments, so their shares of a
    poll are observed together and the cluster's view, as fresh as its stalest share, is a poll's age, not up
    to two (hosts' clocks kept by NTP agree within milliseconds)."""
    if interval_s <= 0:
        raise ValueError(f"interval_s must be > 0, got {interval_s}")
    slots = -(-now_s // interval_s)  # ceil
    return slots * interval_s
