"""Mutual TLS, Kafka and ZooKeeper: krm watches a ZooKeeper-mode cluster whose SSL listeners require a
client certificate (CN=krm is the principal User:krm, holding only krm's minimum ACLs) and whose
ZooKeeper serves TLS only, with client certificates too. One monitor watches the cluster three times:
with krm's certificate (collector, ZooKeeper watch, canary, publisher, Spark's Kafka source all work),
with a certificate for CN=krm signed by a CA the cluster does not trust, and with no certificate.
Each refused one is one log line for Kafka and one for ZooKeeper naming the cause, its
krm_cluster_reachable{reason} and krm_collector_zookeeper_connected say it, the brokers are not
stormed with handshakes, and the good one goes on being monitored."""

import logging
import os
import time

import pytest

from foundation.config import load_config
from krm.runner import Monitor
from krm.scrape import scrape, series
from lab.local_cluster import free_port
from lab.local_security import KRM_USER, LocalSecurity, _ca, _signed_cert
from lab.harness import create_topic, wait_equal

pytestmark = pytest.mark.e2e

REFUSED = "(SSL handshake failed)"  # how a broker's server.log records a refused TLS client (Kafka's Selector)


def _by_cluster(url, name):
    return {s.labels["cluster"]: (s.labels.get("reason", ""), s.value) if name == "krm_cluster_reachable" else s.value
            for s in series(scrape(url), name)}


def _refused_handshakes(cluster):
    return sum((cluster.root / f"broker-{b}" / "logs" / "server.log").read_text(errors="replace").count(REFUSED)
               for b in cluster.broker_ids)


def _impostor(tmp_path):
    """A certificate for CN=krm signed by another CA: the right name, the wrong signer."""
    from cryptography.hazmat.primitives import serialization

    ca_key, ca_cert = _ca()
    key, cert = _signed_cert(ca_key, ca_cert, KRM_USER, server=False)
    certfile, keyfile = tmp_path / "impostor.pem", tmp_path / "impostor.key"
    certfile.write_bytes(cert.public_bytes(serialization.Encoding.PEM))
    keyfile.write_bytes(key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                                          serialization.NoEncryption()))
    os.chmod(keyfile, 0o600)
    return certfile, keyfile


def test_client_certificates_for_kafka_and_zookeeper(zk_mtls_cluster, spark, tmp_path, caplog):
    cluster = zk_mtls_cluster
    sec = LocalSecurity(cluster.root, cluster.security)
    create_topic(cluster, "mtls-topic", partitions=3, rf=3)
    certfile, keyfile = _impostor(tmp_path)
    good, good_zk = sec.config_toml(), sec.zookeeper_toml()

    def impostor(text):
        return text.replace(str(sec.certfile(KRM_USER)), str(certfile)).replace(str(sec.keyfile(KRM_USER)), str(keyfile))

    def without_certificate(text):
        return "".join(line + "\n" for line in text.splitlines() if not line.startswith(("ssl_certfile", "ssl_keyfile")))

    clusters = (("good", good, good_zk, "canary = true\n"), ("impostor", impostor(good), impostor(good_zk), ""),
                ("nocert", without_certificate(good), without_certificate(good_zk), ""))
    config_path = tmp_path / "krm.toml"
    config_path.write_text("".join(
        f'[[clusters]]\nname = "{name}"\nbootstrap_servers = "{cluster.bootstrap_servers}"\n'
        f'zookeeper = "{cluster.zookeeper}"\n{extra}[clusters.security]\n{kafka}\n[clusters.zookeeper_security]\n{zk}\n'
        for name, kafka, zk, extra in clusters)
        + f'[observations]\nbootstrap_servers = "{cluster.bootstrap_servers}"\ntopic = "krm.obs.mtls"\n'
        f"[observations.security]\n{good}\n"
        f"[collector]\npoll_interval_s = 1.0\ncanary_interval_s = 1.0\n\n"
        f'[pipeline]\ndata_dir = "{tmp_path / "data"}"\nmetrics_port = {free_port()}\n')
    caplog.set_level(logging.INFO, logger="collectors")
    before, t0 = _refused_handshakes(cluster), time.monotonic()
    monitor = Monitor(load_config(config_path), spark=spark).start()
    try:
        url = monitor.metrics_url
        wait_equal(lambda: _by_cluster(url, "krm_cluster_reachable"), {
            "good": ("", 1.0), "impostor": ("tls_failed", 0.0), "nocert": ("tls_failed", 0.0)}, 120,
            "reachability with reasons")
        # ZooKeeper over TLS: the good certificate holds a session, the others none
        wait_equal(lambda: _by_cluster(url, "krm_collector_zookeeper_connected"),
                   {"good": 1.0, "impostor": 0.0, "nocert": 0.0}, 30, "ZooKeeper sessions by certificate")
        # the whole path over mutual TLS: the partitions judged from the observations Spark read, the canary
        wait_equal(lambda: [s.value for s in series(scrape(url), "krm_cluster_offline_partitions", cluster="good")],
                   [0.0], 60, "the good cluster judged by the pipeline")
        wait_equal(lambda: {s.labels["broker"]: s.value for s in series(scrape(url), "krm_canary_produce_up",
                                                                          cluster="good")},
                   {"1": 1.0, "2": 1.0, "3": 1.0}, 60, "the canary writing and reading back on every broker")

        time.sleep(max(0.0, 40 - (time.monotonic() - t0)))
        refused, seconds = _refused_handshakes(cluster) - before, time.monotonic() - t0
        print(f"\nrefused TLS handshakes on the brokers in the monitor's first {seconds:.0f}s, two clusters "
              f"with a refused certificate: {refused}")
        # polled every second, each refused cluster would cost 3 or more handshakes a second (120+ in
        # 40 s); the back-off (5, 10, 20 s, ...) allows a few attempts, each a bootstrap and a diagnosis
        assert refused <= 30, refused

        lines = [r.getMessage() for r in caplog.records if r.name.startswith("collectors")]
        assert [m for m in lines if m.startswith("TLS handshake failed for cluster impostor")] == [
            f"TLS handshake failed for cluster impostor: the broker refused the client certificate {certfile} "
            f"(SSLV3_ALERT_CERTIFICATE_UNKNOWN); is it signed by a CA in the brokers' ssl.truststore, and still valid?"]
        (nocert,) = [m for m in lines if m.startswith("TLS handshake failed for cluster nocert")]
        assert "the broker requires a client certificate (mutual TLS) and none is configured" in nocert, nocert
        zk_lines = {name: [m for m in lines if m.startswith(f"cluster {name}: ZooKeeper")] for name, *_ in clusters}
        assert zk_lines["good"] == [], zk_lines
        (zk_impostor,) = zk_lines["impostor"]
        assert f"refused the TLS connection: it refused the client certificate {certfile}" in zk_impostor, zk_impostor
        (zk_nocert,) = zk_lines["nocert"]
        assert "it requires a client certificate and none is configured" in zk_nocert, zk_nocert
        assert not [r for r in caplog.records if r.exc_info], "no tracebacks"
        assert _by_cluster(url, "krm_cluster_reachable")["good"] == ("", 1.0)
    finally:
        monitor.stop()
