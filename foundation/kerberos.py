"""GSSAPI (Kerberos) logins for krm's own Kafka clients, each cluster with its own identity.

kafka-python's GSSAPI mechanism logs in with the process's default credentials (a ticket cache made
by kinit). A daemon watching several clusters needs one login per cluster, renewed without a cron
job: a keytab and a principal. krm acquires the initiator credential from the keytab itself
(GSS-API's credential store: `client_keytab`, and a private in-memory ticket cache per login, so
krm never touches the user's cache) and hands it to the security context; MIT Kerberos fetches a
new ticket from the keytab when the cached one expires. Without a keytab the default credentials
are used, as before.

kafka-python's mechanism registry is the hook: `GssapiWithLogin` is registered for "GSSAPI" and
takes the login through the one GSSAPI option kafka-python passes through untouched,
`sasl_kerberos_name` (otherwise a target name). The target is Kafka's: `<service>/<broker host>`
(Kafka's SaslClientAuthenticator uses the host it connects to).

krb5.conf: the MIT library reads KRB5_CONFIG (default /etc/krb5.conf); `krb5_config` sets it for the
process, so all clusters of one krm process share one (a different one is refused, naming both).
"""

from __future__ import annotations

import hashlib
import os
import threading
from dataclasses import dataclass
from pathlib import Path
from typing import Any

_LOCK = threading.Lock()


class KerberosLoginError(Exception):
    """No Kerberos credential could be had: an operator-readable reason."""


@dataclass(frozen=True)
class KerberosLogin:
    service_name: str  # the brokers' sasl.kerberos.service.name (Kafka's default: kafka)
    principal: str | None = None  # krm's own, e.g. krm@EXAMPLE.COM (with keytab)
    keytab: Path | None = None
    krb5_config: Path | None = None

    def describe(self) -> str:
        who = f"principal {self.principal}" if self.principal else "the default ticket cache"
        return f"{who}{f', keytab {self.keytab}' if self.keytab else ''}"

    def credentials(self) -> Any:
        """The initiator credential (None: the process's default ones). Raises KerberosLoginError."""
        import gssapi
        from gssapi.raw.misc import GSSError

        use_krb5_config(self.krb5_config)
        if self.keytab is None:
            return None
        ccache = "MEMORY:krm-" + hashlib.sha256(f"{self.principal}|{self.keytab}".encode()).hexdigest()[:16]
        try:
            name = gssapi.Name(self.principal, gssapi.NameType.kerberos_principal) if self.principal else None
            return gssapi.Credentials(name=name, usage="initiate",
                                      store={b"client_keytab": str(self.keytab).encode(), b"ccache": ccache.encode()})
        except GSSError as e:
            raise KerberosLoginError(f"the KDC gave no ticket to {self.principal}: {gss_words(e)}") from None


def gss_words(e: BaseException) -> str:
    """The Kerberos library's own words, the reason first: the minor status says why (an unknown
    principal, no KDC reachable, a wrong key), the major one only that no credential came of it."""
    try:
        minor = e.get_all_statuses(e.min_code, False)  # type: ignore[attr-defined]
        major = e.get_all_statuses(e.maj_code, True)  # type: ignore[attr-defined]
        words = [m for m in (*minor, *major) if m and m != "Unknown error"]
        return "; ".join(words) or str(e)
    except Exception:  # noqa: BLE001 - the library's plain text then
        return str(e).strip()


def use_krb5_config(path: Path | None) -> None:
    if path is None:
        return
    with _LOCK:
        current = os.environ.get("KRB5_CONFIG")
        if current and Path(current) != Path(path):
            raise KerberosLoginError(f"krb5_config {path} differs from the {current} this krm process already uses; "
                                     f"one krm process uses one krb5.conf (name the same file everywhere)")
        os.environ["KRB5_CONFIG"] = str(path)


def register() -> None:
    """Make kafka-python's "GSSAPI" mechanism take a KerberosLogin (idempotent)."""
    from kafka.sasl import SASL_MECHANISMS, register_sasl_mechanism

    if SASL_MECHANISMS.get("GSSAPI") is not _mechanism():
        register_sasl_mechanism("GSSAPI", _mechanism(), overwrite=True)


_MECHANISM: Any = None


def _mechanism() -> Any:
    global _MECHANISM
    if _MECHANISM is None:
        from kafka.sasl.gssapi import SaslMechanismGSSAPI

        class GssapiWithLogin(SaslMechanismGSSAPI):
            """kafka-python's GSSAPI exchange, with krm's own credential when a KerberosLogin is given."""

            def __init__(self, **config: Any) -> None:
                login = config.get("sasl_kerberos_name")
                if not isinstance(login, KerberosLogin):
                    super().__init__(**config)
                    return
                import gssapi
                from gssapi.raw.misc import GSSError

                self._is_done = False
                self._is_authenticated = False
                self.auth_id = f"{login.service_name}@{config.get('host', '')}"
                creds = login.credentials()
                try:
                    self.gssapi_name = gssapi.Name(self.auth_id, name_type=gssapi.NameType.hostbased_service
                                                   ).canonicalize(gssapi.MechType.kerberos)
                    self._client_ctx = gssapi.SecurityContext(name=self.gssapi_name, usage="initiate", creds=creds)
                    self._next_token = self._client_ctx.step(None)
                except GSSError as e:
                    raise KerberosLoginError(f"no service ticket for {login.service_name}/{config.get('host', '')}: "
                                             f"{gss_words(e)}") from None

        _MECHANISM = GssapiWithLogin
    return _MECHANISM
