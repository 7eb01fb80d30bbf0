"""Security settings: parsing, secret handling, the client settings they become, failure wording."""

import os
import ssl
import subprocess

import pytest

from collectors import access
from foundation.config import load_config, parse_config
from foundation.errors import ConfigError
from foundation.security import KafkaSecurity, kafka_python_kwargs, spark_kafka_options
from lab.harness import KRM

pytestmark = pytest.mark.unit


def _secret(tmp_path, name="pw", text="s3cr\"et", mode=0o600):
    p = tmp_path / name
    p.write_text(text + "\n")
    os.chmod(p, mode)
    return p


def _config(tmp_path, security: str, observations: str = "") -> str:
    return (f'[[clusters]]\nname = "prod-eu-1"\nbootstrap_servers = "b1:9093"\n\n[clusters.security]\n{security}\n'
            f"{observations}\n[pipeline]\ndata_dir = \"{tmp_path / 'data'}\"\n")


def _load(tmp_path, text):
    path = tmp_path / "krm.toml"
    path.write_text(text)
    return load_config(path)


def test_scram_over_tls_becomes_client_settings(tmp_path):
    _secret(tmp_path)
    ca = tmp_path / "ca.pem"
    ca.write_text("-----BEGIN CERTIFICATE-----\nMIIB\n-----END CERTIFICATE-----\n")
    cfg = _load(tmp_path, _config(tmp_path, 'security_protocol = "SASL_SSL"\nsasl_mechanism = "SCRAM-SHA-512"\n'
                                            'sasl_username = "krm"\nsasl_password_file = "pw"\nssl_cafile = "ca.pem"\n'))
    sec = cfg.clusters[0].security
    assert kafka_python_kwargs(sec) == {
        "security_protocol": "SASL_SSL", "ssl_check_hostname": True, "ssl_cafile": str(ca),
        "sasl_mechanism": "SCRAM-SHA-512", "sasl_plain_username": "krm", "sasl_plain_password": 's3cr"et'}
    spark = spark_kafka_options(sec)
    assert spark["kafka.security.protocol"] == "SASL_SSL" and spark["kafka.sasl.mechanism"] == "SCRAM-SHA-512"
    assert spark["kafka.sasl.jaas.config"] == ('org.apache.kafka.common.security.scram.ScramLoginModule required '
                                               'username="krm" password="s3cr\\"et";')
    # PEM text inline: executors on a Spark cluster do not have the driver's files
    assert spark["kafka.ssl.truststore.type"] == "PEM" and "BEGIN CERTIFICATE" in spark["kafka.ssl.truststore.certificates"]
    # the observations topic lives on that cluster (no [observations] bootstrap): same security
    assert cfg.observations.security == sec


def test_oauthbearer_from_a_token_endpoint(tmp_path, monkeypatch):
    monkeypatch.setenv("KRM_OAUTH_SECRET", 'se"cret')
    cfg = _load(tmp_path, _config(tmp_path, 'security_protocol = "SASL_SSL"\nsasl_mechanism = "OAUTHBEARER"\n'
                                            'sasl_oauth_token_endpoint_url = "https://idp.example.com/oauth2/token"\n'
                                            'sasl_oauth_client_id = "krm"\nsasl_oauth_client_secret_env = "KRM_OAUTH_SECRET"\n'
                                            'sasl_oauth_scope = "kafka"\n'))
    sec = cfg.clusters[0].security
    assert sec.principal() == "OAUTHBEARER, client krm"
    assert kafka_python_kwargs(sec)["sasl_oauth_token_provider"] is not None
    o = spark_kafka_options(sec)
    assert o["kafka.sasl.oauthbearer.token.endpoint.url"] == "https://idp.example.com/oauth2/token"
    assert o["kafka.sasl.login.callback.handler.class"].endswith(".OAuthBearerLoginCallbackHandler")
    assert o["kafka.sasl.jaas.config"] == ('org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginModule required '
                                           'clientId="krm" clientSecret="se\\"cret" scope="kafka";')


def test_password_from_environment(tmp_path, monkeypatch):
    monkeypatch.setenv("KRM_KAFKA_PW", "from-env")
    cfg = _load(tmp_path, _config(tmp_path, 'security_protocol = "SASL_PLAINTEXT"\nsasl_mechanism = "PLAIN"\n'
                                            'sasl_username = "krm"\nsasl_password_env = "KRM_KAFKA_PW"\n'))
    assert kafka_python_kwargs(cfg.clusters[0].security)["sasl_plain_password"] == "from-env"
    monkeypatch.delenv("KRM_KAFKA_PW")
    with pytest.raises(ConfigError, match="environment variable KRM_KAFKA_PW is not set"):
        _load(tmp_path, _config(tmp_path, 'security_protocol = "SASL_PLAINTEXT"\nsasl_mechanism = "PLAIN"\n'
                                          'sasl_username = "krm"\nsasl_password_env = "KRM_KAFKA_PW"\n'))


@pytest.mark.parametrize("security, message", [
    ('security_protocol = "SASL_SSL"\nsasl_mechanism = "SCRAM-SHA-512"\nsasl_username = "krm"\nsasl_password = "x"\n',
     "secrets are not kept in the config"),
    ('security_protocol = "SASL_SSL"\n', "needs sasl_mechanism"),
    ('security_protocol = "SASL_SSL"\nsasl_mechanism = "SCRAM-SHA-256"\n', "needs sasl_username and sasl_password_file"),
    ('security_protocol = "TLS"\n', "security_protocol must be one of"),
    ('security_protocol = "SSL"\nsasl_mechanism = "PLAIN"\n', "has SASL settings but security_protocol is SSL"),
    ('security_protocol = "SSL"\nssl_cafile = "nowhere.pem"\n', "ssl_cafile .*nowhere.pem does not exist"),
    ('security_protocol = "SASL_SSL"\nsasl_mechanism = "OAUTHBEARER"\n', "needs sasl_oauth_token_file"),
    ('security_protocol = "SASL_SSL"\nsasl_mechanism = "OAUTHBEARER"\nsasl_oauth_token_endpoint_url = "ftp://idp/t"\n',
     "sasl_oauth_token_endpoint_url must be an http"),
    ('security_protocol = "SASL_SSL"\nsasl_mechanism = "OAUTHBEARER"\nsasl_oauth_token_endpoint_url = "http://idp/t"\n',
     "needs both sasl_oauth_client_id and sasl_oauth_client_secret_file"),
    ('security_protocol = "SSL"\nsasl_oauth_token_endpoint_url = "http://idp/t"\n', "has SASL settings"),
    ('security_protocol = "SSL"\nssl_verify = false\n', "unknown key"),
    ('security_protocol = "SASL_SSL"\nsasl_mechanism = "GSSAPI"\nsasl_kerberos_principal = "krm@R"\n',
     "sasl_kerberos_keytab and sasl_kerberos_principal go together"),
    ('security_protocol = "SASL_SSL"\nsasl_mechanism = "PLAIN"\nsasl_username = "krm"\nsasl_password_env = "X"\n'
     'sasl_kerberos_principal = "krm@R"\n', "has sasl_kerberos_.* settings but sasl_mechanism is PLAIN"),
])
def test_broken_security_settings_name_the_key(tmp_path, security, message):
    with pytest.raises(ConfigError, match=message):
        _load(tmp_path, _config(tmp_path, security))


def test_gssapi_from_a_keytab_becomes_client_settings(tmp_path):
    from foundation.kerberos import KerberosLogin

    keytab = _secret(tmp_path, "krm.keytab", "binary-ish")
    krb5 = tmp_path / "krb5.conf"
    krb5.write_text("[libdefaults]\n  default_realm = EXAMPLE.COM\n")
    cfg = _load(tmp_path, _config(tmp_path, 'security_protocol = "SASL_SSL"\nsasl_mechanism = "GSSAPI"\n'
                                            'sasl_kerberos_principal = "krm@EXAMPLE.COM"\n'
                                            f'sasl_kerberos_keytab = "{keytab}"\nkrb5_config = "{krb5}"\n'))
    sec = cfg.clusters[0].security
    kw = kafka_python_kwargs(sec)
    assert kw["sasl_kerberos_service_name"] == "kafka"
    assert kw["sasl_kerberos_name"] == KerberosLogin("kafka", "krm@EXAMPLE.COM", keytab, krb5)
    assert sec.principal() == f"GSSAPI, principal krm@EXAMPLE.COM, keytab {keytab}"
    o = spark_kafka_options(sec)
    assert o["kafka.sasl.kerberos.service.name"] == "kafka"
    assert o["kafka.sasl.jaas.config"] == ("com.sun.security.auth.module.Krb5LoginModule required useKeyTab=true "
                                           f'storeKey=true keyTab="{keytab}" principal="krm@EXAMPLE.COM";')
    # without a keytab: the ticket cache (kinit), for both
    cache = KafkaSecurity(security_protocol="SASL_SSL", sasl_mechanism="GSSAPI", sasl_kerberos_service_name="kfk")
    assert kafka_python_kwargs(cache)["sasl_kerberos_name"] == KerberosLogin("kfk")
    assert "useTicketCache=true" in spark_kafka_options(cache)["kafka.sasl.jaas.config"]


def test_a_refused_kerberos_login_is_an_authentication_failure():
    from foundation.kerberos import KerberosLoginError

    sec = KafkaSecurity(security_protocol="SASL_SSL", sasl_mechanism="GSSAPI")
    found = access.classify(KerberosLoginError("the KDC gave no ticket to krm@R: Client 'krm@R' not found in "
                                               "Kerberos database"), "prod-eu-1", sec)
    assert found == access.AccessProblem(
        access.AUTHENTICATION, "authentication failed for cluster prod-eu-1 (GSSAPI, the default ticket cache): "
                               "the KDC gave no ticket to krm@R: Client 'krm@R' not found in Kerberos database")


def test_world_readable_secret_is_refused(tmp_path):
    _secret(tmp_path, mode=0o644)
    with pytest.raises(ConfigError, match=r"readable by every user \(mode 0644\); run `chmod o-r"):
        _load(tmp_path, _config(tmp_path, 'security_protocol = "SASL_SSL"\nsasl_mechanism = "SCRAM-SHA-512"\n'
                                          'sasl_username = "krm"\nsasl_password_file = "pw"\n'))


def test_cli_refuses_world_readable_secret_in_one_line(tmp_path):
    """What the operator sees: one line naming the file, no traceback, a failing exit code."""
    _secret(tmp_path, mode=0o604)
    path = tmp_path / "krm.toml"
    path.write_text(_config(tmp_path, 'security_protocol = "SASL_SSL"\nsasl_mechanism = "SCRAM-SHA-512"\n'
                                      'sasl_username = "krm"\nsasl_password_file = "pw"\n'))
    out = subprocess.run([KRM, "run", "--config", str(path)], capture_output=True, text=True, timeout=60)
    assert out.returncode != 0
    assert "Traceback" not in out.stderr
    lines = [ln for ln in out.stderr.splitlines() if ln.strip()]
    assert len(lines) == 1 and f"secret file {tmp_path / 'pw'} is readable by every user" in lines[0], out.stderr


def test_plaintext_adds_nothing():
    assert kafka_python_kwargs(KafkaSecurity()) == {} and spark_kafka_options(KafkaSecurity()) == {}


def test_zookeeper_and_jmx_security(tmp_path):
    _secret(tmp_path, "zkpw")
    _secret(tmp_path, "jmxpw")
    cfg = parse_config({
        "clusters": [{"name": "c", "bootstrap_servers": "b:9092", "zookeeper": "z:2182/kafka",
                      "zookeeper_security": {"sasl_username": "krm", "sasl_password_file": str(tmp_path / "zkpw")},
                      "jmx_exporter_urls": ["1=https://b1:7071/metrics"],
                      "jmx_security": {"username": "prom", "password_file": str(tmp_path / "jmxpw"),
                                       "ssl_check_hostname": False}}],
        "pipeline": {"data_dir": str(tmp_path)}})
    from foundation.security import kazoo_kwargs

    c = cfg.clusters[0]
    assert kazoo_kwargs(c.zookeeper_security) == {
        "sasl_options": {"mechanism": "DIGEST-MD5", "username": "krm", "password": 's3cr"et'}}
    assert c.jmx_security.username == "prom" and c.jmx_security.tls.check_hostname is False


# ---------------------------------------------------------------- failure wording (collectors/access.py)

# built without validation: no password file is needed to word a refusal
SCRAM = KafkaSecurity.model_construct(security_protocol="SASL_SSL", sasl_mechanism="SCRAM-SHA-512", sasl_username="krm")


def test_refused_login_names_cluster_mechanism_and_user():
    from kafka.errors import SaslAuthenticationFailedError

    p = access.classify(SaslAuthenticationFailedError("Authentication failed during authentication due to invalid "
                                                      "credentials with SASL mechanism SCRAM-SHA-512"), "prod-eu-1", SCRAM)
    assert p.reason == "authentication_failed"
    assert p.message.startswith("authentication failed for cluster prod-eu-1 (SCRAM-SHA-512, user krm): "
                                "Authentication failed")


def test_a_refused_token_is_named_without_asking_a_broker(tmp_path, monkeypatch):
    """kafka-python turns a token it could not get into NoBrokersAvailable; the diagnosis asks the
    token endpoint itself, so a slow broker cannot turn the refusal into "unreachable"."""
    import http.server
    import threading

    from kafka.errors import NoBrokersAvailable

    class Refusing(http.server.BaseHTTPRequestHandler):
        def do_POST(self):  # noqa: N802 - http.server's name
            self.rfile.read(int(self.headers["Content-Length"]))
            body = b'{"error": "invalid_client", "error_description": "wrong secret"}'
            self.send_response(401)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args):
            pass

    server = http.server.HTTPServer(("127.0.0.1", 0), Refusing)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        _secret(tmp_path, "client.secret")
        url = f"http://127.0.0.1:{server.server_port}/token"
        sec = _load(tmp_path, _config(tmp_path, f'security_protocol = "SASL_PLAINTEXT"\nsasl_mechanism = "OAUTHBEARER"\n'
                                                f'sasl_oauth_token_endpoint_url = "{url}"\nsasl_oauth_client_id = "krm"\n'
                                                f'sasl_oauth_client_secret_file = "client.secret"\n')).clusters[0].security
        monkeypatch.setattr(access, "probe", lambda *a, **k: pytest.fail("a broker was asked"))
        p = access.explain(NoBrokersAvailable(), "c", "127.0.0.1:1", sec)
    finally:
        server.shutdown()
    assert p == access.AccessProblem(access.AUTHENTICATION, f"authentication failed for cluster c (OAUTHBEARER, client "
                                                            f"krm): the token endpoint {url} answered HTTP 401 "
                                                            f"(invalid_client: wrong secret) for client krm")


def test_untrusted_certificate_is_a_tls_failure():
    e = ssl.SSLCertVerificationError(1, "certificate verify failed")
    e.verify_message = "self-signed certificate in certificate chain"
    p = access.classify(e, "prod-eu-1", SCRAM)
    assert p.reason == "tls_failed" and "self-signed certificate in certificate chain" in p.message


def _alert(reason):
    e = ssl.SSLError(1, f"[SSL: {reason}] alert (_ssl.c:2580)")
    e.reason = reason  # what OpenSSL sets: the peer's alert
    return e


def test_broker_refusing_the_client_certificate_names_it(tmp_path):
    cert, key = _secret(tmp_path, "krm.pem", "cert"), _secret(tmp_path, "krm.key", "key")
    mtls = KafkaSecurity(security_protocol="SSL", ssl_certfile=cert, ssl_keyfile=key)
    p = access.classify(_alert("SSLV3_ALERT_CERTIFICATE_UNKNOWN"), "prod-eu-1", mtls)
    assert p.reason == "tls_failed"
    assert p.message == (f"TLS handshake failed for cluster prod-eu-1: the broker refused the client certificate "
                         f"{cert} (SSLV3_ALERT_CERTIFICATE_UNKNOWN); is it signed by a CA in the brokers' "
                         f"ssl.truststore, and still valid?")
    p = access.classify(_alert("SSLV3_ALERT_BAD_CERTIFICATE"), "prod-eu-1", KafkaSecurity(security_protocol="SSL"))
    assert p.reason == "tls_failed" and "requires a client certificate (mutual TLS) and none is configured" in p.message
    # any other TLS failure keeps OpenSSL's words
    p = access.classify(_alert("WRONG_VERSION_NUMBER"), "prod-eu-1", mtls)
    assert p.message.endswith("(TLS client certificate): WRONG_VERSION_NUMBER")


def test_plaintext_client_on_tls_listener_is_a_protocol_mismatch():
    from kafka.errors import InvalidReceiveError

    p = access.classify(InvalidReceiveError("Invalid frame length: 352518912"), "c", KafkaSecurity())
    assert p.reason == "protocol_mismatch" and "try SSL or SASL_SSL" in p.message


def test_timeouts_are_not_access_problems():
    from kafka.errors import KafkaTimeoutError

    assert access.classify(KafkaTimeoutError(), "c", SCRAM) is None
    assert access.classify(None, "c", SCRAM) is None


def test_missing_acls_in_one_line():
    p = access.denials("c", SCRAM, [f"DESCRIBE_CONFIGS on TOPIC t{i}" for i in range(5)] + ["DESCRIBE on CLUSTER"])
    assert p.reason == "authorization_failed"
    assert p.message == ("authorization failed for cluster c (SCRAM-SHA-512, user krm): missing ACL: DESCRIBE on CLUSTER; "
                         "DESCRIBE_CONFIGS on TOPIC t0; DESCRIBE_CONFIGS on TOPIC t1; and 3 more "
                         "(krm's minimum ACLs: docs/security.md)")
    assert access.denials("c", SCRAM, []) is None


def test_access_failures_are_retried_ever_more_slowly():
    """No login storm: after a refused login the collector waits before asking the brokers again."""
    from collectors.admin import AdminSource
    from foundation.config import ClusterConfig, CollectorConfig

    src = AdminSource(ClusterConfig.model_construct(name="c", bootstrap_servers="h:1", security=SCRAM), CollectorConfig())
    refused = access.AccessProblem(access.AUTHENTICATION, "authentication failed for cluster c")
    waits = []
    for _ in range(7):
        import time

        before = time.monotonic()
        src.parts.access.failed(refused)
        waits.append(round(src.parts.access.retry.retry_at - before))
    assert waits == [5, 10, 20, 40, 60, 60, 60]
    assert src.poll()[0]["cluster_state"]["error_reason"] == "authentication_failed"  # no connection attempted
    src.parts.access.failed(access.AccessProblem(access.UNREACHABLE, "down"))
    assert src.parts.access.retry.failures == 0  # an unreachable cluster is polled at the normal rate


def test_one_back_off_doubles_to_its_cap_and_starts_over_after_a_success():
    from foundation.backoff import Backoff, Retry

    clock = [0.0]
    retry = Retry(Backoff(first_s=0.5, cap_s=10.0), clock=lambda: clock[0])
    assert retry.due() and [retry.failed() for _ in range(7)] == [0.5, 1.0, 2.0, 4.0, 8.0, 10.0, 10.0]
    assert not retry.due()
    clock[0] = 10.0
    assert retry.due()
    retry.succeeded()
    assert retry.failed() == 0.5
