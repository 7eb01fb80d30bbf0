"""How krm authenticates to what it watches: Kafka (SASL, TLS), ZooKeeper (SASL digest, TLS) and
JMX exporter endpoints (basic auth, TLS).

A config names where each secret lives (`*_file`, a file only its owner may read, or `*_env`, an
environment variable), never the secret itself. Secrets are read when a client is built, so a rotated
password is picked up at the next reconnect; they are never logged and never exported.

One `KafkaSecurity` turns into the keyword arguments of every kafka-python client krm opens
(`kafka_python_kwargs`) and into the `kafka.`-prefixed options of Spark's Kafka source
(`spark_kafka_options`), so the collector, the publisher, the pipeline and the CLI's live commands
speak to a cluster the same way.
"""

from __future__ import annotations

import os
import ssl
import stat
import threading
import urllib.parse
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pydantic import Field, field_validator, model_validator

from foundation import kerberos
from foundation.errors import ConfigError
from foundation.oauth import ClientCredentials
from foundation.settings import EnvName, File, Table, Text, checked

PROTOCOLS = ("PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL")
MECHANISMS = ("PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512", "OAUTHBEARER", "GSSAPI")

# Java login modules for Spark's Kafka source (org.apache.kafka.common.security.*).
_LOGIN_MODULES = {
    "PLAIN": "org.apache.kafka.common.security.plain.PlainLoginModule",
    "SCRAM-SHA-256": "org.apache.kafka.common.security.scram.ScramLoginModule",
    "SCRAM-SHA-512": "org.apache.kafka.common.security.scram.ScramLoginModule",
}


@dataclass(frozen=True)
class Secret:
    """Where a secret is kept: a file (`path`) or an environment variable (`env`)."""

    path: Path | None = None
    env: str | None = None

    def describe(self) -> str:
        return f"file {self.path}" if self.path else f"environment variable {self.env}"

    def check(self, where: str) -> None:
        """Fail early, with the key named, on a secret that is missing or readable by everyone."""
        if self.path is not None:
            check_secret_file(self.path, where)
        elif self.env is not None and not os.environ.get(self.env):
            raise ConfigError(f"{where}: environment variable {self.env} is not set or empty")

    def read(self) -> str:
        if self.path is not None:
            check_secret_file(self.path, str(self.path))
            return self.path.read_text().strip()
        value = os.environ.get(self.env or "")
        if not value:
            raise ConfigError(f"environment variable {self.env} is not set or empty")
        return value


def check_secret_file(path: Path, where: str) -> None:
    """A secret file must exist and must not be readable by every user of the machine (like ssh's
    private keys: krm refuses rather than use a secret that may already be exposed)."""
    try:
        mode = path.stat().st_mode
    except FileNotFoundError:
        raise ConfigError(f"{where}: secret file {path} does not exist") from None
    except PermissionError:
        raise ConfigError(f"{where}: secret file {path} cannot be read by this user") from None
    if not stat.S_ISREG(mode):
        raise ConfigError(f"{where}: secret file {path} is not a regular file")
    if mode & stat.S_IROTH:
        raise ConfigError(f"{where}: secret file {path} is readable by every user (mode {stat.S_IMODE(mode):04o}); "
                          f"run `chmod o-r {path}` (0600 or 0640 are fine)")


@dataclass(frozen=True)
class TlsFiles:
    """CA bundle to trust, optional client certificate and key (PEM), hostname verification."""

    cafile: Path | None = None
    certfile: Path | None = None
    keyfile: Path | None = None
    key_password: Secret | None = None
    check_hostname: bool = True

    def context(self) -> ssl.SSLContext:
        """An SSLContext for HTTPS and ZooKeeper: the CA given (or the system's), the client pair."""
        ctx = ssl.create_default_context(cafile=str(self.cafile) if self.cafile else None)
        ctx.check_hostname = self.check_hostname
        if self.certfile:
            ctx.load_cert_chain(str(self.certfile), str(self.keyfile) if self.keyfile else None,
                                password=self.key_password.read() if self.key_password else None)
        return ctx


def secret_of(table: Table, prefix: str) -> Secret | None:
    """The secret a table names by `<prefix>_file` or `<prefix>_env`."""
    path, env = getattr(table, f"{prefix}_file"), getattr(table, f"{prefix}_env")
    return Secret(path=path) if path is not None else Secret(env=env) if env is not None else None


def check_secret(table: Table, prefix: str) -> None:
    """One place for a secret, and that place usable now (set, or a file only its owner reads)."""
    if getattr(table, f"{prefix}_file") is not None and getattr(table, f"{prefix}_env") is not None:
        raise ValueError(f"give {prefix}_file or {prefix}_env, not both")
    secret = secret_of(table, prefix)
    if secret is not None:
        checked(secret.check, prefix)


def check_login(table: Table, user_key: str, prefix: str, what: str) -> None:
    """A user name and its secret, both or neither."""
    if bool(getattr(table, user_key)) != (secret_of(table, prefix) is not None):
        raise ValueError(f"{what} needs both {user_key} and {prefix}_file or {prefix}_env")


class TlsKeys(Table):
    """The `ssl_*` keys every login table shares: what to trust, and a client certificate to show."""

    ssl_cafile: File | None = None  # the CA bundle to trust (PEM); the system's when not given
    ssl_certfile: File | None = None  # a client certificate (PEM), for mutual TLS
    ssl_keyfile: File | None = None  # its private key: a file only its owner reads
    ssl_key_password_file: File | None = None
    ssl_key_password_env: EnvName | None = None
    ssl_check_hostname: bool = True

    @model_validator(mode="after")
    def _tls_files(self) -> TlsKeys:
        missing = [f"{key} {getattr(self, key)} does not exist" for key in ("ssl_cafile", "ssl_certfile", "ssl_keyfile")
                   if getattr(self, key) is not None and not getattr(self, key).is_file()]
        if missing:
            raise ValueError("; ".join(missing))
        if self.ssl_keyfile is not None:
            checked(check_secret_file, self.ssl_keyfile, "ssl_keyfile")
            if self.ssl_certfile is None:
                raise ValueError("ssl_keyfile needs ssl_certfile (the client certificate)")
        check_secret(self, "ssl_key_password")
        return self

    def tls_files(self) -> TlsFiles:
        return TlsFiles(self.ssl_cafile, self.ssl_certfile, self.ssl_keyfile, secret_of(self, "ssl_key_password"),
                        self.ssl_check_hostname)


class SaslKeys(TlsKeys):
    """The `sasl_username` / `sasl_password_*` keys Kafka's and ZooKeeper's login tables share."""

    sasl_username: Text | None = None  # Kafka PLAIN and SCRAM, ZooKeeper digest; GSSAPI: the service name
    sasl_password_file: File | None = None
    sasl_password_env: EnvName | None = None

    @property
    def username(self) -> str | None:
        return self.sasl_username

    @property
    def password(self) -> Secret | None:
        return secret_of(self, "sasl_password")


class KafkaSecurity(SaslKeys):
    """`[clusters.security]` / `[observations.security]`: how to connect to one Kafka cluster."""

    security_protocol: str = "PLAINTEXT"  # PLAINTEXT, SSL, SASL_PLAINTEXT or SASL_SSL
    sasl_mechanism: str | None = None  # PLAIN, SCRAM-SHA-256, SCRAM-SHA-512, OAUTHBEARER or GSSAPI
    sasl_oauth_token_file: File | None = None  # OAUTHBEARER: the token, kept fresh by a sidecar, or:
    sasl_oauth_token_endpoint_url: Text | None = None  # OAUTHBEARER: an OAuth 2 token endpoint (client credentials)
    sasl_oauth_client_id: Text | None = None
    sasl_oauth_client_secret_file: File | None = None
    sasl_oauth_client_secret_env: EnvName | None = None
    sasl_oauth_scope: Text | None = None
    # GSSAPI (Kerberos): the brokers' sasl.kerberos.service.name, and krm's own login from a keytab
    # (foundation/kerberos.py); without a keytab, the process's default ticket cache (kinit)
    sasl_kerberos_service_name: Text | None = None
    sasl_kerberos_principal: Text | None = None
    sasl_kerberos_keytab: File | None = None
    krb5_config: File | None = None  # the krb5.conf naming the realm's KDCs (default: /etc/krb5.conf)

    @field_validator("security_protocol", "sasl_mechanism")
    @classmethod
    def _upper(cls, value: str | None) -> str | None:
        return value.strip().upper() if value is not None else None

    @field_validator("security_protocol")
    @classmethod
    def _protocol(cls, value: str) -> str:
        if value not in PROTOCOLS:
            raise ValueError(f"must be one of {', '.join(PROTOCOLS)}, got {value!r}")
        return value

    @model_validator(mode="after")
    def _sasl(self) -> KafkaSecurity:
        protocol, mechanism = self.security_protocol, self.sasl_mechanism
        password = secret_of(self, "sasl_password")
        if protocol.startswith("SASL_"):
            if mechanism not in MECHANISMS:
                raise ValueError(f"security_protocol {protocol} needs sasl_mechanism, one of {', '.join(MECHANISMS)}; "
                                 f"got {mechanism!r}")
            if mechanism in _LOGIN_MODULES and (not self.sasl_username or password is None):
                raise ValueError(f"sasl_mechanism {mechanism} needs sasl_username and sasl_password_file or "
                                 "sasl_password_env")
            if mechanism == "OAUTHBEARER":
                self._oauth()
            if mechanism == "GSSAPI":
                self._kerberos()
        if mechanism != "GSSAPI" and (self.sasl_kerberos_principal or self.sasl_kerberos_keytab or self.krb5_config
                                      or self.sasl_kerberos_service_name):
            raise ValueError(f"has sasl_kerberos_* / krb5_config settings but sasl_mechanism is {mechanism}; "
                             f"use GSSAPI")
        if not protocol.startswith("SASL_") and (mechanism or self.sasl_username or password or
                                                 self.sasl_oauth_token_file or self.sasl_oauth_token_endpoint_url):
            raise ValueError(f"has SASL settings but security_protocol is {protocol}; use SASL_SSL or SASL_PLAINTEXT")
        if not protocol.endswith("SSL") and (self.ssl_cafile or self.ssl_certfile):
            raise ValueError(f"has ssl_* files but security_protocol is {protocol}; use SSL or SASL_SSL")
        check_secret(self, "sasl_password")
        return self

    def _kerberos(self) -> None:
        """GSSAPI: the gssapi package; a keytab with the principal it holds (Kafka's Java clients need both)."""
        try:
            import gssapi  # noqa: F401
        except ImportError:
            raise ValueError("sasl_mechanism GSSAPI needs the `gssapi` Python package (pip install gssapi, "
                             "which builds against the system's Kerberos library: libkrb5-dev)") from None
        if (self.sasl_kerberos_keytab is None) != (self.sasl_kerberos_principal is None):
            raise ValueError("sasl_kerberos_keytab and sasl_kerberos_principal go together (the keytab's principal, "
                             "e.g. krm@EXAMPLE.COM); neither: the default ticket cache (kinit)")
        if self.sasl_kerberos_keytab is not None:
            checked(check_secret_file, self.sasl_kerberos_keytab, "sasl_kerberos_keytab")
        if self.krb5_config is not None and not self.krb5_config.is_file():
            raise ValueError(f"krb5_config {self.krb5_config} is not a file")

    @property
    def kerberos(self) -> Any:
        """GSSAPI's login (foundation/kerberos.py KerberosLogin); None for other mechanisms."""
        if self.sasl_mechanism != "GSSAPI":
            return None
        return kerberos.KerberosLogin(self.sasl_kerberos_service_name or self.sasl_username or "kafka",
                             self.sasl_kerberos_principal, self.sasl_kerberos_keytab, self.krb5_config)

    def _oauth(self) -> None:
        """OAUTHBEARER: a token file, or a token endpoint with the client's id and secret."""
        if (self.sasl_oauth_token_file is None) == (self.sasl_oauth_token_endpoint_url is None):
            raise ValueError("sasl_mechanism OAUTHBEARER needs sasl_oauth_token_file or sasl_oauth_token_endpoint_url "
                             "(with sasl_oauth_client_id and sasl_oauth_client_secret_file or _env), one of them")
        if self.sasl_oauth_token_file is not None:
            checked(check_secret_file, self.sasl_oauth_token_file, "sasl_oauth_token_file")
            return
        url = urllib.parse.urlsplit(self.sasl_oauth_token_endpoint_url or "")
        if url.scheme not in ("http", "https") or not url.netloc:
            raise ValueError(f"sasl_oauth_token_endpoint_url must be an http(s) URL, got "
                             f"{self.sasl_oauth_token_endpoint_url!r}")
        if not self.sasl_oauth_client_id or secret_of(self, "sasl_oauth_client_secret") is None:
            raise ValueError("sasl_oauth_token_endpoint_url needs both sasl_oauth_client_id and "
                             "sasl_oauth_client_secret_file or sasl_oauth_client_secret_env")
        check_secret(self, "sasl_oauth_client_secret")

    @property
    def oauth_client(self) -> ClientCredentials | None:
        """The token endpoint's client, when OAUTHBEARER tokens come from one."""
        if not self.sasl_oauth_token_endpoint_url or not self.sasl_oauth_client_id:
            return None
        secret = secret_of(self, "sasl_oauth_client_secret")
        return ClientCredentials(self.sasl_oauth_token_endpoint_url, self.sasl_oauth_client_id,
                                 secret.read if secret else (lambda: ""), self.sasl_oauth_scope)

    @property
    def protocol(self) -> str:
        return self.security_protocol

    @property
    def oauth_token_file(self) -> Path | None:
        return self.sasl_oauth_token_file

    @property
    def tls(self) -> TlsFiles:
        return self.tls_files()

    @property
    def uses_tls(self) -> bool:
        return self.protocol in ("SSL", "SASL_SSL")

    @property
    def uses_sasl(self) -> bool:
        return self.protocol in ("SASL_PLAINTEXT", "SASL_SSL")

    def principal(self) -> str:
        """How this client appears in messages: `SCRAM-SHA-512, user krm`, `TLS client certificate`."""
        if self.uses_sasl:
            if self.sasl_oauth_client_id:
                return f"{self.sasl_mechanism}, client {self.sasl_oauth_client_id}"
            if self.sasl_mechanism == "GSSAPI":
                return f"GSSAPI, {self.kerberos.describe()}"
            who = f", user {self.username}" if self.username else ""
            return f"{self.sasl_mechanism}{who}"
        if self.uses_tls:
            return "TLS client certificate" if self.tls.certfile else "TLS, no client certificate"
        return "PLAINTEXT, no authentication"


def kafka_python_kwargs(sec: KafkaSecurity) -> dict[str, Any]:
    """Keyword arguments for KafkaAdminClient / KafkaClient / KafkaProducer. Holds the secret: never log it."""
    if sec.protocol == "PLAINTEXT":
        return {}
    kw: dict[str, Any] = {"security_protocol": sec.protocol}
    if sec.uses_tls:
        kw["ssl_check_hostname"] = sec.tls.check_hostname
        if sec.tls.cafile:
            kw["ssl_cafile"] = str(sec.tls.cafile)
        if sec.tls.certfile:
            kw["ssl_certfile"] = str(sec.tls.certfile)
            kw["ssl_keyfile"] = str(sec.tls.keyfile) if sec.tls.keyfile else None
            if sec.tls.key_password:
                kw["ssl_password"] = sec.tls.key_password.read()
            kw["ssl_context"] = client_certificate_context(sec.tls)
    if sec.uses_sasl:
        kw["sasl_mechanism"] = sec.sasl_mechanism
        if sec.sasl_mechanism in _LOGIN_MODULES:
            kw["sasl_plain_username"] = sec.username
            kw["sasl_plain_password"] = sec.password.read() if sec.password else None
        elif sec.sasl_mechanism == "OAUTHBEARER":
            kw["sasl_oauth_token_provider"] = _token_provider(sec)
        elif sec.sasl_mechanism == "GSSAPI":
            kerberos.register()
            login = sec.kerberos
            kw["sasl_kerberos_service_name"] = login.service_name
            kw["sasl_kerberos_name"] = login  # taken by kerberos.GssapiWithLogin
    return kw


def client_certificate_context(tls: TlsFiles) -> ssl.SSLContext:
    """kafka-python's TLS with a client certificate, at most TLS 1.2. A Java broker sends its TLS 1.3
    session tickets after it has checked the client's certificate, that is after the client's side
    of the handshake is done; kafka-python takes any bytes on a connection with no request in flight
    for a protocol error and closes it ("Socket EVENT_READ without in-flight-requests",
    kafka/client_async.py), so many of its connections to a mutual-TLS broker failed. TLS 1.2
    has no post-handshake messages. (Spark's Kafka source is Kafka's Java client: not affected.)"""
    ctx = tls.context()
    ctx.maximum_version = ssl.TLSVersion.TLSv1_2
    return ctx


# one client per endpoint, client id and secret in this process: its cached token serves every connection
_OAUTH_CLIENTS: dict[tuple[str, ...], ClientCredentials] = {}
_OAUTH_LOCK = threading.Lock()


def _token_provider(sec: KafkaSecurity) -> Any:
    """OAUTHBEARER for kafka-python: a token from the token endpoint (cached until 80% of its
    lifetime), or whatever the token file holds now (a sidecar refreshes it)."""
    from kafka.sasl.oauth import AbstractTokenProvider

    client = sec.oauth_client
    if client is not None:
        with _OAUTH_LOCK:
            secret = secret_of(sec, "sasl_oauth_client_secret")
            key = (client.endpoint, client.client_id, client.scope or "", secret.describe() if secret else "")
            client = _OAUTH_CLIENTS.setdefault(key, client)
    path = sec.oauth_token_file

    class TokenProvider(AbstractTokenProvider):
        def token(self) -> str:
            if client is not None:
                return client.token()
            check_secret_file(path, "OAUTHBEARER token")  # type: ignore[arg-type]
            return path.read_text().strip()  # type: ignore[union-attr]

    return TokenProvider()


def spark_kafka_options(sec: KafkaSecurity) -> dict[str, str]:
    """The same settings as Java client properties for Spark's Kafka source (`kafka.` + property).

    TLS material goes inline (PEM text), not as paths: on a Spark cluster the executors that read
    the topic do not have the driver's files. The session redacts these options from plans and logs
    (pipelines/session.py)."""
    if sec.protocol == "PLAINTEXT":
        return {}
    o = {"kafka.security.protocol": sec.protocol}
    if sec.uses_tls:
        if sec.tls.cafile:
            o["kafka.ssl.truststore.type"] = "PEM"
            o["kafka.ssl.truststore.certificates"] = sec.tls.cafile.read_text()
        if sec.tls.certfile:
            o["kafka.ssl.keystore.type"] = "PEM"
            o["kafka.ssl.keystore.certificate.chain"] = sec.tls.certfile.read_text()
            o["kafka.ssl.keystore.key"] = (sec.tls.keyfile or sec.tls.certfile).read_text()
            if sec.tls.key_password:
                o["kafka.ssl.key.password"] = sec.tls.key_password.read()
        if not sec.tls.check_hostname:
            o["kafka.ssl.endpoint.identification.algorithm"] = ""
    if sec.uses_sasl:
        o["kafka.sasl.mechanism"] = sec.sasl_mechanism or ""
        if sec.sasl_mechanism in _LOGIN_MODULES:
            o["kafka.sasl.jaas.config"] = (f'{_LOGIN_MODULES[sec.sasl_mechanism]} required '
                                           f'username="{_jaas_quote(sec.username or "")}" '
                                           f'password="{_jaas_quote(sec.password.read() if sec.password else "")}";')
        elif sec.sasl_mechanism == "OAUTHBEARER":
            # KIP-768: the login callback handler asks the token endpoint with the client's id and
            # secret, or reads the token from a file: URL (then the file must be on every executor)
            o["kafka.sasl.login.callback.handler.class"] = \
                "org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginCallbackHandler"
            client = sec.oauth_client
            if client is not None:
                scope = f' scope="{_jaas_quote(client.scope)}"' if client.scope else ""
                o["kafka.sasl.jaas.config"] = (
                    "org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginModule required "
                    f'clientId="{_jaas_quote(client.client_id)}" clientSecret="{_jaas_quote(client.secret())}"{scope};')
                o["kafka.sasl.oauthbearer.token.endpoint.url"] = client.endpoint
            else:
                o["kafka.sasl.jaas.config"] = \
                    "org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginModule required;"
                o["kafka.sasl.oauthbearer.token.endpoint.url"] = f"file://{sec.oauth_token_file}"
        elif sec.sasl_mechanism == "GSSAPI":
            # Kafka's Java client logs in with JAAS: from the keytab, or from the ticket cache (kinit);
            # the JVM finds the KDCs in -Djava.security.krb5.conf (krm/runner.py sets it from krb5_config)
            login = sec.kerberos
            o["kafka.sasl.kerberos.service.name"] = login.service_name
            if login.keytab is not None:
                o["kafka.sasl.jaas.config"] = (
                    "com.sun.security.auth.module.Krb5LoginModule required useKeyTab=true storeKey=true "
                    f'keyTab="{_jaas_quote(str(login.keytab))}" principal="{_jaas_quote(login.principal or "")}";')
            else:
                o["kafka.sasl.jaas.config"] = "com.sun.security.auth.module.Krb5LoginModule required useTicketCache=true;"
    return o


def _jaas_quote(value: str) -> str:
    return value.replace("\\", "\\\\").replace('"', '\\"')


class ZooKeeperSecurity(SaslKeys):
    """`[clusters.zookeeper_security]`: SASL DIGEST-MD5 (ZooKeeper's DigestLoginModule users) and/or TLS."""

    use_tls: bool = Field(False, alias="tls")  # the ensemble's secureClientPort, with the ssl_* keys

    @model_validator(mode="after")
    def _login(self) -> ZooKeeperSecurity:
        check_login(self, "sasl_username", "sasl_password", "SASL digest")
        check_secret(self, "sasl_password")
        return self

    @property
    def tls(self) -> TlsFiles | None:
        return self.tls_files() if self.use_tls else None


def kazoo_kwargs(sec: ZooKeeperSecurity | None) -> dict[str, Any]:
    """Keyword arguments for KazooClient (kazoo speaks SASL through pure-sasl). Holds the secret."""
    if sec is None:
        return {}
    kw: dict[str, Any] = {}
    if sec.username:
        kw["sasl_options"] = {"mechanism": "DIGEST-MD5", "username": sec.username,
                              "password": sec.password.read() if sec.password else ""}
    if sec.tls is not None:
        kw |= {"use_ssl": True, "verify_certs": True, "check_hostname": sec.tls.check_hostname,
               "ca": str(sec.tls.cafile) if sec.tls.cafile else None,
               "certfile": str(sec.tls.certfile) if sec.tls.certfile else None,
               "keyfile": str(sec.tls.keyfile) if sec.tls.keyfile else None,
               "keyfile_password": sec.tls.key_password.read() if sec.tls.key_password else None}
    return kw


class HttpSecurity(TlsKeys):
    """`[clusters.jmx_security]`: basic auth and/or TLS for the JMX exporter endpoints."""

    username: Text | None = None
    password_file: File | None = None
    password_env: EnvName | None = None

    @model_validator(mode="after")
    def _login(self) -> HttpSecurity:
        check_login(self, "username", "password", "basic auth")
        check_secret(self, "password")
        return self

    @property
    def password(self) -> Secret | None:
        return secret_of(self, "password")

    @property
    def tls(self) -> TlsFiles | None:
        """TLS settings, when any is given (an https:// URL without them uses the system's CAs)."""
        given = self.ssl_cafile or self.ssl_certfile or not self.ssl_check_hostname
        return self.tls_files() if given else None
