"""collectors/jmx.py: the exporter's text, as the 1.0.1 agent prints it with conf/jmx-exporter.yaml."""

import pytest

from collectors.jmx import broker_metrics_record, parse_exposition
from foundation.errors import SchemaError
from schemas.observation import check

pytestmark = pytest.mark.unit

TEXT = """\
# HELP jvm_threads_current Current thread count of a JVM
jvm_threads_current 42.0
kafka_log_log_logendoffset{partition="0",topic="orders"} 159.0
kafka_log_log_logstartoffset{partition="0",topic="orders"} 0.0
kafka_server_fetcherlagmetrics_consumerlag{client_id="ReplicaFetcherThread-0-3",partition="0",topic="orders"} 7.0
kafka_server_fetcherlagmetrics_consumerlag{client_id="ReplicaFetcherThread-1-3",partition="0",topic="orders"} 12.0
kafka_server_replicamanager_underreplicatedpartitions 2.0
kafka_server_replicamanager_isrshrinkspersec 3.0
kafka_controller_kafkacontroller_activecontrollercount 1.0
kafka_controller_controllerstats_uncleanleaderelectionspersec_total 1.0
"""


def test_gauges_and_partition_values():
    gauges, parts = parse_exposition(TEXT)
    assert gauges == {"under_replicated_partitions": 2.0, "isr_shrinks_total": 3.0, "active_controller_count": 1.0,
                      "unclean_leader_elections_total": 1.0}
    assert parts == [{"metric": "consumer_lag", "topic": "orders", "partition": 0, "value": 12.0},
                     {"metric": "log_end_offset", "topic": "orders", "partition": 0, "value": 159.0}]


def test_records_pass_the_schema_including_an_unreachable_endpoint():
    gauges, parts = parse_exposition(TEXT)
    answered = broker_metrics_record("c1", 1, 1000, 2, "http://b2:7071/metrics", gauges, parts, None, 3.5)
    assert check(answered) is answered
    refused = broker_metrics_record("c1", 1, 1000, 3, "http://b3:7071/metrics", {}, [], "URLError: refused", None)
    assert check(refused) is refused
    assert answered["broker_metrics_state"]["gauges"] and not refused["broker_metrics_state"]["gauges"]
    assert refused["broker_metrics_state"]["error"] == "URLError: refused"
    with pytest.raises(SchemaError):
        check({**refused, "v": 99})
