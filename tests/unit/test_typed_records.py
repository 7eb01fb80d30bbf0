"""The observation record's TypedDicts (schemas/typed.py) against the one schema (schemas/observation.py):
the same keys, required where the schema requires them, and the same value types (an optional value may be
null), so neither can change without the other."""

from __future__ import annotations

import typing

import pytest

from schemas import observation as o
from schemas import typed as t

pytestmark = pytest.mark.unit

PAIRS = [(o.LOG_DIR, t.LogDir), (o.BROKER, t.Broker), (o.REPLICA_OFFSET, t.ReplicaOffset), (o.PREVIOUS, t.Previous),
         (o.PARTITION, t.Partition), (o.VOTER, t.Voter), (o.QUORUM, t.Quorum), (o.TOPIC_SHARE, t.TopicShareField),
         (o.CLUSTER_STATE, t.ClusterState), (o.TOPIC_STATE, t.TopicState),
         (o.BROKER_METRICS_STATE, t.BrokerMetricsState), (o.BROKER_METRICS_STATE.fields[4][1].element, t.Gauge),
         (o.BROKER_METRICS_STATE.fields[5][1].element, t.PartitionMetric),
         (o.CANARY_STATE, t.CanaryState), (o.CANARY_STATE.fields[1][1].element, t.CanaryPartition)]
KINDS = {"cluster": t.ClusterObservation, "topic": t.TopicObservation, "broker_metrics": t.BrokerMetricsObservation,
         "canary": t.CanaryObservation}
SCALARS = {"string": str, "int": int, "long": int, "bool": bool, "double": float}


def python_type(node: object) -> object:
    if isinstance(node, o.Scalar):
        return SCALARS[node.name]
    if isinstance(node, o.Array):
        return list[python_type(node.element)]
    assert isinstance(node, o.Struct)
    (typed,) = [td for struct, td in PAIRS if struct is node] or [None]
    assert typed is not None, f"no TypedDict in schemas/typed.py for {node}"
    return typed


@pytest.mark.parametrize("struct, typed", PAIRS, ids=[td.__name__ for _, td in PAIRS])
def test_each_typed_dict_says_what_its_struct_says(struct, typed):
    hints = typing.get_type_hints(typed)
    assert list(hints) == [name for name, _, _ in struct.fields], "the same keys, in the schema's order"
    for name, node, required in struct.fields:
        want = python_type(node) if required else python_type(node) | None
        assert hints[name] == want, (typed.__name__, name, hints[name], want)
        assert (name in typed.__required_keys__) == required, (typed.__name__, name, "required" if required else "optional")


def test_a_record_built_by_the_collector_reads_as_its_types():
    from collectors.records import cluster_record

    rec = cluster_record("c", "admin", 1, 1_000, controller_id=1, brokers=[{"id": 1, "live": True}], topic_count=0,
                         partition_count=0)
    cs: t.ClusterState = rec["cluster_state"]
    assert set(cs) <= set(t.ClusterState.__annotations__) and t.ClusterState.__required_keys__ <= set(cs)


@pytest.mark.parametrize("kind", o.KINDS)
def test_each_kind_of_record_is_the_envelope_and_its_body(kind):
    """A record of kind K: the envelope's required fields, `kind` itself, and K's body, required (`check`)."""
    typed = KINDS[kind]
    hints = typing.get_type_hints(typed)
    envelope = {name: node for name, node, required in o.OBSERVATION.fields if required}
    body = f"{kind}_state"
    assert set(hints) == set(envelope) | {body}
    assert typed.__required_keys__ == set(hints)
    for name, node in envelope.items():
        want = typing.Literal[kind] if name == "kind" else python_type(node)
        assert hints[name] == want, (typed.__name__, name, hints[name], want)
    (node,) = [n for name, n, _ in o.OBSERVATION.fields if name == body]
    assert hints[body] == python_type(node)
    assert set(typing.get_args(t.Observation)) == set(KINDS.values())
