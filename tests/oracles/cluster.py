"""The cluster rules in plain Python: reference oracles for tests, beside the golden tables.

The product runs each rule's Spark form (pipelines/detectors/brokers.py, controllers.py,
cluster_reachability.py, reassignment.py); these say the same rules case by case.
"""

from __future__ import annotations

from typing import Any, Iterable, Mapping, Sequence

from pipelines.detectors.brokers import LOG_DIR_FULL, NOT_REGISTERED, RULE as BROKER_DOWN, STOPPED, UNKNOWN, UNREACHABLE
from pipelines.detectors.cluster_reachability import RULE as CLUSTER_UNREACHABLE
from pipelines.detectors.controllers import COPYING, DUAL_WRITE, MIGRATION_COPY_STUCK, MIGRATION_DUAL_WRITE_STUCK
from schemas.observation import UNREACHABLE as POLL_UNREACHABLE


def _departure(b: dict[str, Any]) -> str:
    """`controlled`, `crash` or `unknown` (collectors/departures.py); a record of an older collector
    carries only `controlled_shutdown`, whose null there meant a crash."""
    said = b.get("departure")
    if said is not None:
        return str(said)
    return "controlled" if b.get("controlled_shutdown") else "crash"


def down_brokers(brokers: Iterable[dict[str, Any]]) -> list[tuple[int, str]]:
    """(broker, cause) for every broker that is down or not answering."""
    out = []
    for b in brokers:
        how = _departure(b)
        if (not b["live"] or b.get("reachable") is False) and b.get("disk_full"):
            out.append((b["id"], LOG_DIR_FULL))  # its disks were full when it went: that names it, however it went
        elif not b["live"]:
            out.append((b["id"], {"controlled": STOPPED, "unknown": UNKNOWN}.get(how, NOT_REGISTERED)))
        elif b.get("reachable") is False:
            out.append((b["id"], STOPPED if how == "controlled" else UNREACHABLE))
    return sorted(out)


def broker_down_severity(cause: str, down_for_ms: int | None, planned_stop_max_ms: int) -> str:
    """A broker not registered (a crash, a controlled stop, or one nothing explains) is a warning until it
    has been down longer than planned_stop_max_ms; one still registered but silent stays a warning."""
    timed = (NOT_REGISTERED, STOPPED, UNKNOWN, LOG_DIR_FULL)
    if cause in timed and down_for_ms is not None and down_for_ms > planned_stop_max_ms:
        return "critical"
    return BROKER_DOWN.severity_of(cause)


def controller_missing(controller_id: int | None) -> bool:
    return controller_id is None or controller_id < 0


def migration_stuck(phase: int | None, since_ms: int | None, now_ms: int, copy_max_ms: int,
                    dual_write_max_ms: int) -> str | None:
    """The cause when a migration stayed in one phase too long, else None."""
    if phase is None or since_ms is None:
        return None
    if phase == COPYING and now_ms - since_ms >= copy_max_ms:
        return MIGRATION_COPY_STUCK
    if phase == DUAL_WRITE and now_ms - since_ms >= dual_write_max_ms:
        return MIGRATION_DUAL_WRITE_STUCK
    return None


def cluster_unreachable(cluster_state: Mapping[str, Any]) -> tuple[str, dict[str, Any]] | None:
    """(cause, details) when the record says krm could not see the cluster at all, else None."""
    if cluster_state.get("error") is None or cluster_state.get("brokers"):
        return None
    reason = cluster_state.get("error_reason")
    cause = reason if isinstance(reason, str) and reason in CLUSTER_UNREACHABLE.causes else POLL_UNREACHABLE
    return cause, {"error": cluster_state["error"]}


def copy_left(leader: int, leos: dict[int, int], adding: Sequence[int] | None) -> dict[int, int]:
    """Messages each adding replica that answered still has to copy (0 once level with the leader)."""
    if leader not in leos:
        return {}
    return {b: max(0, leos[leader] - leos[b]) for b in adding or () if b in leos}
