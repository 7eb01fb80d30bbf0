"""Typed configuration, loaded once from a TOML file and validated before anything connects.

Errors name the file and the key, e.g. `krm.toml: [collector] poll_interval_s must be > 0`.
"""

from __future__ import annotations

import re
import tomllib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from foundation.errors import ConfigError
from foundation.security import (
    HttpSecurity,
    KafkaSecurity,
    ZooKeeperSecurity,
    parse_http_security,
    parse_kafka_security,
    parse_zookeeper_security,
)
from foundation.storage import Location, StorageConfig, parse_data_dir, parse_storage
from foundation.web_config import load_web_config

_NAME = re.compile(r"^[A-Za-z0-9._-]+$")


def setting(default: Any, minimum: float | None = None, maximum: float | None = None) -> Any:
    """A numeric setting: its default and bounds, declared once; the parser reads both from here."""
    return field(default=default, metadata={"minimum": minimum, "maximum": maximum})


def default_of(cls: type, name: str) -> Any:
    """The declared default of a setting (what other modules' own defaults follow)."""
    return cls.__dataclass_fields__[name].default  # type: ignore[attr-defined]


@dataclass(frozen=True)
class ClusterConfig:
    """One monitored Kafka cluster."""

    name: str
    bootstrap_servers: str
    zookeeper: str | None = None  # host:port[/chroot], ZooKeeper-mode clusters only
    jmx_exporter_urls: tuple[tuple[int, str], ...] = ()  # (broker id, http://host:port/metrics)
    security: KafkaSecurity = KafkaSecurity()  # [clusters.security]
    canary: bool = False  # produce/consume canary (collectors/canary.py)
    canary_topic: str = "krm.canary"
    zookeeper_security: ZooKeeperSecurity | None = None  # [clusters.zookeeper_security]
    jmx_security: HttpSecurity | None = None  # [clusters.jmx_security]


@dataclass(frozen=True)
class ObservationsConfig:
    """The Kafka topic the collectors publish to and the pipeline reads.

    Production: a separate, healthy Kafka cluster, so the monitor still works while the monitored
    cluster is broken. Locally it may be the monitored cluster itself.
    """

    bootstrap_servers: str
    topic: str = "krm.observations"
    partitions: int = setting(1, minimum=1)
    replication_factor: int | None = None  # default: min(3, brokers) of the observations cluster
    security: KafkaSecurity = KafkaSecurity()  # [observations.security]; default: the first cluster's when
    # bootstrap_servers is not given either (the observations then live on that cluster)


@dataclass(frozen=True)
class CollectorConfig:
    poll_interval_s: float = setting(2.0, minimum=0.05)
    config_refresh_s: float = setting(30.0, minimum=0.0)  # topic configs change rarely; refreshed on new topics too
    request_timeout_ms: int = setting(2000, minimum=100)  # per broker asked (metadata, configs); then the next broker
    offsets_timeout_ms: int = setting(1000, minimum=50)  # how long a poll waits for brokers' offsets; later = unreachable
    spool_max_mb: float = setting(64.0, minimum=0.001)  # records kept while the observations topic is unreachable
    jmx_interval_s: float = setting(10.0, minimum=0.1)  # JMX exporter scrapes (clusters with jmx_exporter_urls)
    assignment_snapshot_s: float = setting(600.0, minimum=1.0)  # every topic's assignment recorded this often (and on change)
    # clusters without ZooKeeper watches: brokers-only Metadata between polls; 0: off
    broker_check_s: float = setting(0.2, minimum=0.0)
    # a broker silent (timeouts) this long makes its partitions unavailable
    unreachable_after_s: float = setting(4.0, minimum=0.0)
    canary_interval_s: float = setting(5.0, minimum=0.5)  # clusters with `canary = true`: a write + read-back round this often
    # a canary write not acknowledged (and read back) within this fails the round
    canary_timeout_ms: int = setting(3000, minimum=100)
    canary_replication_factor: int = setting(3, minimum=1)  # of the canary topic, at most the number of brokers
    # `krm collect`'s own /metrics; -1: [pipeline] metrics_port + 1, so both halves run on one host with one file
    metrics_port: int = setting(-1, minimum=-1, maximum=65535)

    def serve_port(self, pipeline_port: int) -> int:
        """The port `krm collect` serves on (0: any free port)."""
        if self.metrics_port >= 0:
            return self.metrics_port
        return pipeline_port + 1 if 0 < pipeline_port < 65535 else 0


@dataclass(frozen=True)
class PipelineConfig:
    data_dir: Location  # a local folder, or an s3a://, abfss://, gs:// or hdfs:// URI (foundation/storage.py)
    metrics_host: str = "127.0.0.1"
    metrics_port: int = setting(9308, minimum=0, maximum=65535)
    web_config_file: Path | None = None  # /metrics TLS and basic auth (Prometheus exporter-toolkit format)
    console_url: str = ""  # the console as operators reach it (alerts link to it); "": the /metrics address
    spark_master: str = "local[2,4]"
    spark_conf: tuple[tuple[str, str], ...] = ()  # [pipeline.spark_conf]: Spark settings over krm's defaults
    starting_offsets: str = "latest"  # only for a pipeline with no checkpoint yet
    flap_window_s: float = setting(300.0, minimum=0.0)  # an incident reopening within this window is the same incident
    incident_touch_s: float = setting(60.0, minimum=0.0)  # an unchanged open incident's last_seen_at is written this often
    # history tasks at once; 0: local[N] keeps a core for the alert path (N-1), a cluster is not capped
    history_tasks: int = setting(0, minimum=0)
    history_trigger_s: float = setting(10.0, minimum=0.0)  # observations/quarantine Delta appends (beside the alert path)
    hw_stall_window_s: float | None = None  # None: each cluster's replica.lag.time.max.ms
    replica_lag_messages: int = setting(10_000, minimum=1)  # REPLICA_LAG when a follower is this many messages behind ...
    replica_lag_seconds: float = setting(30.0, minimum=0.0)  # ... or this many seconds at the partition's recent write rate
    event_hold_s: float = setting(900.0, minimum=0.0)  # events (unclean election, truncation, regression) stay open this long
    # a broker stopped by a controlled shutdown (BROKER_DOWN `stopped`, warning) turns critical after this long down
    planned_stop_max_s: float = setting(600.0, minimum=0.0)
    # PARTITION_REASSIGNING turns `stalled` (warning) when its adding replicas copied nothing this long
    reassignment_stall_s: float = setting(300.0, minimum=0.0)
    leader_skew_tolerance: float = setting(0.5, minimum=0.0)  # LEADER_SKEW beyond this share of the mean leaders per broker
    # REPLICA_IMBALANCE (cluster) below this share under the mean
    replica_imbalance_tolerance: float = setting(0.2, minimum=0.0, maximum=1.0)
    quality_interval_s: float = setting(60.0, minimum=0.0)  # data-quality suite over new observations (0: off)
    quality_max_rows: int = setting(100_000, minimum=1)  # partition rows validated per run at most (the newest)
    # how long each table's _delta_log keeps its commits (pipelines/log_retention.py; Delta's own default: 30 days)
    delta_log_retention_hours: int = setting(48, minimum=1)
    storage: StorageConfig = StorageConfig()  # [pipeline.storage]: object-store endpoint and credentials


@dataclass(frozen=True)
class Config:
    clusters: tuple[ClusterConfig, ...]
    observations: ObservationsConfig
    collector: CollectorConfig
    pipeline: PipelineConfig
    source: Path | None = field(default=None, compare=False)

    def cluster(self, name: str) -> ClusterConfig:
        for c in self.clusters:
            if c.name == name:
                return c
        raise ConfigError(f"no cluster named {name!r} in {self.source}")


def load_config(path: str | Path) -> Config:
    path = Path(path)
    try:
        raw = tomllib.loads(path.read_text())
    except FileNotFoundError:
        raise ConfigError(f"config file {path} does not exist") from None
    except tomllib.TOMLDecodeError as e:
        raise ConfigError(f"{path}: not valid TOML: {e}") from None
    return parse_config(raw, source=path)


def _settings(r: _Reader, sec: str, table: dict, cls: type) -> dict[str, Any]:
    """Every `setting(...)` field of `cls` present in the table or not: its value, validated against
    the declared type and bounds, or the declared default."""
    import typing

    hints = typing.get_type_hints(cls)
    out = {}
    for f in cls.__dataclass_fields__.values():  # type: ignore[attr-defined]
        if "minimum" not in f.metadata:
            continue
        kind = int if hints[f.name] is int else float
        out[f.name] = r.number(sec, table, f.name, f.default, kind, minimum=f.metadata["minimum"],
                               maximum=f.metadata["maximum"])
    return out


def _keys(cls: type, *extra: str) -> set[str]:
    return {n for n in cls.__dataclass_fields__} | set(extra)  # type: ignore[attr-defined]


def parse_config(raw: dict[str, Any], source: Path | None = None) -> Config:
    where = str(source) if source else "<config>"
    r = _Reader(where)
    known = {"clusters", "observations", "collector", "pipeline"}
    r.no_unknown("", raw, known)

    clusters_raw = raw.get("clusters")
    if not isinstance(clusters_raw, list) or not clusters_raw:
        raise ConfigError(f"{where}: at least one [[clusters]] table is required")
    clusters = []
    for i, c in enumerate(clusters_raw):
        sec = f"[[clusters]] #{i + 1}"
        r.no_unknown(sec, c, _keys(ClusterConfig))
        if not isinstance(c.get("canary", False), bool):
            raise ConfigError(f"{where}: {sec} canary must be true or false, got {c.get('canary')!r}")
        name = r.string(sec, c, "name")
        if not _NAME.match(name):
            raise ConfigError(f"{where}: {sec} name {name!r} may hold only letters, digits, '.', '_', '-'")
        clusters.append(
            ClusterConfig(
                name=name,
                bootstrap_servers=r.string(sec, c, "bootstrap_servers"),
                zookeeper=r.string(sec, c, "zookeeper", required=False),
                jmx_exporter_urls=_jmx_urls(where, sec, c.get("jmx_exporter_urls", [])),
                security=parse_kafka_security(where, f"[clusters.security] of {name}", c.get("security", {})),
                canary=c.get("canary", False),
                canary_topic=r.string(sec, c, "canary_topic", default=default_of(ClusterConfig, "canary_topic")),
                zookeeper_security=(parse_zookeeper_security(where, f"[clusters.zookeeper_security] of {name}",
                                                             c["zookeeper_security"])
                                    if "zookeeper_security" in c else None),
                jmx_security=(parse_http_security(where, f"[clusters.jmx_security] of {name}", c["jmx_security"])
                              if "jmx_security" in c else None),
            )
        )
    names = [c.name for c in clusters]
    if len(set(names)) != len(names):
        raise ConfigError(f"{where}: cluster names must be unique, got {names}")

    o = raw.get("observations", {})
    r.no_unknown("[observations]", o, _keys(ObservationsConfig))
    if "security" in o:
        obs_security = parse_kafka_security(where, "[observations.security]", o["security"])
    elif "bootstrap_servers" not in o:
        obs_security = clusters[0].security  # the observations topic lives on the first cluster
    else:
        obs_security = KafkaSecurity()
    observations = ObservationsConfig(
        bootstrap_servers=r.string("[observations]", o, "bootstrap_servers", default=clusters[0].bootstrap_servers),
        topic=r.string("[observations]", o, "topic", default=default_of(ObservationsConfig, "topic")),
        replication_factor=(r.number("[observations]", o, "replication_factor", 1, int, minimum=1)
                            if "replication_factor" in o else None),
        security=obs_security,
        **_settings(r, "[observations]", o, ObservationsConfig),
    )

    k = raw.get("collector", {})
    r.no_unknown("[collector]", k, _keys(CollectorConfig))
    collector = CollectorConfig(**_settings(r, "[collector]", k, CollectorConfig))

    p = raw.get("pipeline", {})
    r.no_unknown("[pipeline]", p, _keys(PipelineConfig))
    storage = parse_storage(where, p.get("storage"))
    data_dir = parse_data_dir(where, r.string("[pipeline]", p, "data_dir", default="krm-data"),
                              source.parent if source is not None else None, storage)
    starting = r.string("[pipeline]", p, "starting_offsets", default=default_of(PipelineConfig, "starting_offsets"))
    if starting not in ("latest", "earliest"):
        raise ConfigError(f"{where}: [pipeline] starting_offsets must be 'latest' or 'earliest', got {starting!r}")
    console_url = r.string("[pipeline]", p, "console_url", default="")
    if console_url and not console_url.startswith(("http://", "https://")):
        raise ConfigError(f"{where}: [pipeline] console_url must start with http:// or https://, got {console_url!r}")
    pipeline = PipelineConfig(
        data_dir=data_dir,
        console_url=console_url.rstrip("/"),
        metrics_host=r.string("[pipeline]", p, "metrics_host", default=default_of(PipelineConfig, "metrics_host")),
        web_config_file=_web_config(where, source, p),
        spark_master=r.string("[pipeline]", p, "spark_master", default=default_of(PipelineConfig, "spark_master")),
        spark_conf=_spark_conf(where, p.get("spark_conf", {})),
        starting_offsets=starting,
        hw_stall_window_s=(r.number("[pipeline]", p, "hw_stall_window_s", 30.0, float, minimum=0.0)
                           if "hw_stall_window_s" in p else None),
        storage=storage,
        **_settings(r, "[pipeline]", p, PipelineConfig),
    )
    return Config(tuple(clusters), observations, collector, pipeline, source)


def _web_config(where: str, source: Path | None, p: dict) -> Path | None:
    """`web_config_file`: checked and parsed now, so a broken one fails `krm run` before anything starts."""
    if "web_config_file" not in p:
        return None
    value = p["web_config_file"]
    if not isinstance(value, str) or not value.strip():
        raise ConfigError(f"{where}: [pipeline] web_config_file must be a file path")
    path = Path(value.strip()).expanduser()
    if not path.is_absolute() and source is not None:
        path = source.parent / path
    load_web_config(path)
    return path


def _spark_conf(where: str, table: Any) -> tuple[tuple[str, str], ...]:
    """`[pipeline.spark_conf]`: Spark settings by their own names ("spark.executor.memory" = "2g", or
    unquoted, which TOML nests); values may be strings, numbers or booleans, given to Spark as text."""
    if not isinstance(table, dict):
        raise ConfigError(f"{where}: [pipeline.spark_conf] must be a table of Spark settings, got {type(table).__name__}")

    def flat(prefix: str, t: dict) -> list[tuple[str, str]]:
        out = []
        for key, value in t.items():
            name = f"{prefix}{key}"
            if isinstance(value, dict):
                out.extend(flat(f"{name}.", value))
            elif isinstance(value, (str, int, float, bool)):
                out.append((name, str(value).lower() if isinstance(value, bool) else str(value)))
            else:
                raise ConfigError(f"{where}: [pipeline.spark_conf] {name} must be a string, number or boolean")
        return out

    settings = flat("", table)
    for name, _ in settings:
        if not name.startswith("spark."):
            raise ConfigError(f"{where}: [pipeline.spark_conf] {name!r} is not a Spark setting (they start with 'spark.')")
    return tuple(settings)


def _jmx_urls(where: str, sec: str, value: Any) -> tuple[tuple[int, str], ...]:
    """`["1=http://broker1:7071/metrics", ...]`: each broker's JMX exporter endpoint."""
    if not isinstance(value, list):
        raise ConfigError(f"{where}: {sec} jmx_exporter_urls must be a list of \"<broker id>=<url>\" strings")
    out = []
    for item in value:
        bid, _, url = str(item).partition("=")
        if not bid.strip().isdigit() or not url.startswith(("http://", "https://")):
            raise ConfigError(f"{where}: {sec} jmx_exporter_urls entry {item!r} is not \"<broker id>=http://host:port/metrics\"")
        out.append((int(bid), url.strip()))
    return tuple(out)


class _Reader:
    """Typed access to one TOML table, raising ConfigError that names file, table and key."""

    def __init__(self, where: str) -> None:
        self.where = where

    def no_unknown(self, sec: str, table: Any, known: set[str]) -> None:
        if not isinstance(table, dict):
            raise ConfigError(f"{self.where}: {sec or 'top level'} must be a table")
        unknown = sorted(set(table) - known)
        if unknown:
            raise ConfigError(f"{self.where}: {sec or 'top level'}: unknown key(s) {unknown}; known: {sorted(known)}")

    def string(self, sec: str, t: dict, key: str, default: str | None = None, required: bool = True) -> Any:
        if key not in t:
            if default is not None or not required:
                return default
            raise ConfigError(f"{self.where}: {sec} is missing required key {key!r}")
        v = t[key]
        if not isinstance(v, str) or not v.strip():
            raise ConfigError(f"{self.where}: {sec} {key} must be a non-empty string, got {v!r}")
        return v.strip()

    def number(self, sec: str, t: dict, key: str, default: Any, kind: type, minimum: float | None = None,
               maximum: float | None = None) -> Any:
        v = t.get(key, default)
        if isinstance(v, bool) or not isinstance(v, (int, float)) or (kind is int and not isinstance(v, int)):
            raise ConfigError(f"{self.where}: {sec} {key} must be {'an integer' if kind is int else 'a number'}, got {v!r}")
        if minimum is not None and v < minimum:
            raise ConfigError(f"{self.where}: {sec} {key} must be >= {minimum}, got {v}")
        if maximum is not None and v > maximum:
            raise ConfigError(f"{self.where}: {sec} {key} must be <= {maximum}, got {v}")
        return kind(v)
