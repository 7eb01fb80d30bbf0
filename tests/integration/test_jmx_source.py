"""The JMX exporter source against the brokers' real agents (conf/jmx-exporter.yaml): its values
agree with the Admin API at the same moment, and a dead broker's endpoint is an observation."""

import time

import pytest

from collectors.admin import AdminSource
from collectors.jmx import JmxSource
from foundation.config import ClusterConfig, CollectorConfig
from schemas.observation import check
from lab.harness import create_topic, wait_for

pytestmark = pytest.mark.integration


def _by_broker(records):
    return {r["broker_metrics_state"]["broker"]: r["broker_metrics_state"] for r in records}


def test_jmx_values_agree_with_the_admin_api(zk_cluster):
    from kafka import KafkaProducer

    cluster = zk_cluster
    topic = "jmx-agree"
    (replicas,) = create_topic(cluster, topic, partitions=1, rf=3).values()
    producer = KafkaProducer(bootstrap_servers=cluster.bootstrap_servers, acks="all")
    for _ in range(25):
        producer.send(topic, b"m", partition=0)
    producer.flush()
    producer.close()
    endpoints = dict((int(b), u) for b, _, u in (x.partition("=") for x in cluster.jmx_exporter_urls))
    jmx = JmxSource(cluster.name, endpoints)
    admin = AdminSource(ClusterConfig(name=cluster.name, bootstrap_servers=cluster.bootstrap_servers),
                        CollectorConfig(leave_out_quiet=False))  # every poll whole: compared with JMX each time
    try:
        def agreeing():
            records = jmx.poll()
            for r in records:
                check(r)
            states = _by_broker(records)
            polled = admin.poll()
            controller = next(r for r in polled if r["kind"] == "cluster")["cluster_state"]["controller_id"]
            (part,) = next(r for r in polled if r["kind"] == "topic" and r["topic_state"]["topic"] == topic)[
                "topic_state"]["partitions"]
            leos = {o["broker"]: o["log_end_offset"] for o in part["replica_offsets"]}
            jmx_leos = {b: next((p["value"] for p in st["partitions"]
                                 if p["metric"] == "log_end_offset" and p["topic"] == topic), None)
                        for b, st in states.items() if b in replicas}
            active = [b for b, st in states.items()
                      if dict((g["name"], g["value"]) for g in st["gauges"]).get("active_controller_count") == 1]
            ok = leos == {b: 25 for b in replicas} and jmx_leos == {b: 25.0 for b in replicas} and active == [controller]
            return (states, active) if ok else None

        states, active = wait_for(agreeing, 60, "JMX and Admin API to agree")
        assert all(st["error"] is None for st in states.values())
        urp = {b: dict((g["name"], g["value"]) for g in st["gauges"])["under_replicated_partitions"]
               for b, st in states.items()}
        assert set(urp.values()) == {0.0}

        victim = max(b for b in endpoints if b not in active)
        cluster.kill(victim)
        try:
            dead = _by_broker(jmx.poll())[victim]
            assert dead["error"] and dead["gauges"] == []
        finally:
            cluster.start(victim)
            time.sleep(1)
    finally:
        jmx.close()
        admin.close()


def test_exporters_behind_basic_auth_and_tls(kraft4_secure_cluster):
    """A secured cluster's exporters (HTTPS with the cluster's CA, basic auth): krm's
    [clusters.jmx_security] gets the gauges; without the password or with another CA, the record
    says why, and nothing is read."""
    from foundation.config import load_config

    cluster = kraft4_secure_cluster
    c = load_config(cluster.config_path).clusters[0]
    assert all(url.startswith("https://") for _, url in c.jmx_exporter_urls)
    ok = JmxSource(c.name, dict(c.jmx_exporter_urls), security=c.jmx_security)
    no_password = JmxSource(c.name, dict(c.jmx_exporter_urls), security=c.jmx_security.model_copy(update={"username": None}))
    no_ca = JmxSource(c.name, dict(c.jmx_exporter_urls))
    try:
        states = _by_broker(ok.poll())
        assert sorted(states) == cluster.broker_ids
        assert all(s["error"] is None and s["gauges"] for s in states.values()), states
        assert {s["error"] for s in _by_broker(no_password.poll()).values()} == {"HTTPError: HTTP Error 401: Unauthorized"}
        assert all("CERTIFICATE_VERIFY_FAILED" in s["error"] and not s["gauges"]
                   for s in _by_broker(no_ca.poll()).values())
    finally:
        for src in (ok, no_password, no_ca):
            src.close()
