"""Publishes observation records to the observations topic (JSON, keyed by cluster and subject)."""

from __future__ import annotations

import json
import logging
import threading
from typing import Any

from krm.config import ObservationsConfig
from krm.errors import SourceUnavailable
from schemas.observation import check

log = logging.getLogger(__name__)


def record_key(record: dict[str, Any]) -> bytes:
    """Records of one subject share a key, so they stay in order on one partition."""
    subject = record["topic_state"]["topic"] if record["kind"] == "topic" else ""
    return f"{record['cluster']}|{record['kind']}|{subject}".encode()


class Publisher:
    """Construct opens nothing; start() creates the topic if missing and connects the producer."""

    def __init__(self, settings: ObservationsConfig) -> None:
        self.settings = settings
        self._producer: Any = None
        self.sent = 0
        self.dropped = 0
        self.invalid = 0
        self._lock = threading.Lock()

    def start(self) -> Publisher:
        from kafka import KafkaProducer

        ensure_topic(self.settings)
        self._producer = KafkaProducer(
            bootstrap_servers=self.settings.bootstrap_servers.split(","),
            client_id="krm-collector",
            acks=1,
            linger_ms=5,
            # A paused (not dead) leader holds requests until they time out: keep that short so the
            # retry goes to the new leader within a poll or two instead of after 30 s.
            request_timeout_ms=5000,
            retries=5,
            retry_backoff_ms=200,
            metadata_max_age_ms=10000,
            max_block_ms=1000,  # a full buffer drops (and counts) records instead of stalling polls
            max_in_flight_requests_per_connection=1,  # retries keep each subject's records in order
            max_request_size=8 * 1024 * 1024,
            value_serializer=lambda v: json.dumps(v, separators=(",", ":")).encode(),
        )
        return self

    def publish(self, records: list[dict[str, Any]]) -> None:
        """Hand one poll's records to the producer and return: the poll loop never waits on the
        observations topic (its leader may sit on the very broker that just died). The producer
        sends within linger_ms; delivery failures are counted and logged by the callbacks."""
        for rec in records:
            try:
                check(rec)
            except Exception as e:  # noqa: BLE001 - a collector bug must not stop the other records
                self._count("invalid")
                log.error("collector produced an invalid record, not published: %s", e)
                continue
            try:
                future = self._producer.send(self.settings.topic, key=record_key(rec), value=rec)
            except Exception as e:  # noqa: BLE001 - buffer full (max_block_ms) or producer closed
                self._failed(e)
                continue
            future.add_callback(lambda _md: self._count("sent"))
            future.add_errback(self._failed)

    def _count(self, what: str) -> None:
        with self._lock:
            setattr(self, what, getattr(self, what) + 1)

    def _failed(self, e: Exception) -> None:
        with self._lock:
            self.dropped += 1
            first = self.dropped == 1 or self.dropped % 1000 == 0
        if first:
            log.error("observation records could not be published to %s (%d dropped so far): %s",
                      self.settings.topic, self.dropped, e)

    def close(self) -> None:
        if self._producer is not None:
            self._producer.close(timeout=5)  # flushes what is still buffered
            self._producer = None


def ensure_topic(settings: ObservationsConfig) -> None:
    from kafka.admin import KafkaAdminClient, NewTopic
    from kafka.errors import TopicAlreadyExistsError

    try:
        admin = KafkaAdminClient(bootstrap_servers=settings.bootstrap_servers.split(","), client_id="krm-setup",
                                 request_timeout_ms=10000)
    except Exception as e:  # noqa: BLE001
        raise SourceUnavailable(f"observations cluster {settings.bootstrap_servers} unreachable: {e}") from e
    try:
        if settings.topic not in admin.list_topics():
            # The monitor's own topic must survive the broker failures it reports (seeds/002's lesson).
            rf = settings.replication_factor or min(3, len(admin.describe_cluster()["brokers"]))
            admin.create_topics([NewTopic(settings.topic, settings.partitions, rf,
                                          topic_configs={"retention.ms": str(24 * 3600 * 1000)})])
            log.info("created observations topic %s (replication factor %d)", settings.topic, rf)
    except TopicAlreadyExistsError:
        pass
    finally:
        admin.close()
