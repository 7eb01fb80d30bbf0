"""The config file: one pydantic model per table, each key declared once with its type, bounds, default
and what it is for; loaded once and checked before anything connects.

Errors name the file, the table and the key, e.g. `krm.toml: [collector] poll_interval_s must be >= 0.05,
got 0` (foundation/settings.py says pydantic's errors that way); docs/configuration.md is
checked against these models (tests/unit/test_config.py).
"""

from __future__ import annotations

import dataclasses
import re
import tomllib
from pathlib import Path
from typing import Any, Literal, TypeVar

from pydantic import Field, ValidationInfo, field_validator, model_validator

from foundation.cadence import Cadence
from foundation.errors import ConfigError
from foundation.security import HttpSecurity, KafkaSecurity, ZooKeeperSecurity
from foundation.settings import File, Table, Text, tuple_field, validate
from foundation.storage import Location, StorageConfig, parse_data_dir
from foundation.web_config import load_web_config

_NAME = re.compile(r"^[A-Za-z0-9._-]+$")
_T = TypeVar("_T")


def default_of(cls: type[Table], name: str) -> Any:
    """The declared default of a setting (what other modules' own defaults follow)."""
    return cls.model_fields[name].default


def _scaled(value: Any, scale: int) -> Any:
    return value if value is None or scale == 1 else int(value * scale)


def setting(key: str, scale: int = 1) -> Any:
    """A field of a frozen dataclass of thresholds that is the `[pipeline]` setting `key` (times `scale`:
    1000 for seconds to ms): its default is the setting's, and `from_pipeline` fills it from a loaded
    table. Each threshold's config key is spelled once, where the threshold is declared."""
    return dataclasses.field(default=_scaled(default_of(PipelineConfig, key), scale),
                             metadata={"config": key, "scale": scale})


def from_pipeline(cls: type[_T], pipeline: PipelineConfig) -> _T:
    """`cls` (a dataclass of `setting` fields) with every setting as `pipeline` holds it."""
    values = {f.name: _scaled(getattr(pipeline, f.metadata["config"]), f.metadata["scale"])
              for f in dataclasses.fields(cls) if "config" in f.metadata}  # type: ignore[arg-type]
    return cls(**values)


class ClusterConfig(Table):
    """`[[clusters]]`: one monitored Kafka cluster."""

    name: Text  # label on every metric and incident
    bootstrap_servers: Text
    zookeeper: Text | None = None  # host:port[/chroot], ZooKeeper-mode clusters only
    # `["<broker id>=http://host:port/metrics", ...]` in the file: each broker's JMX exporter
    jmx_exporter_urls: tuple[tuple[int, str], ...] = tuple_field()
    security: KafkaSecurity = KafkaSecurity()  # [clusters.security]
    canary: bool = False  # produce/consume canary (collectors/canary.py)
    canary_topic: Text = "krm.canary"
    # what "hurt" means for this cluster's clients: a BROKER_SLOW pages once the canary waits longer (s)
    latency_objective_s: float = Field(2.0, gt=0.0)
    zookeeper_security: ZooKeeperSecurity | None = None  # [clusters.zookeeper_security]
    jmx_security: HttpSecurity | None = None  # [clusters.jmx_security]
    # this cluster's own pace and patience where it differs from [collector]'s (far away, a slow link)
    poll_interval_s: float | None = Field(None, ge=0.05)
    request_timeout_ms: int | None = Field(None, ge=100)
    offsets_timeout_ms: int | None = Field(None, ge=50)

    @field_validator("name")
    @classmethod
    def _name(cls, value: str) -> str:
        if not _NAME.match(value):
            raise ValueError(f"{value!r} may hold only letters, digits, '.', '_', '-'")
        return value

    @field_validator("jmx_exporter_urls", mode="before")
    @classmethod
    def _jmx_urls(cls, value: Any) -> Any:
        if not isinstance(value, (list, tuple)):
            raise ValueError('must be a list of "<broker id>=<url>" strings')
        out = []
        for item in value:
            if isinstance(item, tuple):  # built in code: (broker id, url)
                out.append(item)
                continue
            bid, _, url = str(item).partition("=")
            if not bid.strip().isdigit() or not url.startswith(("http://", "https://")):
                raise ValueError(f'entry {item!r} is not "<broker id>=http://host:port/metrics"')
            out.append((int(bid), url.strip()))
        return tuple(out)


class ObservationsConfig(Table):
    """`[observations]`: the Kafka topic the collectors publish to and the pipeline reads.

    Production: a separate, healthy Kafka cluster, so the monitor still works while the monitored
    cluster is broken. Locally it may be the monitored cluster itself.
    """

    bootstrap_servers: Text  # default: the first cluster's
    topic: Text = "krm.observations"
    partitions: int = Field(1, ge=1)
    replication_factor: int | None = Field(None, ge=1)  # default: min(3, brokers) of the observations cluster
    security: KafkaSecurity = KafkaSecurity()  # [observations.security]; default: the first cluster's when
    # bootstrap_servers is not given either (the observations then live on that cluster)


CLUSTER_OVERRIDES = ("poll_interval_s", "request_timeout_ms", "offsets_timeout_ms")  # [[clusters]] over [collector]


class CollectorConfig(Table):
    """`[collector]`: how often and how patiently the collectors ask."""

    poll_interval_s: float = Field(2.0, ge=0.05)
    config_refresh_s: float = Field(30.0, ge=0.0)  # topic configs change rarely; refreshed on new topics too
    request_timeout_ms: int = Field(2000, ge=100)  # per broker asked (metadata, configs); then the next broker
    offsets_timeout_ms: int = Field(1000, ge=50)  # how long a poll waits for brokers' offsets; later = unreachable
    spool_max_mb: float = Field(64.0, ge=0.001)  # records kept while the observations topic is unreachable
    jmx_interval_s: float = Field(10.0, ge=0.1)  # JMX exporter scrapes (clusters with jmx_exporter_urls)
    assignment_snapshot_s: float = Field(600.0, ge=1.0)  # every topic's assignment recorded this often (and on change)
    # clusters without ZooKeeper watches: brokers-only Metadata between polls; 0: off
    broker_check_s: float = Field(0.2, ge=0.0)
    # a broker silent (timeouts) this long makes its partitions unavailable
    unreachable_after_s: float = Field(4.0, ge=0.0)
    # between polls, a brokers-only Metadata request to each live broker this often: a broker's silence
    # is seen from then, not from the next poll (collectors/reachability.py Probes); 0: off
    reach_probe_s: float = Field(0.25, ge=0.0)
    # a partition's poll is marked `keyframe` (kept in partition_state, unchanged) once per this many seconds
    history_keyframe_s: float = Field(300.0, ge=1.0)
    # a follower this many seconds behind (or out of the ISR) is marked lagging: replica_lag keeps it every poll
    history_lag_floor_s: float = Field(1.0, ge=0.0)
    # a topic record leaves out its quiet partitions (schemas/quiet.py); false: every partition at every poll
    leave_out_quiet: bool = True
    # `krm run` (the pipeline in the same process): a healthy poll that found what the last published one
    # did is published only this often; the pipeline is told its view still holds (collectors/unchanged.py); 0: every poll
    unchanged_publish_s: float = Field(60.0, ge=0.0)
    # each live broker's log directories (DescribeLogDirs) this often: krm_log_dir_* and the fill forecast
    # (collectors/disk_watch.py); 0: never asked but where a replica is offline
    log_dir_poll_s: float = Field(10.0, ge=0.0)
    log_dir_window_s: float = Field(600.0, ge=10.0)  # the growth rate's longest trend
    # forecasts further out than this are left out: no concern, and polls without one may stay home
    log_dir_horizon_s: float = Field(86400.0, ge=0.0)
    canary_interval_s: float = Field(5.0, ge=0.5)  # clusters with `canary = true`: a write + read-back round this often
    # a canary or JMX round in which nothing is late, failed or counted waits at most this long to go out with the
    # others (one alert micro-batch for them at rest, collectors/routine_hold.py); 0: each round at once
    routine_publish_s: float = Field(10.0, ge=0.0)
    # a canary write not acknowledged (and read back) within this fails the round
    canary_timeout_ms: int = Field(3000, ge=100)
    canary_replication_factor: int = Field(3, ge=1)  # of the canary topic, at most the number of brokers
    # `krm collect`'s own /metrics; -1: [pipeline] metrics_port + 1, so both halves run on one host with one file
    metrics_port: int = Field(-1, ge=-1, le=65535)
    # "I/N": this process polls the I-th of N shares of each cluster's topics (collectors/topic_share.py;
    # `krm collect --topic-share`); unset: every topic
    topic_share: str | None = None

    @field_validator("topic_share")
    @classmethod
    def _topic_share(cls, value: str | None) -> str | None:
        m = re.fullmatch(r"(\d+)/(\d+)", value) if value is not None else None
        if value is not None and not (m and 1 <= int(m.group(1)) <= int(m.group(2))):
            raise ValueError(f"expected I/N with 1 <= I <= N, such as 2/3; got {value!r}")
        return value

    def for_cluster(self, cluster: ClusterConfig) -> CollectorConfig:
        """These settings with the cluster's own `poll_interval_s` / `request_timeout_ms` /
        `offsets_timeout_ms` where it sets them: each cluster is polled on its own thread, so one
        cluster's longer patience costs the others nothing."""
        own = {k: getattr(cluster, k) for k in CLUSTER_OVERRIDES if getattr(cluster, k) is not None}
        return self.model_copy(update=own) if own else self

    def serve_port(self, pipeline_port: int) -> int:
        """The port `krm collect` serves on (0: any free port). Derived from the pipeline's, the I-th
        topic share (`topic_share`) takes the I-th port after it, so the shares of one config share a
        host."""
        if self.metrics_port >= 0:
            return self.metrics_port
        after = int(self.topic_share.split("/")[0]) if self.topic_share else 1
        return pipeline_port + after if 0 < pipeline_port < 65536 - after else 0


class PipelineConfig(Table):
    """`[pipeline]`: the Spark pipeline, its tables and its /metrics."""

    storage: StorageConfig = StorageConfig()  # [pipeline.storage]: object-store endpoint and credentials
    # a local folder (relative to the config file), or an s3a://, abfss://, gs:// or hdfs:// URI (foundation/storage.py)
    data_dir: Location = Field(default_factory=lambda: Location(str(Path("krm-data").resolve())))
    metrics_host: Text = "127.0.0.1"
    metrics_port: int = Field(9308, ge=0, le=65535)
    web_config_file: File | None = None  # /metrics TLS and basic auth (Prometheus exporter-toolkit format)
    console_url: str = ""  # the console as operators reach it (alerts link to it); "": the /metrics address
    spark_master: Text = "local[2,4]"
    spark_conf: tuple[tuple[str, str], ...] = tuple_field()  # [pipeline.spark_conf]: Spark settings over krm's
    starting_offsets: Literal["latest", "earliest"] = "latest"  # only for a pipeline with no checkpoint yet
    flap_window_s: float = Field(300.0, ge=0.0)  # an incident reopening within this window is the same incident
    incident_touch_s: float = Field(60.0, ge=0.0)  # an unchanged open incident's last_seen_at is written this often
    # history tasks at once; 0: local[N] keeps a core for the alert path (N-1), a cluster is not capped
    history_tasks: int = Field(0, ge=0)
    # the history path's Delta appends (observations, partition state, lag, assignments, quarantine), beside
    # the alert path: each costs Delta a commit whatever it holds, so at rest fewer, larger ones
    history_trigger_s: float = Field(30.0, ge=0.0)
    # a stop (SIGTERM, Ctrl-C) first writes to the history what the topic holds and it has not stored yet,
    # for at most this long (0: not at all): a post-mortem's last seconds are not lost with the process
    history_flush_on_stop_s: float = Field(30.0, ge=0.0)
    # each broker's leaders, replicas and out-of-sync replicas are written to `broker_state` this often
    # (the console's broker charts; 0: not at all)
    broker_history_s: float = Field(60.0, ge=0.0)
    broker_history_write_s: float = Field(900.0, gt=0.0)  # ... and appended this often (and at a stop): few files
    hw_stall_window_s: float | None = Field(None, ge=0.0)  # None: each cluster's replica.lag.time.max.ms
    replica_lag_messages: int = Field(10_000, ge=1)  # REPLICA_LAG when a follower is this many messages behind ...
    replica_lag_seconds: float = Field(30.0, ge=0.0)  # ... or this many seconds at the partition's recent write rate
    event_hold_s: float = Field(900.0, ge=0.0)  # events (unclean election, truncation, regression) stay open this long
    # a broker stopped by a controlled shutdown (BROKER_DOWN `stopped`, warning) turns critical after this long down
    planned_stop_max_s: float = Field(600.0, ge=0.0)
    # a log directory forecast full within this long pages (krm_log_dir_full_soon critical: KafkaLogDirFullSoon);
    # within the second, a warning (KafkaLogDirFillingUp). docs/disks.md
    log_dir_page_within_s: float = Field(1800.0, gt=0.0)
    log_dir_warn_within_s: float = Field(21600.0, gt=0.0)
    # PARTITION_REASSIGNING turns `stalled` (warning) when its adding replicas copied nothing this long
    reassignment_stall_s: float = Field(300.0, ge=0.0)
    # CONTROLLER_ANOMALY (warning) for a ZooKeeper → KRaft migration left half-way: a KRaft controller that
    # claimed /controller but copied nothing this long, and dual writes (not finalized) this long
    migration_copy_stuck_s: float = Field(900.0, ge=0.0)
    migration_dual_write_max_s: float = Field(86400.0, ge=0.0)
    leader_skew_tolerance: float = Field(0.5, ge=0.0)  # LEADER_SKEW beyond this share of the mean leaders per broker
    # REPLICA_IMBALANCE (cluster) below this share under the mean
    replica_imbalance_tolerance: float = Field(0.2, ge=0.0, le=1.0)
    quality_interval_s: float = Field(60.0, ge=0.0)  # data-quality suite over new observations (0: off)
    quality_max_rows: int = Field(100_000, ge=1)  # partition rows validated per run at most (the newest)
    # how long each table's _delta_log keeps its commits (pipelines/log_retention.py; Delta's own default: 30 days)
    delta_log_retention_hours: int = Field(48, ge=1)

    @field_validator("data_dir", mode="before")
    @classmethod
    def _data_dir(cls, value: Any, info: ValidationInfo) -> Any:
        if isinstance(value, Location):
            return value
        if not isinstance(value, str) or not value.strip():
            raise ValueError(f"must be a folder or a URI, got {value!r}")
        storage = info.data.get("storage", StorageConfig())
        return parse_data_dir(value.strip(), (info.context or {}).get("base"), storage)

    @field_validator("web_config_file")
    @classmethod
    def _web_config(cls, path: Path | None) -> Path | None:
        """Parsed now, so a broken one fails `krm run` before anything starts."""
        if path is not None:
            try:
                load_web_config(path)
            except ConfigError as e:
                raise ValueError(f"[pipeline] {e}") from None
        return path

    @field_validator("console_url")
    @classmethod
    def _console_url(cls, value: str) -> str:
        value = value.strip()
        if value and not value.startswith(("http://", "https://")):
            raise ValueError(f"must start with http:// or https://, got {value!r}")
        return value.rstrip("/")

    @field_validator("spark_conf", mode="before")
    @classmethod
    def _spark_conf(cls, value: Any) -> Any:
        if isinstance(value, tuple):  # built in code
            return value
        if not isinstance(value, dict):
            raise ValueError(f"must be a table of Spark settings, got {type(value).__name__}")
        return spark_settings(value)

    @model_validator(mode="after")
    def _disk_horizons(self) -> PipelineConfig:
        if self.log_dir_page_within_s > self.log_dir_warn_within_s:
            raise ValueError(f"log_dir_page_within_s ({self.log_dir_page_within_s:g}) must not exceed "
                             f"log_dir_warn_within_s ({self.log_dir_warn_within_s:g}): the page is the nearer horizon")
        return self


class Config(Table):
    """The whole file: the clusters watched, where observations go, the collector and the pipeline."""

    clusters: tuple[ClusterConfig, ...] = tuple_field(...)
    observations: ObservationsConfig
    collector: CollectorConfig = CollectorConfig()
    pipeline: PipelineConfig = Field(default_factory=PipelineConfig)
    source: Path | None = Field(None, exclude=True)  # the file it was read from

    @model_validator(mode="before")
    @classmethod
    def _defaults(cls, data: Any) -> Any:
        """The observations default to the first cluster's address; the data_dir to `krm-data` beside the
        config file."""
        if not isinstance(data, dict):
            return data
        data = dict(data)
        clusters, o = data.get("clusters"), data.get("observations", {})
        first = clusters[0] if isinstance(clusters, list) and clusters and isinstance(clusters[0], dict) else {}
        if isinstance(o, dict) and "bootstrap_servers" not in o:  # (a cluster without one is refused on its own)
            data["observations"] = {"bootstrap_servers": first.get("bootstrap_servers", "(the first cluster's)"), **o}
        p = data.get("pipeline", {})
        if isinstance(p, dict) and "data_dir" not in p:
            data["pipeline"] = {**p, "data_dir": "krm-data"}
        return data

    @model_validator(mode="wrap")
    @classmethod
    def _observations_security(cls, data: Any, handler: Any) -> Any:
        """Observations on the first cluster (no address of their own) use its security, checked once there."""
        config = handler(data)
        o = data.get("observations", {}) if isinstance(data, dict) else {}
        if isinstance(o, dict) and "bootstrap_servers" not in o and "security" not in o:
            observations = config.observations.model_copy(update={"security": config.clusters[0].security})
            return config.model_copy(update={"observations": observations})
        return config

    def cadence(self, cluster: ClusterConfig) -> Cadence:
        """The cluster's cadence (foundation/cadence.py): its poll interval and the resend of unchanged polls."""
        return Cadence(self.collector.for_cluster(cluster).poll_interval_s, self.collector.unchanged_publish_s)

    @property
    def slowest_poll_s(self) -> float:
        """The longest poll interval of any cluster (its own, else [collector]'s)."""
        return max(self.collector.for_cluster(c).poll_interval_s for c in self.clusters)

    @field_validator("clusters")
    @classmethod
    def _unique(cls, clusters: tuple[ClusterConfig, ...]) -> tuple[ClusterConfig, ...]:
        if not clusters:
            raise ValueError("at least one [[clusters]] table is required")
        names = [c.name for c in clusters]
        if len(set(names)) != len(names):
            raise ValueError(f"names must be unique, got {names}")
        return clusters

    def only(self, names: list[str] | None = None, shard: tuple[int, int] | None = None) -> Config:
        """The config for one collector process: the clusters `names` (in that order), or its `shard`
        (i, n): the clusters sorted by name, every n-th from the i-th (1-based). Every host holds the
        same file, so n processes with shards 1/n ... n/n poll each cluster exactly once."""
        clusters = self.clusters
        if names:
            clusters = tuple(self.cluster(name) for name in dict.fromkeys(names))
        if shard is not None:
            i, n = shard
            clusters = tuple(c for k, c in enumerate(sorted(clusters, key=lambda c: c.name)) if k % n == i - 1)
            if not clusters:
                raise ConfigError(f"shard {i}/{n} of the {len(self.clusters)} cluster(s) in {self.source} holds none")
        return self.model_copy(update={"clusters": clusters})

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


def parse_config(raw: dict[str, Any], source: Path | None = None) -> Config:
    where = str(source) if source else "<config>"
    if not isinstance(raw.get("clusters"), list) or not raw["clusters"]:
        raise ConfigError(f"{where}: at least one [[clusters]] table is required")
    names = [c.get("name") if isinstance(c, dict) else None for c in raw["clusters"]]
    config = validate(Config, raw, where, lambda loc: _section(loc, names),
                      base=source.parent if source is not None else None)
    return config.model_copy(update={"source": source})


def _section(loc: tuple[Any, ...], names: list[Any]) -> str | None:
    """The config file's name for the table at `loc` (None: not a table)."""
    tables = {(): "", ("observations",): "[observations]", ("collector",): "[collector]", ("pipeline",): "[pipeline]",
              ("pipeline", "storage"): "[pipeline.storage]", ("pipeline", "spark_conf"): "[pipeline.spark_conf]",
              ("observations", "security"): "[observations.security]", ("clusters",): "[[clusters]]"}
    if loc in tables:
        return tables[loc]
    if len(loc) >= 2 and loc[0] == "clusters" and isinstance(loc[1], int):
        if len(loc) == 2:
            return f"[[clusters]] #{loc[1] + 1}"
        if len(loc) == 3 and loc[2] in ("security", "zookeeper_security", "jmx_security"):
            name = names[loc[1]] if loc[1] < len(names) else None
            return f"[clusters.{loc[2]}] of {name or f'cluster #{loc[1] + 1}'}"
    return None


def spark_settings(table: dict[str, Any]) -> tuple[tuple[str, str], ...]:
    """`[pipeline.spark_conf]`: Spark settings by their own names ("spark.executor.memory" = "2g", or
    unquoted, which TOML nests); values may be strings, numbers or booleans, given to Spark as text."""

    def flat(prefix: str, t: dict[str, Any]) -> list[tuple[str, str]]:
        out = []
        for key, value in t.items():
            name = f"{prefix}{key}"
            if isinstance(value, dict):
                out.extend(flat(f"{name}.", value))
            elif isinstance(value, (str, int, float, bool)):
                out.append((name, str(value).lower() if isinstance(value, bool) else str(value)))
            else:
                raise ValueError(f"[pipeline.spark_conf] {name} must be a string, number or boolean")
        return out

    settings = flat("", table)
    for name, _ in settings:
        if not name.startswith("spark."):
            raise ValueError(f"[pipeline.spark_conf] {name!r} is not a Spark setting (they start with 'spark.')")
    return tuple(settings)
