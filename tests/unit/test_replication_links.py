"""Which side of a replication link is cut, from the HW_STALL stalls (pipelines/replication_links.py)."""

import pytest

from pipelines.detectors.hw_stall import StallDetails
from prometheus_client import CollectorRegistry

from pipelines.incidents import Finding, Incident
from pipelines.metrics import KrmCollector
from pipelines.state import PipelineState
from pipelines.replication_links import annotate, side, stopped

pytestmark = pytest.mark.unit


def stall(topic, partition, leader, holding_back, unreachable=(), cluster="c1"):
    return Finding(cluster, f"offsets:{topic}", "HW_STALL", "critical", topic, partition, None,
                   "isr_follower_unreachable" if unreachable else "isr_follower_not_caught_up",
                   {"leader": leader, "holding_back": list(holding_back), "unreachable": list(unreachable)}, 1000, 1)


def test_a_follower_that_answers_krm_is_a_stopped_fetcher_one_that_does_not_is_not():
    assert stopped(StallDetails(leader=1, holding_back=(3, 2), unreachable=(2,))) == [(3, 1)]
    assert stopped(StallDetails(leader=-1, holding_back=(3,))) == []


def test_one_follower_behind_several_leaders_is_the_followers_side():
    pairs = {(3, 1), (3, 2), (3, 4)}
    assert side((3, 1), pairs) == {"side": "follower", "broker": 3, "peers": [1, 2, 4],
                                   "summary": "broker 3 fetches nothing from brokers 1, 2, 4"}


def test_several_followers_behind_one_leader_is_the_leaders_side_and_one_pair_is_that_link():
    pairs = {(2, 1), (3, 1)}
    assert side((2, 1), pairs)["summary"] == "brokers 2, 3 fetch nothing from broker 1"
    assert side((2, 1), pairs)["side"] == "leader"
    assert side((3, 1), {(3, 1)}) == {"side": "link", "broker": 3, "peers": [1],
                                      "summary": "broker 3 fetches nothing from broker 1"}


def test_findings_are_judged_with_the_open_stalls_of_other_topics():
    open_before = [Incident("i1", "c1", "offsets:a", "HW_STALL", "critical", "a", 0, None, "isr_follower_not_caught_up",
                            {"leader": 2, "holding_back": [3], "unreachable": []}, 1, 1, None, "open")]
    found = [stall("b", 0, 1, [3]), stall("b", 1, 4, [3]), stall("c", 0, 1, [2], unreachable=[2]),
             Finding("c1", "topic:b", "UNDER_REPLICATED", "warning", "b", 0, None, None, {}, 1000, 1)]
    out = annotate(found, lambda: open_before)
    assert out[0].details["replication_link"]["summary"] == "broker 3 fetches nothing from brokers 1, 2, 4"
    assert out[1].details["replication_link"] == out[0].details["replication_link"]
    assert "replication_link" not in out[2].details  # a silent follower (dead, paused): BROKER_DOWN's story
    assert out[3] is found[3]
    calls = []
    assert annotate(found[3:], lambda: calls.append(1) or []) == found[3:] and not calls  # no stall: nothing read


def test_the_series_has_one_sample_per_stalled_pair():
    incs = tuple(Incident(f"i{n}", "c1", "offsets:t", "HW_STALL", "critical", "t", n, None, "x",
                          {"leader": leader, "holding_back": [3], "unreachable": []}, 1, 1, None, "open")
                 for n, leader in enumerate((1, 1, 2)))
    state = PipelineState()
    state.update(open_incidents=incs)
    reg = CollectorRegistry(auto_describe=False)
    reg.register(KrmCollector(state))
    got = sorted((s.labels["follower"], s.labels["leader"]) for fam in reg.collect() for s in fam.samples
                 if s.name == "krm_replication_link_stalled")
    assert got == [("3", "1"), ("3", "2")]
