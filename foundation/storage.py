"""Where the Delta tables and checkpoints live: a local folder or an object store / HDFS URI.

`[pipeline] data_dir` is a path (relative to the config file), a `file://` URI, or one of
- `s3a://bucket/prefix`: AWS S3 or any S3-compatible store (MinIO, Ceph), Hadoop's S3A connector;
- `abfss://container@account.dfs.core.windows.net/prefix`: Azure (ADLS Gen2 / Blob storage),
  hadoop-azure's ABFS connector;
- `gs://bucket/prefix`: Google Cloud Storage, Google's Cloud Storage connector;
- `hdfs://namenode:port/path`: PySpark's own Hadoop client.
Spark reads and writes through those Hadoop file systems (the connectors are the pinned `objectstore`
jars); the tools that read the tables without Spark (`krm incidents`, `krm lag`, `krm maintain`, the
incident store, the data-quality thread) use delta-rs with the matching storage options. One
`Location` carries both views; `[pipeline.storage]` holds the endpoint and credentials and turns
into Hadoop settings (`spark_conf`) and delta-rs options (`delta_options`) for the data_dir's scheme.

Object stores and Delta: every table has one writer (Spark writes the history tables, delta-rs the
incidents and data-quality tables), so neither side needs a commit lock; delta-rs is told so on S3
(`AWS_S3_ALLOW_UNSAFE_RENAME`; Azure and GCS have atomic put-if-absent). `krm maintain` is a second
writer: on an object store run it with the pipeline stopped. Without credentials in the config both
sides use the cloud's default chain: AWS's (environment, profile, instance role), Azure's managed
identity, Google's application-default credentials.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import urlparse

from pydantic import field_validator, model_validator

from foundation.security import Secret, check_secret, check_secret_file, secret_of
from foundation.settings import EnvName, File, Table, Text, checked

REMOTE_SCHEMES = ("s3a", "abfss", "gs", "hdfs")
_AZURE = "use abfss://container@account.dfs.core.windows.net/path (hadoop-azure's ABFS connector, TLS)"
_S3 = "use s3a:// (Hadoop's S3 connector)"
WHY_NOT = {"abfs": _AZURE, "wasbs": _AZURE, "wasb": _AZURE, "s3": _S3, "s3n": _S3, "gcs": "use gs://"}

# Which [pipeline.storage] keys apply to which data_dir scheme (a key for another store is refused).
S3_KEYS = ("region", "path_style_access", "access_key_id", "secret_access_key")
AZURE_KEYS = ("azure_account_key", "azure_client_id", "azure_tenant_id", "azure_client_secret")
GCS_KEYS = ("gcs_service_account_key_file",)
KEYS_OF = {"s3a": ("endpoint",) + S3_KEYS, "abfss": AZURE_KEYS, "gs": ("endpoint",) + GCS_KEYS, "hdfs": ()}

_GCS_FS = "com.google.cloud.hadoop.fs.gcs.GoogleHadoopFileSystem"
_GCS_AFS = "com.google.cloud.hadoop.fs.gcs.GoogleHadoopFS"
_ABFS_OAUTH = "org.apache.hadoop.fs.azurebfs.oauth2."


def scheme_of(uri: str) -> str:
    return uri.split("://", 1)[0] if "://" in uri else ""


def azure_host(uri: str) -> str:
    """`account.dfs.core.windows.net` of abfss://container@account.dfs.core.windows.net/path."""
    return urlparse(uri).netloc.rsplit("@", 1)[-1]


class StorageConfig(Table):
    """`[pipeline.storage]`: how to reach an object-store data_dir (all optional: the cloud's default
    credential chain otherwise)."""

    endpoint: Text | None = None  # http(s)://host:port of an S3-compatible store or a GCS emulator
    region: Text | None = None  # s3a://: the bucket's region, such as us-east-1
    path_style_access: bool = False  # bucket in the path, not the host name (MinIO, Ceph, moto)
    access_key_id_file: File | None = None
    access_key_id_env: EnvName | None = None
    secret_access_key_file: File | None = None
    secret_access_key_env: EnvName | None = None
    azure_account_key_file: File | None = None  # the storage account's shared key
    azure_account_key_env: EnvName | None = None
    azure_client_id: Text | None = None  # a service principal (with azure_tenant_id, azure_client_secret)
    azure_tenant_id: Text | None = None
    azure_client_secret_file: File | None = None
    azure_client_secret_env: EnvName | None = None
    gcs_service_account_key_file: File | None = None  # a service account's JSON key

    @field_validator("endpoint")
    @classmethod
    def _url(cls, value: str | None) -> str | None:
        if value is not None and not value.startswith(("http://", "https://")):
            raise ValueError(f"must be an http:// or https:// URL, got {value!r}")
        return value.rstrip("/") if value else value

    @model_validator(mode="after")
    def _credentials(self) -> StorageConfig:
        if (self.access_key_id is None) != (self.secret_access_key is None):
            raise ValueError("give both access_key_id_* and secret_access_key_* (or neither, for the default AWS "
                             "credential chain)")
        principal = (self.azure_client_id, self.azure_tenant_id, self.azure_client_secret)
        if any(x is not None for x in principal) and any(x is None for x in principal):
            raise ValueError("a service principal needs azure_client_id, azure_tenant_id and azure_client_secret_*")
        if self.azure_account_key is not None and self.azure_client_secret is not None:
            raise ValueError("give azure_account_key_* or a service principal, not both")
        for prefix in ("access_key_id", "secret_access_key", "azure_account_key", "azure_client_secret"):
            check_secret(self, prefix)
        if self.gcs_service_account_key_file is not None:
            checked(check_secret_file, self.gcs_service_account_key_file, "gcs_service_account_key_file")
        return self

    @property
    def access_key_id(self) -> Secret | None:
        return secret_of(self, "access_key_id")

    @property
    def secret_access_key(self) -> Secret | None:
        return secret_of(self, "secret_access_key")

    @property
    def azure_account_key(self) -> Secret | None:
        return secret_of(self, "azure_account_key")

    @property
    def azure_client_secret(self) -> Secret | None:
        return secret_of(self, "azure_client_secret")

    def given(self) -> list[str]:
        """The keys set in the config (for the scheme check)."""
        defaults = StorageConfig()
        return [k for k in KEYS_OF["s3a"] + AZURE_KEYS + GCS_KEYS if getattr(self, k) != getattr(defaults, k)]

    def spark_conf(self, uri: str) -> dict[str, str]:
        """Hadoop settings for the Spark session (`spark.hadoop.fs.*`) for a data_dir at `uri`."""
        scheme = scheme_of(uri)
        conf = (self._s3a_conf() if scheme == "s3a" else self._abfs_conf(azure_host(uri)) if scheme == "abfss"
                else self._gcs_conf() if scheme == "gs" else {})
        return {f"spark.hadoop.{k}": v for k, v in conf.items()}

    def delta_options(self, uri: str) -> dict[str, str]:
        """delta-rs (object_store) options for the same store."""
        scheme = scheme_of(uri)
        if scheme == "s3a":
            return self._s3_options()
        if scheme == "abfss":
            return self._azure_options(azure_host(uri))
        if scheme == "gs":
            return {"GOOGLE_SERVICE_ACCOUNT": str(self.gcs_service_account_key_file)} \
                if self.gcs_service_account_key_file else {}
        return {}

    def _s3a_conf(self) -> dict[str, str]:
        conf: dict[str, str] = {}
        if self.endpoint:
            conf["fs.s3a.endpoint"] = self.endpoint
            conf["fs.s3a.connection.ssl.enabled"] = str(self.endpoint.startswith("https")).lower()
        if self.region:
            conf["fs.s3a.endpoint.region"] = self.region
        if self.path_style_access:
            conf["fs.s3a.path.style.access"] = "true"
        if self.access_key_id is not None and self.secret_access_key is not None:
            conf["fs.s3a.aws.credentials.provider"] = "org.apache.hadoop.fs.s3a.SimpleAWSCredentialsProvider"
            conf["fs.s3a.access.key"] = self.access_key_id.read()
            conf["fs.s3a.secret.key"] = self.secret_access_key.read()
        return conf

    def _s3_options(self) -> dict[str, str]:
        opts = {"AWS_S3_ALLOW_UNSAFE_RENAME": "true"}  # one writer per table: see the module docstring
        if self.endpoint:
            opts["AWS_ENDPOINT_URL"] = self.endpoint
            if self.endpoint.startswith("http://"):
                opts["AWS_ALLOW_HTTP"] = "true"
        if self.region:
            opts["AWS_REGION"] = self.region
        if self.path_style_access:
            opts["AWS_VIRTUAL_HOSTED_STYLE_REQUEST"] = "false"
        if self.access_key_id is not None and self.secret_access_key is not None:
            opts["AWS_ACCESS_KEY_ID"] = self.access_key_id.read()
            opts["AWS_SECRET_ACCESS_KEY"] = self.secret_access_key.read()
        return opts

    def _abfs_conf(self, host: str) -> dict[str, str]:
        """Per-account ABFS settings (org.apache.hadoop.fs.azurebfs.constants.ConfigurationKeys):
        the shared key, else a service principal, else the VM's managed identity."""
        if self.azure_account_key is not None:
            return {f"fs.azure.account.key.{host}": self.azure_account_key.read()}
        conf = {f"fs.azure.account.auth.type.{host}": "OAuth"}
        if self.azure_client_secret is not None:
            conf[f"fs.azure.account.oauth.provider.type.{host}"] = _ABFS_OAUTH + "ClientCredsTokenProvider"
            conf[f"fs.azure.account.oauth2.client.id.{host}"] = str(self.azure_client_id)
            conf[f"fs.azure.account.oauth2.client.secret.{host}"] = self.azure_client_secret.read()
            conf[f"fs.azure.account.oauth2.client.endpoint.{host}"] = \
                f"https://login.microsoftonline.com/{self.azure_tenant_id}/oauth2/token"
        else:
            conf[f"fs.azure.account.oauth.provider.type.{host}"] = _ABFS_OAUTH + "MsiTokenProvider"
        return conf

    def _azure_options(self, host: str) -> dict[str, str]:
        opts = {"AZURE_STORAGE_ACCOUNT_NAME": host.split(".", 1)[0]}
        if self.azure_account_key is not None:
            opts["AZURE_STORAGE_ACCOUNT_KEY"] = self.azure_account_key.read()
        elif self.azure_client_secret is not None:
            opts |= {"AZURE_CLIENT_ID": str(self.azure_client_id), "AZURE_TENANT_ID": str(self.azure_tenant_id),
                     "AZURE_CLIENT_SECRET": self.azure_client_secret.read()}
        return opts

    def _gcs_conf(self) -> dict[str, str]:
        """The GCS connector is not in Hadoop's core-default.xml: its classes are named here."""
        conf = {"fs.gs.impl": _GCS_FS, "fs.AbstractFileSystem.gs.impl": _GCS_AFS}
        if self.endpoint:
            conf["fs.gs.storage.root.url"] = self.endpoint + "/"
        if self.gcs_service_account_key_file:
            conf["fs.gs.auth.type"] = "SERVICE_ACCOUNT_JSON_KEYFILE"
            conf["fs.gs.auth.service.account.json.keyfile"] = str(self.gcs_service_account_key_file)
        else:
            conf["fs.gs.auth.type"] = "APPLICATION_DEFAULT"
        return conf


@dataclass(frozen=True)
class Location:
    """A folder or table: `str()` is what Spark takes, `delta_uri` + `options()` what delta-rs takes."""

    uri: str  # an absolute local path, or scheme://authority/path without a trailing slash
    storage: StorageConfig = field(default_factory=StorageConfig, compare=False)

    @property
    def is_local(self) -> bool:
        return "://" not in self.uri

    @property
    def path(self) -> Path:
        if not self.is_local:
            raise ValueError(f"{self.uri} is not a local path")
        return Path(self.uri)

    @property
    def name(self) -> str:
        return self.uri.rstrip("/").rsplit("/", 1)[-1]

    def __truediv__(self, part: str) -> Location:
        return Location(str(Path(self.uri) / part) if self.is_local else f"{self.uri}/{part}", self.storage)

    def __str__(self) -> str:
        return self.uri

    @property
    def delta_uri(self) -> str:
        return "s3://" + self.uri[len("s3a://"):] if self.uri.startswith("s3a://") else self.uri

    def options(self) -> dict[str, str]:
        return self.storage.delta_options(self.uri)

    def is_table(self) -> bool:
        """A Delta table is there (a missing table is no history yet, not an error)."""
        if self.is_local:  # a commit, not just the folder: a writer killed before its first commit leaves one
            log_dir = self.path / "_delta_log"
            return log_dir.is_dir() and any(p.suffix == ".json" or p.name.endswith(".checkpoint.parquet")
                                            for p in log_dir.iterdir())
        from deltalake import DeltaTable

        return DeltaTable.is_deltatable(self.delta_uri, storage_options=self.options())

    def table(self) -> Any:
        from deltalake import DeltaTable

        return DeltaTable(self.delta_uri, storage_options=self.options() or None)

    def dataset(self, table: Any | None = None) -> Any:
        """The Delta table as a pyarrow dataset whose files are pruned by their partition values only,
        for readers that filter (krm sql, krm timeline, the console). delta-rs' own `to_pyarrow_dataset()` also
        turns each file's statistics into a guarantee, and Spark records no min/max for a boolean
        column: delta-rs then guarantees `col >= null AND col <= null`, and any predicate on that
        column (`changed = true`) drops every file Spark wrote (deltalake 1.6.6, tests/spark/
        test_history_tables.py). Row groups are still skipped by the Parquet files' own statistics."""
        import urllib.parse

        import pyarrow as pa
        import pyarrow.dataset as ds

        table = table or self.table()
        whole = table.to_pyarrow_dataset()
        cols = list(table.metadata().partition_columns)
        adds = table.get_add_actions(flatten=True)
        paths = [urllib.parse.unquote(str(p)) for p in adds.column("path").to_pylist()]
        values = [adds.column(f"partition.{c}").to_pylist() for c in cols]
        fragments = []
        for i, path in enumerate(paths):
            expr = None
            for c, vs in zip(cols, values):
                v = vs[i]
                # a typed literal (not a cast): the scan fills the column from it
                term = ds.field(c).is_null() if v is None else ds.field(c) == pa.scalar(v, whole.schema.field(c).type)
                expr = term if expr is None else expr & term
            fragments.append(whole.format.make_fragment(path, whole.filesystem,
                                                        partition_expression=ds.scalar(True) if expr is None else expr))
        return ds.FileSystemDataset(fragments, whole.schema, whole.format, whole.filesystem)

    def write(self, data: Any, **kwargs: Any) -> None:
        from deltalake import write_deltalake

        if self.is_local:
            self.path.mkdir(parents=True, exist_ok=True)
        write_deltalake(self.delta_uri, data, storage_options=self.options() or None, **kwargs)


def parse_data_dir(value: str, base: Path | None, storage: StorageConfig) -> Location:
    """`data_dir` as a Location; a scheme krm cannot write is refused by name (ValueError, for validation)."""
    if "://" not in value:
        p = Path(value).expanduser()
        if not p.is_absolute() and base is not None:
            p = base / p
        return _local(str(p), storage)
    uri = urlparse(value)
    if uri.scheme == "file":
        return _local(uri.path, storage)
    if uri.scheme in REMOTE_SCHEMES:
        if not uri.netloc:
            raise ValueError(f"[pipeline] data_dir {value!r} names no bucket or namenode")
        if uri.scheme == "abfss" and ("@" not in uri.netloc or ".dfs." not in uri.netloc):
            raise ValueError(f"[pipeline] data_dir {value!r}: an Azure URI names the container and the account's "
                             "dfs endpoint: abfss://container@account.dfs.core.windows.net/path")
        foreign = [k for k in storage.given() if k not in KEYS_OF[uri.scheme]]
        if foreign:
            usable = ", ".join(KEYS_OF[uri.scheme]) or "none"
            raise ValueError(f"[pipeline.storage] {', '.join(foreign)}: not used with a data_dir on {uri.scheme}:// "
                             f"(its keys: {usable})")
        return Location(value.rstrip("/"), storage)
    why = f" ({WHY_NOT[uri.scheme]})" if uri.scheme in WHY_NOT else ""
    raise ValueError(f"[pipeline] data_dir {value!r}: {uri.scheme}:// is not supported{why}; "
                     "use a local path, file://, s3a://, abfss://, gs:// or hdfs://")


def _local(path: str, storage: StorageConfig) -> Location:
    if storage.given():
        raise ValueError(f"[pipeline.storage] {', '.join(storage.given())} apply to an object-store data_dir only; "
                         f"data_dir is the local folder {path}")
    return Location(path, storage)


def as_location(x: Location | Path | str) -> Location:
    """A Location from a Location, a local path, or a URI string (tests and tools pass paths)."""
    if isinstance(x, Location):
        return x
    text = str(x)
    return Location(text.rstrip("/") if "://" in text else str(Path(text)))
