"""A local OAuth 2 identity provider for a `--security sasl_ssl` local cluster: one token endpoint
(client credentials grant, RFC 6749 §4.4) that issues RS256-signed JWTs with the cluster's signing
key, which its brokers verify against the JWKS file next to it (lab/local_security.py). The token's
`sub` is the client id, so client `krm` is the principal User:krm with krm's minimum ACLs.

For tests and trying OAUTHBEARER without an identity provider; it serves in a thread of the process
that starts it, on 127.0.0.1 only.
"""

from __future__ import annotations

import base64
import json
import threading
import time
import urllib.parse
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from lab.local_security import KRM_USER, OAUTH_AUDIENCE, OAUTH_ISSUER, OAUTH_KEY_ID, LocalSecurity


def _b64(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode()


class TokenEndpoint:
    """POST /token with the client's id and secret (HTTP Basic, or client_id/client_secret in the form)."""

    def __init__(self, security: LocalSecurity, lifetime_s: int = 3600, clients: tuple[str, ...] = (KRM_USER,)) -> None:
        from cryptography.hazmat.primitives import serialization

        self.security = security
        self.lifetime_s = lifetime_s
        self._key: Any = serialization.load_pem_private_key(security.oauth_signing_key.read_bytes(), password=None)
        self._secrets = {c: security.password(f"oauth-{c}") for c in clients}
        self.issued: list[str] = []  # client ids, one per token issued
        self.refused = 0
        self._server: ThreadingHTTPServer | None = None

    @property
    def url(self) -> str:
        assert self._server is not None, "not started"
        return f"http://127.0.0.1:{self._server.server_address[1]}/token"

    def start(self) -> TokenEndpoint:
        endpoint = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:  # noqa: N802 - http.server's name
                form = urllib.parse.parse_qs(self.rfile.read(int(self.headers.get("Content-Length") or 0)).decode())
                status, body = endpoint.answer(self.path, self.headers.get("Authorization", ""), form)
                data = json.dumps(body).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def log_message(self, *args: Any) -> None:
                pass

        self._server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        threading.Thread(target=self._server.serve_forever, name="krm-local-oauth", daemon=True).start()
        return self

    def stop(self) -> None:
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()
            self._server = None

    def answer(self, path: str, authorization: str, form: dict[str, list[str]]) -> tuple[int, dict[str, Any]]:
        """The endpoint's answer: (HTTP status, JSON body), errors as RFC 6749 §5.2 says."""
        if path != "/token":
            return 404, {"error": "not_found"}
        if form.get("grant_type") != ["client_credentials"]:
            return 400, {"error": "unsupported_grant_type"}
        client, secret = _client(authorization, form)
        if client not in self._secrets or secret != self._secrets[client]:
            self.refused += 1
            return 401, {"error": "invalid_client", "error_description": "unknown client or wrong secret"}
        self.issued.append(client)
        return 200, {"access_token": self.token(client, (form.get("scope") or [""])[0]), "token_type": "bearer",
                     "expires_in": self.lifetime_s}

    def token(self, subject: str, scope: str = "") -> str:
        """A JWT for `subject`, signed RS256 with the cluster's key."""
        from cryptography.hazmat.primitives import hashes
        from cryptography.hazmat.primitives.asymmetric import padding

        now = int(time.time())
        header = {"alg": "RS256", "typ": "JWT", "kid": OAUTH_KEY_ID}
        claims = {"iss": OAUTH_ISSUER, "aud": OAUTH_AUDIENCE, "sub": subject, "iat": now, "nbf": now - 5,
                  "exp": now + self.lifetime_s, **({"scope": scope} if scope else {})}
        signing_input = f"{_b64(json.dumps(header).encode())}.{_b64(json.dumps(claims).encode())}"
        signature = self._key.sign(signing_input.encode(), padding.PKCS1v15(), hashes.SHA256())
        return f"{signing_input}.{_b64(signature)}"


def _client(authorization: str, form: dict[str, list[str]]) -> tuple[str, str]:
    if authorization.startswith("Basic "):
        try:
            user, _, secret = base64.b64decode(authorization[6:]).decode().partition(":")
        except (ValueError, UnicodeDecodeError):
            return "", ""
        return urllib.parse.unquote(user), urllib.parse.unquote(secret)
    return (form.get("client_id") or [""])[0], (form.get("client_secret") or [""])[0]
