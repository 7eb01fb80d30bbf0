"""What `krm local-cluster up --security sasl_ssl|mtls` adds to a local cluster: a certificate
authority of its own, a broker certificate it signed, and the ACLs of krm's least-privilege principal.

- `sasl_ssl`: users and passwords for SCRAM-SHA-512 and PLAIN (one SASL_SSL listener takes both);
  ZooKeeper mode: ZooKeeper asks every session for a SASL digest login.
- `mtls`: an SSL listener that requires a client certificate (`ssl.client.auth=required`); the
  certificate's CN is the principal (`ssl.principal.mapping.rules`), so CN=krm is User:krm. ZooKeeper
  mode: ZooKeeper serves TLS only (its secureClientPort, client certificates required), the brokers
  and krm connect with theirs.

Users: `admin` (the brokers' inter-broker principal and the only super user) and `krm` (what the
monitor connects as, holding exactly `KRM_ACLS`, the minimum docs/security.md documents). Passwords are
random per cluster, kept in `<root>/secrets/<user>.password` (mode 0600) and referenced by the
cluster's krm.toml, never written into it.
"""

from __future__ import annotations

import datetime as dt
import ipaddress
import os
import secrets
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from foundation.errors import ClusterError
from foundation.paths import CONF_DIR

MECHANISM = "SCRAM-SHA-512"
ADMIN_USER = "admin"
KRM_USER = "krm"
JMX_USER = "prometheus"  # the JMX exporters' basic-auth user
OAUTH_ISSUER = "krm-local-idp"  # the local identity provider's tokens (lab/local_oauth.py)
OAUTH_AUDIENCE = "kafka"
OAUTH_KEY_ID = "krm-local-1"
BROKER_CN = "broker"  # the broker certificate's CN: with mtls, the brokers' own principal
ZK_BROKER_USER = "kafka"  # ZooKeeper mode: the brokers' (and Kafka tools') SASL digest user in ZooKeeper

# krm's minimum ACLs: (resource type, resource name, pattern type, operation). "kafka-cluster" is the
# cluster resource's only name. Why each is needed:
KRM_ACLS = (
    ("CLUSTER", "kafka-cluster", "LITERAL", "DESCRIBE"),  # DescribeCluster, DescribeQuorum, DescribeLogDirs
    ("CLUSTER", "kafka-cluster", "LITERAL", "DESCRIBE_CONFIGS"),  # broker configs (replica.lag.time.max.ms, ...)
    ("TOPIC", "*", "LITERAL", "DESCRIBE"),  # Metadata, ListOffsets, DescribeTopicPartitions: a topic krm may
    #                                         not describe is invisible to it, not an error
    ("TOPIC", "*", "LITERAL", "DESCRIBE_CONFIGS"),  # min.insync.replicas, unclean.leader.election.enable
    # the observations topic (here every topic named krm.*, so several krm instances can share the
    # cluster; a single LITERAL name is enough for one):
    ("TOPIC", "krm.", "PREFIXED", "CREATE"),  # the collector creates its topic when missing
    ("TOPIC", "krm.", "PREFIXED", "WRITE"),  # the collector publishes
    ("TOPIC", "krm.", "PREFIXED", "READ"),  # the pipeline reads (Spark's Kafka source, no consumer group)
)


@dataclass(frozen=True)
class LocalSecurity:
    """Paths of one secured local cluster's files (all under `<root>/secrets`, mode 0700)."""

    root: Path
    kind: str = "sasl_ssl"  # or "mtls"

    @property
    def mtls(self) -> bool:
        return self.kind == "mtls"

    @property
    def dir(self) -> Path:
        return self.root / "secrets"

    @property
    def ca_file(self) -> Path:
        return self.dir / "ca.pem"

    @property
    def keystore(self) -> Path:
        return self.dir / "broker.p12"

    @property
    def oauth_signing_key(self) -> Path:
        """The local identity provider's RSA key: tokens for OAUTHBEARER are signed with it."""
        return self.dir / "oauth-signing.key"

    @property
    def jwks_file(self) -> Path:
        """Its public half as a JSON Web Key Set, which the brokers verify tokens against."""
        return self.dir / "jwks.json"

    def certfile(self, user: str) -> Path:
        """A user's client certificate (mtls: CN=<user> is the principal User:<user>)."""
        return self.dir / f"{user}.pem"

    def keyfile(self, user: str) -> Path:
        """Its private key (PKCS#8 PEM, unencrypted, mode 0600)."""
        return self.dir / f"{user}.key"

    @property
    def zk_server_jaas(self) -> Path:
        return self.dir / "zookeeper-server.jaas"

    @property
    def zk_client_jaas(self) -> Path:
        """What the brokers and Kafka's tools log in to ZooKeeper with (as ZK_BROKER_USER)."""
        return self.dir / "zookeeper-client.jaas"

    # zoo.cfg lines: every session must authenticate with SASL (ZooKeeper 3.7+'s enforce.auth)
    ZOO_CFG = ("authProvider.sasl=org.apache.zookeeper.server.auth.SASLAuthenticationProvider",
               "enforce.auth.enabled=true", "enforce.auth.schemes=sasl")

    def zoo_cfg(self, port: int) -> list[str]:
        """zoo.cfg lines for ZooKeeper's client port (ZooKeeper's own names, its admin guide)."""
        if not self.mtls:
            return [f"clientPort={port}", "clientPortAddress=127.0.0.1", *self.ZOO_CFG]
        return [f"secureClientPort={port}", "secureClientPortAddress=127.0.0.1",
                "serverCnxnFactory=org.apache.zookeeper.server.NettyServerCnxnFactory",
                "authProvider.x509=org.apache.zookeeper.server.auth.X509AuthenticationProvider",
                "ssl.clientAuth=need", f"ssl.keyStore.location={self.keystore}", "ssl.keyStore.type=PKCS12",
                f"ssl.keyStore.password={self.password('keystore')}",
                f"ssl.trustStore.location={self.ca_file}", "ssl.trustStore.type=PEM"]

    def broker_zookeeper_properties(self) -> dict[str, str]:
        """mtls, ZooKeeper mode: the brokers reach ZooKeeper over TLS with the broker certificate
        (Kafka's zookeeper.ssl.* settings, KIP-515)."""
        if not self.mtls:
            return {}
        return {"zookeeper.ssl.client.enable": "true",
                "zookeeper.clientCnxnSocket": "org.apache.zookeeper.ClientCnxnSocketNetty",
                "zookeeper.ssl.keystore.location": str(self.keystore), "zookeeper.ssl.keystore.type": "PKCS12",
                "zookeeper.ssl.keystore.password": self.password("keystore"),
                "zookeeper.ssl.truststore.location": str(self.ca_file), "zookeeper.ssl.truststore.type": "PEM"}

    def zookeeper_toml(self) -> str:
        """`[clusters.zookeeper_security]` body: krm's SASL digest user, or (mtls) its certificate."""
        if self.mtls:
            return f"tls = true\n{self._tls_toml(KRM_USER)}"
        return f'sasl_username = "{KRM_USER}"\nsasl_password_file = "{self.password_file(f"zk-{KRM_USER}")}"\n'

    def kazoo_kwargs(self, user: str = ZK_BROKER_USER) -> dict[str, Any]:
        if self.mtls:
            return {"use_ssl": True, "verify_certs": True, "ca": str(self.ca_file),
                    "certfile": str(self.certfile(ADMIN_USER)), "keyfile": str(self.keyfile(ADMIN_USER))}
        return {"sasl_options": {"mechanism": "DIGEST-MD5", "username": user, "password": self.password(f"zk-{user}")}}

    def password_file(self, user: str) -> Path:
        return self.dir / f"{user}.password"

    def password(self, user: str) -> str:
        return self.password_file(user).read_text().strip()

    def create(self) -> None:
        """CA, broker key and certificate (valid for 127.0.0.1 and localhost), PKCS12 keystore, passwords."""
        self.dir.mkdir(mode=0o700, parents=True, exist_ok=True)
        for user in (ADMIN_USER, KRM_USER, "keystore", f"zk-{ZK_BROKER_USER}", f"zk-{KRM_USER}", "jmx",
                     f"oauth-{KRM_USER}"):
            _write_private(self.password_file(user), secrets.token_urlsafe(24))
        # ZooKeeper's side (DigestLoginModule: the users and their passwords) and its clients' side
        users = " ".join(f'user_{u}="{self.password(f"zk-{u}")}"' for u in (ZK_BROKER_USER, KRM_USER))
        _write_private(self.zk_server_jaas, "Server {\n  org.apache.zookeeper.server.auth.DigestLoginModule required "
                                            f"{users};\n}};")
        broker_pw = self.password(f"zk-{ZK_BROKER_USER}")
        _write_private(self.zk_client_jaas, "Client {\n  org.apache.zookeeper.server.auth.DigestLoginModule required "
                                            f'username="{ZK_BROKER_USER}" password="{broker_pw}";\n}};')
        ca_key, ca_cert = _ca()
        key, cert = _signed_cert(ca_key, ca_cert, BROKER_CN, server=True)
        from cryptography.hazmat.primitives import serialization
        from cryptography.hazmat.primitives.serialization import pkcs12

        self.ca_file.write_bytes(ca_cert.public_bytes(serialization.Encoding.PEM))
        for user in (ADMIN_USER, KRM_USER):  # client certificates (used by mtls)
            user_key, user_cert = _signed_cert(ca_key, ca_cert, user, server=False)
            self.certfile(user).write_bytes(user_cert.public_bytes(serialization.Encoding.PEM))
            _write_private(self.keyfile(user), user_key.private_bytes(
                serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                serialization.NoEncryption()).decode().strip())
        self.keystore.write_bytes(pkcs12.serialize_key_and_certificates(
            b"broker", key, cert, [ca_cert],
            serialization.BestAvailableEncryption(self.password("keystore").encode())))
        os.chmod(self.keystore, 0o600)
        self._write_jmx_exporter_config()
        self._write_oauth_keys()

    def _write_oauth_keys(self) -> None:
        import base64
        import json

        from cryptography.hazmat.primitives import serialization
        from cryptography.hazmat.primitives.asymmetric import rsa

        key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
        _write_private(self.oauth_signing_key, key.private_bytes(
            serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()).decode().strip())
        numbers = key.public_key().public_numbers()

        def b64(n: int) -> str:
            return base64.urlsafe_b64encode(n.to_bytes((n.bit_length() + 7) // 8, "big")).rstrip(b"=").decode()

        self.jwks_file.write_text(json.dumps({"keys": [{"kty": "RSA", "kid": OAUTH_KEY_ID, "use": "sig", "alg": "RS256",
                                                        "n": b64(numbers.n), "e": b64(numbers.e)}]}))

    @property
    def jmx_exporter_config(self) -> Path:
        return self.dir / "jmx-exporter.yaml"

    def _write_jmx_exporter_config(self) -> None:
        """krm's exporter rules (conf/jmx-exporter.yaml) behind HTTPS (the broker certificate) and basic
        auth (user `prometheus`, SHA-256 of "<salt>:<password>", as the JMX exporter agent checks it)."""
        import hashlib

        salt = secrets.token_hex(8)
        # the agent compares against BigInteger(1, digest).toString(16): hex without leading zeros
        # (io/prometheus/jmx/common/http/authenticator/MessageDigestAuthenticator, agent 1.0.1)
        digest = hashlib.sha256(f"{salt}:{self.password('jmx')}".encode()).hexdigest().lstrip("0")
        server = (f"httpServer:\n  authentication:\n    basic:\n      username: {JMX_USER}\n"
                  f"      algorithm: SHA-256\n      salt: {salt}\n      passwordHash: {digest}\n"
                  f"  ssl:\n    keyStore:\n      filename: {self.keystore}\n      password: {self.password('keystore')}\n"
                  f"    certificate:\n      alias: broker\n")
        _write_private(self.jmx_exporter_config, (CONF_DIR / "jmx-exporter.yaml").read_text() + "\n" + server)

    def jmx_toml(self) -> str:
        """`[clusters.jmx_security]` body for this cluster's exporters."""
        return (f'username = "{JMX_USER}"\npassword_file = "{self.password_file("jmx")}"\n'
                f'ssl_cafile = "{self.ca_file}"\n')

    @property
    def listener(self) -> str:
        """The brokers' listener (and its security protocol)."""
        return "SSL" if self.mtls else "SASL_SSL"

    @property
    def super_users(self) -> str:
        """admin; with mtls the brokers too (they talk to each other as their certificate's CN)."""
        return f"User:{ADMIN_USER};User:{BROKER_CN}" if self.mtls else f"User:{ADMIN_USER}"

    def listener_properties(self, listener: str, oauth: bool = False, kdc: Any = None) -> dict[str, str]:
        """Broker settings of the listener named `listener`, by kind (`oauth`: sasl_ssl also takes
        OAUTHBEARER tokens of the local identity provider, lab/local_oauth.py; Kafka 3.4+; `kdc`:
        GSSAPI with the cluster's own KDC, lab/local_kdc.py)."""
        stores = {"ssl.keystore.type": "PKCS12", "ssl.keystore.location": str(self.keystore),
                  "ssl.keystore.password": self.password("keystore"),
                  "ssl.truststore.type": "PEM", "ssl.truststore.location": str(self.ca_file)}
        if self.mtls:
            # the principal is the certificate's CN alone (Kafka's SslPrincipalMapper rules), else the
            # whole distinguished name
            return {"ssl.client.auth": "required",
                    "ssl.principal.mapping.rules": "RULE:^CN=([^,]+)$/$1/,DEFAULT", **stores}
        props = self._sasl_listener_properties(listener) | stores
        if oauth:  # KIP-768: signed JWTs checked against the provider's keys (here a JWKS file)
            name = listener.lower()
            props |= {
                "sasl.enabled.mechanisms": props["sasl.enabled.mechanisms"] + ",OAUTHBEARER",
                f"listener.name.{name}.oauthbearer.sasl.jaas.config":
                    "org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginModule required ;",
                f"listener.name.{name}.oauthbearer.sasl.server.callback.handler.class":
                    "org.apache.kafka.common.security.oauthbearer.OAuthBearerValidatorCallbackHandler",
                "sasl.oauthbearer.jwks.endpoint.url": self.jwks_file.as_uri(),
                "sasl.oauthbearer.expected.audience": OAUTH_AUDIENCE,
                "sasl.oauthbearer.expected.issuer": OAUTH_ISSUER,
            }
        if kdc is not None:  # the service principal's key from its keytab; clients' principals map to
            # their first component (krm@KRM.LOCAL -> User:krm: the DEFAULT rule, KRM.LOCAL the default realm)
            props |= {
                "sasl.enabled.mechanisms": props["sasl.enabled.mechanisms"] + ",GSSAPI",
                "sasl.kerberos.service.name": "kafka",
                f"listener.name.{listener.lower()}.gssapi.sasl.jaas.config":
                    "com.sun.security.auth.module.Krb5LoginModule required useKeyTab=true storeKey=true "
                    f'keyTab="{kdc.keytab("kafka")}" principal="{kdc.service_principal}";',
            }
        return props

    def oauth_jvm_properties(self) -> list[str]:
        """Kafka 3.9.1+ and 4.x read OAuth keys only from URLs and files allowed by these."""
        return [f"-Dorg.apache.kafka.sasl.oauthbearer.allowed.urls={self.jwks_file.as_uri()}",
                f"-Dorg.apache.kafka.sasl.oauthbearer.allowed.files={self.jwks_file}"]

    def _sasl_listener_properties(self, listener: str) -> dict[str, str]:
        """Broker settings for a SASL_SSL listener named `listener`: SCRAM-SHA-512 (also between
        brokers) and PLAIN, the same users and passwords for both (PLAIN's are listed in the broker's
        JAAS entry, `user_<name>`; Kafka's PlainServerCallbackHandler checks them)."""
        jaas = (f'org.apache.kafka.common.security.scram.ScramLoginModule required username="{ADMIN_USER}" '
                f'password="{self.password(ADMIN_USER)}";')
        plain_users = " ".join(f'user_{u}="{self.password(u)}"' for u in (ADMIN_USER, KRM_USER))
        plain = (f'org.apache.kafka.common.security.plain.PlainLoginModule required username="{ADMIN_USER}" '
                 f'password="{self.password(ADMIN_USER)}" {plain_users};')
        return {
            "sasl.enabled.mechanisms": f"{MECHANISM},PLAIN",
            "sasl.mechanism.inter.broker.protocol": MECHANISM,
            f"listener.name.{listener.lower()}.{MECHANISM.lower()}.sasl.jaas.config": jaas,
            f"listener.name.{listener.lower()}.plain.sasl.jaas.config": plain,
        }

    def client_kwargs(self, user: str = KRM_USER) -> dict[str, Any]:
        """kafka-python keyword arguments for a client of this cluster (the `up --json` contract)."""
        if self.mtls:
            return {"security_protocol": "SSL", "ssl_cafile": str(self.ca_file),
                    "ssl_certfile": str(self.certfile(user)), "ssl_keyfile": str(self.keyfile(user))}
        return {"security_protocol": "SASL_SSL", "sasl_mechanism": MECHANISM, "sasl_plain_username": user,
                "sasl_plain_password": self.password(user), "ssl_cafile": str(self.ca_file)}

    def python_client_kwargs(self, user: str = KRM_USER) -> dict[str, Any]:
        """client_kwargs for use in this process: with mtls, the TLS context krm's own clients use
        (foundation/security.py client_certificate_context: at most TLS 1.2, and why)."""
        kw = self.client_kwargs(user)
        if self.mtls:
            from foundation.security import TlsFiles, client_certificate_context

            kw["ssl_context"] = client_certificate_context(TlsFiles(self.ca_file, self.certfile(user), self.keyfile(user)))
        return kw

    def scram_format_args(self) -> list[str]:
        """KRaft: SCRAM credentials written into the metadata log when the storage is formatted (KIP-900)."""
        out = []
        for user in (ADMIN_USER, KRM_USER):
            out += ["--add-scram", f"{MECHANISM}=[name={user},password={self.password(user)}]"]
        return out

    def config_toml(self, mechanism: str = MECHANISM) -> str:
        """The `[clusters.security]`-style table body krm.toml gets: paths, never the password
        (`mechanism` SCRAM-SHA-512 or PLAIN: the listener takes both; mtls: the certificate)."""
        if self.mtls:
            return f'security_protocol = "SSL"\n{self._tls_toml(KRM_USER)}'
        if mechanism == "OAUTHBEARER":
            raise ValueError("OAUTHBEARER's krm.toml needs the token endpoint's URL: oauth_config_toml(url)")
        return (f'security_protocol = "SASL_SSL"\nsasl_mechanism = "{mechanism}"\nsasl_username = "{KRM_USER}"\n'
                f'sasl_password_file = "{self.password_file(KRM_USER)}"\nssl_cafile = "{self.ca_file}"\n')


    def oauth_config_toml(self, token_endpoint_url: str, client_id: str = KRM_USER) -> str:
        """`[clusters.security]` for OAUTHBEARER with tokens from the local identity provider."""
        return (f'security_protocol = "SASL_SSL"\nsasl_mechanism = "OAUTHBEARER"\n'
                f'sasl_oauth_token_endpoint_url = "{token_endpoint_url}"\nsasl_oauth_client_id = "{client_id}"\n'
                f'sasl_oauth_client_secret_file = "{self.password_file(f"oauth-{client_id}")}"\n'
                f'ssl_cafile = "{self.ca_file}"\n')

    def _tls_toml(self, user: str) -> str:
        return (f'ssl_cafile = "{self.ca_file}"\nssl_certfile = "{self.certfile(user)}"\n'
                f'ssl_keyfile = "{self.keyfile(user)}"\n')


def grant_krm_acls(admin: Any, acls: tuple[tuple[str, str, str, str], ...] = KRM_ACLS, user: str = KRM_USER) -> None:
    """Create krm's ACLs through an Admin client of a super user; raises if the broker refuses any."""
    from kafka.admin import ACL, ACLPermissionType, ResourcePattern

    result = admin.create_acls([ACL(f"User:{user}", "*", _op(op), ACLPermissionType.ALLOW,
                                    ResourcePattern(_rtype(rtype), name, _ptype(ptype)))
                                for rtype, name, ptype, op in acls])
    if result.get("failed"):
        raise ClusterError(f"creating krm's ACLs failed: {result['failed']}")


def revoke_acl(admin: Any, rtype: str, name: str, ptype: str, op: str, user: str = KRM_USER) -> None:
    from kafka.admin import ACLFilter, ACLPermissionType, ResourcePatternFilter

    admin.delete_acls([ACLFilter(f"User:{user}", "*", _op(op), ACLPermissionType.ALLOW,
                                 ResourcePatternFilter(_rtype(rtype), name, _ptype(ptype)))])


def _op(name: str) -> Any:
    from kafka.admin import ACLOperation

    return ACLOperation[name]


def _rtype(name: str) -> Any:
    from kafka.admin import ResourceType

    return ResourceType[name]


def _ptype(name: str) -> Any:
    from kafka.admin import ACLResourcePatternType

    return ACLResourcePatternType[name]


def _write_private(path: Path, text: str) -> None:
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w") as f:
        f.write(text + "\n")


def _ca() -> tuple[Any, Any]:
    from cryptography import x509
    from cryptography.hazmat.primitives import hashes
    from cryptography.hazmat.primitives.asymmetric import ec
    from cryptography.x509.oid import NameOID

    key = ec.generate_private_key(ec.SECP256R1())
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "krm local-cluster CA")])
    now = dt.datetime.now(dt.timezone.utc)
    cert = (x509.CertificateBuilder().subject_name(name).issuer_name(name).public_key(key.public_key())
            .serial_number(x509.random_serial_number()).not_valid_before(now - dt.timedelta(minutes=5))
            .not_valid_after(now + dt.timedelta(days=365))
            .add_extension(x509.BasicConstraints(ca=True, path_length=0), critical=True)
            .add_extension(x509.KeyUsage(digital_signature=True, key_cert_sign=True, crl_sign=True,
                                         content_commitment=False, key_encipherment=False, data_encipherment=False,
                                         key_agreement=False, encipher_only=False, decipher_only=False), critical=True)
            .sign(key, hashes.SHA256()))
    return key, cert


def _signed_cert(ca_key: Any, ca_cert: Any, cn: str, server: bool) -> tuple[Any, Any]:
    """A key and a certificate for CN=`cn` signed by the CA: a server's (valid for 127.0.0.1 and
    localhost, usable both ways: brokers are each other's clients) or a client's."""
    from cryptography import x509
    from cryptography.hazmat.primitives import hashes
    from cryptography.hazmat.primitives.asymmetric import ec
    from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

    key = ec.generate_private_key(ec.SECP256R1())
    now = dt.datetime.now(dt.timezone.utc)
    cert = (x509.CertificateBuilder()
            .subject_name(x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, cn)]))
            .issuer_name(ca_cert.subject).public_key(key.public_key()).serial_number(x509.random_serial_number())
            .not_valid_before(now - dt.timedelta(minutes=5)).not_valid_after(now + dt.timedelta(days=365)))
    usages = [ExtendedKeyUsageOID.SERVER_AUTH, ExtendedKeyUsageOID.CLIENT_AUTH] if server else [
        ExtendedKeyUsageOID.CLIENT_AUTH]
    if server:
        cert = cert.add_extension(x509.SubjectAlternativeName([x509.DNSName("localhost"),
                                                               x509.IPAddress(ipaddress.ip_address("127.0.0.1"))]),
                                  critical=False)
    return key, cert.add_extension(x509.ExtendedKeyUsage(usages), critical=False).sign(ca_key, hashes.SHA256())
