"""A produce/consume canary per cluster, in the style of LinkedIn's Xinfra Monitor: what a client of
the cluster experiences, measured rather than inferred from metadata.

The canary topic has one partition meant to be led by each broker (its first replica, the preferred
leader). Each round writes one record to every partition with acks=all and reads it back; a write
not acknowledged within `canary_timeout_ms` is a partition producers cannot use right now (a dead
or paused leader before the controller moves leadership, too few in-sync replicas for acks=all).
A broker that joins gets a new partition led by it (CreatePartitions with an explicit assignment);
partitions of departed brokers stay (Kafka cannot remove partitions) and keep being written.

A write still waiting when the cluster's `latency_objective_s` has passed is said at once, in an early record
of the round (`canary_state.waiting`, the waiting partitions with `waiting_ms`): its clients already wait longer
than they should, and the round's own record comes only when the write ends or times out, read back included.

While a broker answers krm late (collectors/answer_times.py), each round also writes a train to the partitions it
holds: a write every TRAIN_GAP_S for the objective's length, as a busy producer writes. A CPU quota lets some
requests through at once, so one write a round can come through quickly while clients wait in the tail. The
partition's `produce_ms` is then its slowest acknowledged write and `writes` how many it got; each write is timed
when its answer arrives.

Needs, besides krm's minimum ACLs: CREATE, ALTER (new partitions), WRITE and READ on the canary topic.
"""

from __future__ import annotations

import json
import logging
import threading
import time
from typing import Any, Callable, Collection

from collectors.records import canary_record
from foundation.config import ClusterConfig, CollectorConfig
from foundation.security import kafka_python_kwargs
from schemas.typed import CanaryObservation, CanaryPartition

log = logging.getLogger(__name__)

TOPIC_CHECK_S = 60.0  # the canary topic's coverage of the live brokers is re-checked this often
# while a broker answers krm late, the partitions it holds get a write this often for the latency objective's length,
# as a busy producer writes: a CPU quota lets some requests through at once, and one write a round misses the tail
# its clients wait in
TRAIN_GAP_S = 0.2
AWAIT_STEP_S = 0.01  # how often a round looks whether its writes are answered


class _Write:
    """One canary write: its future, when it went out, and when its answer came (acknowledged or failed; None: not
    yet). The answer's time is taken when it arrives: the round reads the futures only once all are in."""

    __slots__ = ("future", "sent_at", "done_at")

    def __init__(self, future: Any, sent_at: float) -> None:
        self.future, self.sent_at = future, sent_at
        self.done_at: float | None = None
        future.add_both(self._done)

    def _done(self, _result: Any) -> None:
        if self.done_at is None:
            self.done_at = time.monotonic()

    def took_s(self, now: float) -> float:
        return (self.done_at if self.done_at is not None else now) - self.sent_at


def plan_partitions(live: list[int], current: dict[int, list[int]], rf: int) -> dict[int, list[int]]:
    """Pure: the new partitions (id -> replicas) that give every live broker a canary partition it
    leads by preference. Followers: the next live brokers in id order (replicas on distinct brokers)."""
    led = {replicas[0] for replicas in current.values() if replicas}
    ordered = sorted(live)
    out: dict[int, list[int]] = {}
    next_id = max(current, default=-1) + 1
    for b in ordered:
        if b in led:
            continue
        i = ordered.index(b)
        out[next_id] = [ordered[(i + k) % len(ordered)] for k in range(min(rf, len(ordered)))]
        next_id += 1
    return out


class CanarySource:
    """One cluster's canary: `poll()` runs a round and returns its `canary` record (never raises)."""

    source = "canary"

    def __init__(self, cluster: ClusterConfig, settings: CollectorConfig,
                 publish: Callable[[list[CanaryObservation]], object] | None = None) -> None:
        self.cluster = cluster
        self.settings = settings
        self.publish = publish  # where a round's early record goes (None: no early record)
        self.hurried = threading.Event()  # set by `hurry`: the round loop (collectors/daemon.py) runs the next one now
        self._hurried_by: set[int] = set()  # the brokers that hurried the next round
        # the brokers answering krm late now (collectors/answer_times.py AnswerTimes.late_now): their partitions get a
        # train of writes each round (TRAIN_GAP_S)
        self.suspects: Callable[[], Collection[int]] | None = None
        self.topic = cluster.canary_topic
        self._poll_id = 0
        self._producer: Any = None
        self._consumer: Any = None
        self._admin: Any = None
        self._partitions: dict[int, list[int]] = {}  # partition -> replicas (first: the broker it is for)
        self._leaders: dict[int, int] = {}
        self._checked_at = 0.0
        self._failing = False
        # rounds by outcome, for /metrics (collectors/stats.py): a round that cannot start (no topic,
        # no connection) has no partition to report, so this is where it shows
        self.rounds = {"ok": 0, "partition_failed": 0, "not_started": 0}

    def hurry(self, broker: int | None = None) -> None:
        """Ask for the next round now: a broker began answering krm late (collectors/answer_times.py on_late)."""
        if broker is not None:
            if not self.hurried.is_set():
                log.debug("cluster %s: broker %s answers late: a canary round now", self.cluster.name, broker)
            self._hurried_by = self._hurried_by | {broker}
        self.hurried.set()

    # ------------------------------------------------------------------ one round

    def poll(self) -> list[CanaryObservation]:
        self._poll_id += 1
        try:
            self._connect()
            self._ensure_topic()
            results: list[CanaryPartition] = self._round()
        except Exception as e:  # noqa: BLE001 - a round that cannot even start says so for every partition
            if not self._failing:
                log.warning("cluster %s: canary round failed (%s: %s)", self.cluster.name, type(e).__name__, e)
                self._failing = True
            self._close()
            results = [
                {"partition": p, "broker": r[0], "leader": self._leaders.get(p), "produced": False,
                 "error": f"{type(e).__name__}: {e}"} for p, r in sorted(self._partitions.items())]
            self.rounds["not_started"] += 1
        else:
            if self._failing:
                log.warning("cluster %s: canary rounds run again", self.cluster.name)
                self._failing = False
            ok = all(r["produced"] and r.get("consumed") for r in results)
            self.rounds["ok" if ok else "partition_failed"] += 1
        return [canary_record(self.cluster.name, self._poll_id, int(time.time() * 1000), topic=self.topic,
                              partitions=results)] if results else []

    def _round(self) -> list[CanaryPartition]:
        from kafka import TopicPartition

        timeout_s = self.settings.canary_timeout_ms / 1000
        parts = sorted(self._partitions)
        if {tp.partition for tp in self._consumer.assignment()} != set(parts):  # first round, or new partitions
            tps = [TopicPartition(self.topic, p) for p in parts]
            self._consumer.assign(tps)
            self._consumer.seek_to_end()
            until = time.monotonic() + timeout_s
            for tp in tps:  # resolved now, before this round's writes land (bounded: a dead leader never answers)
                self._consumer.position(tp, timeout_ms=max(1, int((until - time.monotonic()) * 1000)))
        objective_s = self.cluster.latency_objective_s
        late = set(self.suspects() if self.suspects is not None else ()) | self._hurried_by
        self._hurried_by = set()
        train = held_by(self._partitions, late) if objective_s < timeout_s else []
        sent = self._write(parts, train, objective_s, timeout_s)
        deadline = time.monotonic() + timeout_s
        results: dict[int, CanaryPartition] = {}
        want: dict[int, int] = {}  # partition -> the offset its (first) write got
        metadata = self._producer._metadata  # the leader the producer wrote to (its own, fresh, view)
        for p, writes in sent.items():
            leader = metadata.leader_for_partition(TopicPartition(self.topic, p))
            res: CanaryPartition = {"partition": p, "broker": self._partitions[p][0],
                                    "leader": leader if leader is not None else self._leaders.get(p), "produced": False}
            if (isr := _isr(metadata, self.topic, p)) is not None:
                res["isr"] = isr
            if len(writes) > 1:
                res["writes"] = len(writes)
            took, error = [], None
            for w in writes:
                try:
                    meta = w.future.get(timeout=max(0.0, deadline - time.monotonic()))
                    took.append(w.took_s(time.monotonic()))
                    want.setdefault(p, meta.offset)
                except Exception as e:  # noqa: BLE001 - the partition's producers fail the same way now
                    error = error or f"{type(e).__name__}: {e}"[:300]
            if error is None:
                res["produced"], res["produce_ms"] = True, round(max(took) * 1000, 1)
            else:
                res["error"] = error
                want.pop(p, None)
            results[p] = res
        # read back this round's records (the consumer sits at the log end of every partition)
        got: dict[int, float] = {}
        while want.keys() - got.keys() and time.monotonic() < deadline:
            for tp, records in self._consumer.poll(timeout_ms=100).items():
                for rec in records:
                    if rec.offset >= want.get(tp.partition, 1 << 62):
                        got.setdefault(tp.partition, time.time() * 1000 - json.loads(rec.value)["sent_ms"])
        for p, r in results.items():
            if r["produced"]:
                r["consumed"] = p in got
                if p in got:
                    r["e2e_ms"] = round(max(0.0, got[p]), 1)
        return [results[p] for p in parts]

    def _write(self, parts: list[int], train: list[int], objective_s: float, timeout_s: float) -> dict[int, list[_Write]]:
        """One write to each partition now; then, to the partitions of `train`, another every TRAIN_GAP_S for
        `objective_s`. Returns once every write is answered, or the last one's timeout passed. Writes still
        waiting when the objective passed go out at once in the round's early record (once a round)."""
        def send(p: int) -> _Write:
            value = json.dumps({"sent_ms": int(time.time() * 1000), "round": self._poll_id}).encode()
            at = time.monotonic()
            return _Write(self._producer.send(self.topic, value=value, partition=p), at)

        sent = {p: [send(p)] for p in parts}
        start = last = time.monotonic()
        train_end, tick = (start + objective_s if train else start), start + TRAIN_GAP_S
        said = self.publish is None or objective_s >= timeout_s
        while True:
            now = time.monotonic()
            if now >= train_end and (all(w.done_at is not None for ws in sent.values() for w in ws)
                                     or now >= last + timeout_s):
                return sent
            wake = min(train_end, tick) if now < train_end else last + timeout_s
            if not said:
                wake = min([wake] + [w.sent_at + objective_s for ws in sent.values() for w in ws if w.done_at is None])
            _await(sent, wake, until_all=now >= train_end)
            now = time.monotonic()
            if not said and self.publish is not None and (early := _waiting(
                    sent, self._partitions, now, *self._leaders_now(parts), at_least_s=objective_s)):
                self.publish([canary_record(self.cluster.name, self._poll_id, int(time.time() * 1000), topic=self.topic,
                                            partitions=early, waiting=True)])
                said = True
            if tick <= now < train_end:
                for p in train:
                    sent[p].append(send(p))
                last, tick = time.monotonic(), tick + TRAIN_GAP_S

    def _leaders_now(self, parts: list[int]) -> tuple[dict[int, int], dict[int, list[int]]]:
        """partition -> the leader the producer writes to now and the ISR it waits on (its own metadata), where known."""
        from kafka import TopicPartition

        metadata = self._producer._metadata
        leaders = {p: leader for p in parts
                   if (leader := metadata.leader_for_partition(TopicPartition(self.topic, p))) is not None}
        return leaders, {p: isr for p in parts if (isr := _isr(metadata, self.topic, p)) is not None}

    # ------------------------------------------------------------------ topic and clients

    def _ensure_topic(self) -> None:
        """Create the topic, or add partitions for brokers without one, at most every TOPIC_CHECK_S."""
        if time.monotonic() - self._checked_at < TOPIC_CHECK_S and self._partitions:
            return
        from kafka.admin import NewPartitions, NewTopic

        live = sorted(b["node_id"] for b in self._admin.describe_cluster()["brokers"])
        rf = min(self.settings.canary_replication_factor, len(live))
        current = self._describe()
        if not current:
            assignment = plan_partitions(live, {}, rf)
            self._admin.create_topics([NewTopic(self.topic, replica_assignments=assignment,
                                                topic_configs={"retention.ms": str(3600 * 1000),
                                                               "min.insync.replicas": "1"})])
            log.info("cluster %s: created canary topic %s (%d partitions, RF %d)", self.cluster.name, self.topic,
                     len(assignment), rf)
        else:
            new = plan_partitions(live, current, rf)
            if new:
                self._admin.create_partitions({self.topic: NewPartitions(
                    len(current) + len(new), [new[p] for p in sorted(new)])})
                log.info("cluster %s: canary partitions %s added for brokers %s", self.cluster.name, sorted(new),
                         [r[0] for r in new.values()])
        self._partitions = self._await_partitions()
        self._checked_at = time.monotonic()

    def _describe(self) -> dict[int, list[int]]:
        from kafka.errors import UnknownTopicOrPartitionError

        try:
            (t,) = self._admin.describe_topics([self.topic])
        except UnknownTopicOrPartitionError:
            return {}
        if t.get("error_code"):
            return {}
        self._leaders = {p["partition"]: p["leader"] for p in t["partitions"]}
        return {p["partition"]: list(p["replicas"]) for p in t["partitions"]}

    def _await_partitions(self) -> dict[int, list[int]]:
        deadline = time.monotonic() + 10
        parts = self._describe()
        while (not parts or any(self._leaders.get(p, -1) < 0 for p in parts)) and time.monotonic() < deadline:
            time.sleep(0.2)
            parts = self._describe()
        return parts

    def _connect(self) -> None:
        if self._producer is not None:
            return
        from kafka import KafkaConsumer, KafkaProducer
        from kafka.admin import KafkaAdminClient

        sec = kafka_python_kwargs(self.cluster.security)
        boot = self.cluster.bootstrap_servers.split(",")
        timeout = self.settings.canary_timeout_ms
        self._admin = KafkaAdminClient(bootstrap_servers=boot, client_id=f"krm-canary-{self.cluster.name}",
                                       request_timeout_ms=max(timeout, 5000), **sec)
        # acks=all, retried (a moved leader is found again) but never beyond the round's timeout: a write
        # that needs longer is what the canary reports
        self._producer = KafkaProducer(bootstrap_servers=boot, client_id=f"krm-canary-{self.cluster.name}", acks="all",
                                       linger_ms=0, request_timeout_ms=attempt_timeout_ms(
                                           timeout, self.cluster.latency_objective_s), max_block_ms=timeout,
                                       delivery_timeout_ms=timeout, retries=10, retry_backoff_ms=100,
                                       metadata_max_age_ms=5000, reconnect_backoff_max_ms=1000, **sec)
        self._consumer = KafkaConsumer(bootstrap_servers=boot, client_id=f"krm-canary-{self.cluster.name}",
                                       group_id=None, enable_auto_commit=False, auto_offset_reset="latest",
                                       reconnect_backoff_max_ms=1000, **sec)

    def _close(self) -> None:
        for client in (self._producer, self._consumer, self._admin):
            if client is not None:
                try:
                    client.close(timeout=1) if client is self._producer else client.close()
                except Exception:  # noqa: BLE001 - closing a broken client must not mask the round's error
                    pass
        self._producer = self._consumer = self._admin = None
        self._checked_at = 0.0

    def close(self) -> None:
        self._close()


def held_by(replicas: dict[int, list[int]], brokers: Collection[int]) -> list[int]:
    """The partitions with a replica on one of `brokers`: an acks=all write to them waits on it as leader or follower."""
    return [p for p, r in sorted(replicas.items()) if set(r) & set(brokers)]


def _await(sent: dict[int, list[_Write]], until: float, until_all: bool) -> None:
    """Sleep until `until`, or (`until_all`) until every write is answered if sooner. The producer's own flush would
    wait up to its timeout once per batch in flight, not once in all."""
    while (now := time.monotonic()) < until:
        if until_all and all(w.done_at is not None for ws in sent.values() for w in ws):
            return
        time.sleep(min(AWAIT_STEP_S, until - now))


def _waiting(sent: dict[int, list[_Write]], replicas: dict[int, list[int]], now: float,
             leaders: dict[int, int], isrs: dict[int, list[int]] | None = None,
             at_least_s: float = 0.0) -> list[CanaryPartition]:
    """The partitions with a write of the round not answered yet (neither acknowledged nor failed) that has waited
    `at_least_s` or longer, with how long the oldest such has waited and the leader and ISR it waits on, where known."""
    out: list[CanaryPartition] = []
    for p, writes in sorted(sent.items()):
        waits = [now - w.sent_at for w in writes if w.done_at is None and now - w.sent_at >= at_least_s]
        if waits:
            waiting: CanaryPartition = {"partition": p, "broker": replicas[p][0], "produced": False,
                                        "waiting_ms": round(max(waits) * 1000, 1)}
            if p in leaders:
                waiting["leader"] = leaders[p]
            if isrs and p in isrs:
                waiting["isr"] = isrs[p]
            out.append(waiting)
    return out


def _isr(metadata: Any, topic: str, partition: int) -> list[int] | None:
    """The ISR the producer's metadata holds for the partition: the replicas an acks=all write waits on (as fresh as
    its metadata_max_age_ms). None when unknown. kafka-python keeps it only in ClusterMetadata's private map."""
    known = getattr(metadata, "_partitions", {}).get(topic, {}).get(partition)
    isr = getattr(known, "isr", None)
    return sorted(int(b) for b in isr) if isr is not None else None


def attempt_timeout_ms(timeout_ms: int, objective_s: float) -> int:
    """How long one produce attempt may wait: half the round's timeout, so a moved leader is tried again within it,
    but never less than the latency objective. Cut sooner, an attempt is retried on a new connection, and a write a
    client would have had within the objective reads past it: clients hurt where none is."""
    return min(timeout_ms, max(500, timeout_ms // 2, int(objective_s * 1000)))
