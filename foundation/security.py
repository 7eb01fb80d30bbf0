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
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from foundation.errors import ConfigError

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


@dataclass(frozen=True)
class KafkaSecurity:
    """`[clusters.security]` / `[observations.security]`: how to connect to one Kafka cluster."""

    protocol: str = "PLAINTEXT"
    sasl_mechanism: str | None = None
    username: str | None = None
    password: Secret | None = None
    oauth_token_file: Path | None = None
    tls: TlsFiles = TlsFiles()

    @property
    def uses_tls(self) -> bool:
        return self.protocol in ("SSL", "SASL_SSL")

    @property
    def uses_sasl(self) -> bool:
        return self.protocol in ("SASL_PLAINTEXT", "SASL_SSL")

    def principal(self) -> str:
        """How this client appears in messages: `SCRAM-SHA-512, user krm`, `TLS client certificate`."""
        if self.uses_sasl:
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
    if sec.uses_sasl:
        kw["sasl_mechanism"] = sec.sasl_mechanism
        if sec.sasl_mechanism in _LOGIN_MODULES:
            kw["sasl_plain_username"] = sec.username
            kw["sasl_plain_password"] = sec.password.read() if sec.password else None
        elif sec.sasl_mechanism == "OAUTHBEARER":
            kw["sasl_oauth_token_provider"] = _token_provider(sec.oauth_token_file)  # type: ignore[arg-type]
        elif sec.sasl_mechanism == "GSSAPI":
            kw["sasl_kerberos_service_name"] = sec.username or "kafka"
    return kw


def _token_provider(path: Path) -> Any:
    """OAUTHBEARER for kafka-python: the token is whatever the file holds now (a sidecar refreshes it)."""
    from kafka.sasl.oauth import AbstractTokenProvider

    class FileTokenProvider(AbstractTokenProvider):
        def token(self) -> str:
            check_secret_file(path, "OAUTHBEARER token")
            return path.read_text().strip()

    return FileTokenProvider()


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
            # KIP-768: the login callback handler reads the token from a file: URL (must be on every executor)
            o["kafka.sasl.jaas.config"] = "org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginModule required;"
            o["kafka.sasl.login.callback.handler.class"] = \
                "org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginCallbackHandler"
            o["kafka.sasl.oauthbearer.token.endpoint.url"] = f"file://{sec.oauth_token_file}"
        elif sec.sasl_mechanism == "GSSAPI":
            o["kafka.sasl.kerberos.service.name"] = sec.username or "kafka"
    return o


def _jaas_quote(value: str) -> str:
    return value.replace("\\", "\\\\").replace('"', '\\"')


@dataclass(frozen=True)
class ZooKeeperSecurity:
    """`[clusters.zookeeper_security]`: SASL DIGEST-MD5 (ZooKeeper's DigestLoginModule users) and/or TLS."""

    username: str | None = None
    password: Secret | None = None
    tls: TlsFiles | None = None


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


@dataclass(frozen=True)
class HttpSecurity:
    """`[clusters.jmx_security]`: basic auth and/or TLS for the JMX exporter endpoints."""

    username: str | None = None
    password: Secret | None = None
    tls: TlsFiles | None = None


# ---------------------------------------------------------------- parsing (config tables)

def parse_kafka_security(where: str, sec: str, t: Any) -> KafkaSecurity:
    _table(where, sec, t, {"security_protocol", "sasl_mechanism", "sasl_username", "sasl_password_file",
                           "sasl_password_env", "sasl_oauth_token_file", "ssl_cafile", "ssl_certfile",
                           "ssl_keyfile", "ssl_key_password_file", "ssl_key_password_env", "ssl_check_hostname"})
    protocol = str(t.get("security_protocol", "PLAINTEXT")).upper()
    if protocol not in PROTOCOLS:
        raise ConfigError(f"{where}: {sec} security_protocol must be one of {', '.join(PROTOCOLS)}, got {protocol!r}")
    mechanism = t.get("sasl_mechanism")
    username = t.get("sasl_username")
    password = _secret(where, sec, t, "sasl_password")
    token = _path(where, sec, t, "sasl_oauth_token_file")
    if protocol.startswith("SASL_"):
        mechanism = str(mechanism or "").upper()
        if mechanism not in MECHANISMS:
            raise ConfigError(f"{where}: {sec} security_protocol {protocol} needs sasl_mechanism, one of "
                              f"{', '.join(MECHANISMS)}; got {t.get('sasl_mechanism')!r}")
        if mechanism in _LOGIN_MODULES and (not username or password is None):
            raise ConfigError(f"{where}: {sec} sasl_mechanism {mechanism} needs sasl_username and "
                              f"sasl_password_file or sasl_password_env")
        if mechanism == "OAUTHBEARER":
            if token is None:
                raise ConfigError(f"{where}: {sec} sasl_mechanism OAUTHBEARER needs sasl_oauth_token_file")
            check_secret_file(token, f"{sec} sasl_oauth_token_file")
        if mechanism == "GSSAPI":
            try:
                import gssapi  # noqa: F401
            except ImportError:
                raise ConfigError(f"{where}: {sec} sasl_mechanism GSSAPI needs the `gssapi` Python package "
                                  f"(pip install gssapi, with a Kerberos client library and a ticket cache)") from None
    elif mechanism or username or password or token:
        raise ConfigError(f"{where}: {sec} has SASL settings but security_protocol is {protocol}; "
                          f"use SASL_SSL or SASL_PLAINTEXT")
    else:
        mechanism = None
    tls = _tls(where, sec, t)
    if not protocol.endswith("SSL") and (tls.cafile or tls.certfile):
        raise ConfigError(f"{where}: {sec} has ssl_* files but security_protocol is {protocol}; use SSL or SASL_SSL")
    if password is not None:
        password.check(f"{sec} sasl_password")
    return KafkaSecurity(protocol, mechanism, str(username) if username else None, password, token, tls)


def parse_zookeeper_security(where: str, sec: str, t: Any) -> ZooKeeperSecurity:
    _table(where, sec, t, {"sasl_username", "sasl_password_file", "sasl_password_env", "tls", "ssl_cafile",
                           "ssl_certfile", "ssl_keyfile", "ssl_key_password_file", "ssl_key_password_env",
                           "ssl_check_hostname"})
    username, password = _login(where, sec, t, "sasl_username", "sasl_password", "SASL digest")
    use_tls = t.get("tls", False)
    if not isinstance(use_tls, bool):
        raise ConfigError(f"{where}: {sec} tls must be true or false")
    return ZooKeeperSecurity(username, password, _tls(where, sec, t) if use_tls else None)


def parse_http_security(where: str, sec: str, t: Any) -> HttpSecurity:
    _table(where, sec, t, {"username", "password_file", "password_env", "ssl_cafile", "ssl_certfile",
                           "ssl_keyfile", "ssl_key_password_file", "ssl_key_password_env", "ssl_check_hostname"})
    username, password = _login(where, sec, t, "username", "password", "basic auth")
    tls = _tls(where, sec, t)
    has_tls = tls.cafile or tls.certfile or not tls.check_hostname
    return HttpSecurity(username, password, tls if has_tls else None)


def _login(where: str, sec: str, t: dict, user_key: str, secret: str, what: str) -> tuple[str | None, Secret | None]:
    """A user name and its secret, both or neither; the secret checked (present, not world-readable)."""
    username, password = t.get(user_key), _secret(where, sec, t, secret)
    if bool(username) != (password is not None):
        raise ConfigError(f"{where}: {sec} {what} needs both {user_key} and {secret}_file or {secret}_env")
    if password is not None:
        password.check(f"{sec} {secret}")
    return (str(username) if username else None), password


def _table(where: str, sec: str, t: Any, known: set[str]) -> None:
    if not isinstance(t, dict):
        raise ConfigError(f"{where}: {sec} must be a table")
    for key in ("password", "sasl_password", "ssl_key_password"):
        if key in t:
            raise ConfigError(f"{where}: {sec} {key}: secrets are not kept in the config; "
                              f"use {key}_file (a file only its owner reads) or {key}_env")
    unknown = sorted(set(t) - known)
    if unknown:
        raise ConfigError(f"{where}: {sec}: unknown key(s) {unknown}; known: {sorted(known)}")


def _path(where: str, sec: str, t: dict, key: str) -> Path | None:
    """A path from the config; relative paths are taken from the config file's folder."""
    v = t.get(key)
    if v is None:
        return None
    if not isinstance(v, str) or not v.strip():
        raise ConfigError(f"{where}: {sec} {key} must be a file path")
    p = Path(v.strip()).expanduser()
    if not p.is_absolute() and where not in ("", "<config>"):
        p = Path(where).parent / p
    return p


def _secret(where: str, sec: str, t: dict, prefix: str) -> Secret | None:
    path, env = _path(where, sec, t, f"{prefix}_file"), t.get(f"{prefix}_env")
    if path is not None and env is not None:
        raise ConfigError(f"{where}: {sec} give {prefix}_file or {prefix}_env, not both")
    if env is not None and (not isinstance(env, str) or not env.strip()):
        raise ConfigError(f"{where}: {sec} {prefix}_env must name an environment variable")
    return Secret(path=path) if path else Secret(env=env.strip()) if env else None


def _tls(where: str, sec: str, t: dict) -> TlsFiles:
    files = {k: _path(where, sec, t, f"ssl_{k}") for k in ("cafile", "certfile", "keyfile")}
    for k, p in files.items():
        if p is not None and not p.is_file():
            raise ConfigError(f"{where}: {sec} ssl_{k} {p} does not exist")
    if files["keyfile"] is not None:
        check_secret_file(files["keyfile"], f"{sec} ssl_keyfile")
    if files["keyfile"] and not files["certfile"]:
        raise ConfigError(f"{where}: {sec} ssl_keyfile needs ssl_certfile (the client certificate)")
    key_password = _secret(where, sec, t, "ssl_key_password")
    if key_password is not None:
        key_password.check(f"{sec} ssl_key_password")
    check = t.get("ssl_check_hostname", True)
    if not isinstance(check, bool):
        raise ConfigError(f"{where}: {sec} ssl_check_hostname must be true or false")
    return TlsFiles(files["cafile"], files["certfile"], files["keyfile"], key_password, check)
