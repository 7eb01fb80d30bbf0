"""Hostile observation records for property-based tests (hypothesis), and the oracle they are judged by.

Strategies:
- `valid_records()`: records of every kind built from the schema tree (schemas/observation.py), with
  Kafka's invariants kept (distinct non-negative replicas, leader one of them or -1, ISR a subset,
  offsets >= 0, log start <= HW): what a correct collector publishes.
- `hostile_records()`: any JSON value; a valid record with one field removed or replaced by any JSON
  value (wrong types, huge numbers, huge strings, deep nesting); future and past schema versions;
  unknown kinds; valid-looking records that break one of Kafka's invariants.
`expected_rejection(record)` says whether ingest must refuse it: the schema check in Python, then the
contract ingest enforces (pipelines/ingest.py `contract`), restated here independently.
"""

from __future__ import annotations

import copy
import json
import re
from typing import Any

from hypothesis import strategies as st

from foundation.errors import SchemaError
from schemas.observation import KINDS, OBSERVATION, SUPPORTED_VERSIONS, Array, Scalar, check

INT32 = st.integers(-(2**31), 2**31 - 1)
NAMES = st.from_regex(r"[a-zA-Z0-9_-][a-zA-Z0-9._-]{0,11}", fullmatch=True)  # legal cluster and topic names
NON_NEG = st.integers(0, 2**31 - 1)
NON_NEG_LONG = st.integers(0, 2**63 - 1)
SCALARS = {"string": st.text(max_size=20), "int": INT32, "long": st.integers(-(2**63), 2**63 - 1),
           "bool": st.booleans(), "double": st.floats(allow_nan=False, allow_infinity=False, width=64)}

JSON = st.recursive(
    st.none() | st.booleans() | st.integers(-(2**70), 2**70) | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(max_size=30),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=10), inner, max_size=4),
    max_leaves=12)


def _from_schema(t: Any) -> Any:
    """Any value the schema tree accepts (optional fields present or absent)."""
    if isinstance(t, Scalar):
        return SCALARS[t.name]
    if isinstance(t, Array):
        return st.lists(_from_schema(t.element), max_size=3)
    required = {n: _from_schema(ft) for n, ft, req in t.fields if req}
    optional = {n: _from_schema(ft) for n, ft, req in t.fields if not req}
    return st.fixed_dictionaries(required, optional=optional)


@st.composite
def _partition(draw: Any, pid: int) -> dict[str, Any]:
    replicas = draw(st.lists(st.integers(0, 9), min_size=1, max_size=4, unique=True))
    isr = [b for b in replicas if draw(st.booleans())]
    leader = draw(st.sampled_from([-1, *replicas]))
    hw = draw(NON_NEG_LONG)
    p: dict[str, Any] = {"partition": pid, "leader": leader, "replicas": replicas, "isr": isr,
                         "leader_epoch": draw(NON_NEG)}
    if draw(st.booleans()):
        p["high_watermark"] = hw
        p["log_start_offset"] = draw(st.integers(0, hw))
        p["replica_offsets"] = [{"broker": b, "log_end_offset": draw(NON_NEG_LONG)} for b in replicas
                                if draw(st.booleans())]
    if draw(st.booleans()):
        p["elr"] = [b for b in replicas if b not in isr and draw(st.booleans())]
    return p


@st.composite
def valid_records(draw: Any) -> dict[str, Any]:
    kind = draw(st.sampled_from(KINDS))
    rec = {"v": draw(st.sampled_from(SUPPORTED_VERSIONS)), "kind": kind, "cluster": draw(NAMES),
           "source": draw(st.sampled_from(["admin", "zookeeper", "jmx", "probe"])), "poll_id": draw(NON_NEG_LONG),
           "observed_at_ms": draw(NON_NEG_LONG)}
    body = next(ft for n, ft, _ in OBSERVATION.fields if n == f"{kind}_state")
    if kind == "topic":
        n = draw(st.integers(0, 4))
        rec["topic_state"] = {"topic": draw(NAMES), "live_brokers": draw(
            st.lists(st.integers(0, 9), max_size=5, unique=True)),
            "partitions": [draw(_partition(i)) for i in range(n)]}
    elif kind == "cluster":
        ids = draw(st.lists(st.integers(0, 9), max_size=5, unique=True))
        rec["cluster_state"] = {"brokers": [{"id": b, "live": draw(st.booleans())} for b in ids],
                                "topic_count": draw(NON_NEG), "partition_count": draw(NON_NEG),
                                "controller_id": draw(st.sampled_from([-1, *ids]))}
    else:
        rec[f"{kind}_state"] = draw(_from_schema(body))
        if kind == "canary":
            rec["canary_state"]["topic"] = draw(NAMES)
    return rec


def _paths(value: Any, prefix: tuple = ()) -> list[tuple]:
    out = [prefix] if prefix else []
    if isinstance(value, dict):
        for k, v in value.items():
            out += _paths(v, (*prefix, k))
    elif isinstance(value, list):
        for i, v in enumerate(value):
            out += _paths(v, (*prefix, i))
    return out


def _set(rec: dict[str, Any], path: tuple, value: Any) -> dict[str, Any]:
    rec = copy.deepcopy(rec)
    target = rec
    for step in path[:-1]:
        target = target[step]
    if value is _DELETE:
        if isinstance(target, dict):
            del target[path[-1]]
        else:
            target.pop(path[-1])
    else:
        target[path[-1]] = value
    return rec


_DELETE = object()
NASTY = st.one_of(
    JSON,
    st.integers(2**31, 2**80) | st.integers(-(2**80), -(2**31) - 1),  # do not fit an int (or a long)
    st.tuples(st.sampled_from("x\u00e9\u4e2d\U0001f600\"\\\n\x00"), st.integers(10_000, 1_000_000))
    .map(lambda t: t[0] * t[1]),  # huge strings of odd characters
    st.integers(50, 400).map(lambda depth: _nest(depth)),  # deep nesting
    st.just(_DELETE),
)


def _nest(depth: int) -> Any:
    v: Any = 1
    for _ in range(depth):
        v = [v]
    return v


@st.composite
def _mutated(draw: Any) -> dict[str, Any]:
    rec = draw(valid_records())
    path = draw(st.sampled_from(_paths(rec)))
    return _set(rec, path, draw(NASTY))


@st.composite
def _contract_broken(draw: Any) -> dict[str, Any]:
    rec = draw(valid_records().filter(lambda r: r["kind"] in ("topic", "cluster")))
    if rec["kind"] == "cluster":
        brokers = rec["cluster_state"]["brokers"]
        if brokers and draw(st.booleans()):
            brokers.append(dict(brokers[0]))  # a broker twice
        else:
            brokers.append({"id": draw(st.integers(-(2**31), -1)), "live": True})
        return rec
    parts = rec["topic_state"]["partitions"]
    if not parts:
        parts.append(draw(_partition(0)))
    p = parts[draw(st.integers(0, len(parts) - 1))]
    how = draw(st.sampled_from(["leader", "isr", "dup", "neg_replica", "no_replicas", "neg_hw", "start_above_hw",
                                "neg_partition", "dup_partition"]))
    if how == "leader":
        p["leader"] = max(p["replicas"]) + 1
    elif how == "isr":
        p["isr"] = [*p["isr"], max(p["replicas"]) + 1]
    elif how == "dup":
        p["replicas"] = [*p["replicas"], p["replicas"][0]]
    elif how == "neg_replica":
        p["replicas"] = [*p["replicas"], -5]
    elif how == "no_replicas":
        p["replicas"], p["isr"], p["leader"] = [], [], -1
    elif how == "neg_hw":
        p["high_watermark"] = -draw(st.integers(1, 2**40))
    elif how == "start_above_hw":
        p["high_watermark"] = draw(st.integers(0, 2**40))
        p["log_start_offset"] = p["high_watermark"] + draw(st.integers(1, 100))
    elif how == "neg_partition":
        p["partition"] = -draw(st.integers(1, 2**31))
    else:
        parts.append(copy.deepcopy(p))
    return rec


def hostile_records() -> Any:
    return st.one_of(
        JSON,
        _mutated(),
        valid_records().map(lambda r: {**r, "v": r["v"] + 2}),  # a future schema version
        valid_records().map(lambda r: {**r, "v": 0}),
        valid_records().map(lambda r: {**r, "kind": "weather"}),
        _contract_broken(),
        valid_records(),
    )


def schema_error(record: Any) -> str | None:
    """What the Python check says (None: schema-valid)."""
    if not isinstance(record, dict):
        return "not a JSON object"
    try:
        check(record)
    except SchemaError as e:
        return str(e)
    return None


TOPIC_NAME = re.compile(r"(?!\.\.?$)[a-zA-Z0-9._-]{1,249}")
CLUSTER_NAME = re.compile(r"[A-Za-z0-9._-]+")


def contract_error(record: dict[str, Any]) -> str | None:
    """Kafka's invariants on a schema-valid record, restated from pipelines/ingest.py `contract`."""
    if not CLUSTER_NAME.fullmatch(record["cluster"]):
        return "cluster name"
    if record["kind"] in ("topic", "canary") and not TOPIC_NAME.fullmatch(record[f"{record['kind']}_state"]["topic"]):
        return "topic name"
    if record["kind"] == "topic":
        parts = record["topic_state"]["partitions"]
        for p in parts:
            replicas, isr = p["replicas"], p["isr"]
            offsets = [p.get("high_watermark"), p.get("log_start_offset"),
                       *[r["log_end_offset"] for r in p.get("replica_offsets") or []]]
            if (p["partition"] < 0 or not replicas or len(set(replicas)) != len(replicas)
                    or any(b < 0 for b in replicas) or (p["leader"] != -1 and p["leader"] not in replicas)
                    or any(b not in replicas for b in isr) or any(o is not None and o < 0 for o in offsets)
                    or (p.get("log_start_offset") is not None and p.get("high_watermark") is not None
                        and p["log_start_offset"] > p["high_watermark"])):
                return f"partition {p['partition']}"
        if len({p["partition"] for p in parts}) != len(parts):
            return "a partition twice"
    if record["kind"] == "cluster":
        ids = [b["id"] for b in record["cluster_state"]["brokers"]]
        if any(i < 0 for i in ids) or len(set(ids)) != len(ids):
            return "brokers"
    return None


def expected_rejection(record: Any) -> str | None:
    return schema_error(record) or contract_error(record)


def collect(strategy: Any, n: int, seed: int = 0) -> list[Any]:
    """`n` examples of `strategy`, reproducibly (a hypothesis run that only generates and keeps them)."""
    from hypothesis import HealthCheck, Phase, given, seed as with_seed, settings

    out: list[Any] = []

    @with_seed(seed)
    @settings(max_examples=n, database=None, deadline=None, phases=[Phase.generate],
              suppress_health_check=list(HealthCheck))
    @given(strategy)
    def keep(value: Any) -> None:
        out.append(value)

    keep()
    return out[:n]


NOT_JSON = ["", "{", "[1, 2", "null", "\"just a string\"", "{\"v\": 2, \"kind\": \"topic\"", "\x00\xff\xfe", "NaN",
            "{\"v\": 1e999}", "[]" * 10_000]


def as_spark_reads(record, steps=5):
    """The record as Spark's JSON reader sees it, when that reading is a valid record (else None):
    a mistyped string field as the value's JSON text, any other mistyped optional field as absent, an
    optional array with a mistyped element as absent (a JSON null element is refused by ingest)."""
    import copy

    from schemas.observation import OBSERVATION, Scalar

    record = copy.deepcopy(record)
    for _ in range(steps):
        why = schema_error(record)
        if why is None:
            return record if contract_error(record) is None else None
        if not why.startswith("$.") or "required field is missing" in why:
            return None
        steps_ = [s for s in why.split(":", 1)[0][2:].replace("[", ".[").split(".") if s]
        element = steps_[-1].startswith("[")
        if element:  # a mistyped array element: Spark reads the whole array as null
            steps_ = steps_[:-1]
        if not steps_ or steps_[-1].startswith("["):
            return None
        node, holder = OBSERVATION, record
        for step in steps_[:-1]:
            if step.startswith("["):
                node, holder = node.element, holder[int(step[1:-1])]
            else:
                node, holder = next(ft for n, ft, _ in node.fields if n == step), holder[step]
        last = steps_[-1]
        field = next((f for f in node.fields if f[0] == last), None)
        if field is None:
            return None
        if not element and isinstance(field[1], Scalar) and field[1].name == "string":
            holder[last] = json.dumps(holder[last], separators=(",", ":"))
        elif not field[2]:
            holder.pop(last)
        else:
            return None
    return None
