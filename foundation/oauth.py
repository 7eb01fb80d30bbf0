"""OAUTHBEARER tokens from an OAuth 2 token endpoint (client credentials grant, RFC 6749 §4.4), for
krm's own (kafka-python) clients. Spark's Kafka source is Kafka's Java client and asks the same
endpoint itself (OAuthBearerLoginCallbackHandler, KIP-768).

The request is the one Kafka's Java client sends (clients/.../oauthbearer/internals/secured/
HttpAccessTokenRetriever.java): POST `grant_type=client_credentials` (and `scope`), the client id and
secret URL-encoded in HTTP Basic auth. A token is reused until 80% of its lifetime has passed, Kafka's
default `sasl.login.refresh.window.factor`, so a connection storm asks the endpoint once.
"""

from __future__ import annotations

import base64
import json
import threading
import time
import urllib.error
import urllib.parse
import urllib.request
from dataclasses import dataclass, field
from typing import Callable

REFRESH_FACTOR = 0.8  # of the token's lifetime: Kafka's sasl.login.refresh.window.factor default
DEFAULT_LIFETIME_S = 300.0  # when the endpoint does not say (no expires_in)


class OAuthTokenError(Exception):
    """The token endpoint did not give a token: an operator-readable reason."""


@dataclass
class ClientCredentials:
    """One client's tokens from one endpoint; thread-safe, cached until the refresh point."""

    endpoint: str
    client_id: str
    secret: Callable[[], str]  # read at each request: a rotated secret is used at the next token
    scope: str | None = None
    timeout_s: float = 10.0
    clock: Callable[[], float] = time.monotonic
    fetch: Callable[[urllib.request.Request, float], tuple[int, bytes]] | None = None  # tests replace the HTTP call
    _token: str | None = field(default=None, init=False, repr=False)
    _refresh_at: float = field(default=0.0, init=False, repr=False)
    _lock: threading.Lock = field(default_factory=threading.Lock, init=False, repr=False)
    requests: int = field(default=0, init=False)

    def token(self) -> str:
        with self._lock:
            now = self.clock()
            if self._token is None or now >= self._refresh_at:
                self._token, lifetime = self._request()
                self._refresh_at = now + REFRESH_FACTOR * lifetime
            return self._token

    def _request(self) -> tuple[str, float]:
        self.requests += 1
        form = {"grant_type": "client_credentials", **({"scope": self.scope} if self.scope else {})}
        basic = base64.b64encode(f"{urllib.parse.quote(self.client_id, safe='')}:"
                                 f"{urllib.parse.quote(self.secret(), safe='')}".encode()).decode()
        req = urllib.request.Request(self.endpoint, data=urllib.parse.urlencode(form).encode(), method="POST",
                                     headers={"Authorization": f"Basic {basic}", "Accept": "application/json",
                                              "Content-Type": "application/x-www-form-urlencoded"})
        status, body = (self.fetch or _http)(req, self.timeout_s)
        if status != 200:
            raise OAuthTokenError(f"the token endpoint {self.endpoint} answered HTTP {status}{_oauth_error(body)} "
                                  f"for client {self.client_id}")
        try:
            doc = json.loads(body)
            token = doc["access_token"]
            lifetime = float(doc.get("expires_in") or DEFAULT_LIFETIME_S)
        except (ValueError, KeyError, TypeError):
            raise OAuthTokenError(f"the token endpoint {self.endpoint} answered without an access_token "
                                  f"({body[:80]!r})") from None
        if not isinstance(token, str) or not token:
            raise OAuthTokenError(f"the token endpoint {self.endpoint} answered an empty access_token")
        return token, max(1.0, lifetime)


def _http(req: urllib.request.Request, timeout_s: float) -> tuple[int, bytes]:
    try:
        with urllib.request.urlopen(req, timeout=timeout_s) as resp:  # noqa: S310 - the operator's endpoint
            return resp.status, resp.read()
    except urllib.error.HTTPError as e:
        return e.code, e.read()
    except (urllib.error.URLError, OSError) as e:
        reason = getattr(e, "reason", e)
        raise OAuthTokenError(f"the token endpoint {req.full_url} is unreachable ({reason})") from None


def _oauth_error(body: bytes) -> str:
    """RFC 6749 §5.2's error and description, when the body carries them."""
    try:
        doc = json.loads(body)
    except ValueError:
        return ""
    if not isinstance(doc, dict) or "error" not in doc:
        return ""
    desc = doc.get("error_description")
    return f" ({doc['error']}{': ' + str(desc) if desc else ''})"
