"""A restarted pipeline keeps its assignment history: rebuilt from the `assignments` table and the
`broker_expansion` incidents it wrote (issue: a broker added before a restart must stay
`broker_expansion`, an expanded topic `partition_expansion`)."""

from __future__ import annotations

import datetime as dt

import pyarrow as pa
from deltalake import write_deltalake

from pipelines.assignment_history import broker_join_ms, topic_layouts
from pipelines.detectors import balance
from pipelines.detectors.balance import AssignmentHistory, TopicLayout
from pipelines.incidents import Incident
from pipelines.load import TopicLoad

T0 = 1_700_000_000_000


def _snapshots(path, rows):
    write_deltalake(str(path), pa.table({
        "cluster": [r[0] for r in rows], "topic": [r[1] for r in rows],
        "observed_at": pa.array([dt.datetime.fromtimestamp(r[2] / 1000, dt.timezone.utc) for r in rows],
                                pa.timestamp("us", tz="UTC")),
        "partition_count": pa.array([r[3] for r in rows], pa.int32())}))


def test_topic_layouts_find_first_sight_and_last_growth(tmp_path):
    _snapshots(tmp_path / "a", [("c", "grown", T0, 2), ("c", "grown", T0 + 5000, 2), ("c", "grown", T0 + 9000, 4),
                                ("c", "grown", T0 + 20000, 4), ("c", "flat", T0 + 1000, 6), ("c", "flat", T0 + 30000, 6),
                                ("d", "grown", T0 + 7000, 3)])
    assert topic_layouts(tmp_path / "a") == {
        ("c", "grown"): TopicLayout(T0, T0 + 9000, 4),
        ("c", "flat"): TopicLayout(T0 + 1000, T0 + 1000, 6),
        ("d", "grown"): TopicLayout(T0 + 7000, T0 + 7000, 3),
    }
    assert topic_layouts(tmp_path / "missing") == {}


def _incident(broker, opened_ms, cause="broker_expansion"):
    return Incident("id", "c", "balance", "REPLICA_IMBALANCE", "warning", None, None, broker, cause, {}, opened_ms,
                    opened_ms, None, "open")


def test_broker_joins_come_from_broker_expansion_incidents():
    joins = broker_join_ms([_incident(4, T0 + 60_000), _incident(4, T0 + 90_000), _incident(5, T0, "uneven_assignment")])
    assert joins == {("c", 4): T0 + 60_000}


def test_restored_history_keeps_the_causes_a_restart_used_to_forget():
    layouts = {("c", "expand"): TopicLayout(T0, T0 + 9000, 4), ("c", "old"): TopicLayout(T0, T0, 3)}
    h = AssignmentHistory.restore(layouts, {("c", 4): T0 + 60_000})
    # the first cluster record after the restart: brokers 1-3 were there, 4 joined while watched
    h.observe_brokers("c", {1, 2, 3, 4}, T0 + 120_000)
    assert h.joined_while_watched("c", 4) and not h.joined_while_watched("c", 1)
    h.observe_topic("c", "expand", 4, T0 + 120_000)
    assert ("c", "expand") in h.topic_expanded_ms and ("c", "old") not in h.topic_expanded_ms

    counts = {1: (2, 4, 2, 0), 2: (2, 4, 2, 0), 3: (0, 0, 0, 0), 4: (0, 0, 0, 0)}
    found = balance.cluster_replica_imbalance("c", counts, {1, 2, 3, 4}, 0.2, h)
    assert {(f.broker, f.cause) for f in found} == {(3, balance.UNEVEN), (4, balance.BROKER_EXPANSION)}
    topic = TopicLoad("c", "expand", T0 + 120_000, {1: (2, 2, 2, 0), 2: (2, 2, 2, 0)}, partitions=4)
    (t,) = balance.topic_replica_imbalance("c", [topic], {1, 2, 3}, h)
    assert t.cause == balance.PARTITION_EXPANSION


def test_without_tables_a_restart_starts_afresh():
    h = AssignmentHistory.restore({}, {})
    h.observe_brokers("c", {1, 2}, T0)
    h.observe_brokers("c", {1, 2, 3}, T0 + 10_000)
    assert h.joined_while_watched("c", 3) and not h.joined_while_watched("c", 1)
