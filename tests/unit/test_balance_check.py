"""pipelines/balance.py: the balance scope is judged only on complete views, once per cluster poll."""

import pytest

from pipelines.balance import BalanceCheck
from pipelines.load import BrokerLoad, TopicLoad
from pipelines.state import ClusterView

pytestmark = pytest.mark.unit


def _view(at, topic_count, brokers=(1, 2, 3)):
    return ClusterView(tuple((b, True) for b in brokers), 1, None, at, topic_count=topic_count)


def test_incomplete_poll_is_not_judged_then_complete_one_is():
    load, check = BrokerLoad(), BalanceCheck()
    a = TopicLoad("c", "a", 1_000, {1: (6, 6, 6, 0)}, 6)
    load.update([a])
    assert check.evaluate(load, [a], {"c": _view(1_000, topic_count=2)}) == ([], [])  # topic b not seen yet
    b = TopicLoad("c", "b", 1_000, {2: (1, 1, 1, 0)}, 1)
    load.update([b])
    polls, found = check.evaluate(load, [b], {"c": _view(1_000, topic_count=2)})
    assert [p.scope for p in polls] == ["balance"]
    assert {(f.type, f.broker, f.topic) for f in found} >= {("LEADER_SKEW", 1, None), ("REPLICA_IMBALANCE", None, "a")}
    assert check.evaluate(load, [], {"c": _view(1_000, topic_count=2)}) == ([], [])  # same poll: judged once


def test_nothing_is_judged_while_a_reassignment_runs():
    load, check = BrokerLoad(), BalanceCheck()
    a = TopicLoad("c", "a", 1_000, {1: (6, 6, 6, 0)}, 6)
    load.update([a])
    moving = ClusterView(((1, True), (2, True)), 1, None, 1_000, topic_count=1, reassigning=True)
    assert check.evaluate(load, [a], {"c": moving}) == ([], [])
