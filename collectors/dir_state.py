"""What a poller knows of the brokers' log directories: their sizes over time (collectors/disk_watch.py), the
replicas Metadata lists offline and the live brokers that report a failed directory (collectors/log_dirs.py)."""

from __future__ import annotations

import logging
import time

from collectors import log_dirs, offsets
from collectors.disk_watch import DiskWatch
from collectors.kafka_client import Client
from foundation.config import CollectorConfig
from schemas.typed import Broker, Observation

log = logging.getLogger(__name__)


class DirState:
    """One cluster's log directories as its poller knows them."""

    def __init__(self, cluster: str, settings: CollectorConfig) -> None:
        self.cluster = cluster
        self._timeout_ms = settings.offsets_timeout_ms
        self.disks = DiskWatch(settings.log_dir_poll_s, settings.log_dir_window_s, settings.log_dir_horizon_s)
        self.requests = log_dirs.PendingDirs()
        # (topic, partition) -> Metadata's offline replicas at the last poll, where any: the ZooKeeper
        # mirror's records carry them (ZooKeeper holds no log-dir state), so a partition whose copies sit
        # on a failed log directory reads so in every record, not only in the polls'
        self.offline: dict[tuple[str, int], list[int]] = {}
        # the live brokers that reported a failed log directory when the last poll asked (None: not asked,
        # no live broker's replica was offline); the mirror's records carry it with the offline replicas
        self.failed_brokers: list[int] | None = None
        self.refused = False  # the last sampling of the directories met an error answer (an ACL)

    def sample(self, brokers: list[Broker]) -> None:
        """The directories' answers in since the last poll (sent every `log_dir_poll_s` before the offsets
        round: collectors/disk_watch.py); the cluster record's `brokers` carry the last word of each, and a
        down broker whose disks were full when it went says so."""
        refused: set[int] = set()
        answers = self.requests.harvest(refused)
        if answers or refused:
            if refused and not self.refused:
                log.warning("cluster %s: brokers %s refuse DescribeLogDirs (krm needs DESCRIBE on the cluster): no "
                            "disk series or fill forecast for them", self.cluster, sorted(refused))
            self.refused = bool(refused)
        self.disks.note(answers, {b["id"] for b in brokers if b["live"]},
                        {b["id"] for b in brokers if b["live"] and b.get("reachable") is not False}, time.monotonic())
        for b in brokers:
            if (dirs := self.disks.dirs(b["id"])) is not None:
                b["log_dirs"] = dirs
            if (not b["live"] or b.get("reachable") is False) and (full := self.disks.went_full(b["id"])):
                b["disk_full"], b["log_dirs"] = True, full  # its departure's likely cause (collectors/disk_watch.py)

    def ask(self, client: Client, records: list[Observation], brokers: list[Broker], found: offsets.OffsetsRound) -> None:
        """Where Metadata lists a live broker's replica offline, ask that broker whether a log directory
        failed (collectors/log_dirs.py): the topic `records` then say which brokers report one, and the
        offline rule names a failed directory on that evidence only, never on a restart's moment."""
        if not self.offline:
            self.failed_brokers = None
            return
        live = {b["id"] for b in brokers if b["live"]}
        suspects = log_dirs.offline_on_live(self.offline, live)
        silent = found.asked - found.answered  # just waited for in the offsets round: not asked again
        versions = client.get_api_versions()
        ask = suspects - silent if log_dirs.announced(versions) else set()
        reports = log_dirs.describe_dirs(client, ask, self._timeout_ms, log_dirs.supports_v4(versions)) if ask else {}
        said = {b for b, dirs in reports.items() if any(d.failed for d in dirs)}
        for b in sorted(suspects - set(reports)):
            log.debug("cluster %s: broker %s lists offline replicas and did not say why", self.cluster, b)
        # a suspect not asked or not answering this time (a loaded broker) keeps its last word: its failed
        # directory does not turn into "a leader not elected yet" for one poll
        failed = sorted(said | (suspects - set(reports)) & set(self.failed_brokers or ()))
        # (a broker dead at this poll has no failed directory on record: if the mirror finds it registered
        # again before the next poll, its replicas still listed offline are a restart's, not a disk's)
        self.failed_brokers = failed
        log_dirs.with_failed_dirs(records, failed)
