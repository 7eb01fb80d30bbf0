"""The offset rules' reference oracles (tests/oracles/offsets.py) against tests/golden_offsets.py; the
product's Spark form runs the same tables in tests/spark/test_offset_detectors_spark.py."""

import pytest

from tests.oracles.offsets import classify_election, classify_stall, follower_lags, hw_regressed, is_unclean, truncations
from tests.golden_offsets import CHANGE, ELECTION, EMPTIED, EVIDENCE, LAG, STALL_MIN_ISR, stall_cases

pytestmark = pytest.mark.unit


@pytest.mark.parametrize("case", list(stall_cases()), ids=[f"stall-{c[0]}" for c in stall_cases()])
def test_hw_stall(case):
    _n, leader, isr, hw, leos, since, now, window, judged, stalled, expected, reason = case
    got = classify_stall(leader, isr, hw, leos, since, now, window, judged, stalled)
    assert (None if got is None else (got.cause, list(got.holding_back))) == expected, reason


@pytest.mark.parametrize("case", STALL_MIN_ISR, ids=[f"stall-{c[0]}" for c in STALL_MIN_ISR])
def test_hw_stall_against_min_isr(case):
    from pipelines.detectors.isr import effective_min_isr

    _n, leader, isr, hw, leos, since, now, min_isr, expected, reason = case
    under = len(isr) < effective_min_isr(min_isr, [1, 2, 3])
    got = classify_stall(leader, isr, hw, leos, since, now, 30_000, under_min_isr=under)
    assert (None if got is None else (got.cause, list(got.holding_back))) == expected, reason


@pytest.mark.parametrize("case", LAG, ids=[f"lag-{c[0]}" for c in LAG])
def test_replica_lag(case):
    _n, leader, isr, leos, rate, max_m, max_s, expected, reason = case
    got = [(x.broker, x.messages, x.seconds) for x in follower_lags(leader, isr, leos, rate, max_m, max_s)]
    assert got == expected, reason


@pytest.mark.parametrize("case", CHANGE, ids=[f"change-{c[0]}" for c in CHANGE])
def test_changes_between_polls(case):
    _n, leader, pleader, pisr, hw, phw, leos, pleos, unclean, regression, truncs, reason = case
    assert is_unclean(leader, pleader, pisr, hw, phw) is unclean, reason
    assert hw_regressed(hw, phw) is regression, reason
    assert [(t.broker, t.cause) for t in truncations(leos, pleos, phw, hw, leader)] == truncs, reason


@pytest.mark.parametrize("case", EMPTIED, ids=[f"emptied-{c[0]}" for c in EMPTIED])
def test_a_follower_that_restarted_empty_cut_nothing(case):
    _n, leader, hw, peak, log_start, local_start, leos, pleos, truncs, reason = case
    on_disk_from = max(s for s in (log_start, local_start) if s is not None)
    assert [(t.broker, t.cause) for t in truncations(leos, pleos, peak, hw, leader, on_disk_from)] == truncs, reason


@pytest.mark.parametrize("case", ELECTION, ids=[f"election-{c[0]}" for c in ELECTION])
def test_elections_with_elr(case):
    _n, leader, pleader, pisr, pelr, plk, hw, phw, expected, reason = case
    got = classify_election(leader, pleader, pisr, pelr, plk, hw, phw)
    assert (None if got is None else (got.cause, got.severity)) == expected, reason


@pytest.mark.parametrize("case", EVIDENCE, ids=[f"evidence-{c[0]}" for c in EVIDENCE])
def test_unclean_needs_evidence(case):
    _n, leader, pleader, pisr, hw, phw, leo, pmax, preplicas, padding, expected, reason = case
    got = classify_election(leader, pleader, pisr, hw=hw, previous_hw=phw, leader_leo=leo, previous_max_hw=pmax,
                            previous_replicas=preplicas, previous_adding=padding)
    assert (None if got is None else (got.cause, got.severity)) == expected, reason
