"""CONTROLLER_ANOMALY of a KRaft cluster: the metadata quorum's health, from DescribeQuorum. Pure.

KRaft keeps the cluster's metadata in the `__cluster_metadata` log, replicated by the controller
quorum's voters with Raft (KIP-595): one leader (the active controller) and followers that fetch
from it. A majority of voters must fetch for the leader to commit anything — no topic change, no
leader election, no broker fencing without it. The quorum leader reports, per voter, its log end
offset, when it last fetched and when it was last caught up (raft/src/main/java/org/apache/kafka/
raft/LeaderState.java, `describeQuorum`), all on the leader's clock. A follower that has not fetched
for controller.quorum.fetch.timeout.ms (2 s by default, QuorumConfig) itself starts an election, so
that is the bound used here for "no longer fetching" and for "not caught up".

Causes (subject: the `__cluster_metadata` partition 0, and for a voter its node id as the broker):
- `no_quorum_leader` (critical): no leader known; DescribeQuorum not answered (a broker cannot
  reach an active controller); or a leader that fewer than a majority of voters still fetch from
  (it commits nothing: metadata is frozen until voters return, and it resigns only later).
- `voter_lagging` (warning, per voter): a voter not fetching (`details.state` not_fetching: dead or
  partitioned) or fetching without catching up (`lagging`).
- `quorum_at_risk` (warning): some voter is out and the healthy ones (leader + caught-up followers)
  are just a majority, so one more loss stops the metadata quorum. A single-voter quorum that is
  whole is a configuration choice, not a risk reported here (as AT_MIN_ISR is for RF 1).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from pipelines.detectors.controllers import NO_QUORUM_LEADER as NO_LEADER
from pipelines.detectors.controllers import QUORUM_AT_RISK as AT_RISK
from pipelines.detectors.controllers import RULE, VOTER_LAGGING
from pipelines.detectors.controllers import TYPE as TYPE  # re-exported: quorum findings are CONTROLLER_ANOMALY
# the voters' states (schemas/quorum.py, shared with the collector), re-exported for pipelines/metrics.py
from schemas.quorum import CAUGHT_UP as CAUGHT_UP  # re-exported: the states /metrics counts
from schemas.quorum import FETCH_TIMEOUT_MS as FETCH_TIMEOUT_MS
from schemas.quorum import LAGGING as LAGGING
from schemas.quorum import LEADER as LEADER
from schemas.quorum import NOT_FETCHING as NOT_FETCHING
from schemas.quorum import VoterState as VoterState
from schemas.quorum import voter_states as voter_states
from schemas.typed import Quorum

SCOPE = "quorum"  # incidents resolved by each cluster record that carries a quorum
TOPIC = "__cluster_metadata"  # the subject of quorum findings: the metadata log's only partition


@dataclass(frozen=True)
class QuorumFinding:
    cause: str
    severity: str
    voter: int | None
    details: dict[str, Any]


def judge(quorum: Quorum | None, timeout_ms: int = FETCH_TIMEOUT_MS) -> list[QuorumFinding]:
    """Findings for one DescribeQuorum answer (the cluster record's `quorum`); none when absent."""
    if quorum is None:
        return []
    if quorum.get("leader_id") is None or quorum["leader_id"] < 0:
        return [QuorumFinding(NO_LEADER, RULE.severity_of(NO_LEADER), None,
                              {"error": quorum.get("error"), "quorum_epoch": quorum.get("leader_epoch")})]
    states = voter_states(quorum, timeout_ms)
    found = [QuorumFinding(VOTER_LAGGING, RULE.severity_of(VOTER_LAGGING), s.id,
                           {"state": s.state, "records_behind": s.records_behind, "fetch_age_ms": s.fetch_age_ms,
                            "caught_up_age_ms": s.caught_up_age_ms, "leader_id": quorum["leader_id"]})
             for s in states if s.state in (LAGGING, NOT_FETCHING)]
    healthy = sum(1 for s in states if s.state in (LEADER, CAUGHT_UP))
    majority = len(states) // 2 + 1
    counts = {"voter_count": len(states), "healthy": healthy, "majority": majority, "can_lose": healthy - majority,
              "out": [s.id for s in states if s.state in (LAGGING, NOT_FETCHING)], "leader_id": quorum["leader_id"]}
    if states and healthy < majority:
        found.append(QuorumFinding(NO_LEADER, RULE.severity_of(NO_LEADER), None, {**counts, "error": "majority lost"}))
    elif states and healthy < len(states) and healthy == majority:
        found.append(QuorumFinding(AT_RISK, RULE.severity_of(AT_RISK), None, counts))
    return found
