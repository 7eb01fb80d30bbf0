"""What `krm local-cluster up --security sasl_ssl` adds to a local cluster: a certificate authority of
its own, a broker certificate it signed, users and passwords for SCRAM-SHA-512 and PLAIN (one SASL_SSL
listener takes both), and the ACLs of krm's least-privilege principal.

Users: `admin` (the brokers' inter-broker principal and the only super user) and `krm` (what the
monitor connects as, holding exactly `KRM_ACLS`, the minimum the README documents). Passwords are
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
    def zk_server_jaas(self) -> Path:
        return self.dir / "zookeeper-server.jaas"

    @property
    def zk_client_jaas(self) -> Path:
        """What the brokers and Kafka's tools log in to ZooKeeper with (as ZK_BROKER_USER)."""
        return self.dir / "zookeeper-client.jaas"

    # zoo.cfg lines: every session must authenticate with SASL (ZooKeeper 3.7+'s enforce.auth)
    ZOO_CFG = ("authProvider.sasl=org.apache.zookeeper.server.auth.SASLAuthenticationProvider",
               "enforce.auth.enabled=true", "enforce.auth.schemes=sasl")

    def zookeeper_toml(self) -> str:
        """`[clusters.zookeeper_security]` body: krm's SASL digest user in ZooKeeper."""
        return f'sasl_username = "{KRM_USER}"\nsasl_password_file = "{self.password_file(f"zk-{KRM_USER}")}"\n'

    def kazoo_kwargs(self, user: str = ZK_BROKER_USER) -> dict[str, Any]:
        return {"sasl_options": {"mechanism": "DIGEST-MD5", "username": user, "password": self.password(f"zk-{user}")}}

    def password_file(self, user: str) -> Path:
        return self.dir / f"{user}.password"

    def password(self, user: str) -> str:
        return self.password_file(user).read_text().strip()

    def create(self) -> None:
        """CA, broker key and certificate (valid for 127.0.0.1 and localhost), PKCS12 keystore, passwords."""
        self.dir.mkdir(mode=0o700, parents=True, exist_ok=True)
        for user in (ADMIN_USER, KRM_USER, "keystore", f"zk-{ZK_BROKER_USER}", f"zk-{KRM_USER}", "jmx"):
            _write_private(self.password_file(user), secrets.token_urlsafe(24))
        # ZooKeeper's side (DigestLoginModule: the users and their passwords) and its clients' side
        users = " ".join(f'user_{u}="{self.password(f"zk-{u}")}"' for u in (ZK_BROKER_USER, KRM_USER))
        _write_private(self.zk_server_jaas, "Server {\n  org.apache.zookeeper.server.auth.DigestLoginModule required "
                                            f"{users};\n}};")
        broker_pw = self.password(f"zk-{ZK_BROKER_USER}")
        _write_private(self.zk_client_jaas, "Client {\n  org.apache.zookeeper.server.auth.DigestLoginModule required "
                                            f'username="{ZK_BROKER_USER}" password="{broker_pw}";\n}};')
        ca_key, ca_cert = _ca()
        key, cert = _server_cert(ca_key, ca_cert)
        from cryptography.hazmat.primitives import serialization
        from cryptography.hazmat.primitives.serialization import pkcs12

        self.ca_file.write_bytes(ca_cert.public_bytes(serialization.Encoding.PEM))
        self.keystore.write_bytes(pkcs12.serialize_key_and_certificates(
            b"broker", key, cert, [ca_cert],
            serialization.BestAvailableEncryption(self.password("keystore").encode())))
        os.chmod(self.keystore, 0o600)
        self._write_jmx_exporter_config()

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

    def listener_properties(self, listener: str) -> dict[str, str]:
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
            "ssl.keystore.type": "PKCS12",
            "ssl.keystore.location": str(self.keystore),
            "ssl.keystore.password": self.password("keystore"),
            "ssl.truststore.type": "PEM",
            "ssl.truststore.location": str(self.ca_file),
        }

    def client_kwargs(self, user: str = KRM_USER) -> dict[str, Any]:
        """kafka-python keyword arguments for a client of this cluster (the `up --json` contract)."""
        return {"security_protocol": "SASL_SSL", "sasl_mechanism": MECHANISM, "sasl_plain_username": user,
                "sasl_plain_password": self.password(user), "ssl_cafile": str(self.ca_file)}

    def scram_format_args(self) -> list[str]:
        """KRaft: SCRAM credentials written into the metadata log when the storage is formatted (KIP-900)."""
        out = []
        for user in (ADMIN_USER, KRM_USER):
            out += ["--add-scram", f"{MECHANISM}=[name={user},password={self.password(user)}]"]
        return out

    def config_toml(self, mechanism: str = MECHANISM) -> str:
        """The `[clusters.security]`-style table body krm.toml gets: paths, never the password
        (`mechanism` SCRAM-SHA-512 or PLAIN: the listener takes both)."""
        return (f'security_protocol = "SASL_SSL"\nsasl_mechanism = "{mechanism}"\nsasl_username = "{KRM_USER}"\n'
                f'sasl_password_file = "{self.password_file(KRM_USER)}"\nssl_cafile = "{self.ca_file}"\n')


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


def _server_cert(ca_key: Any, ca_cert: Any) -> tuple[Any, Any]:
    from cryptography import x509
    from cryptography.hazmat.primitives import hashes
    from cryptography.hazmat.primitives.asymmetric import ec
    from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

    key = ec.generate_private_key(ec.SECP256R1())
    now = dt.datetime.now(dt.timezone.utc)
    cert = (x509.CertificateBuilder()
            .subject_name(x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "localhost")]))
            .issuer_name(ca_cert.subject).public_key(key.public_key()).serial_number(x509.random_serial_number())
            .not_valid_before(now - dt.timedelta(minutes=5)).not_valid_after(now + dt.timedelta(days=365))
            .add_extension(x509.SubjectAlternativeName([x509.DNSName("localhost"),
                                                        x509.IPAddress(ipaddress.ip_address("127.0.0.1"))]),
                           critical=False)
            .add_extension(x509.ExtendedKeyUsage([ExtendedKeyUsageOID.SERVER_AUTH, ExtendedKeyUsageOID.CLIENT_AUTH]),
                           critical=False)
            .sign(ca_key, hashes.SHA256()))
    return key, cert
