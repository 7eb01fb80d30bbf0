"""Why krm cannot use a cluster, in one line an operator can act on.

kafka-python reports a refused login badly: the Admin client's constructor raises
"IncompatibleBrokerVersion" when SASL fails, and the real cause only reaches its log. When a poll
fails, `explain` classifies the exception and, if it says nothing useful, opens one connection to a
bootstrap broker with the same settings and records why that connection was closed.

The reasons, declared with the record field they fill (schemas/observation.py, `error_reason`), are
also the `reason` label of krm_cluster_reachable and the causes of CLUSTER_UNREACHABLE.
"""

from __future__ import annotations

import logging
import socket
import ssl
import time
from dataclasses import dataclass
from typing import Any, Iterable

from foundation.backoff import Backoff, Retry
from foundation.kerberos import KerberosLoginError
from foundation.oauth import OAuthTokenError
from foundation.security import KafkaSecurity, kafka_python_kwargs
from schemas import observation

TOPIC_AUTHORIZATION_FAILED = 29  # Kafka error codes (clients/.../common/protocol/Errors.java)
CLUSTER_AUTHORIZATION_FAILED = 31

AUTHENTICATION = observation.AUTHENTICATION_FAILED
TLS = observation.TLS_FAILED
PROTOCOL = observation.PROTOCOL_MISMATCH
AUTHORIZATION = observation.AUTHORIZATION_FAILED
UNREACHABLE = observation.UNREACHABLE
# OpenSSL's names for the alerts a server sends when it refuses the client's certificate or its absence
PEER_REFUSED_CERTIFICATE = frozenset({"SSLV3_ALERT_BAD_CERTIFICATE", "SSLV3_ALERT_CERTIFICATE_UNKNOWN",
                                      "TLSV1_ALERT_UNKNOWN_CA", "TLSV13_ALERT_CERTIFICATE_REQUIRED",
                                      "SSLV3_ALERT_CERTIFICATE_EXPIRED", "SSLV3_ALERT_CERTIFICATE_REVOKED",
                                      "TLSV1_ALERT_ACCESS_DENIED"})
ACCESS_REASONS = (AUTHENTICATION, TLS, PROTOCOL, AUTHORIZATION)  # retried slowly: retrying sooner cannot help

# How long after an access failure the next attempt waits (5, 10, 20, 40, then every 60 s): the broker
# logs every refused login, and a credential or certificate is not fixed within seconds.
log = logging.getLogger(__name__)

ACCESS_BACKOFF = Backoff(first_s=5.0, cap_s=60.0)


@dataclass(frozen=True)
class AccessProblem:
    reason: str
    message: str


def classify(exc: BaseException | None, cluster: str, sec: KafkaSecurity) -> AccessProblem | None:
    """The problem an exception names by itself, or None when it names none (a plain timeout)."""
    from kafka import errors as Errors

    if exc is None:
        return None
    who = f"({sec.principal()})"
    if isinstance(exc, ssl.SSLCertVerificationError):
        hint = (f"is ssl_cafile {sec.tls.cafile} the CA that signed the brokers' certificates?" if sec.tls.cafile
                else "no ssl_cafile is configured: the system CAs do not trust it")
        return AccessProblem(TLS, f"TLS handshake failed for cluster {cluster}: the broker's certificate was "
                                  f"not accepted ({exc.verify_message}); {hint}")
    if isinstance(exc, ssl.SSLError) and (exc.reason or "") in PEER_REFUSED_CERTIFICATE:
        # the broker's alert: it wants a client certificate (ssl.client.auth=required) and got none,
        # or one it does not trust
        if sec.tls.certfile:
            return AccessProblem(TLS, f"TLS handshake failed for cluster {cluster}: the broker refused the client "
                                      f"certificate {sec.tls.certfile} ({exc.reason}); is it signed by a CA in the "
                                      f"brokers' ssl.truststore, and still valid?")
        return AccessProblem(TLS, f"TLS handshake failed for cluster {cluster}: the broker requires a client "
                                  f"certificate (mutual TLS) and none is configured: set ssl_certfile and "
                                  f"ssl_keyfile ({exc.reason})")
    if isinstance(exc, ssl.SSLError):
        return AccessProblem(TLS, f"TLS handshake failed for cluster {cluster} {who}: {exc.reason or exc}")
    if isinstance(exc, (OAuthTokenError, KerberosLoginError)):  # no token or ticket, so no login attempted
        return AccessProblem(AUTHENTICATION, f"authentication failed for cluster {cluster} {who}: {exc}")
    if isinstance(exc, Errors.SaslAuthenticationFailedError):
        return AccessProblem(AUTHENTICATION, f"authentication failed for cluster {cluster} {who}: "
                                             f"{_broker_words(exc)}")
    if isinstance(exc, Errors.UnsupportedSaslMechanismError):
        return AccessProblem(AUTHENTICATION, f"authentication failed for cluster {cluster} {who}: the broker "
                                             f"does not enable {sec.sasl_mechanism} on this listener")
    if isinstance(exc, Errors.IllegalSaslStateError):
        return AccessProblem(PROTOCOL, f"cluster {cluster}: the listener does not expect SASL "
                                       f"(security_protocol is {sec.protocol}); check the listener's protocol")
    if isinstance(exc, Errors.InvalidReceiveError) and not sec.uses_tls:
        return AccessProblem(PROTOCOL, f"cluster {cluster}: the broker's answer is not Kafka's plaintext protocol: "
                                       f"the listener probably uses TLS (security_protocol is {sec.protocol}; "
                                       f"try SSL or SASL_SSL)")
    if isinstance(exc, Errors.AuthorizationError):
        return AccessProblem(AUTHORIZATION, f"authorization failed for cluster {cluster} {who}: {_broker_words(exc)}")
    return None


def explain(exc: BaseException, cluster: str, bootstrap_servers: str, sec: KafkaSecurity,
            timeout_s: float = 3.0) -> AccessProblem:
    """Why a poll failed. Asks one broker directly when the exception is not telling."""
    found = classify(exc, cluster, sec) or credential(cluster, sec)
    if found is None:  # also for PLAINTEXT: a TLS listener answers it with garbage (protocol_mismatch)
        found = probe(cluster, bootstrap_servers, sec, min(timeout_s, 1.0))
    if found is None:
        found = classify(exc.__cause__ or exc.__context__, cluster, sec)
    return found or AccessProblem(UNREACHABLE, f"cluster {cluster} unreachable through the Admin API: "
                                               f"{type(exc).__name__}: {exc}")


def credential(cluster: str, sec: KafkaSecurity) -> AccessProblem | None:
    """The problem with the credential a login would carry, asked for without a broker: an OAuth
    token (from the token endpoint, or cached) or a Kerberos ticket from the keytab. kafka-python
    reports a token it could not get as "no brokers available"; asked directly, the endpoint's
    refusal is named however slowly the brokers answer."""
    if not sec.uses_sasl:
        return None
    try:
        if sec.sasl_mechanism == "OAUTHBEARER":
            kafka_python_kwargs(sec)["sasl_oauth_token_provider"].token()
        elif sec.sasl_mechanism == "GSSAPI":
            sec.kerberos.credentials()
    except (OAuthTokenError, KerberosLoginError) as e:
        return classify(e, cluster, sec)
    except Exception:  # noqa: BLE001 - anything else is for the connection to show (probe)
        return None
    return None


def probe(cluster: str, bootstrap_servers: str, sec: KafkaSecurity, timeout_s: float = 3.0) -> AccessProblem | None:
    """Connect to the bootstrap brokers in turn as the real client would; the first security failure
    met is the answer, a successful connection (or only silence) means security is not the problem."""
    from kafka.conn import BrokerConnection

    deadline = time.monotonic() + timeout_s
    try:
        kwargs = kafka_python_kwargs(sec)
    except (ssl.SSLError, OSError) as e:  # a client certificate or key that does not load
        return classify(e, cluster, sec) or AccessProblem(TLS, f"cluster {cluster}: {type(e).__name__}: {e}")
    for host, port in _addresses(bootstrap_servers):
        if time.monotonic() >= deadline:
            break
        errors: list[BaseException] = []
        try:
            conn = BrokerConnection(host, port, socket.AF_UNSPEC, client_id="krm-access-check", **kwargs)
        except Exception as e:  # noqa: BLE001 - e.g. an unreadable CA file
            return classify(e, cluster, sec) or AccessProblem(TLS if sec.uses_tls else UNREACHABLE,
                                                              f"cluster {cluster}: {type(e).__name__}: {e}")
        close = conn.close

        def recording_close(error: BaseException | None = None, _close: Any = close,
                            _errors: list[BaseException] = errors) -> None:
            if error is not None:  # the connection keeps only the last state; the cause is in the first error
                _errors.append(error)
            _close(error)

        conn.close = recording_close
        try:
            if conn.connect_blocking(timeout=max(0.1, deadline - time.monotonic())):
                return None
        except Exception as e:  # noqa: BLE001 - SSL errors are raised, SASL ones passed to close()
            errors.insert(0, e)
        finally:
            close()
        for err in errors:
            found = classify(err, cluster, sec)
            if found is not None:
                return found
    return None


def denials(cluster: str, sec: KafkaSecurity, denied: Iterable[str]) -> AccessProblem | None:
    """One line for the ACLs a poll found missing (`DESCRIBE_CONFIGS on TOPIC orders`, ...)."""
    items = sorted(set(denied))
    if not items:
        return None
    shown = "; ".join(items[:3]) + (f"; and {len(items) - 3} more" if len(items) > 3 else "")
    return AccessProblem(AUTHORIZATION, f"authorization failed for cluster {cluster} ({sec.principal()}): "
                                        f"missing ACL: {shown} (krm's minimum ACLs: docs/security.md)")


def _broker_words(exc: BaseException) -> str:
    text = str(exc)
    return text.split(": ", 1)[1] if text.startswith("[Error") and ": " in text else text


def _addresses(bootstrap_servers: str) -> list[tuple[str, int]]:
    out = []
    for item in bootstrap_servers.split(","):
        host, _, port = item.strip().rpartition(":")
        if host and port.isdigit():
            out.append((host.strip("[]"), int(port)))
    return out


class AccessState:
    """One cluster's access as its poller knows it: why the last poll failed (logged once per change), the
    refusals in a row (credentials, TLS, protocol: waited out, longer each time, so no login storm on the
    brokers) and the ACLs found missing (logged once per change)."""

    def __init__(self, cluster: str, sec: KafkaSecurity) -> None:
        self.cluster, self.sec = cluster, sec
        self.problem: AccessProblem | None = None
        self.retry = Retry(ACCESS_BACKOFF)
        self.degraded = False
        self._denied_logged: frozenset[str] = frozenset()

    def waiting(self) -> bool:
        """A refusal is being waited out: the brokers are not asked this time."""
        return self.problem is not None and not self.retry.due()

    def failed(self, problem: AccessProblem) -> None:
        if self.problem is None or problem.message != self.problem.message:
            log.warning("%s", problem.message)
        self.problem = problem
        self.degraded = True
        if problem.reason in ACCESS_REASONS:
            self.retry.failed()
        else:
            self.retry.succeeded()

    def succeeded(self) -> None:
        if self.degraded:
            log.warning("cluster %s reachable again", self.cluster)
            self.degraded = False
            self.problem = None
            self.retry.succeeded()

    def denied(self, denied: set[str]) -> list[str]:
        """The ACLs this poll found missing; a change is logged once, in one line."""
        if frozenset(denied) != self._denied_logged:
            problem = denials(self.cluster, self.sec, denied)
            if problem is not None:
                log.warning("%s", problem.message)
            else:
                log.warning("cluster %s: the ACLs krm missed are granted now", self.cluster)
            self._denied_logged = frozenset(denied)
        return sorted(denied)
