"""Publishes observation records to the observations topic (JSON, keyed by cluster and subject),
through a bounded in-order spool (collectors/spool.py) that rides out an outage of that topic."""

from __future__ import annotations

import json
import logging
import threading
import time
from typing import Any, Sequence

from collectors import access
from collectors.spool import Spool
from foundation.backoff import Backoff, Retry
from foundation.config import ObservationsConfig
from foundation.errors import SourceUnavailable
from foundation.security import kafka_python_kwargs
from schemas.observation import check
from schemas.typed import Observation

log = logging.getLogger(__name__)

# the observations topic out of reach: 0.5 s, doubling, at most 10 s between tries (the spool holds the records)
RECONNECT_BACKOFF = Backoff(first_s=0.5, cap_s=10.0)


def record_key(record: Observation) -> bytes:
    """Records of one subject share a key, so they stay in order on one partition."""
    subject = record["topic_state"]["topic"] if record["kind"] == "topic" else ""
    return f"{record['cluster']}|{record['kind']}|{subject}".encode()


class Publisher:
    """Construct opens nothing; start() creates the topic if missing (or later, when it can) and
    starts the sender thread that drains the spool in order."""

    BATCH = 500

    def __init__(self, settings: ObservationsConfig, spool_max_bytes: int = 64 * 1024 * 1024,
                 validate: bool = True) -> None:
        self.settings = settings
        self.validate = validate  # schema-check each record first (the simulator's are built by the same code)
        self.spool = Spool(spool_max_bytes)
        self._producer: Any = None
        self.sent = 0
        self.invalid = 0
        self.send_failures = 0
        self.acked_at = 0.0  # time.time() the topic last acknowledged a batch (0: never)
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._outage = False

    @property
    def in_outage(self) -> bool:
        """The observations topic is out of reach (not connected, or the last send failed)."""
        return self._producer is None or self._outage

    @property
    def dropped(self) -> int:
        return self.spool.dropped

    def said(self, now: float) -> str:
        """Where the records are (for a blind moment's log line): acknowledged, waiting, or spooled
        through an outage."""
        waiting = self.spool.depth
        if self.in_outage:
            return f"the observations topic is out of reach ({waiting} records spooled)"
        last = f", the last {now - self.acked_at:.1f} s ago" if self.acked_at else ""
        if waiting:
            return f"{waiting} records wait to be sent ({self.sent} acknowledged{last})"
        return f"the observations topic acknowledged every record sent ({self.sent}{last})"

    def start(self) -> Publisher:
        try:
            self._connect()
        except Exception as e:  # noqa: BLE001 - spool until the observations cluster is back
            log.error("%s; spooling records until it works", self._why(e))
        self._thread = threading.Thread(target=self._drain, name="krm-publisher", daemon=True)
        self._thread.start()
        return self

    def publish(self, records: Sequence[Observation]) -> int:
        """Check, serialize and spool one poll's records, then return their size in bytes: the poll
        loop never waits on the observations topic (its leader may sit on the very broker that just died)."""
        return self.publish_encoded(self.encode(records))

    def encode(self, records: Sequence[Observation]) -> list[tuple[bytes, bytes]]:
        """(key, value) per record, as published; a record failing the schema check is counted and left out."""
        items = []
        for rec in records:
            if self.validate:
                try:
                    check(rec)
                except Exception as e:  # noqa: BLE001 - a collector bug must not stop the other records
                    with self._lock:
                        self.invalid += 1
                    log.error("collector produced an invalid record, not published: %s", e)
                    continue
            items.append((record_key(rec), json.dumps(rec, separators=(",", ":")).encode()))
        return items

    def publish_encoded(self, items: list[tuple[bytes, bytes]]) -> int:
        """Spool records `encode` made (perhaps long before: `krm simulate --prebuild`); returns their bytes."""
        dropped = self.spool.put(items)
        if dropped:
            log.error("spool full (%d bytes): dropped the %d oldest observation records (%d so far)",
                      self.spool.max_bytes, dropped, self.spool.dropped)
        return sum(len(v) for _, v in items)

    def close(self, drain_timeout_s: float = 5.0) -> None:
        """Stop after giving the sender `drain_timeout_s` to empty the spool."""
        deadline = time.monotonic() + drain_timeout_s
        while self.spool.depth and time.monotonic() < deadline and self._producer is not None:
            time.sleep(0.05)
        self._stop.set()
        self.spool.close()
        if self._thread is not None:
            self._thread.join(timeout=10)
        if self.spool.depth:
            log.warning("%d observation records still spooled at shutdown are lost", self.spool.depth)
        if self._producer is not None:
            self._producer.close(timeout=5)
            self._producer = None

    # ------------------------------------------------------------------ sender thread

    def _connect(self) -> None:
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
            max_block_ms=5000,
            max_in_flight_requests_per_connection=1,  # retries keep each subject's records in order
            max_request_size=8 * 1024 * 1024,
            # a topic record of a large cluster is tens of KB: with the default 16 KB batches every
            # record was its own request (one round trip each, in flight one at a time); 1 MB
            # batches carry a poll's records in a few requests
            batch_size=1024 * 1024,
            **kafka_python_kwargs(self.settings.security),
        )

    def _why(self, e: BaseException) -> str:
        """One line: a refused login, certificate or ACL said as such (collectors/access.py)."""
        s = self.settings
        problem = access.classify(e, f"observations ({s.bootstrap_servers})", s.security)
        if problem is not None and problem.reason == access.AUTHORIZATION:
            return (f"{problem.message}; krm needs CREATE (unless the topic exists), WRITE and READ on TOPIC {s.topic} "
                    f"(docs/security.md)")
        if problem is not None:
            return problem.message
        return f"observations topic {s.topic} on {s.bootstrap_servers} unreachable ({type(e).__name__}: {e})"

    def _drain(self) -> None:
        """Send the spool's head in order; remove records only once acknowledged. On a failure keep
        them and retry after a back-off: an outage costs spool space, never records (up to the cap)."""
        retry = Retry(RECONNECT_BACKOFF)
        while not self._stop.is_set():
            if self._producer is None:
                try:
                    self._connect()
                except Exception:  # noqa: BLE001 - still down
                    self._stop.wait(retry.failed())
                    continue
            batch = self.spool.peek(self.BATCH, timeout_s=0.5)
            if not batch:
                continue
            try:
                futures = [self._producer.send(self.settings.topic, key=k, value=v) for k, v in batch]
                for f in futures:
                    f.get(timeout=30)
            except Exception as e:  # noqa: BLE001 - keep the batch; what did get through is sent again
                with self._lock:
                    self.send_failures += 1
                if not self._outage:
                    log.error("%s: spooling (%d records waiting)", self._why(e), self.spool.depth)
                    self._outage = True
                self._stop.wait(retry.failed())
                continue
            self.spool.pop(batch)
            with self._lock:
                self.sent += len(batch)
                self.acked_at = time.time()
            retry.succeeded()
            if self._outage:
                log.warning("observations topic reachable again; spool replayed in order (%d still waiting)",
                            self.spool.depth)
                self._outage = False


def ensure_topic(settings: ObservationsConfig) -> None:
    from kafka.admin import KafkaAdminClient, NewTopic
    from kafka.errors import TopicAlreadyExistsError

    try:
        admin = KafkaAdminClient(bootstrap_servers=settings.bootstrap_servers.split(","), client_id="krm-setup",
                                 request_timeout_ms=10000, **kafka_python_kwargs(settings.security))
    except Exception as e:  # noqa: BLE001
        raise SourceUnavailable(f"observations cluster {settings.bootstrap_servers} unreachable: {e}") from e
    try:
        if settings.topic not in admin.list_topics():
            # The monitor's own topic must survive the broker failures it reports (docs/cases/rf1-outage-zk-chroot.md's lesson).
            rf = settings.replication_factor or min(3, len(admin.describe_cluster()["brokers"]))
            admin.create_topics([NewTopic(settings.topic, settings.partitions, rf,
                                          topic_configs={"retention.ms": str(24 * 3600 * 1000)})])
            log.info("created observations topic %s (replication factor %d)", settings.topic, rf)
    except TopicAlreadyExistsError:
        pass
    finally:
        admin.close()
