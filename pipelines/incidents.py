"""Incident lifecycle: findings of successive polls in, open -> update -> resolve changes out. Pure.

An incident is identified by its key (cluster, type, topic, partition, broker). Each poll of a
*scope* (one topic's partitions, or a whole cluster's brokers) says which keys of that scope are
unhealthy at that moment: those open or stay open, every other open incident of the scope resolves.

Restart safety: all times are observation times, never the wall clock, and the incident id is a hash
of the key and the opening observation time, so replaying a micro-batch after a crash reproduces the
same ids and the same changes. An observation no newer than what an incident already reflects is a
replay and changes nothing. Flapping: an incident that reopens within `flap_window_ms` of its
resolution is the same incident (reopened), not a new page. Events, seen by one poll only (an
unclean election, a truncation), are held open for `hold_ms[type]` after they were last seen.

Causes: an incident keeps the cause it opened with as `details.root_cause` and the causes it went
through as `details.cause_history` (a partition offline because its one replica's broker died
later shows `live_isr_but_no_leader` for the moment between the broker's return and the
election: the root cause is what the page was about). `cause` is always the current one.

What `apply` returns is what must be written. An open incident seen again in the same state (cause,
severity, and its details apart from the MEASUREMENTS that move every poll) is updated in memory at
once (/metrics reads it) but returned only every `touch_ms` of observation time: an outage of 40k
partitions would otherwise rewrite 40k rows of the incidents table on every poll. A restart then
resumes from a `last_seen_at` at most `touch_ms` old, which only makes the replayed observations
count as new sightings of the same incident.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass, field, replace
from functools import cached_property
from typing import Any, Iterable, Mapping

from pipelines.detectors.details import Details

Key = tuple[str, str, str | None, int | None, int | None]  # cluster, type, topic, partition, broker

# Details that change on every poll while an incident lasts (offsets, lags, how long so far): a new
# value of one of these alone waits for the next touch; any other detail (ISR, out-of-sync
# replicas, leader, brokers that must return, ...) is a change of state and is written at once.
MEASUREMENTS = frozenset({"high_watermark", "leader_leo", "follower_leo", "lag_messages", "lag_seconds",
                          "stalled_ms", "write_rate", "records_behind", "fetch_age_ms", "caught_up_age_ms"})


CAUSE_HISTORY_MAX = 10  # causes kept in details.cause_history (the first one is also root_cause)


def _state(details: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in details.items() if k not in MEASUREMENTS}


def _kept_earliest(details: dict[str, Any], before: dict[str, Any], keys: tuple[str, ...]) -> dict[str, Any]:
    """`details` with each of `keys` at its earlier value (`before`'s, when earlier or when `details` lacks it)."""
    for k in keys:
        was, now = before.get(k), details.get(k)
        if was is not None and (now is None or was < now):
            details = {**details, k: was}
    return details


def _with_causes(details: dict[str, Any], cause: str | None, before: Incident | None) -> dict[str, Any]:
    """`details` of a finding, plus the root cause and the history of causes of its incident."""
    if cause is None and (before is None or before.cause is None):
        return details
    if before is None:
        return {**details, "root_cause": cause, "cause_history": [cause]}
    history = before.cause_history
    if cause != history[-1]:
        history = (history + [cause])[-CAUSE_HISTORY_MAX:]
    return {**details, "root_cause": before.root_cause, "cause_history": history}


@dataclass(frozen=True)
class Finding:
    """One unhealthy subject seen by one poll (what a detector emits)."""

    cluster: str
    scope: str
    type: str
    severity: str
    topic: str | None
    partition: int | None
    broker: int | None
    cause: str | None
    details: dict[str, Any]
    observed_at_ms: int
    poll_id: int

    @property
    def key(self) -> Key:
        return (self.cluster, self.type, self.topic, self.partition, self.broker)


@dataclass(frozen=True)
class ScopePoll:
    """One poll of one scope: the observation that can resolve the scope's incidents."""

    cluster: str
    scope: str
    poll_id: int
    observed_at_ms: int


@dataclass(frozen=True)
class Incident:
    incident_id: str
    cluster: str
    scope: str
    type: str
    severity: str
    topic: str | None
    partition: int | None
    broker: int | None
    cause: str | None
    details: dict[str, Any]
    opened_at_ms: int
    last_seen_at_ms: int
    resolved_at_ms: int | None
    status: str  # open | resolved
    reopen_count: int = 0

    @property
    def key(self) -> Key:
        return (self.cluster, self.type, self.topic, self.partition, self.broker)

    @cached_property
    def facts(self) -> Details:
        """Its details in its type's declared shape (pipelines/detectors/details.py): what every reader reads.
        Parsed once per version of the incident; never raises."""
        from pipelines.detectors.registry import details_of

        return details_of(self.type, self.details)

    @property
    def cause_history(self) -> list[str | None]:
        """The causes it went through, oldest first (the last CAUSE_HISTORY_MAX), kept in its details. Read
        without `facts`: the lifecycle asks it of every incident a poll sees again."""
        kept = self.details.get("cause_history")
        return list(kept) if isinstance(kept, list) and kept else [self.cause]

    @property
    def root_cause(self) -> str | None:
        """The cause it opened with."""
        kept = self.details.get("root_cause")
        return kept if isinstance(kept, str) else self.cause_history[0]


def incident_id(key: Key, opened_at_ms: int) -> str:
    text = "|".join("" if k is None else str(k) for k in key) + f"|{opened_at_ms}"
    return hashlib.sha1(text.encode()).hexdigest()[:20]


@dataclass
class IncidentBook:
    """The open incidents (and those resolved within the flap window), keyed for O(1) updates."""

    flap_window_ms: int
    hold_ms: dict[str, int] = field(default_factory=dict)  # type -> stays open this long after last seen (events)
    touch_ms: int = 0  # an unchanged open incident is returned for writing at most this often
    # type -> details kept at their earliest while the incident is open: an escalation's `since`
    # (pipelines/clock.py), which a restarted collector reports anew (it saw the broker down only now)
    earliest: dict[str, tuple[str, ...]] = field(default_factory=dict)
    _by_key: dict[Key, Incident] = field(default_factory=dict)
    _written_ms: dict[Key, int] = field(default_factory=dict)  # last_seen_at_ms of the version last returned
    _by_scope: dict[tuple[str, str], set[Key]] = field(default_factory=dict)

    @classmethod
    def from_incidents(cls, flap_window_ms: int, incidents: Iterable[Incident],
                       hold_ms: dict[str, int] | None = None, touch_ms: int = 0,
                       earliest: dict[str, tuple[str, ...]] | None = None) -> IncidentBook:
        book = cls(flap_window_ms, dict(hold_ms or {}), touch_ms, dict(earliest or {}))
        for inc in sorted(incidents, key=lambda i: i.opened_at_ms):
            book._put(inc)
            book._written_ms[inc.key] = inc.last_seen_at_ms
        return book

    def is_open(self, key: Key) -> bool:
        inc = self._by_key.get(key)
        return inc is not None and inc.status == "open"

    def open_incidents(self) -> list[Incident]:
        return [i for i in self._by_key.values() if i.status == "open"]

    def resolved(self, type_: str) -> list[Incident]:
        """The resolved incidents of a type it still holds (those within the flap window)."""
        return [i for i in self._by_key.values() if i.type == type_ and i.status == "resolved"]

    def end_holds(self, through_ms: Mapping[str, int]) -> list[Incident]:
        """Resolve each held event whose hold ended by its cluster's `through_ms` (the time through which
        the cluster is known to be as last polled: pipelines/clock.py), at the hold's end."""
        changed = []
        for inc in list(self._by_key.values()):
            hold, at = self.hold_ms.get(inc.type, 0), through_ms.get(inc.cluster)
            if inc.status == "open" and hold > 0 and at is not None and at - inc.last_seen_at_ms >= hold:
                resolved = replace(inc, status="resolved", resolved_at_ms=inc.last_seen_at_ms + hold)
                self._put(resolved)
                self._written_ms[inc.key] = inc.last_seen_at_ms
                changed.append(resolved)
        return changed

    def revise(self, incidents: Iterable[Incident]) -> list[Incident]:
        """Take open incidents changed outside `apply` (an escalation by time: pipelines/clock.py)."""
        out = list(incidents)
        for inc in out:
            self._put(inc)
            self._written_ms[inc.key] = inc.last_seen_at_ms
        return out

    def apply(self, polls: Iterable[ScopePoll], findings: Iterable[Finding]) -> list[Incident]:
        """Advance through polls in observation order; return every incident that changed."""
        polls = list(polls)
        by_poll: dict[tuple[str, str, int], list[Finding]] = {}
        for f in findings:
            by_poll.setdefault((f.cluster, f.scope, f.poll_id), []).append(f)
        known = {(p.cluster, p.scope, p.poll_id) for p in polls}
        # A finding whose poll marker is missing still opens incidents (it cannot resolve any): a
        # failed poll's BROKER_DOWN from ZooKeeper's registrations (pipelines/findings.py).
        extra = [ScopePoll(c, s, pid, fs[0].observed_at_ms) for (c, s, pid), fs in by_poll.items() if (c, s, pid) not in known]
        changed: dict[str, Incident] = {}
        ordered = sorted([*polls, *extra], key=lambda p: (p.observed_at_ms, p.poll_id))
        for poll in ordered:
            now_bad = {f.key: f for f in by_poll.get((poll.cluster, poll.scope, poll.poll_id), [])}
            for f in now_bad.values():
                inc = self._observe(f)
                if inc is not None:
                    changed[inc.incident_id] = inc
            if (poll.cluster, poll.scope, poll.poll_id) not in known:
                continue
            for key in list(self._by_scope.get((poll.cluster, poll.scope), ())):
                inc = self._by_key[key]
                if key in now_bad or inc.status != "open" or poll.observed_at_ms <= inc.last_seen_at_ms:
                    continue
                hold = self.hold_ms.get(inc.type, 0)
                if poll.observed_at_ms - inc.last_seen_at_ms < hold:
                    continue  # an event (seen once) stays open for its hold time, and ends with it
                resolved = replace(inc, status="resolved",
                                   resolved_at_ms=inc.last_seen_at_ms + hold if hold > 0 else poll.observed_at_ms)
                self._put(resolved)
                changed[resolved.incident_id] = resolved
        if ordered:
            self._evict(ordered[-1].observed_at_ms)
        for inc in changed.values():
            self._written_ms[inc.key] = inc.last_seen_at_ms
        return list(changed.values())

    # ------------------------------------------------------------------ internals

    def _observe(self, f: Finding) -> Incident | None:
        inc = self._by_key.get(f.key)
        if inc is not None and inc.status == "open":
            if f.observed_at_ms <= inc.last_seen_at_ms:
                return None  # replayed observation
            details = _kept_earliest(_with_causes(f.details, f.cause, inc), inc.details, self.earliest.get(inc.type, ()))
            updated = replace(inc, last_seen_at_ms=f.observed_at_ms, cause=f.cause, details=details,
                              severity=f.severity)
            self._put(updated)
            same = (f.cause == inc.cause and f.severity == inc.severity
                    and (details == inc.details or _state(details) == _state(inc.details)))
            if same and f.observed_at_ms - self._written_ms.get(inc.key, 0) < self.touch_ms:
                return None  # seen again, nothing new to write yet
            return updated
        if inc is not None and inc.resolved_at_ms is not None:
            if f.observed_at_ms <= inc.resolved_at_ms:
                return None  # replayed: this observation came before the resolution we already know
            if f.observed_at_ms - inc.resolved_at_ms <= self.flap_window_ms:
                reopened = replace(inc, status="open", resolved_at_ms=None, last_seen_at_ms=f.observed_at_ms,
                                   cause=f.cause, details=_with_causes(f.details, f.cause, inc), severity=f.severity,
                                   reopen_count=inc.reopen_count + 1)
                self._put(reopened)
                return reopened
        new = Incident(
            incident_id=incident_id(f.key, f.observed_at_ms), cluster=f.cluster, scope=f.scope, type=f.type,
            severity=f.severity, topic=f.topic, partition=f.partition, broker=f.broker, cause=f.cause,
            details=_with_causes(f.details, f.cause, None), opened_at_ms=f.observed_at_ms,
            last_seen_at_ms=f.observed_at_ms, resolved_at_ms=None,
            status="open",
        )
        self._put(new)
        return new

    def _put(self, inc: Incident) -> None:
        before = self._by_key.get(inc.key)
        if before is not None and "facts" in before.__dict__ and before.details == inc.details:
            inc.__dict__["facts"] = before.__dict__["facts"]  # the same details: /metrics reads them parsed
        self._by_key[inc.key] = inc
        self._by_scope.setdefault((inc.cluster, inc.scope), set()).add(inc.key)

    def _evict(self, now_ms: int) -> None:
        """Forget resolved incidents past the flap window: memory stays bounded by open problems."""
        stale = [k for k, i in self._by_key.items()
                 if i.status == "resolved" and now_ms - (i.resolved_at_ms or 0) > self.flap_window_ms]
        for k in stale:
            inc = self._by_key.pop(k)
            self._written_ms.pop(k, None)
            keys = self._by_scope.get((inc.cluster, inc.scope))
            if keys is not None:
                keys.discard(k)
                if not keys:
                    del self._by_scope[(inc.cluster, inc.scope)]
