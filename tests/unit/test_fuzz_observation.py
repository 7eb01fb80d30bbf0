"""Hostile input against the Python side of the observation contract (lab/fuzz_records.py): the
schema check either accepts a record or names why not; it never raises anything else, whatever the
JSON. The reliability run (benchmarks/fuzz_observations.py, RELIABILITY.md) drives the same
properties with 100k+ cases; here a few thousand keep the unit tier fast."""

import json

import pytest
from hypothesis import HealthCheck, given, settings

from foundation.errors import SchemaError
from schemas.observation import _CHECK_OBSERVATION, _FAST_OBSERVATION, _Mismatch, check
from lab.fuzz_records import contract_error, hostile_records, schema_error, valid_records

pytestmark = pytest.mark.unit
FAST = settings(max_examples=500, deadline=None, derandomize=True,
                suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large, HealthCheck.large_base_example])


@FAST
@given(hostile_records())
def test_the_check_accepts_or_names_the_cause(record):
    try:
        assert check(record) is record
    except SchemaError as e:
        assert str(e).startswith("$")  # names the place: $.topic_state.partitions[0].leader: ...
    except TypeError:
        assert not isinstance(record, dict)  # the check's contract: a dict (json.loads of an object)


@FAST
@given(valid_records())
def test_what_a_collector_publishes_passes_and_survives_a_json_round_trip(record):
    assert schema_error(record) is None and contract_error(record) is None
    again = json.loads(json.dumps(record))
    assert schema_error(again) is None and again == record


def _walker_accepts(record):
    try:
        _CHECK_OBSERVATION(record)
    except _Mismatch:
        return False
    return True


@FAST
@given(hostile_records())
def test_the_generated_checker_accepts_only_what_the_walker_accepts(record):
    """schemas/fast_check.py only gates the walker: its yes must be the walker's yes."""
    if _FAST_OBSERVATION(record):
        assert _walker_accepts(record)


@FAST
@given(valid_records())
def test_the_generated_checker_accepts_what_a_collector_publishes(record):
    assert _FAST_OBSERVATION(record) and _walker_accepts(record)


def test_the_generated_checker_refuses_what_the_walker_refuses_at_depth():
    part = {"partition": 0, "leader": 1, "replicas": [1], "isr": [1],
            "replica_offsets": [{"broker": 1, "log_end_offset": 2**63}]}  # one past a long
    record = {"v": 2, "kind": "topic", "cluster": "c", "source": "admin", "poll_id": 1, "observed_at_ms": 1,
              "topic_state": {"topic": "t", "live_brokers": [1], "partitions": [part]}}
    assert not _FAST_OBSERVATION(record)
    with pytest.raises(SchemaError, match=r"^\$\.topic_state\.partitions\[0\]\.replica_offsets\[0\]\.log_end_offset"):
        check(record)
    part["replica_offsets"][0]["log_end_offset"] = 2**63 - 1
    assert _FAST_OBSERVATION(record) and check(record) is record
    part["isr"] = [True]  # a bool is not an int, in either checker
    assert not _FAST_OBSERVATION(record) and not _walker_accepts(record)
