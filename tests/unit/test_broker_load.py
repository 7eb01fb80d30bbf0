import pytest

from pipelines.load import BrokerLoad, TopicLoad

pytestmark = pytest.mark.unit


def test_topic_updates_replace_their_share_only():
    load = BrokerLoad()
    load.update([TopicLoad("c", "a", 1, {1: (2, 3, 0, 0), 2: (1, 3, 0, 1)}), TopicLoad("c", "b", 1, {1: (1, 1, 0, 0)})])
    assert load.totals() == {"c": {1: (3, 4, 0, 0), 2: (1, 3, 0, 1)}}
    load.update([TopicLoad("c", "a", 2, {2: (3, 3, 0, 0), 3: (0, 3, 0, 0)})])  # topic a's leaders moved to broker 2
    assert load.totals() == {"c": {1: (1, 1, 0, 0), 2: (3, 3, 0, 0), 3: (0, 3, 0, 0)}}


def test_older_observation_does_not_overwrite_newer():
    load = BrokerLoad()
    load.update([TopicLoad("c", "a", 5, {1: (1, 1, 0, 0)})])
    load.update([TopicLoad("c", "a", 4, {1: (9, 9, 0, 9)})])
    assert load.totals() == {"c": {1: (1, 1, 0, 0)}}


def test_deleted_topics_leave_the_totals():
    """A topic no successful poll observed for the grace period was deleted: its replicas and leaders
    no longer count for the brokers (BrokerLoad.forget_stale, called by the alert path)."""
    load = BrokerLoad()
    load.update([TopicLoad("c", "kept", 1_000, {1: (1, 2, 1, 0)}), TopicLoad("c", "deleted", 1_000, {1: (2, 2, 2, 0)}),
                 TopicLoad("other", "deleted", 1_000, {1: (5, 5, 5, 0)})])
    load.update([TopicLoad("c", "kept", 40_000, {1: (1, 2, 1, 0)})])
    assert load.forget_stale("c", 40_000 - 30_000) == ["deleted"]
    assert load.totals() == {"c": {1: (1, 2, 1, 0)}, "other": {1: (5, 5, 5, 0)}}  # another cluster's topic stays
    assert [t.topic for t in load.topics("c")] == ["kept"]
    assert load.forget_stale("c", 10_000) == []
