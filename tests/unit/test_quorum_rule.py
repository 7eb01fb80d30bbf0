"""CONTROLLER_ANOMALY of a KRaft quorum (pipelines/detectors/quorum.py): a numbered table of
DescribeQuorum answers, each with the findings it must give and why."""

import pytest

from pipelines.detectors.quorum import judge, voter_states

pytestmark = pytest.mark.unit

NOW = 1_800_000_000_000


def _v(vid, leo, fetch_ago=0, caught_ago=0):
    return {"id": vid, "log_end_offset": leo,
            "last_fetch_ms": None if fetch_ago is None else NOW - fetch_ago,
            "last_caught_up_ms": None if caught_ago is None else NOW - caught_ago}


def _q(leader, *voters):
    return {"leader_id": leader, "leader_epoch": 3, "high_watermark": 500, "voters": list(voters), "observers": 3}


CASES = [
    (1, _q(1000, _v(1000, 500), _v(1001, 500, 100, 100), _v(1002, 498, 300, 300)), [],
     "three voters fetching and caught up: healthy"),
    (2, _q(1000, _v(1000, 500)), [], "single-voter quorum, whole: a configuration choice, nothing to report"),
    (3, _q(1000, _v(1000, 500), _v(1001, 480, 5000, 5000), _v(1002, 500, 100, 100)),
     [("voter_lagging", 1001, "not_fetching"), ("quorum_at_risk", None, None)],
     "1001 silent for 5 s (dead): 2 of 3 healthy is just a majority; one more loss stops the quorum"),
    (4, _q(1000, _v(1000, 500), _v(1001, 200, 100, 4000), _v(1002, 500, 100, 100)),
     [("voter_lagging", 1001, "lagging"), ("quorum_at_risk", None, None)],
     "1001 fetches but has not caught up for 4 s"),
    (5, _q(-1, _v(1000, 500), _v(1001, 500)), [("no_quorum_leader", None, None)], "no leader known"),
    (6, {"leader_id": -1, "voters": [], "error": "RequestTimedOutError"}, [("no_quorum_leader", None, None)],
     "DescribeQuorum not answered: the broker reaches no active controller"),
    (7, _q(1000, _v(1000, 500), _v(1001, 500, 100, 100), _v(1002, 500, 100, 100), _v(1003, 500, 9000, 9000),
           _v(1004, 500, 100, 100)),
     [("voter_lagging", 1003, "not_fetching")], "5 voters, one out: 4 healthy, majority 3, one more may go"),
    (8, _q(1000, _v(1000, 500), _v(1001, 500, None, None), _v(1002, 500, 100, 100)),
     [("voter_lagging", 1001, "not_fetching"), ("quorum_at_risk", None, None)],
     "a voter the leader never heard from (restarted leader, dead voter)"),
    (9, _q(1000, _v(1000, 500), _v(1001, 500, 8000, 8000), _v(1002, 500, 8000, 8000)),
     [("voter_lagging", 1001, "not_fetching"), ("voter_lagging", 1002, "not_fetching"), ("no_quorum_leader", None, None)],
     "majority silent, the leader not resigned yet: it commits nothing, metadata is frozen (seen on Kafka 4.4)"),
]


@pytest.mark.parametrize("num,quorum,expected,reason", CASES, ids=[f"case{c[0]}" for c in CASES])
def test_quorum_golden(num, quorum, expected, reason):
    got = [(f.cause, f.voter, f.details.get("state")) for f in judge(quorum)]
    assert got == expected, reason


def test_quorum_findings_count_what_can_still_be_lost():
    (risk,) = [f for f in judge(CASES[2][1]) if f.cause == "quorum_at_risk"]
    assert (risk.details["healthy"], risk.details["majority"], risk.details["can_lose"]) == (2, 2, 0)
    (lost,) = [f for f in judge(CASES[8][1]) if f.cause == "no_quorum_leader"]
    assert (lost.details["healthy"], lost.details["can_lose"], lost.details["out"]) == (1, -1, [1001, 1002])


def test_voter_states_measure_on_the_leaders_clock():
    states = {s.id: s for s in voter_states(CASES[2][1])}
    assert (states[1001].records_behind, states[1001].fetch_age_ms) == (20, 5000)
    assert states[1000].state == "leader" and states[1002].state == "caught_up"


def test_absent_quorum_judges_nothing():
    assert judge(None) == []
