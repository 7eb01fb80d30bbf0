"""A Kerberos KDC of a local cluster's own (MIT krb5: krb5kdc, kdb5_util, kadmin.local), so GSSAPI
runs against real tickets: `krm local-cluster up --security sasl_ssl --kerberos`.

Realm KRM.LOCAL on a free loopback port (TCP only), its database, keytabs and krb5.conf in the
cluster's secrets folder; nothing under /etc is touched. Principals: the brokers' service principal
`kafka/<127.0.0.1's name>`, usually `kafka/localhost`: a client names the broker's host as its
resolver canonicalizes the address it connects to (Kafka's Java client by reverse lookup,
`getInetAddress().getHostName()`; MIT's library with its default dns_canonicalize_hostname and rdns),
and the brokers advertise 127.0.0.1. krm's `krm` (Kafka maps krm@KRM.LOCAL to User:krm:
sasl.kerberos.principal.to.local.rules DEFAULT, the realm being the default one), and `retired`,
whose keytab outlives it (deleted from the KDC: the wrong credential of the tests).
"""

from __future__ import annotations

import functools
import os
import secrets
import shutil
import socket
import subprocess
from pathlib import Path

from foundation.errors import ClusterError

REALM = "KRM.LOCAL"
SERVICE = "kafka"
KDC_ADDRESS = "127.0.0.1"


@functools.cache
def broker_host() -> str:
    """127.0.0.1 as the clients' resolvers name it (reverse lookup: "localhost" with a usual /etc/hosts)."""
    try:
        return socket.gethostbyaddr("127.0.0.1")[0].lower()
    except OSError:
        return "localhost"
CLIENTS = ("krm", "retired")
TOOLS = ("krb5kdc", "kdb5_util", "kadmin.local")


def missing_tools() -> list[str]:
    return [t for t in TOOLS if shutil.which(t) is None and not Path("/usr/sbin", t).exists()]


def _tool(name: str) -> str:
    return shutil.which(name) or str(Path("/usr/sbin", name))


class LocalKdc:
    def __init__(self, folder: Path) -> None:
        self.dir = Path(folder)

    @property
    def krb5_conf(self) -> Path:
        return self.dir / "krb5.conf"

    @property
    def kdc_conf(self) -> Path:
        return self.dir / "kdc.conf"

    @property
    def service_principal(self) -> str:
        return f"{SERVICE}/{broker_host()}@{REALM}"

    def keytab(self, who: str) -> Path:
        """`who`: "kafka" (the brokers') or one of CLIENTS."""
        return self.dir / f"{who}.keytab"

    def principal(self, who: str) -> str:
        return self.service_principal if who == SERVICE else f"{who}@{REALM}"

    def _env(self) -> dict[str, str]:
        return {**os.environ, "KRB5_CONFIG": str(self.krb5_conf), "KRB5_KDC_PROFILE": str(self.kdc_conf)}

    def create(self, port: int) -> None:
        """The realm's database and every keytab (seconds; the KDC itself is started by `command`)."""
        missing = missing_tools()
        if missing:
            raise ClusterError(f"--kerberos needs MIT Kerberos' KDC ({', '.join(missing)} missing): "
                               f"apt-get install krb5-kdc krb5-admin-server")
        self.dir.mkdir(parents=True, exist_ok=True)
        self.dir.chmod(0o700)
        self.krb5_conf.write_text(
            "[libdefaults]\n"
            f"  default_realm = {REALM}\n"
            "  dns_lookup_kdc = false\n  dns_lookup_realm = false\n"
            "  udp_preference_limit = 1\n"  # TCP: the KDC listens on TCP only
            "  ticket_lifetime = 10h\n  forwardable = true\n"
            f"[realms]\n  {REALM} = {{\n    kdc = {KDC_ADDRESS}:{port}\n  }}\n")
        self.kdc_conf.write_text(
            f"[kdcdefaults]\n  kdc_listen = {KDC_ADDRESS}:{port}\n  kdc_tcp_listen = {KDC_ADDRESS}:{port}\n"
            f"[realms]\n  {REALM} = {{\n"
            f"    database_name = {self.dir / 'principal'}\n"
            f"    key_stash_file = {self.dir / 'stash'}\n"
            f"    acl_file = {self.dir / 'kadm5.acl'}\n"
            "    max_life = 10h 0m 0s\n"
            "    supported_enctypes = aes256-cts-hmac-sha1-96:normal aes128-cts-hmac-sha1-96:normal\n"
            "  }\n"
            f"[logging]\n  kdc = FILE:{self.dir / 'kdc.log'}\n")
        (self.dir / "kadm5.acl").write_text("")
        self._run([_tool("kdb5_util"), "-r", REALM, "create", "-s", "-P", secrets.token_hex(16)], "creating the realm")
        script = [f"addprinc -randkey {self.service_principal}", f"ktadd -k {self.keytab(SERVICE)} {self.service_principal}"]
        for who in CLIENTS:
            script += [f"addprinc -randkey {who}", f"ktadd -k {self.keytab(who)} {who}"]
        script.append("delprinc -force retired")  # its keytab stays: a credential the KDC no longer knows
        self._run([_tool("kadmin.local"), "-r", REALM], "adding principals", "\n".join(script) + "\n")
        for who in (SERVICE, *CLIENTS):
            self.keytab(who).chmod(0o600)

    def config_toml(self, who: str, ca_file: Path) -> str:
        """krm's `[clusters.security]` lines to log in as `who` (one of CLIENTS) from its keytab."""
        return (f'security_protocol = "SASL_SSL"\nsasl_mechanism = "GSSAPI"\nssl_cafile = "{ca_file}"\n'
                f'sasl_kerberos_principal = "{self.principal(who)}"\nsasl_kerberos_keytab = "{self.keytab(who)}"\n'
                f'krb5_config = "{self.krb5_conf}"\n')

    def command(self) -> tuple[list[str], dict[str, str]]:
        """How to run the KDC in the foreground (the cluster starts it detached, like its JVMs)."""
        return [_tool("krb5kdc"), "-n", "-r", REALM], self._env()

    def _run(self, cmd: list[str], what: str, stdin: str | None = None) -> None:
        done = subprocess.run(cmd, env=self._env(), input=stdin, capture_output=True, text=True, timeout=60)
        if done.returncode != 0:
            raise ClusterError(f"local KDC: {what} failed (exit {done.returncode}): {done.stderr.strip()[-500:]}")
