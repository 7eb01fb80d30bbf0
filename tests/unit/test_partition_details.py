"""Any partition incident's details read by attribute (pipelines/detectors/rule.py PartitionDetails)."""

import pytest

from pipelines.detectors.rule import PartitionDetails

pytestmark = pytest.mark.unit


def test_the_brokers_to_act_on_whatever_the_type():
    d = PartitionDetails.of({"leader": -1, "replicas": [1, 2], "isr": [1], "must_return": [1], "holding_back": [],
                             "unreachable_brokers": [2], "elr": None, "other": "ignored"})
    assert (d.leader, d.replicas, d.isr, d.elr, d.out_of_sync) == (-1, (1, 2), (1,), None, None)
    assert d.act_on() == [("must_return", (1,)), ("unreachable_brokers", (2,))]  # empty and absent lists left out
    assert PartitionDetails.of({}).act_on() == []
