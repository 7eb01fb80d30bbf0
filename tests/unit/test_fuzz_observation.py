"""Hostile input against the Python side of the observation contract (tests/fuzz_records.py): the
schema check either accepts a record or names why not; it never raises anything else, whatever the
JSON. The reliability run (benchmarks/fuzz_observations.py, RELIABILITY.md) drives the same
properties with 100k+ cases; here a few thousand keep the unit tier fast."""

import json

import pytest
from hypothesis import HealthCheck, given, settings

from foundation.errors import SchemaError
from schemas.observation import check
from tests.fuzz_records import contract_error, hostile_records, schema_error, valid_records

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
