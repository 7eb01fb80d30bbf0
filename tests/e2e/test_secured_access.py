"""What krm does when a secured cluster refuses it: a wrong password, a CA that did not sign the
brokers' certificates, an ACL taken away. One monitor watches the same SASL_SSL + ACL cluster nine
times (SCRAM-SHA-512, PLAIN, OAUTHBEARER and GSSAPI with the right credentials, each with a wrong one,
and a wrong CA), as krm's least-privilege user: each failure is one log line naming the cluster and the
cause, krm_cluster_reachable{reason} says it, the brokers are not stormed with logins, and the
correctly configured clusters go on being monitored, their canaries writing. OAUTHBEARER's tokens
come from a token endpoint the test starts (lab/local_oauth.py, RS256 JWTs the brokers verify
against the cluster's JWKS); the observations topic is written and read (Spark's Kafka source) with
them. GSSAPI's tickets come from the cluster's own MIT KDC (lab/local_kdc.py): krm logs in from a
keytab, Spark's Kafka source too; the wrong credential is a keytab whose principal the KDC no longer
knows."""

import logging
import os
import time

import pytest

from foundation.config import load_config
from foundation.security import spark_kafka_options
from krm.runner import Monitor
from krm.scrape import scrape, series
from lab.local_cluster import free_port
from lab.local_oauth import TokenEndpoint
from lab.local_security import KRM_ACLS, LocalSecurity, grant_krm_acls, revoke_acl
from lab.harness import create_topic, wait_equal

pytestmark = pytest.mark.e2e


def _reachable(url):
    return {s.labels["cluster"]: (s.labels.get("reason", ""), s.value) for s in series(scrape(url), "krm_cluster_reachable")}


# how a broker's server.log records a refused login, by mechanism (Kafka's ScramSaslServer and
# PlainServerCallbackHandler / PlainSaslServer)
REFUSED = {"SCRAM-SHA-512": "invalid credentials with SASL mechanism SCRAM-SHA-512",
           "PLAIN": "Authentication failed: Invalid username or password"}
CANARIES = ("plain", "oauth", "kerberos")  # the canary over PLAIN, OAUTHBEARER and GSSAPI (SCRAM's: test_canary.py)


def _refused_logins(cluster, mechanism):
    """The brokers' own count of refused logins with `mechanism` (their server.log)."""
    n = 0
    for b in cluster.broker_ids:
        log = cluster.root / f"broker-{b}" / "logs" / "server.log"
        n += log.read_text(errors="replace").count(REFUSED[mechanism])
    return n


def _kdc_refusals(cluster):
    """The KDC's own count of ticket requests for the retired principal (its log)."""
    log = cluster.kdc.dir / "kdc.log"
    return log.read_text(errors="replace").count("CLIENT_NOT_FOUND: retired@KRM.LOCAL") if log.exists() else 0


def _other_ca(path):
    from cryptography.hazmat.primitives import serialization

    from lab.local_security import _ca

    _, cert = _ca()
    path.write_bytes(cert.public_bytes(serialization.Encoding.PEM))


def test_refused_password_certificate_and_acl(kraft4_secure_cluster, spark, tmp_path, caplog):
    cluster = kraft4_secure_cluster
    sec = LocalSecurity(cluster.root)
    create_topic(cluster, "secured-topic", partitions=3, rf=3)
    bad_pw = tmp_path / "wrong.password"
    bad_pw.write_text("not-the-password\n")
    os.chmod(bad_pw, 0o600)
    _other_ca(tmp_path / "other-ca.pem")
    good = sec.config_toml()
    wrong_password = good.replace(str(sec.password_file("krm")), str(bad_pw))
    wrong_ca = good.replace(str(sec.ca_file), str(tmp_path / "other-ca.pem"))
    plain = sec.config_toml("PLAIN")
    wrong_plain = plain.replace(str(sec.password_file("krm")), str(bad_pw))
    idp = TokenEndpoint(sec).start()
    oauth = sec.oauth_config_toml(idp.url)
    wrong_oauth = oauth.replace(str(sec.password_file("oauth-krm")), str(bad_pw))
    kerberos, wrong_kerberos = (cluster.kdc.config_toml(who, sec.ca_file) for who in ("krm", "retired"))
    config_path = tmp_path / "krm.toml"
    config_path.write_text("".join(
        f'[[clusters]]\nname = "{name}"\nbootstrap_servers = "{cluster.bootstrap_servers}"\n'
        + (f'canary = true\ncanary_topic = "krm.canary.{name}"\n' if name in CANARIES else "")
        + f"[clusters.security]\n{s}\n"
        for name, s in (("good", good), ("badpw", wrong_password), ("badca", wrong_ca), ("plain", plain),
                        ("badplain", wrong_plain), ("oauth", oauth), ("badoauth", wrong_oauth),
                        ("kerberos", kerberos), ("badkerberos", wrong_kerberos)))
        + f'[observations]\nbootstrap_servers = "{cluster.bootstrap_servers}"\ntopic = "krm.obs.access"\n'
        f"[observations.security]\n{oauth}\n"
        f"[collector]\npoll_interval_s = 1.0\nconfig_refresh_s = 2.0\ncanary_interval_s = 1.0\n\n"
        f'[pipeline]\ndata_dir = "{tmp_path / "data"}"\nmetrics_port = {free_port()}\n')
    caplog.set_level(logging.WARNING, logger="collectors")
    monitor = Monitor(load_config(config_path), spark=spark).start()
    try:
        url = monitor.metrics_url
        wait_equal(lambda: _reachable(url), {"good": ("", 1.0), "badpw": ("authentication_failed", 0.0),
                                             "badca": ("tls_failed", 0.0), "plain": ("", 1.0),
                                             "badplain": ("authentication_failed", 0.0), "oauth": ("", 1.0),
                                             "badoauth": ("authentication_failed", 0.0), "kerberos": ("", 1.0),
                                             "badkerberos": ("authentication_failed", 0.0)}, 120,
                   "reachability with reasons")
        # the right credentials keep working beside the wrong ones, with every mechanism
        for name in ("good", "plain", "oauth", "kerberos"):
            assert {s.labels["broker"]: s.value for s in series(scrape(url), "krm_broker_up", cluster=name)} == {
                "1": 1.0, "2": 1.0, "3": 1.0}, name
        # the observations went through OAUTHBEARER both ways (publisher, Spark's Kafka source)
        wait_equal(lambda: [s.value for s in series(scrape(url), "krm_cluster_offline_partitions", cluster="oauth")],
                   [0.0], 60, "the oauth cluster judged by the pipeline")
        for name in CANARIES:
            wait_equal(lambda name=name: {s.labels["broker"]: s.value
                                          for s in series(scrape(url), "krm_canary_produce_up", cluster=name)},
                       {"1": 1.0, "2": 1.0, "3": 1.0}, 60, f"the {name} canary writing on every broker")
        assert set(idp.issued) == {"krm"} and idp.refused >= 1
        # Spark's Kafka source (Kafka's Java client) over GSSAPI: its Krb5LoginModule entry from the keytab;
        # the JVM's krb5.conf as krm/runner.py gives it to a pipeline's own session
        spark._jvm.java.lang.System.setProperty("java.security.krb5.conf", str(cluster.kdc.krb5_conf))
        gssapi_options = spark_kafka_options(next(c for c in load_config(config_path).clusters
                                                  if c.name == "kerberos").security)
        read = (spark.read.format("kafka").option("kafka.bootstrap.servers", cluster.bootstrap_servers)
                .option("subscribe", "krm.obs.access").options(**gssapi_options).load().count())
        assert read > 0, "the observations topic read over GSSAPI"
        print(f"\ntokens issued to krm (collector and Spark, reused until 80% of their hour): {len(idp.issued)}")

        mechanisms = ("SCRAM-SHA-512", "PLAIN")
        before, t0 = {m: _refused_logins(cluster, m) for m in mechanisms}, time.monotonic()
        before["token endpoint"] = idp.refused
        before["KDC"] = _kdc_refusals(cluster)
        time.sleep(20)
        refused = {m: _refused_logins(cluster, m) - before[m] for m in mechanisms}
        refused["token endpoint"] = idp.refused - before["token endpoint"]  # the wrong client secret
        refused["KDC"] = _kdc_refusals(cluster) - before["KDC"]  # the retired principal
        print(f"\nrefused logins on the brokers in {time.monotonic() - t0:.0f}s of a wrong password: {refused}")
        # polled every second, a wrong password would cost at least 3 logins a second (two Admin
        # client bootstraps and one diagnosis per poll); the back-off (5, 10, 20 s, ...) allows a few
        assert all(n <= 15 for n in refused.values()), refused

        lines = [r.getMessage() for r in caplog.records if r.name.startswith("collectors")]
        assert [m for m in lines if "badpw" in m] == [
            "authentication failed for cluster badpw (SCRAM-SHA-512, user krm): Authentication failed during "
            "authentication due to invalid credentials with SASL mechanism SCRAM-SHA-512"]
        (plain_line,) = [m for m in lines if "badplain" in m]
        assert plain_line.startswith("authentication failed for cluster badplain (PLAIN, user krm): "), plain_line
        assert "Invalid username or password" in plain_line, plain_line
        assert [m for m in lines if "badoauth" in m] == [
            f"authentication failed for cluster badoauth (OAUTHBEARER, client krm): the token endpoint {idp.url} "
            f"answered HTTP 401 (invalid_client: unknown client or wrong secret) for client krm"]
        (kerberos_line,) = [m for m in lines if "badkerberos" in m]
        assert kerberos_line.startswith(
            f"authentication failed for cluster badkerberos (GSSAPI, principal retired@KRM.LOCAL, keytab "
            f"{cluster.kdc.keytab('retired')}): the KDC gave no ticket to retired@KRM.LOCAL: Client "
            f"'retired@KRM.LOCAL' not found in Kerberos database"), kerberos_line
        (tls_line,) = [m for m in lines if "badca" in m]
        assert tls_line.startswith("TLS handshake failed for cluster badca: the broker's certificate was not accepted")
        assert not [r for r in caplog.records if r.exc_info], "no tracebacks"

        admin = cluster.admin_client()
        try:
            revoke_acl(admin, "TOPIC", "*", "LITERAL", "DESCRIBE_CONFIGS")
            wait_equal(lambda: _reachable(url)["good"], ("authorization_failed", 0.0), 60, "the missing ACL reported")
            denied = [m for m in (r.getMessage() for r in caplog.records) if "cluster good" in m and "missing ACL" in m]
            # one line naming what is missing (the first few topics of the cluster, sorted, then a count)
            assert denied and "missing ACL: DESCRIBE_CONFIGS on TOPIC " in denied[-1], denied
            # still polled: the partitions' health is still judged
            assert [s.value for s in series(scrape(url), "krm_cluster_offline_partitions", cluster="good")] == [0.0]
        finally:
            grant_krm_acls(admin, tuple(a for a in KRM_ACLS if a[:2] == ("TOPIC", "*")))
            admin.close()
        wait_equal(lambda: _reachable(url)["good"], ("", 1.0), 60, "the ACL granted again")
    finally:
        monitor.stop()
        idp.stop()
