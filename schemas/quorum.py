"""A KRaft controller quorum's voters as DescribeQuorum shows them: which are fetching from the leader
and caught up. Shared by the pipeline's CONTROLLER_ANOMALY rule (pipelines/detectors/quorum.py says
what Kafka does) and the collector, which must know whether a poll's quorum is whole before it calls
the poll unchanged (collectors/unchanged.py). Pure."""

from __future__ import annotations

from dataclasses import dataclass

from schemas.typed import Quorum

FETCH_TIMEOUT_MS = 2000  # controller.quorum.fetch.timeout.ms's default

LEADER, CAUGHT_UP, LAGGING, NOT_FETCHING = "leader", "caught_up", "lagging", "not_fetching"


@dataclass(frozen=True)
class VoterState:
    id: int
    state: str  # leader | caught_up | lagging | not_fetching
    records_behind: int | None  # leader's log end offset minus the voter's
    fetch_age_ms: int | None  # since its last fetch, on the leader's clock (None: never heard of)
    caught_up_age_ms: int | None


def voter_states(quorum: Quorum, timeout_ms: int = FETCH_TIMEOUT_MS) -> list[VoterState]:
    voters = quorum.get("voters") or []
    leader_id = quorum.get("leader_id")
    leader = next((v for v in voters if v["id"] == leader_id), None)
    times = [t for v in voters for t in (v.get("last_fetch_ms"), v.get("last_caught_up_ms")) if t is not None]
    # "now" on the leader's clock: it reports its own last caught-up time as the current time
    now = (leader.get("last_caught_up_ms") if leader is not None else None) or (max(times) if times else None)
    leader_leo = leader["log_end_offset"] if leader and leader["log_end_offset"] >= 0 else None

    def age(t: int | None) -> int | None:
        return None if t is None or now is None else max(0, now - t)

    out = []
    for v in voters:
        fetch_age, caught_age = age(v.get("last_fetch_ms")), age(v.get("last_caught_up_ms"))
        behind = (max(0, leader_leo - v["log_end_offset"])
                  if leader_leo is not None and v["log_end_offset"] >= 0 else None)
        if v["id"] == leader_id:
            state = LEADER
        elif fetch_age is None or fetch_age > timeout_ms:
            state = NOT_FETCHING
        elif caught_age is None or caught_age > timeout_ms:
            state = LAGGING
        else:
            state = CAUGHT_UP
        out.append(VoterState(v["id"], state, behind, fetch_age, caught_age))
    return out


def whole(quorum: Quorum | None, timeout_ms: int = FETCH_TIMEOUT_MS) -> bool:
    """A known leader and every other voter caught up: nothing for the quorum rule to find."""
    if quorum is None:
        return True
    if quorum.get("leader_id") is None or quorum["leader_id"] < 0:
        return False
    return all(s.state in (LEADER, CAUGHT_UP) for s in voter_states(quorum, timeout_ms))
