"""Every incident type and cause in the registry, read by every reader: `krm incidents` (grouped, --ungrouped,
--json, --open), `krm incidents show`, `krm timeline`, `krm sql`, the console's pages (incidents, an incident,
the fleet, the cluster grid, topic, partition and broker pages), the incident groups and /metrics (whose
krm_incident_info the alerts' annotations read). A type or cause added to the registry is crossed here by
itself; a reader that cannot show it fails. Then hypothesis: details with fields missing, empty or odd."""

from __future__ import annotations

import json
import typing
import datetime as dt
import types
from typing import Any

import pyarrow as pa
import pytest
from deltalake import write_deltalake
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from prometheus_client import CollectorRegistry
from pydantic import BaseModel

from krm import picture
from krm.cli import main
from krm.commands.incidents import describe
from krm.console import Console
from krm.timeline import timeline
from pipelines import incident_groups
from pipelines.detectors.details import Details, problems
from pipelines.detectors.registry import RULES
from pipelines.incident_store import IncidentStore, to_json_obj
from pipelines.incidents import Incident
from pipelines.metrics import KrmCollector
from pipelines.state import ClusterView, PipelineState

pytestmark = pytest.mark.unit

NOW_MS = 1_700_000_000_000
CLUSTER = "prod"


def example(model: type[BaseModel]) -> dict[str, Any]:
    """A value for every declared field of `model`, of its declared shape: what a rule could write."""
    return {name: _value(field.annotation) for name, field in model.model_fields.items()}


def _value(annotation: Any) -> Any:
    origin, args = typing.get_origin(annotation), typing.get_args(annotation)
    if origin in (typing.Union, types.UnionType):
        return _value(next(a for a in args if a is not type(None)))
    if origin is tuple:
        return [_value(args[0]), _value(args[0])] if args[0] is not str else ["a", "b"]
    if origin is dict:
        return {"1": 4, "2": 0}
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return example(annotation)
    return {int: 2, float: 0.5, str: "s", bool: True}[annotation]


def cases() -> list[tuple[str, str | None]]:
    """(type, cause) for every declared cause of every rule (None for a type without causes)."""
    return [(r.type, c) for r in RULES for c in (r.causes or (None,))]


def _subject(type_: str) -> tuple[str | None, int | None, int | None]:
    rule = next(r for r in RULES if r.type == type_)
    if rule.subject == "partition":
        return "orders", 3, (2 if type_ in ("REPLICA_LAG", "LOG_TRUNCATION") else None)
    if type_ == "REPLICA_IMBALANCE":
        return None, None, 2
    return None, None, 1


def incident(n: int, type_: str, cause: str | None, details: Any, status: str = "open") -> Incident:
    topic, partition, broker = _subject(type_)
    rule = next(r for r in RULES if r.type == type_)
    return Incident(f"inc-{n}", CLUSTER, "s", type_, rule.severity.get(cause, "warning"),
                    topic, partition, broker, cause, details, NOW_MS + n, NOW_MS + n + 500,
                    None if status == "open" else NOW_MS + n + 1000, status)


def every_incident() -> list[Incident]:
    out = []
    for n, (type_, cause) in enumerate(cases()):
        rule = next(r for r in RULES if r.type == type_)
        details = example(rule.details) | {"root_cause": cause, "cause_history": [cause]}
        out.append(incident(2 * n, type_, cause, details))
        out.append(incident(2 * n + 1, type_, cause, {}, status="resolved"))
    return out


def test_every_cause_has_a_case_and_every_example_is_of_its_declared_shape():
    assert len(cases()) >= sum(max(1, len(r.causes)) for r in RULES)
    for r in RULES:
        assert problems(r.details, example(r.details)) == [], r.type


def _console(incidents: list[Incident], tables: Any) -> Console:
    state = PipelineState()
    state.update(clusters={CLUSTER: ClusterView(((1, True), (2, False), (3, True)), 1, None, NOW_MS)},
                 open_incidents=tuple(i for i in incidents if i.status == "open"),
                 broker_load={CLUSTER: {1: (5, 9, 5, 0), 3: (4, 9, 4, 0)}})
    return Console(state, tables)


def _get(app: Console, path: str, query: str = "") -> tuple[str, str]:
    got: dict[str, str] = {}
    body = b"".join(app({"PATH_INFO": path, "QUERY_STRING": query}, lambda s, h: got.setdefault("s", s))).decode()
    return got["s"], body


CONSOLE_PAGES = ["/", "/incidents", "/incidents?status=all", f"/clusters/{CLUSTER}", f"/clusters/{CLUSTER}?all=1",
                 f"/topics/{CLUSTER}/orders", f"/partitions/{CLUSTER}/orders/3", f"/brokers/{CLUSTER}/1",
                 f"/brokers/{CLUSTER}/2"]


def read_everywhere(incidents: list[Incident], tables: Any) -> None:
    """The pure readers (no table): a reader that raises fails the test."""
    groups = incident_groups.group(incidents)
    assert sorted(m.incident_id for g in groups for m in g.members) == sorted(i.incident_id for i in incidents)
    for g in groups:
        g.counts(), g.partitions, g.title
    for i in incidents:
        json.dumps(to_json_obj(i))
        describe(i, None, [])
        picture.names(i)
        i.facts.act_on(), i.facts.headline(), i.facts.facts(), i.facts.raw()
    timeline([], incidents, "orders", 3, dt.datetime.fromtimestamp(0, dt.timezone.utc))
    reg = CollectorRegistry(auto_describe=False)
    state = PipelineState()
    state.update(clusters={CLUSTER: ClusterView(((1, True), (2, True)), 1, None, NOW_MS)},
                 open_incidents=tuple(i for i in incidents if i.status == "open"))
    reg.register(KrmCollector(state, clock=lambda: NOW_MS / 1000 + 5))
    [m for m in reg.collect()]
    app = _console(incidents, tables)
    for page in CONSOLE_PAGES + [f"/incidents/{i.incident_id}" for i in incidents]:
        path, _, query = page.partition("?")
        status, body = _get(app, path, query)
        assert status == "200 OK", (page, body[:400])


@pytest.fixture
def written(tmp_path):
    """Every type and cause, open and resolved, in a real incidents table, and a config that reads it."""
    incidents = every_incident()
    data = tmp_path / "data"
    IncidentStore(_tables(data).incidents).upsert(incidents)
    at = dt.datetime.fromtimestamp(NOW_MS / 1000, dt.timezone.utc)
    state = {"cluster": CLUSTER, "topic": "orders", "partition": 3, "observed_at": at, "leader": 1, "leader_epoch": 3,
             "replicas": [1, 2], "isr": [1], "high_watermark": 10, "leader_leo": 12, "changed": True, "date": at.date()}
    write_deltalake(str(data / "tables" / "partition_state"), pa.Table.from_pylist([state]),
                    partition_by=["date", "cluster"])
    cfg = tmp_path / "krm.toml"
    cfg.write_text(f'[[clusters]]\nname = "{CLUSTER}"\nbootstrap_servers = "127.0.0.1:1"\n'
                   f'[pipeline]\ndata_dir = "{data}"\n')
    return incidents, cfg, data


@pytest.mark.parametrize("flags", [[], ["--ungrouped"], ["--open"], ["--json"], ["--open", "--json"]])
def test_krm_incidents_lists_every_type_and_cause(written, capsys, flags):
    incidents, cfg, _ = written
    assert main(["incidents", "--config", str(cfg), *flags]) == 0
    out = capsys.readouterr().out
    if "--json" in flags:
        got = json.loads(out)
        want = [i for i in incidents if "--open" not in flags or i.status == "open"]
        assert sorted(o["incident_id"] for o in got) == sorted(i.incident_id for i in want)
        assert all(isinstance(o["details"], dict) for o in got)
        return
    for type_, _ in cases():
        assert type_ in out, type_


def test_krm_incidents_show_every_incident(written, capsys):
    incidents, cfg, _ = written
    for i in incidents:
        assert main(["incidents", "show", i.incident_id, "--config", str(cfg)]) == 0
        text = capsys.readouterr().out
        assert i.type in text and i.incident_id in text
        assert main(["incidents", "show", i.incident_id, "--json", "--config", str(cfg)]) == 0
        assert json.loads(capsys.readouterr().out)["incident_id"] == i.incident_id


def test_krm_timeline_and_sql_read_every_type(written, capsys):
    incidents, cfg, _ = written
    assert main(["timeline", "--topic", "orders", "--partition", "3", "--since", "10000d", "--json",
                 "--config", str(cfg)]) == 0
    events = json.loads(capsys.readouterr().out)
    partition_types = {i.type for i in incidents if i.topic == "orders"}
    assert {e.get("type") for e in events if e.get("type")} >= partition_types
    assert main(["sql", "select type, cause, details from incidents", "--json", "--config", str(cfg)]) == 0
    rows = json.loads(capsys.readouterr().out)
    assert {r["type"] for r in rows} == {t for t, _ in cases()}


def test_the_console_and_every_pure_reader_read_every_type(written):
    incidents, _, data = written
    read_everywhere(incidents, _tables(data))


def test_the_expansion_imbalance_reads_as_brokers_with_too_few_replicas(written):
    """The field case: a cluster-level REPLICA_IMBALANCE (`uneven_assignment`) open beside a BROKER_DOWN."""
    incidents, _, data = written
    old = incident(900, "REPLICA_IMBALANCE", "uneven_assignment",  # a row written before `replica_count`
                   {"replicas": 0, "mean_replicas": 2.5, "replicas_by_broker": {"1": 5, "2": 0}, "too_few": [2]})
    assert old.facts.replica_count == 0 and old.facts.act_on() == [("too_few", (2,))]
    assert old.facts.headline() == "replicas by broker 1:5 2:0; too few on 2"
    read_everywhere([*incidents, old], _tables(data))
    status, body = _get(_console([*incidents, old], _tables(data)), "/incidents/inc-900")
    assert status == "200 OK" and "too few on 2" in body and "too_few [2]" in body


def _tables(data: Any) -> Any:
    from pipelines.tables import Tables

    return Tables(str(data))


# details with fields missing, empty and of other shapes: every reader shows what it has and never raises
ODD = st.one_of(st.none(), st.booleans(), st.integers(-3, 2**40), st.floats(allow_nan=True), st.text(max_size=5),
                st.lists(st.one_of(st.integers(-1, 5), st.text(max_size=2), st.none()), max_size=3),
                st.dictionaries(st.text(max_size=4), st.one_of(st.integers(), st.text(max_size=3)), max_size=2))


@st.composite
def odd_details(draw: Any) -> tuple[str, str | None, Any]:
    type_, cause = draw(st.sampled_from(cases()))
    rule = next(r for r in RULES if r.type == type_)
    names = [*rule.details.model_fields, "replication_link", "log_dirs", "extra"]
    base = example(rule.details) if draw(st.booleans()) else {}
    changed = draw(st.dictionaries(st.sampled_from(names), ODD, max_size=6))
    dropped = draw(st.sets(st.sampled_from(names), max_size=4))
    details: Any = {k: v for k, v in (base | changed).items() if k not in dropped}
    return type_, draw(st.sampled_from([cause, None, "a_cause_krm_never_wrote"])), details


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(st.lists(odd_details(), min_size=1, max_size=4))
def test_odd_details_are_read_without_error(tmp_path, drawn):
    incidents = [incident(n, t, c, d) for n, (t, c, d) in enumerate(drawn)]
    read_everywhere(incidents, _tables(tmp_path / "none"))
    for i in incidents:
        assert isinstance(i.facts, Details)


def test_details_of_another_shape_are_named_not_raised():
    broken = incident(1, "OFFLINE_PARTITION", "all_isr_replicas_dead", {"must_return": 3, "isr": [1, "x"], "leader": -1})
    assert broken.facts.unreadable == ("isr", "must_return") and broken.facts.leader == -1
    assert broken.facts.must_return == () and broken.facts.act_on() == []
    assert incident(2, "HW_STALL", None, ["not", "an", "object"]).facts.raw() == {}


def test_a_name_means_one_thing_in_every_type():
    """The same field name has the same declared shape in every type's details (a count is never a list)."""
    seen: dict[str, tuple[Any, str]] = {}
    for r in RULES:
        for name, field in r.details.model_fields.items():
            shape = _shape(field.annotation)
            first = seen.setdefault(name, (shape, r.type))
            assert first[0] == shape, f"{name}: {first[1]} declares {first[0]}, {r.type} {shape}"


def _shape(annotation: Any) -> Any:
    args = [a for a in typing.get_args(annotation) if a is not type(None)]
    if typing.get_origin(annotation) in (typing.Union, types.UnionType) and len(args) == 1:
        return _shape(args[0])
    return annotation


def test_rules_write_what_they_declare():
    """The driver-side rules' details against their declared shapes (the Spark rules: tests/spark)."""
    from pipelines.detectors import balance
    from pipelines.detectors.details import problems as p
    from pipelines.load import TopicLoad

    history = balance.AssignmentHistory()
    history.observe_brokers(CLUSTER, {1, 2}, 0)
    history.observe_brokers(CLUSTER, {1, 2, 3}, 10)
    totals = {1: (6, 9, 6, 3), 2: (3, 9, 3, 0), 3: (0, 0, 0, 0)}
    found = (balance.preferred_leader_imbalance(totals, {1, 2, 3}, 10) + balance.leader_skew(totals, {1, 2, 3}, 0.5)
             + balance.cluster_replica_imbalance(CLUSTER, totals, {1, 2, 3}, 0.2, history)
             + balance.topic_replica_imbalance(CLUSTER, [TopicLoad(CLUSTER, "t", 0, {1: (3, 6, 3, 0), 2: (3, 6, 3, 0)}, 6)],
                                               {1, 2, 3}, history))
    assert {f.type for f in found} == {balance.PREFERRED, balance.LEADER_SKEW, balance.REPLICA_IMBALANCE}
    for f in found:
        assert p(balance.RULES[f.type].details, f.details) == [], (f.type, f.details)
    joined = next(f for f in found if f.type == balance.REPLICA_IMBALANCE and f.broker == 3)
    assert joined.details["too_few"] == [3] and joined.cause == balance.BROKER_EXPANSION


def test_describe_names_what_to_act_on_and_the_evidence():
    link = {"side": "follower", "broker": 3, "peers": [1, 2], "summary": "broker 3 fetches nothing from brokers 1, 2"}
    stall = incident(1, "HW_STALL", "isr_follower_behind", {"holding_back": [3], "replication_link": link, "leader": 1})
    text = "\n".join(describe(stall, None, []))
    assert "holding_back [3]" in text and "broker 3 fetches nothing from brokers 1, 2 (follower side)" in text
