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
