"""The brokers' log directories as the collector last sampled them (collectors/disk_watch.py): the
krm_log_dir_* series and the alerts on a directory filling up or failed. Read from the cluster record,
so they are as fresh as the view of the cluster; no incident of their own (a failed directory's
partitions are OFFLINE_PARTITION `log_dir_offline`). How near a forecast pages or warns is a setting
(`[pipeline] log_dir_page_within_s`, `log_dir_warn_within_s`): krm_log_dir_full_soon carries the verdict as
its severity, and the shipped alerts key on that, so the rules file needs no edit to move a threshold."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Iterable, Iterator

from prometheus_client.metrics_core import Metric

from pipelines.detectors.exports import Alert, console
from schemas.disks import PAGE_WITHIN_S as PAGE_WITHIN_S  # re-exported: the forecast horizons
from schemas.disks import WARN_WITHIN_S as WARN_WITHIN_S
from schemas.typed import Broker


@dataclass(frozen=True)
class LogDirState:
    broker: int
    path: str
    failed: bool
    total_bytes: int | None
    usable_bytes: int | None
    full_in_s: float | None


def of_brokers(brokers: Iterable[Broker]) -> tuple[LogDirState, ...]:
    """The directories a cluster record's registered brokers carry (a down one's are its departure's evidence,
    pipelines/detectors/brokers.py, not a disk to watch)."""
    return tuple(LogDirState(b["id"], d["path"], bool(d["failed"]), d.get("total_bytes"), d.get("usable_bytes"),
                             d.get("full_in_s"))
                 for b in brokers if b.get("live", True) for d in b.get("log_dirs") or ())


def urgency(full_in_s: float | None, page_within_s: float = PAGE_WITHIN_S,
            warn_within_s: float = WARN_WITHIN_S) -> str | None:
    """`critical` for a forecast within the page's horizon, `warning` within the warning's, else None."""
    if full_in_s is None:
        return None
    if full_in_s < page_within_s:
        return "critical"
    return "warning" if full_in_s < warn_within_s else None


def series(views: Iterable[tuple[str, tuple[LogDirState, ...]]], page_within_s: float = PAGE_WITHIN_S,
           warn_within_s: float = WARN_WITHIN_S) -> Iterator[Metric]:
    """(cluster, its directories) -> the five families, each present (empty) even with none known."""
    from prometheus_client.core import GaugeMetricFamily

    labels = ["cluster", "broker", "log_dir"]
    used = GaugeMetricFamily("krm_log_dir_used_bytes", "Bytes used on the filesystem of the broker's log directory "
                             "(total - usable, as the broker reports it: Kafka 3.3+).", labels=labels)
    total = GaugeMetricFamily("krm_log_dir_total_bytes", "Size of the filesystem of the broker's log directory.",
                              labels=labels)
    full = GaugeMetricFamily("krm_log_dir_full_in_seconds", "Seconds until the log directory's filesystem is full at "
                             "its recent growth rate; absent while not growing or further out than the collector's "
                             "log_dir_horizon_s.", labels=labels)
    soon = GaugeMetricFamily("krm_log_dir_full_soon", "1 while the directory is forecast full within "
                             "[pipeline] log_dir_page_within_s (severity critical) or log_dir_warn_within_s (warning).",
                             labels=labels + ["severity"])
    offline = GaugeMetricFamily("krm_log_dir_offline", "1 while the broker reports the log directory failed (offline).",
                                labels=labels)
    for cluster, dirs in views:
        for d in dirs:
            key = [cluster, str(d.broker), d.path]
            if d.failed:
                offline.add_metric(key, 1)
                continue
            if d.total_bytes is not None and d.usable_bytes is not None:
                used.add_metric(key, d.total_bytes - d.usable_bytes)
                total.add_metric(key, d.total_bytes)
            if d.full_in_s is not None:
                full.add_metric(key, d.full_in_s)
                if (level := urgency(d.full_in_s, page_within_s, warn_within_s)) is not None:
                    soon.add_metric(key + [level], 1)
    yield from (used, total, full, soon, offline)


_BROKER_PAGE = console("/brokers/{{ $labels.cluster }}/{{ $labels.broker }}")
_RUNBOOK = ("When the directory is full Kafka takes it offline: its partitions' replicas there stop (leaders move, or "
            "the partitions go offline where no other copy is in sync), and a broker whose only directory it is shuts "
            "down. Find what grows (`kafka-log-dirs --describe --broker-list {{ $labels.broker }}`, or the broker page): "
            "lower retention.ms / retention.bytes of the largest topics, delete what is not needed, or move partitions "
            "to brokers with room (`krm plan rebalance --topic T --output plan.json`, then `kafka-reassign-partitions "
            "--execute`, throttled). Growing the filesystem also works where the volume allows it.")


def _forecast(severity: str) -> str:
    """The forecast (its value: the summary's "full in") where the pipeline judged it `severity`."""
    return (f'krm_log_dir_full_in_seconds and on(cluster, broker, log_dir) '
            f'krm_log_dir_full_soon{{severity="{severity}"}} == 1')


ALERTS = (
    Alert("KafkaLogDirFullSoon", _forecast("critical"), "critical", wait="15s",
          summary=("{{ $labels.cluster }}: broker {{ $labels.broker }}'s {{ $labels.log_dir }} is full in "
                   "{{ $value | humanizeDuration }} at its recent rate"),
          runbook=_RUNBOOK, links=(("broker_page", _BROKER_PAGE),),
          why=("Pages before the harm: at this rate the directory fails within [pipeline] log_dir_page_within_s (half "
               "an hour) and takes its replicas with it. Fifteen seconds of it, so one sampling's burst does not page.")),
    Alert("KafkaLogDirFillingUp", _forecast("warning"), "warning", wait="1m",
          summary=("{{ $labels.cluster }}: broker {{ $labels.broker }}'s {{ $labels.log_dir }} is full in "
                   "{{ $value | humanizeDuration }} at its recent rate"),
          runbook=_RUNBOOK, links=(("broker_page", _BROKER_PAGE),),
          why=("Within [pipeline] log_dir_warn_within_s (6 hours) but not the page's: time to change retention or "
               "move partitions in working hours; nothing is hurt yet.")),
    Alert("KafkaLogDirOffline", "krm_log_dir_offline == 1", "warning", wait="30s",
          summary="{{ $labels.cluster }}: broker {{ $labels.broker }} took {{ $labels.log_dir }} offline",
          runbook=("The broker stopped serving the directory after an I/O error (its log: `Stopping serving logs in "
                   "dir`); a full disk is the usual cause. Its replicas there are out of their ISRs; partitions with no "
                   "other in-sync copy are offline (KafkaPartitionOffline, cause log_dir_offline). Free or replace the "
                   "disk, then restart the broker: a failed directory comes back only with a restart."),
          links=(("broker_page", _BROKER_PAGE),),
          why=("A warning: the partitions it leaves without a leader page on their own (KafkaPartitionOffline); "
               "the rest still have in-sync copies elsewhere, one failure from harm.")),
)
