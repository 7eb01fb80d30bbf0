"""Whether the observations topic lives on a watched cluster (foundation/fate.py), and when a view is stale."""

import pytest

from foundation.config import Config, parse_config
from foundation.fate import addresses, sharing_fate
from pipelines.state import ClusterView, PipelineState

pytestmark = pytest.mark.unit


def config(observations: str) -> Config:
    return parse_config({
        "clusters": [{"name": "a", "bootstrap_servers": "127.0.0.1:9092,127.0.0.1:9093"},
                     {"name": "b", "bootstrap_servers": "10.9.9.9:9092"}],
        "observations": {"bootstrap_servers": observations, "topic": "krm.obs"}, "pipeline": {"data_dir": "/tmp/x"}})


def test_an_address_in_common_is_the_same_cluster():
    assert sharing_fate(config("localhost:9093")) == ["a"], "localhost resolves to 127.0.0.1"
    assert sharing_fate(config("127.0.0.1:9094")) == []
    assert sharing_fate(config("10.9.9.9:9092,127.0.0.1:9092")) == ["a", "b"]


def test_addresses_skip_what_names_no_port():
    assert addresses(" 127.0.0.1:1 , junk,") == {("127.0.0.1", 1)}


def test_a_view_older_than_its_limit_is_stale():
    state = PipelineState(stale_after_s={"a": 6.0})
    view = ClusterView(brokers=(), controller_id=None, error=None, newest_observed_ms=100_000)
    state.update(clusters={"a": view, "b": view})
    assert state.stale(now=105.0) == {}
    assert state.stale(now=107.0) == {"a": 7.0, "b": 7.0}, "b: the default limit (6 s)"
