"""The offset rules in plain Python: reference oracles for tests, beside the golden tables.

The product runs each rule's Spark form (pipelines/detectors/hw_stall.py, lag.py, truncation.py,
unclean.py); these say the same rule the way tests/golden_offsets.py states its cases, so a change
to a rule shows in both forms or in neither.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Sequence

from pipelines.detectors.hw_stall import FOLLOWER_BEHIND, FOLLOWER_UNREACHABLE, WAITS_OUTSIDE_ISR
from schemas.quiet import SILENT_FOLLOWER_WINDOW_MS, STOPPED_FETCHER_WINDOW_MS
from pipelines.detectors.truncation import BELOW_HW, REFETCH, UNCOMMITTED
from pipelines.detectors.unclean import LAST_KNOWN_ELR, NOT_ELIGIBLE, RULE as UNCLEAN, UNCONFIRMED


@dataclass(frozen=True)
class Stall:
    stalled_ms: int
    cause: str
    holding_back: tuple[int, ...]
    unreachable: tuple[int, ...]


def classify_stall(leader: int, isr: Sequence[int], hw: int | None, leos: dict[int, int], since_ms: int | None,
                   observed_at_ms: int, window_ms: int, judged_unreachable: Sequence[int] = (),
                   stalled_followers: Sequence[int] = (), under_min_isr: bool = False) -> Stall | None:
    followers = [r for r in isr if r != leader]
    if since_ms is None or hw is None or leader < 0:
        return None
    held_ms = observed_at_ms - since_ms
    unreachable = tuple(r for r in followers if r not in leos)
    behind = tuple(r for r in followers if r in leos and (leos[r] <= hw or r in stalled_followers))
    silent = held_ms >= SILENT_FOLLOWER_WINDOW_MS and any(r in judged_unreachable for r in followers)
    # every ISR follower answered past the HW and fetching: the leader waits for a replica outside this ISR
    # (not under min ISR: Kafka 4 holds the HW there by design, KIP-966)
    ahead = not under_min_isr and all(r in leos and leos[r] > hw and r not in stalled_followers for r in followers)
    stopped = (held_ms >= STOPPED_FETCHER_WINDOW_MS and (bool(behind) or ahead)
               and leader not in judged_unreachable)
    if held_ms < window_ms and not silent and not stopped:
        return None
    cause = FOLLOWER_UNREACHABLE if unreachable else WAITS_OUTSIDE_ISR if ahead else FOLLOWER_BEHIND
    return Stall(observed_at_ms - since_ms, cause, unreachable + behind, unreachable)


@dataclass(frozen=True)
class Lag:
    broker: int
    messages: int
    seconds: float | None
    in_isr: bool


def follower_lags(leader: int, isr: list[int], leos: dict[int, int], write_rate: float | None,
                  max_messages: int, max_seconds: float, adding: list[int] | None = None) -> list[Lag]:
    if leader < 0 or leader not in leos:
        return []
    out = []
    for b, leo in leos.items():
        if b == leader or b in (adding or ()):
            continue
        messages = max(0, leos[leader] - leo)
        seconds = messages / write_rate if write_rate else None
        if messages > 0 and (messages >= max_messages or (seconds is not None and seconds >= max_seconds)):
            out.append(Lag(b, messages, seconds, b in isr))
    return sorted(out, key=lambda x: x.broker)


@dataclass(frozen=True)
class Truncated:
    broker: int
    before: int
    after: int
    cause: str


def hw_regressed(hw: int | None, previous_hw: int | None) -> bool:
    return hw is not None and previous_hw is not None and hw < previous_hw


def truncations(leos: dict[int, int], previous_leos: dict[int, int], previous_hw: int | None,
                hw: int | None = None, leader: int | None = None, on_disk_from: int | None = None) -> list[Truncated]:
    """`previous_hw`: the highest HW the partition had (previous.max_high_watermark); `hw`, `leader`: now;
    `on_disk_from`: the first offset the leader keeps on disk now (max of its log start and local log start)."""
    out = []
    for b, after in sorted(leos.items()):
        before = previous_leos.get(b)
        if before is not None and after < before:
            below = previous_hw is not None and after < previous_hw
            covered = hw is not None and previous_hw is not None and hw >= previous_hw and b != leader
            if covered and on_disk_from is not None and after <= on_disk_from:
                continue  # restarted empty: rebuilding from the leader, nothing cut
            out.append(Truncated(b, before, after, (REFETCH if covered else BELOW_HW) if below else UNCOMMITTED))
    return out


@dataclass(frozen=True)
class ElectionVerdict:
    cause: str
    severity: str


def classify_election(leader: int, previous_leader: int | None, previous_isr: Sequence[int] | None,
                      previous_elr: Sequence[int] | None = None, previous_last_known_elr: Sequence[int] | None = None,
                      hw: int | None = None, previous_hw: int | None = None, *, leader_leo: int | None = None,
                      previous_max_hw: int | None = None, previous_replicas: Sequence[int] | None = None,
                      previous_adding: Sequence[int] | None = None) -> ElectionVerdict | None:
    """None for no election, a clean one or a reassignment's; otherwise what kind of unclean election."""
    if previous_isr is None or leader < 0 or leader == previous_leader:
        return None
    if leader in previous_isr or leader in (previous_elr or ()):
        return None
    if leader in (previous_adding or ()) or (previous_replicas is not None and leader not in previous_replicas):
        return None  # a reassignment moved the leader onto a replica that joined the ISR in between
    went_back = hw is not None and previous_hw is not None and hw < previous_hw
    if leader in (previous_last_known_elr or ()):
        return ElectionVerdict(LAST_KNOWN_ELR, "critical" if went_back else UNCLEAN.severity_of(LAST_KNOWN_ELR))
    if hw is None and leader_leo is None:
        return None  # the new leader's offsets are not known yet: the next poll carries the same `previous`
    peak = previous_max_hw if previous_max_hw is not None else previous_hw
    short = leader_leo is not None and peak is not None and leader_leo < peak
    if went_back or short:
        return ElectionVerdict(NOT_ELIGIBLE, UNCLEAN.severity_of(NOT_ELIGIBLE))
    return ElectionVerdict(UNCONFIRMED, UNCLEAN.severity_of(UNCONFIRMED))


def is_unclean(leader: int, previous_leader: int | None, previous_isr: Sequence[int] | None,
               hw: int | None = None, previous_hw: int | None = None) -> bool:
    """An election krm reports as unclean with proof of loss (critical)."""
    v = classify_election(leader, previous_leader, previous_isr, hw=hw, previous_hw=previous_hw)
    return v is not None and v.cause == NOT_ELIGIBLE
