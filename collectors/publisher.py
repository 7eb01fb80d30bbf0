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

FLUSH_TIMEOUT_S = 10.0


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
            max_request_size=8 * 1024 * 1024,
            value_serializer=lambda v: json.dumps(v, separators=(",", ":")).encode(),
        )
        return self

    def publish(self, records: list[dict[str, Any]]) -> None:
        """Send one poll's records and wait for them: the alert path wants them on the topic now."""
        futures = []
        for rec in records:
            try:
                check(rec)
            except Exception as e:  # noqa: BLE001 - a collector bug must not stop the other records
                with self._lock:
                    self.invalid += 1
                log.error("collector produced an invalid record, not published: %s", e)
                continue
            futures.append(self._producer.send(self.settings.topic, key=record_key(rec), value=rec))
        try:
            self._producer.flush(timeout=FLUSH_TIMEOUT_S)
        except Exception as e:  # noqa: BLE001 - counted below as dropped; the next poll goes on
            log.error("observations topic %s did not take a poll's records within %ss: %s", self.settings.topic,
                      FLUSH_TIMEOUT_S, e)
        failed = 0
        for f in futures:
            if not f.is_done:
                failed += 1
                last = TimeoutError("not acknowledged in time")
                continue
            try:
                f.get(timeout=0)
            except Exception as e:  # noqa: BLE001
                failed += 1
                last = e
        with self._lock:
            self.sent += len(futures) - failed
            self.dropped += failed
        if failed:
            log.error("%d observation records could not be published to %s: %s", failed, self.settings.topic, last)

    def close(self) -> None:
        if self._producer is not None:
            self._producer.close(timeout=5)
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
