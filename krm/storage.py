"""Where the Delta tables and checkpoints live: a local folder or an object store / HDFS URI.

`[pipeline] data_dir` is a path (relative to the config file), a `file://` URI, or an `s3a://bucket/
prefix` (any S3-compatible store: AWS, MinIO, Ceph; settings in `[pipeline.storage]`) or
`hdfs://namenode/path` URI. Spark reads and writes through Hadoop's file systems (the S3A connector
is in the pinned `objectstore` jars; PySpark's own Hadoop client holds HDFS); the tools that read the
tables without Spark (`krm incidents`, `krm lag`, `krm maintain`, the incident store, the data-quality
thread) use delta-rs with the matching storage options. One `Location` carries both views.

Object stores and Delta: every table has one writer (Spark writes the history tables, delta-rs the
incidents and data-quality tables), so neither side needs a commit lock; delta-rs is told so
(`AWS_S3_ALLOW_UNSAFE_RENAME`). `krm maintain` is a second writer: on an object store run it with the
pipeline stopped. Credentials come from `[pipeline.storage]` files or environment variables, else
the standard AWS chain (environment, profile, instance role) on both sides.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import urlparse

from krm.errors import ConfigError

REMOTE_SCHEMES = ("s3a", "hdfs")
_AZURE = "hadoop-azure is not among krm's pinned jars"
_S3 = "use s3a:// (Hadoop's S3 connector)"
WHY_NOT = {"abfss": _AZURE, "abfs": _AZURE, "wasbs": _AZURE, "gs": "gcs-connector is not among krm's pinned jars",
           "s3": _S3, "s3n": _S3}


@dataclass(frozen=True)
class StorageConfig:
    """`[pipeline.storage]`: how to reach an s3a:// data_dir (empty for AWS with the default chain)."""

    endpoint: str | None = None  # http(s)://host:port of an S3-compatible store; None: AWS itself
    region: str | None = None
    path_style_access: bool = False  # bucket in the path, not the host name (MinIO, Ceph, moto)
    access_key_id: Any = None  # krm.security.Secret
    secret_access_key: Any = None  # krm.security.Secret

    def spark_conf(self) -> dict[str, str]:
        """Hadoop S3A settings for the Spark session (`spark.hadoop.fs.s3a.*`)."""
        conf: dict[str, str] = {}
        if self.endpoint:
            conf["spark.hadoop.fs.s3a.endpoint"] = self.endpoint
            conf["spark.hadoop.fs.s3a.connection.ssl.enabled"] = str(self.endpoint.startswith("https")).lower()
        if self.region:
            conf["spark.hadoop.fs.s3a.endpoint.region"] = self.region
        if self.path_style_access:
            conf["spark.hadoop.fs.s3a.path.style.access"] = "true"
        if self.access_key_id is not None and self.secret_access_key is not None:
            conf["spark.hadoop.fs.s3a.aws.credentials.provider"] = \
                "org.apache.hadoop.fs.s3a.SimpleAWSCredentialsProvider"
            conf["spark.hadoop.fs.s3a.access.key"] = self.access_key_id.read()
            conf["spark.hadoop.fs.s3a.secret.key"] = self.secret_access_key.read()
        return conf

    def delta_options(self) -> dict[str, str]:
        """delta-rs (object_store) options for the same bucket."""
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
        return self.storage.delta_options() if self.uri.startswith("s3a://") else {}

    def is_table(self) -> bool:
        """A Delta table is there (a missing table is no history yet, not an error)."""
        if self.is_local:
            return (self.path / "_delta_log").is_dir()
        from deltalake import DeltaTable

        return DeltaTable.is_deltatable(self.delta_uri, storage_options=self.options())

    def table(self) -> Any:
        from deltalake import DeltaTable

        return DeltaTable(self.delta_uri, storage_options=self.options() or None)

    def write(self, data: Any, **kwargs: Any) -> None:
        from deltalake import write_deltalake

        if self.is_local:
            self.path.mkdir(parents=True, exist_ok=True)
        write_deltalake(self.delta_uri, data, storage_options=self.options() or None, **kwargs)


def parse_data_dir(where: str, value: str, base: Path | None, storage: StorageConfig) -> Location:
    """`data_dir` as a Location; a scheme krm cannot write is refused by name."""
    if "://" not in value:
        p = Path(value).expanduser()
        if not p.is_absolute() and base is not None:
            p = base / p
        return Location(str(p), storage)
    uri = urlparse(value)
    if uri.scheme == "file":
        return Location(uri.path, storage)
    if uri.scheme in REMOTE_SCHEMES:
        if not uri.netloc:
            raise ConfigError(f"{where}: [pipeline] data_dir {value!r} names no bucket or namenode")
        return Location(value.rstrip("/"), storage)
    why = f" ({WHY_NOT[uri.scheme]})" if uri.scheme in WHY_NOT else ""
    raise ConfigError(f"{where}: [pipeline] data_dir {value!r}: {uri.scheme}:// is not supported{why}; "
                      "use a local path, file://, s3a:// or hdfs://")


def parse_storage(where: str, t: Any) -> StorageConfig:
    """`[pipeline.storage]`."""
    from krm.security import _secret, _table

    if t is None:
        return StorageConfig()
    _table(where, "[pipeline.storage]", t, {"endpoint", "region", "path_style_access", "access_key_id_file",
                                            "access_key_id_env", "secret_access_key_file", "secret_access_key_env"})
    endpoint = t.get("endpoint")
    if endpoint is not None and (not isinstance(endpoint, str) or not endpoint.startswith(("http://", "https://"))):
        raise ConfigError(f"{where}: [pipeline.storage] endpoint must be an http:// or https:// URL, got {endpoint!r}")
    region = t.get("region")
    if region is not None and (not isinstance(region, str) or not region.strip()):
        raise ConfigError(f"{where}: [pipeline.storage] region must be a region name such as us-east-1")
    path_style = t.get("path_style_access", False)
    if not isinstance(path_style, bool):
        raise ConfigError(f"{where}: [pipeline.storage] path_style_access must be true or false")
    key = _secret(where, "[pipeline.storage]", t, "access_key_id")
    secret = _secret(where, "[pipeline.storage]", t, "secret_access_key")
    if (key is None) != (secret is None):
        raise ConfigError(f"{where}: [pipeline.storage] give both access_key_id_* and secret_access_key_* "
                          "(or neither, for the default AWS credential chain)")
    for s in (key, secret):
        if s is not None:
            s.check(f"{where}: [pipeline.storage]")
    return StorageConfig(endpoint.rstrip("/") if endpoint else None, region.strip() if region else None,
                         path_style, key, secret)


def as_location(x: Location | Path | str) -> Location:
    """A Location from a Location, a local path, or a URI string (tests and tools pass paths)."""
    if isinstance(x, Location):
        return x
    text = str(x)
    return Location(text.rstrip("/") if "://" in text else str(Path(text)))
