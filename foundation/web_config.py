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
from pathlib import Path
from typing import Annotated, Any, Callable, Iterable, Literal
from wsgiref.simple_server import WSGIServer
from wsgiref.types import WSGIApplication

from pydantic import AfterValidator, Field, model_validator

from foundation.errors import ConfigError, KrmError
from foundation.security import check_secret_file
from foundation.settings import File, Table, checked, validate

_TLS_VERSIONS = {"TLS10": ssl.TLSVersion.TLSv1, "TLS11": ssl.TLSVersion.TLSv1_1, "TLS12": ssl.TLSVersion.TLSv1_2,
                 "TLS13": ssl.TLSVersion.TLSv1_3}


class TlsServer(Table):
    """`tls_server_config`: the server's certificate and key, and what it asks of clients."""

    cert_file: File
    key_file: File  # a file only its owner reads
    client_auth_type: Literal["NoClientCert", "RequestClientCert", "RequireAnyClientCert", "VerifyClientCertIfGiven",
                              "RequireAndVerifyClientCert"] = "NoClientCert"
    client_ca_file: File | None = None  # needed to verify client certificates
    min_version: Literal["TLS10", "TLS11", "TLS12", "TLS13"] = "TLS12"

    @model_validator(mode="after")
    def _usable(self) -> TlsServer:
        missing = [f"{key} {getattr(self, key)} does not exist" for key in ("cert_file", "key_file", "client_ca_file")
                   if getattr(self, key) is not None and not getattr(self, key).is_file()]
        if missing:
            raise ValueError("; ".join(missing))
        if self.client_ca_file is None and self.client_auth_type in ("VerifyClientCertIfGiven",
                                                                     "RequireAndVerifyClientCert"):
            raise ValueError(f"client_auth_type {self.client_auth_type} needs client_ca_file")
        checked(check_secret_file, self.key_file, "key_file")
        try:
            self.context()
        except (ssl.SSLError, OSError) as e:
            raise ValueError(f"the TLS certificate or key cannot be used: {e}") from None
        return self

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


def _bcrypt_hashes(users: dict[str, str]) -> dict[str, str]:
    for user, hashed in users.items():
        if not hashed.startswith(("$2a$", "$2b$", "$2y$")) or len(hashed) != 60:
            raise ValueError(f"{user}: not a bcrypt hash (make one with `htpasswd -nBC 10 \"\" | tr -d ':\\n'`)")
    return users


class WebConfig(Table):
    """The file as a whole: only what an exporter needs; an unknown key is an error, not an open endpoint."""

    tls_server_config: TlsServer | None = None
    basic_auth_users: Annotated[dict[str, str], AfterValidator(_bcrypt_hashes)] = Field(default_factory=dict)
    path: Path = Field(Path(), exclude=True)  # the file it was read from

    @property
    def tls(self) -> TlsServer | None:
        return self.tls_server_config

    @property
    def users(self) -> dict[str, bytes]:
        """user -> bcrypt hash."""
        return {u: h.encode() for u, h in self.basic_auth_users.items()}


def load_web_config(path: Path) -> WebConfig:
    import yaml

    try:
        raw = yaml.safe_load(path.read_text()) or {}
    except FileNotFoundError:
        raise ConfigError(f"web_config_file {path} does not exist") from None
    except yaml.YAMLError as e:
        raise ConfigError(f"web_config_file {path}: not valid YAML: {e}") from None
    if isinstance(raw, dict) and raw.get("basic_auth_users"):
        check_secret_file(path, "web_config_file")  # the hashes can be attacked offline
    web = validate(WebConfig, raw, f"web_config_file {path}",
                   lambda loc: {(): "", ("tls_server_config",): "tls_server_config",
                                ("basic_auth_users",): "basic_auth_users"}.get(loc),
                   base=path.parent, words={"model_type": "a mapping", "dict_type": "a mapping"})
    return web.model_copy(update={"path": path})


class BasicAuth:
    """WSGI middleware: 401 with a Basic challenge unless the request carries a listed user's password."""

    def __init__(self, app: Callable[..., Iterable[bytes]], users: dict[str, bytes]) -> None:
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

    def __call__(self, environ: dict[str, Any], start_response: Callable[..., Any]) -> Iterable[bytes]:
        if environ.get("PATH_INFO") in self.OPEN_PATHS or self.allowed(environ.get("HTTP_AUTHORIZATION")):
            return self.app(environ, start_response)
        start_response("401 Unauthorized", [("WWW-Authenticate", 'Basic realm="krm"'), ("Content-Type", "text/plain")])
        return [b"Unauthorized\n"]


def serve_wsgi(app: WSGIApplication, host: str, port: int, web: WebConfig | None) -> WSGIServer:
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
