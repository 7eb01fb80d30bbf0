"""schemas.observation.check: what it accepts, and that a rejection names the exact place."""

import copy

import pytest

from foundation.errors import SchemaError
from schemas.observation import check

pytestmark = pytest.mark.unit

TOPIC = {
    "v": 1, "kind": "topic", "cluster": "c1", "source": "admin", "poll_id": 7, "observed_at_ms": 1_700_000_000_000,
    "topic_state": {
        "topic": "orders", "live_brokers": [1, 2, 3],
        "partitions": [
            {"partition": 0, "leader": 1, "replicas": [1, 2, 3], "isr": [1, 2, 3],
             "replica_offsets": [{"broker": 1, "log_end_offset": 10}, {"broker": 2, "log_end_offset": 9}]},
            {"partition": 1, "leader": -1, "replicas": [2], "isr": []},
        ],
    },
}


def broken(path, value):
    rec = copy.deepcopy(TOPIC)
    *parents, last = path
    target = rec
    for step in parents:
        target = target[step]
    if value is KeyError:
        del target[last]
    else:
        target[last] = value
    return rec


def test_a_valid_record_is_returned_unchanged():
    rec = copy.deepcopy(TOPIC)
    assert check(rec) is rec and rec == TOPIC


@pytest.mark.parametrize("path, value, message", [
    (("topic_state", "partitions", 0, "isr", 1), "2",
     "$.topic_state.partitions[0].isr[1]: expected int, got str '2'"),
    (("topic_state", "partitions", 1, "leader"), True,
     "$.topic_state.partitions[1].leader: expected int, got bool True"),
    (("topic_state", "partitions", 0, "replica_offsets", 1, "log_end_offset"), 2**63,
     "$.topic_state.partitions[0].replica_offsets[1].log_end_offset: 9223372036854775808 does not fit in long"),
    (("topic_state", "partitions", 0, "replicas"), KeyError,
     "$.topic_state.partitions[0].replicas: required field is missing"),
    (("topic_state", "live_brokers"), {"1": True}, "$.topic_state.live_brokers: expected a list, got dict"),
    (("topic_state",), [], "$.topic_state: expected an object, got list"),
    (("poll_id",), 2.5, "$.poll_id: expected long, got float 2.5"),
    (("kind",), "nope", "$.kind: expected one of"),
    (("v",), 5, "$.v: expected one of (1, 2, 3, 4), got 5"),
])
def test_a_rejection_names_the_place(path, value, message):
    with pytest.raises(SchemaError) as e:
        check(broken(path, value))
    assert str(e.value).startswith(message)


def test_a_kind_without_its_body_is_rejected():
    rec = copy.deepcopy(TOPIC)
    rec["kind"] = "cluster"
    with pytest.raises(SchemaError, match=r"\$\.cluster_state: required for kind 'cluster'"):
        check(rec)
