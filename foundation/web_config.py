"""TLS and basic auth for krm's own HTTP endpoint (/metrics), in the format of Prometheus'
exporter-toolkit web config, so a krm instance is secured and scraped like any other exporter:

    tls_server_config:
      cert_file: /etc/krm/tls/server.crt
      key_file: /etc/krm/tls/server.key
      client_auth_type: RequireAndVerifyClientCert   # optional; with client_ca_file
      client_ca_file: /etc/krm/tls/clients-ca.crt
    basic_auth_users:
      prometheus: $2y$10$...                          # bcrypt hash (htpasswd -nBC 10 "" | tr -d ':\\n')

Only what an exporter needs is supported; an unknown key is an error rather than a silently open
endpoint. Passwords are checked with bcrypt; a pair that matched once is remembered (by its SHA-256)
so a scrape every few seconds does not pay bcrypt's cost each time.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import ssl
import threading
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Iterable

from foundation.errors import ConfigError, KrmError
from foundation.security import check_secret_file

CLIENT_AUTH_TYPES = ("NoClientCert", "RequestClientCert", "RequireAnyClientCert", "VerifyClientCertIfGiven",
                     "RequireAndVerifyClientCert")
_TLS_VERSIONS = {"TLS10": ssl.TLSVersion.TLSv1, "TLS11": ssl.TLSVersion.TLSv1_1, "TLS12": ssl.TLSVersion.TLSv1_2,
                 "TLS13": ssl.TLSVersion.TLSv1_3}


@dataclass(frozen=True)
class TlsServer:
    cert_file: Path
    key_file: Path
    client_auth_type: str = "NoClientCert"
    client_ca_file: Path | None = None
    min_version: str = "TLS12"

    def context(self) -> ssl.SSLContext:
        ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        ctx.minimum_version = _TLS_VERSIONS[self.min_version]
        ctx.load_cert_chain(str(self.cert_file), str(self.key_file))
        if self.client_ca_file:
            ctx.load_verify_locations(str(self.client_ca_file))
        ctx.verify_mode = {"NoClientCert": ssl.CERT_NONE, "RequestClientCert": ssl.CERT_OPTIONAL,
                           "RequireAnyClientCert": ssl.CERT_REQUIRED, "VerifyClientCertIfGiven": ssl.CERT_OPTIONAL,
                           "RequireAndVerifyClientCert": ssl.CERT_REQUIRED}[self.client_auth_type]
        return ctx


@dataclass(frozen=True)
class WebConfig:
    path: Path
    tls: TlsServer | None = None
    users: dict[str, bytes] = field(default_factory=dict)  # user -> bcrypt hash


def load_web_config(path: Path) -> WebConfig:
    import yaml

    try:
        raw = yaml.safe_load(path.read_text()) or {}
    except FileNotFoundError:
        raise ConfigError(f"web_config_file {path} does not exist") from None
    except yaml.YAMLError as e:
        raise ConfigError(f"web_config_file {path}: not valid YAML: {e}") from None
    if not isinstance(raw, dict):
        raise ConfigError(f"web_config_file {path}: must be a mapping")
    unknown = sorted(set(raw) - {"tls_server_config", "basic_auth_users"})
    if unknown:
        raise ConfigError(f"web_config_file {path}: unsupported key(s) {unknown}; "
                          f"krm supports tls_server_config and basic_auth_users")
    if raw.get("basic_auth_users"):
        check_secret_file(path, "web_config_file")  # the hashes can be attacked offline
    return WebConfig(path, _tls(path, raw.get("tls_server_config")), _users(path, raw.get("basic_auth_users")))


def _tls(path: Path, t: Any) -> TlsServer | None:
    if t is None:
        return None
    if not isinstance(t, dict):
        raise ConfigError(f"web_config_file {path}: tls_server_config must be a mapping")
    known = {"cert_file", "key_file", "client_auth_type", "client_ca_file", "min_version"}
    unknown = sorted(set(t) - known)
    if unknown:
        raise ConfigError(f"web_config_file {path}: tls_server_config: unsupported key(s) {unknown}; known: {sorted(known)}")

    def file(key: str, required: bool) -> Path | None:
        if not t.get(key):
            if required:
                raise ConfigError(f"web_config_file {path}: tls_server_config needs {key}")
            return None
        p = Path(str(t[key])).expanduser()
        p = p if p.is_absolute() else path.parent / p
        if not p.is_file():
            raise ConfigError(f"web_config_file {path}: tls_server_config {key} {p} does not exist")
        return p

    auth = str(t.get("client_auth_type", "NoClientCert"))
    if auth not in CLIENT_AUTH_TYPES:
        raise ConfigError(f"web_config_file {path}: client_auth_type must be one of {', '.join(CLIENT_AUTH_TYPES)}")
    ca = file("client_ca_file", auth in ("VerifyClientCertIfGiven", "RequireAndVerifyClientCert"))
    key = file("key_file", True)
    check_secret_file(key, f"web_config_file {path}: key_file")  # type: ignore[arg-type]
    version = str(t.get("min_version", "TLS12"))
    if version not in _TLS_VERSIONS:
        raise ConfigError(f"web_config_file {path}: min_version must be one of {', '.join(_TLS_VERSIONS)}")
    server = TlsServer(file("cert_file", True), key, auth, ca, version)  # type: ignore[arg-type]
    try:
        server.context()
    except (ssl.SSLError, OSError) as e:
        raise ConfigError(f"web_config_file {path}: the TLS certificate or key cannot be used: {e}") from None
    return server


def _users(path: Path, u: Any) -> dict[str, bytes]:
    if u is None:
        return {}
    if not isinstance(u, dict):
        raise ConfigError(f"web_config_file {path}: basic_auth_users must map user names to bcrypt hashes")
    out = {}
    for user, hashed in u.items():
        h = str(hashed).encode()
        if not h.startswith((b"$2a$", b"$2b$", b"$2y$")) or len(h) != 60:
            raise ConfigError(f"web_config_file {path}: basic_auth_users {user}: not a bcrypt hash "
                              f"(make one with `htpasswd -nBC 10 \"\" | tr -d ':\\n'`)")
        out[str(user)] = h
    return out


class BasicAuth:
    """WSGI middleware: 401 with a Basic challenge unless the request carries a listed user's password."""

    def __init__(self, app: Callable, users: dict[str, bytes]) -> None:
        self.app, self.users = app, users
        self._verified: set[tuple[str, bytes]] = set()
        self._lock = threading.Lock()

    def allowed(self, header: str | None) -> bool:
        import bcrypt

        if not header or not header.startswith("Basic "):
            return False
        try:
            user, _, password = base64.b64decode(header[6:], validate=True).decode().partition(":")
        except (ValueError, UnicodeDecodeError):
            return False
        hashed = self.users.get(user)
        if hashed is None:
            return False
        digest = hashlib.sha256(password.encode() + b"\0" + hashed).digest()
        with self._lock:
            if any(u == user and hmac.compare_digest(d, digest) for u, d in self._verified):
                return True
        if not bcrypt.checkpw(password.encode(), hashed):
            return False
        with self._lock:
            self._verified.add((user, digest))
        return True

    OPEN_PATHS = ("/healthz", "/readyz")  # liveness and readiness probes: no data, no credentials

    def __call__(self, environ: dict, start_response: Callable) -> Iterable[bytes]:
        if environ.get("PATH_INFO") in self.OPEN_PATHS or self.allowed(environ.get("HTTP_AUTHORIZATION")):
            return self.app(environ, start_response)
        start_response("401 Unauthorized", [("WWW-Authenticate", 'Basic realm="krm"'), ("Content-Type", "text/plain")])
        return [b"Unauthorized\n"]


def serve_wsgi(app: Callable, host: str, port: int, web: WebConfig | None) -> Any:
    """A threaded WSGI server on a daemon thread, with the web config's TLS and basic auth."""
    from wsgiref.simple_server import WSGIRequestHandler, make_server

    from prometheus_client.exposition import ThreadingWSGIServer

    class Quiet(WSGIRequestHandler):
        def log_message(self, *args: Any) -> None:  # scrapes every few seconds: no access log
            pass

    if web is not None and web.users:
        app = BasicAuth(app, web.users)
    try:
        httpd = make_server(host, port, app, ThreadingWSGIServer, handler_class=Quiet)
    except OSError as e:  # the one likely cause at start: the port is taken (another krm, an exporter)
        raise KrmError(f"cannot serve /metrics on {host}:{port}: {e.strerror or e}; another process listens "
                       f"there (`ss -ltnp sport = :{port}`), or set [pipeline] metrics_host / metrics_port "
                       f"(`krm collect`: [collector] metrics_port)") from None
    if web is not None and web.tls is not None:
        httpd.socket = web.tls.context().wrap_socket(httpd.socket, server_side=True)
    threading.Thread(target=httpd.serve_forever, name="krm-http", daemon=True).start()
    return httpd
