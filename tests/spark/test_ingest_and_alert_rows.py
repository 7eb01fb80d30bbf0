"""Parsing, quarantine reasons and the alert path's collected rows, on a static batch of records."""

import json

import pytest

from collectors.records import cluster_record, topic_record
from pipelines.findings import DetectorSettings, alert_rows
from pipelines.ingest import parse, rejected, valid

pytestmark = pytest.mark.spark


def _batch(spark, values):
    rows = [(None if v is None else v.encode(), "krm.observations", 0, i) for i, v in enumerate(values)]
    return spark.createDataFrame(rows, "value binary, topic string, partition int, offset long").selectExpr(
        "*", "current_timestamp() as timestamp")


def _topic(poll_id=7, t=1_000, live=(1, 3), parts=None):
    parts = parts or [
        {"partition": 0, "leader": 1, "leader_epoch": 0, "replicas": [1], "isr": [1], "offline_replicas": []},
        {"partition": 1, "leader": -1, "leader_epoch": 3, "replicas": [2], "isr": [2], "offline_replicas": [2]},
    ]
    return topic_record("c1", "admin", poll_id, t, topic="rf1", live_brokers=live, partitions=parts,
                        min_insync_replicas=1, unclean_leader_election=False)


def _cluster(poll_id=7, t=1_000, error=None):
    brokers = [] if error else [{"id": 1, "live": True}, {"id": 2, "live": False}, {"id": 3, "live": True}]
    return cluster_record("c1", "admin", poll_id, t, controller_id=1, brokers=brokers, topic_count=1,
                          partition_count=2, error=error)


BAD = [
    ("{not json", "not a JSON observation object"),
    (json.dumps({**_cluster(), "v": 99}), "unsupported schema version 99"),
    (json.dumps({**_cluster(), "kind": "gossip"}), "unknown kind gossip"),
    (json.dumps({k: v for k, v in _cluster().items() if k != "observed_at_ms"}), "required field observed_at_ms is missing"),
    (json.dumps({**_topic(), "topic_state": None}), "topic_state is required for kind 'topic'"),
    (json.dumps({**_topic(), "poll_id": "seven"}), "required field poll_id is missing or not a long"),
    (json.dumps(_topic(parts=[{"partition": 0, "replicas": [1], "isr": [1]}])),
     "partitions[].{partition,leader,replicas,isr} is missing"),
]


def _p(partition=0, leader=1, replicas=(1, 2), isr=(1, 2), **offsets):
    return {"partition": partition, "leader": leader, "replicas": list(replicas), "isr": list(isr), **offsets}


# the contract (pipelines/ingest.py `contract`): what Kafka itself never allows
CONTRACT = [
    (_topic(parts=[_p(0), _p(1, leader=3)]), "leader is neither -1 nor one of the replicas (topic rf1, partition 1)"),
    (_topic(parts=[_p(0, isr=(1, 4))]), "ISR not a subset of replicas (topic rf1, partition 0)"),
    (_topic(parts=[_p(0, replicas=(1, 1), isr=(1,))]), "a broker twice in replicas"),
    (_topic(parts=[_p(0, replicas=(), isr=(), leader=-1)]), "no replicas"),
    (_topic(parts=[_p(-2)]), "negative partition id"),
    (_topic(parts=[_p(0, high_watermark=-5)]), "negative offset"),
    (_topic(parts=[_p(0, replica_offsets=[{"broker": 1, "log_end_offset": -1}])]), "negative offset"),
    (_topic(parts=[_p(0, high_watermark=10, log_start_offset=11)]), "log start offset above the high watermark"),
    (_topic(parts=[_p(0), _p(0)]), "a partition twice in one record"),
    (cluster_record("c1", "admin", 7, 1_000, controller_id=1, brokers=[{"id": 1, "live": True}, {"id": 1, "live": False}],
                    topic_count=0, partition_count=0), "a broker twice in cluster_state.brokers"),
]
# sampling can break these legitimately (an unclean election): they pass, the quality suite measures them
SOUND = [
    _topic(parts=[_p(0, high_watermark=50, replica_offsets=[{"broker": 1, "log_end_offset": 40}])]),
    _topic(parts=[_p(0, leader=-1, isr=(), high_watermark=None)]),
    _topic(parts=[_p(0, high_watermark=10, log_start_offset=10)]),
]


def test_contract_breaches_are_quarantined_naming_the_partition(spark):
    parsed = parse(_batch(spark, [json.dumps(r) for r, _ in CONTRACT] + [json.dumps(r) for r in SOUND]))
    assert valid(parsed).count() == len(SOUND)
    reasons = [r.reason for r in rejected(parsed).orderBy("kafka_offset").collect()]
    assert len(reasons) == len(CONTRACT)
    for got, (_, want) in zip(reasons, CONTRACT):
        assert got.startswith("contract: ") and want in got, (got, want)


def test_bad_records_are_quarantined_with_their_reason(spark):
    good = [json.dumps(_topic()), json.dumps(_cluster())]
    parsed = parse(_batch(spark, good + [b for b, _ in BAD]))
    assert valid(parsed).count() == 2
    reasons = [r.reason for r in rejected(parsed).orderBy("kafka_offset").collect()]
    assert len(reasons) == len(BAD)
    for got, (_, want) in zip(reasons, BAD):
        assert want in got


def test_alert_rows_hold_findings_markers_and_cluster_state(spark):
    rows = alert_rows(valid(parse(_batch(spark, [json.dumps(_topic()), json.dumps(_cluster())])))).collect()
    kinds = sorted((r.row_type, r.scope, r.type) for r in rows)
    assert kinds == [("cluster", "cluster", None), ("finding", "cluster", "BROKER_DOWN"),
                     ("finding", "topic:rf1", "OFFLINE_PARTITION"), ("poll", "cluster", None),
                     ("poll", "offsets:rf1", None), ("poll", "topic:rf1", None)]
    assert next(r for r in rows if r.type == "BROKER_DOWN").broker == 2
    finding = next(r for r in rows if r.type == "OFFLINE_PARTITION")
    assert (finding.topic, finding.partition, finding.cause) == ("rf1", 1, "single_replica_on_dead_broker")
    assert json.loads(finding.details)["must_return"] == [2]


def test_isr_findings_and_missing_controller(spark):
    parts = [{"partition": 0, "leader": 1, "leader_epoch": 0, "replicas": [1, 3, 2], "isr": [1], "offline_replicas": []}]
    topic = topic_record("c1", "admin", 7, 1_000, topic="t3", live_brokers=[1, 2, 3], partitions=parts,
                         min_insync_replicas=2, unclean_leader_election=False)
    cluster = cluster_record("c1", "admin", 7, 1_000, controller_id=None, brokers=[{"id": 1, "live": True}],
                             topic_count=1, partition_count=1)
    rows = alert_rows(valid(parse(_batch(spark, [json.dumps(topic), json.dumps(cluster)])))).collect()
    found = {r.type: r for r in rows if r.row_type == "finding"}
    assert set(found) == {"UNDER_REPLICATED", "UNDER_MIN_ISR", "CONTROLLER_ANOMALY"}
    details = json.loads(found["UNDER_MIN_ISR"].details)
    assert details["out_of_sync"] == [3, 2] and details["effective_min_isr"] == 2
    assert found["CONTROLLER_ANOMALY"].cause == "no_active_controller"


def test_failed_cluster_poll_opens_cluster_unreachable_and_resolves_nothing(spark):
    rows = alert_rows(valid(parse(_batch(spark, [json.dumps(_cluster(error="NoBrokersAvailable"))])))).collect()
    assert [(r.row_type, r.scope, r.type, r.cause) for r in rows] == [
        ("cluster", "cluster", None, None), ("finding", "cluster", "CLUSTER_UNREACHABLE", "unreachable")]


def test_failed_poll_with_zookeeper_s_registrations_opens_broker_down_and_resolves_nothing(spark):
    """The whole cluster down (fault loops' cluster-down): no broker answers, but ZooKeeper says who
    is registered. BROKER_DOWN opens then, so a restart resolves it broker by broker; no poll marker,
    so nothing resolves, and an unknown reachability (nobody answered) is not `unreachable`."""
    record = cluster_record("c1", "admin", 7, 1_000, controller_id=None, topic_count=0, partition_count=0,
                            brokers=[{"id": 1, "live": False, "reachable": None},
                                     {"id": 2, "live": True, "reachable": None}], error="no broker answered")
    rows = alert_rows(valid(parse(_batch(spark, [json.dumps(record)])))).collect()
    assert [(r.row_type, r.scope, r.type, r.broker, r.cause) for r in rows] == [
        ("cluster", "cluster", None, None, None), ("finding", "cluster", "BROKER_DOWN", 1, "not_registered")]


def test_poll_marker_carries_per_broker_counts(spark):
    parts = [
        {"partition": 0, "leader": 1, "replicas": [1, 2], "isr": [1, 2]},
        {"partition": 1, "leader": 1, "replicas": [2, 1], "isr": [2, 1]},  # preferred 2, led by 1
        {"partition": 2, "leader": -1, "replicas": [3], "isr": [3]},
    ]
    rec = topic_record("c1", "admin", 7, 1_000, topic="t", live_brokers=[1, 2], partitions=parts,
                       min_insync_replicas=1, unclean_leader_election=False)
    rows = alert_rows(valid(parse(_batch(spark, [json.dumps(rec)])))).collect()
    marker = next(r for r in rows if r.row_type == "poll")
    d = json.loads(marker.details)
    counts = {b: (lead, rep, pref, npref) for b, lead, rep, pref, npref in d["brokers"]}
    assert d["partitions"] == 3
    assert counts == {1: (2, 2, 1, 0), 2: (0, 2, 1, 1), 3: (0, 1, 1, 1)}


def test_metadata_only_record_judges_and_resolves_only_metadata_incidents(spark):
    """A ZooKeeper-triggered record has no offsets: it must not emit the offsets scope's marker,
    which would resolve HW_STALL / REPLICA_LAG incidents it cannot judge."""
    parts = [{"partition": 0, "leader": -1, "leader_epoch": 3, "replicas": [2], "isr": [2], "zk_mtime_ms": 990}]
    rec = topic_record("c1", "zookeeper", 8, 1_000, topic="rf1", live_brokers=[1], partitions=parts,
                       min_insync_replicas=1, unclean_leader_election=False, has_offsets=False)
    rows = alert_rows(valid(parse(_batch(spark, [json.dumps(rec)])))).collect()
    assert sorted((r.row_type, r.scope, r.type) for r in rows) == [
        ("finding", "topic:rf1", "OFFLINE_PARTITION"), ("poll", "topic:rf1", None)]


def test_record_of_a_poll_that_reached_no_broker_opens_and_resolves_nothing(spark):
    """The ZooKeeper view of a failed poll (`resolves` false): its findings come out, its marker is a
    "view" (broker counts, no poll), so split_rows gives the incident book nothing to resolve with."""
    from pipelines.alert_path import split_rows

    parts = [{"partition": 0, "leader": 2, "leader_epoch": 3, "replicas": [2], "isr": [2], "zk_mtime_ms": 990},
             {"partition": 1, "leader": 1, "leader_epoch": 3, "replicas": [1], "isr": [1], "zk_mtime_ms": 990}]
    rec = topic_record("c1", "zookeeper", 8, 1_000, topic="rf1", live_brokers=[1], partitions=parts,
                       min_insync_replicas=1, unclean_leader_election=False, has_offsets=False, resolves=False)
    rows = alert_rows(valid(parse(_batch(spark, [json.dumps(rec)])))).collect()
    assert sorted((r.row_type, r.scope, r.type, r.partition) for r in rows) == [
        ("finding", "topic:rf1", "OFFLINE_PARTITION", 0), ("view", "topic:rf1", None, None)]
    polls, found, _clusters, counts, _jmx = split_rows(rows)
    assert polls == [] and [f.partition for f in found] == [0]
    assert [(c.topic, c.partitions) for c in counts] == [("rf1", 2)]


def test_broker_metrics_record_becomes_one_jmx_row(spark):
    from collectors.jmx import broker_metrics_record

    rec = broker_metrics_record("c1", 3, 1_000, 2, "http://b2:7071/metrics", {"active_controller_count": 1.0},
                                [{"metric": "log_end_offset", "topic": "t", "partition": 0, "value": 5.0}], None, 2.0)
    rows = alert_rows(valid(parse(_batch(spark, [json.dumps(rec)])))).collect()
    assert [(r.row_type, r.scope, r.broker) for r in rows] == [("jmx", "jmx", 2)]
    assert json.loads(rows[0].details)["gauges"] == [{"name": "active_controller_count", "value": 1.0}]


def test_registered_but_unanswering_broker_is_down_unreachable(spark):
    brokers = [{"id": 1, "live": True, "reachable": True}, {"id": 2, "live": True, "reachable": False}]
    rec = cluster_record("c1", "admin", 7, 1_000, controller_id=1, brokers=brokers, topic_count=0, partition_count=0)
    rows = alert_rows(valid(parse(_batch(spark, [json.dumps(rec)])))).collect()
    (f,) = [r for r in rows if r.row_type == "finding"]
    assert (f.type, f.broker, f.cause, f.severity) == ("BROKER_DOWN", 2, "unreachable", "warning")


@pytest.mark.parametrize("controlled, departure, down_since, expected", [
    (True, None, 900_000, ("stopped", "warning")),  # down 100 s after a controlled shutdown: routine
    (True, None, 100_000, ("stopped", "critical")),  # down 900 s, past planned_stop_max_s (600 s)
    (False, None, 900_000, ("not_registered", "warning")),  # went down holding leaderships: a crash, its load moved
    (None, None, None, ("not_registered", "warning")),  # an older collector: a crash, since unknown
    (True, "controlled", 900_000, ("stopped", "warning")),
    (False, "crash", 900_000, ("not_registered", "warning")),
    (False, "crash", 100_000, ("not_registered", "critical")),  # a crash nobody restarted: past planned_stop_max_s
    (None, "unknown", 900_000, ("unknown", "warning")),  # nothing to hand over: no evidence, never "stopped"
    (None, "unknown", 100_000, ("unknown", "critical")),  # and past planned_stop_max_s, as a stop
])
def test_broker_down_after_a_controlled_shutdown(spark, controlled, departure, down_since, expected):
    broker = {"id": 2, "live": False, "reachable": None}
    if controlled is not None or departure is not None:
        broker |= {"controlled_shutdown": controlled, "down_since_ms": down_since, "departure": departure}
    rec = cluster_record("c1", "admin", 7, 1_000_000, controller_id=1, topic_count=0, partition_count=0,
                         brokers=[{"id": 1, "live": True, "reachable": True}, broker])
    rows = alert_rows(valid(parse(_batch(spark, [json.dumps(rec)]))), DetectorSettings(planned_stop_max_ms=600_000)).collect()
    (f,) = [r for r in rows if r.row_type == "finding"]
    assert (f.type, f.broker, (f.cause, f.severity)) == ("BROKER_DOWN", 2, expected)
    assert json.loads(f.details)["departure"] == (departure or {True: "controlled"}.get(controlled, "crash"))


@pytest.mark.parametrize("live, reachable, departure, down_since, expected", [
    (False, None, "crash", 900_000, ("log_dir_full", "warning")),
    (False, None, "crash", 100_000, ("log_dir_full", "critical")),  # left on a full disk past planned_stop_max_s
    (True, False, "unknown", 900_000, ("log_dir_full", "warning")),  # halted, not deregistered yet
])
def test_a_broker_gone_with_its_disks_full_is_named_so(spark, live, reachable, departure, down_since, expected):
    dirs = [{"path": "/data", "failed": False, "total_bytes": 64 << 20, "usable_bytes": 1 << 20, "full_in_s": 2.5}]
    broker = {"id": 2, "live": live, "reachable": reachable, "departure": departure, "down_since_ms": down_since,
              "disk_full": True, "log_dirs": dirs}
    rec = cluster_record("c1", "admin", 7, 1_000_000, controller_id=1, topic_count=0, partition_count=0,
                         brokers=[{"id": 1, "live": True, "reachable": True}, broker])
    rows = alert_rows(valid(parse(_batch(spark, [json.dumps(rec)]))), DetectorSettings(planned_stop_max_ms=600_000)).collect()
    (f,) = [r for r in rows if r.row_type == "finding"]
    assert (f.type, f.broker, (f.cause, f.severity)) == ("BROKER_DOWN", 2, expected)
    details = json.loads(f.details)
    assert details["disk_full"] is True and details["log_dirs"][0]["path"] == "/data"


def test_a_reassigning_partition_is_info_not_under_replicated_nor_lagging(spark):
    """kafka-reassign-partitions moving 1,2 -> 3,4: replicas [1,2,3,4], ISR [1,2], 3 and 4 copying."""
    parts = [{"partition": 0, "leader": 1, "leader_epoch": 3, "replicas": [1, 2, 3, 4], "isr": [1, 2],
              "adding_replicas": [3, 4], "removing_replicas": [1, 2], "high_watermark": 90_000,
              "replica_offsets": [{"broker": b, "log_end_offset": o} for b, o in ((1, 90_000), (2, 90_000), (3, 500), (4, 0))]}]
    topic = topic_record("c1", "admin", 7, 1_000, topic="mv", live_brokers=[1, 2, 3, 4], partitions=parts,
                         min_insync_replicas=2, unclean_leader_election=False)
    rows = alert_rows(valid(parse(_batch(spark, [json.dumps(topic)]))), DetectorSettings(lag_messages=10)).collect()
    found = [r for r in rows if r.row_type == "finding"]
    assert [(f.type, f.cause, f.severity) for f in found] == [("PARTITION_REASSIGNING", "in_progress", "info")]
    details = json.loads(found[0].details)
    assert (details["adding"], details["removing"]) == ([3, 4], [1, 2])
    assert details["progress"] == [{"broker": 3, "messages_to_copy": 89_500}, {"broker": 4, "messages_to_copy": 90_000}]


@pytest.mark.parametrize("progress_ms, leo, expected", [
    (700_000, 500, ("in_progress", "info")),  # copied 300 s before the poll (1_000_000): within 300 s... at the edge
    (600_000, 500, ("stalled", "warning")),  # nothing copied for 400 s while 89,500 messages are left
    (600_000, 90_000, ("in_progress", "info")),  # caught up, waiting to join the ISR: not a copy stall
])
def test_a_reassignment_that_stopped_copying_is_stalled(spark, progress_ms, leo, expected):
    parts = [{"partition": 0, "leader": 1, "leader_epoch": 3, "replicas": [1, 2, 3], "isr": [1, 2],
              "adding_replicas": [3], "removing_replicas": [2], "high_watermark": 90_000,
              "reassignment_progress_ms": progress_ms,
              "replica_offsets": [{"broker": b, "log_end_offset": o} for b, o in ((1, 90_000), (2, 90_000), (3, leo))]}]
    topic = topic_record("c1", "admin", 7, 1_000_000, topic="mv", live_brokers=[1, 2, 3], partitions=parts,
                         min_insync_replicas=2, unclean_leader_election=False)
    rows = alert_rows(valid(parse(_batch(spark, [json.dumps(topic)]))), DetectorSettings(reassignment_stall_ms=300_000))
    (f,) = [r for r in rows.collect() if r.row_type == "finding"]
    assert (f.type, (f.cause, f.severity)) == ("PARTITION_REASSIGNING", expected)


def test_a_tiered_topic_brings_its_offsets_to_the_driver(spark):
    """Only a topic with remote.storage.enable=true (the record's `remote_storage`) gets a "tiered" row:
    every partition's HW, log start, local log start and highest remote offset (pipelines/tiered_view.py)."""
    from pipelines.alert_path import split_rows

    parts = [_p(0, high_watermark=4000, log_start_offset=0, local_log_start_offset=2048, highest_remote_offset=3071),
             _p(1, high_watermark=10, log_start_offset=0, local_log_start_offset=0, highest_remote_offset=-1)]
    tiered = topic_record("c1", "admin", 7, 1_000, topic="tiered", live_brokers=[1, 2], partitions=parts,
                          min_insync_replicas=1, unclean_leader_election=False, remote_storage=True)
    plain = topic_record("c1", "admin", 7, 1_000, topic="plain", live_brokers=[1, 2], partitions=[_p(0)],
                         min_insync_replicas=1, unclean_leader_election=False)
    rows = alert_rows(valid(parse(_batch(spark, [json.dumps(tiered), json.dumps(plain)])))).collect()
    assert sorted(r.topic for r in rows if r.row_type == "tiered") == ["tiered"]
    found = []
    split_rows(rows, [], found)
    ((t,),) = [found]
    assert (t.cluster, t.topic, t.observed_at_ms) == ("c1", "tiered", 1_000)
    assert [(p.partition, p.remote_copy_lag) for p in t.partitions] == [(0, 928), (1, 10)]


def test_another_share_of_a_split_cluster_is_judged_by_no_rule(spark):
    """collectors/topic_share.py: share 2's cluster record (a broker down in it, as that process saw it)
    yields its state row only: no finding, no poll marker that could resolve share 1's incidents."""
    from pipelines.alert_path import split_rows

    brokers = [{"id": 1, "live": True, "reachable": True}, {"id": 2, "live": False, "reachable": None}]
    first = cluster_record("c1", "admin", 7, 1_000, controller_id=1, brokers=brokers, topic_count=2, partition_count=8)
    second = cluster_record("c1", "admin", 9, 1_500, controller_id=1, brokers=brokers, topic_count=2, partition_count=8)
    first["cluster_state"]["topic_share"] = {"index": 1, "count": 2}
    second["cluster_state"]["topic_share"] = {"index": 2, "count": 2}
    rows = alert_rows(valid(parse(_batch(spark, [json.dumps(first), json.dumps(second)])))).collect()
    by_poll = sorted((r.poll_id, r.row_type, r.type) for r in rows)
    assert by_poll == [(7, "cluster", None), (7, "finding", "BROKER_DOWN"), (7, "poll", None), (9, "cluster", None)]
    shares: dict = {}
    polls, found, clusters, _counts, _jmx = split_rows(rows, shares=shares)
    assert [p.poll_id for p in polls] == [7] and [f.poll_id for f in found] == [7]
    assert clusters["c1"].newest_observed_ms == 1_000 and clusters["c1"].share_count == 2
    assert shares == {"c1": {2: 1_500}}
