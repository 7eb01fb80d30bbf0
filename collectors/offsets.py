"""Offsets source: every replica's log end offset and every leader's high watermark, batched per broker.

Three ListOffsets requests per broker per poll, never one per partition, all brokers in parallel:
- replica id -2 (ListOffsetsRequest.DEBUGGING_REPLICA_ID), LATEST, for every partition the broker
  holds a replica of. Kafka answers it from any replica, not only the leader
  (`KafkaApis.handleListOffsetRequest`: fetchOnlyFromLeader = replicaId != DEBUGGING_REPLICA_ID),
  and with no isolation level (only consumers, replica id -1, get one), so
  `Partition.fetchOffsetForTimestamp` returns that replica's own `logEndOffset` (Kafka 3.9,
  core/src/main/scala/kafka/server/KafkaApis.scala and kafka/cluster/Partition.scala).
- replica id -1 (a consumer), READ_UNCOMMITTED, LATEST, to each leader for the partitions it leads:
  the same code path returns the leader's `highWatermark`.
- replica id -1, EARLIEST, to each leader: its log start offset (`UnifiedLog.fetchOffsetByTimestamp`,
  EARLIEST_TIMESTAMP -> `logStartOffset`, storage/.../UnifiedLog). A separate request because Kafka
  refuses a partition twice in one ListOffsets.
For tiered topics (KIP-405) each leader is also asked its local log start offset and the highest
offset in remote storage (collectors/tiered.py), in the same round.
Order matters: to each broker the log-start and HW requests go before the LEO request, and a broker
answers one connection's requests in order, so a leader's log start <= HW <= LEO holds in a record
even while producers write (asked the other way round, a busy partition's HW overtook the LEO read
a moment earlier).

Everything is sent at once and waited for until one deadline: a broker that does not answer in time
(dead, SIGSTOPped, overloaded) costs the poll at most that deadline and is reported as unreachable,
which is itself the direct reachability probe (the controller only notices a dead broker after the
ZooKeeper session or KRaft heartbeat timeout).
"""

from __future__ import annotations

import logging
import math
import time
from dataclasses import dataclass, field
from typing import Any, Iterable

from collectors import tiered, wire
from collectors.kafka_client import Client, Future
from schemas.observation import NOT_LEADER_OR_FOLLOWER, OFFSET_NOT_AVAILABLE

log = logging.getLogger(__name__)

DEBUGGING_REPLICA_ID = -2
CONSUMER_REPLICA_ID = -1
LATEST_TIMESTAMP = -1
EARLIEST_TIMESTAMP = -2
READ_UNCOMMITTED = 0

TopicPartition = tuple[str, int]

# The errors a partition's leader (by the metadata) gives the HW question that say it does not serve the
# partition, by Kafka's code (org.apache.kafka.common.protocol.Errors). Kafka's ListOffsets path
# (`ReplicaManager.fetchOffsetForTimestamp` -> `Partition.fetchOffsetForTimestamp`,
# core/src/main/scala/kafka/cluster/Partition.scala):
# - NOT_LEADER_OR_FOLLOWER: the broker does not lead it (`localLogWithEpochOrThrow` with fetchOnlyFromLeader):
#   the controller's word that it leads has not reached it. Producers get the same answer.
# - OFFSET_NOT_AVAILABLE: it leads, but its HW is still below the offset its leader epoch started at (a
#   client request, isolation level set, while `leaderEpochStartOffsetOpt` > the HW): the HW of a new leader
#   waits for its ISR followers to fetch from it, and acks=all producers wait with it.
# Both are normal for the first moments after any election; held, they are clients refused or waiting.
# Not among them: authorization (krm's own ACLs), UNKNOWN_TOPIC_OR_PARTITION (a topic being created or
# deleted), KAFKA_STORAGE_ERROR (a failed log directory: its own rule).
REFUSALS = {6: NOT_LEADER_OR_FOLLOWER, 78: OFFSET_NOT_AVAILABLE}


@dataclass
class OffsetsRound:
    """What one round of ListOffsets requests learnt."""

    # by topic first, as the records are built topic by topic (no key tuple per partition and replica)
    leo: dict[str, dict[int, dict[int, int]]] = field(default_factory=dict)  # topic -> broker -> partition -> LEO
    hw: dict[str, dict[int, int]] = field(default_factory=dict)  # topic -> partition -> leader's HW
    log_start: dict[str, dict[int, int]] = field(default_factory=dict)  # topic -> partition -> leader's log start
    local_start: dict[str, dict[int, int]] = field(default_factory=dict)  # tiered topics: leader's local log start
    remote: dict[str, dict[int, int]] = field(default_factory=dict)  # tiered: highest offset in remote storage
    # the leaders' refusals of the HW question (REFUSALS only): topic -> partition -> Kafka error code; only
    # topics with one (a leader that answers the request but not for a partition: `leader_error` on the record)
    refused: dict[str, dict[int, int]] = field(default_factory=dict)
    answered: set[int] = field(default_factory=set)  # brokers that answered every request sent to them
    asked: set[int] = field(default_factory=set)
    requests: int = 0
    sent_at: float | None = None  # time.monotonic() when the round's requests went out
    # the topics whose answers are not the previous round's (`seq` - 1, of the same Requests) byte for
    # byte; None: not known, every topic may have moved. A topic not in it got the previous round's
    # maps back, the same objects.
    moved: set[str] | None = None
    seq: int = 0

    def by_kind(self) -> dict[str, dict[str, Any]]:
        """Its maps by the kind of question that filled them."""
        return {"leo": self.leo, "hw": self.hw, "log_start": self.log_start, "local_start": self.local_start,
                "remote": self.remote, "refused": self.refused}

    @property
    def unanswered(self) -> set[int]:
        return self.asked - self.answered


def plan(partitions: Iterable[tuple[str, int, int, list[int]]], live: set[int]
         ) -> tuple[dict[int, list[TopicPartition]], dict[int, list[TopicPartition]]]:
    """From (topic, partition, leader, replicas): which partitions to ask each live broker for its
    own LEO, and which to ask each live leader for its HW. Dead brokers and leaderless partitions
    are not asked: they cannot answer and must not slow the poll."""
    replica_of: dict[int, list[TopicPartition]] = {b: [] for b in live}
    leader_of: dict[int, list[TopicPartition]] = {b: [] for b in live}
    for topic, partition, leader, replicas in partitions:
        tp = (topic, partition)
        for b in replicas:
            asked = replica_of.get(b)
            if asked is not None:
                asked.append(tp)
        asked = leader_of.get(leader)  # -1 (no leader) is never a live broker
        if asked is not None:
            asked.append(tp)
    return {b: tps for b, tps in replica_of.items() if tps}, {b: tps for b, tps in leader_of.items() if tps}


class Plans:
    """`plan` topic by topic, each topic's part kept while Metadata hands back the same partitions
    object (an unchanged healthy topic: collectors/wire.py TopicBlocks) and the live brokers are the
    same: a steady poll plans only what changed. The lists come out as `plan` builds them."""

    def __init__(self) -> None:
        self._by_topic: dict[str, tuple[list[wire.MdPartition], dict[int, list[TopicPartition]],
                                        dict[int, list[TopicPartition]]]] = {}
        self._live: set[int] = set()

    def plan(self, topics: list[wire.MdTopic], live: set[int]
             ) -> tuple[dict[int, list[TopicPartition]], dict[int, list[TopicPartition]]]:
        if live != self._live:
            self._by_topic, self._live = {}, set(live)
        replica_of: dict[int, list[TopicPartition]] = {}
        leader_of: dict[int, list[TopicPartition]] = {}
        kept = {}
        for t in topics:
            name, parts = t["topic"], t["partitions"]
            mine = self._by_topic.get(name)
            if mine is None or mine[0] is not parts:
                mine = (parts, *plan(((name, p["partition"], p["leader"], p["replicas"]) for p in parts), live))
            kept[name] = mine
            for into, part in ((replica_of, mine[1]), (leader_of, mine[2])):
                for b, tps in part.items():
                    if b in into:
                        into[b] += tps
                    else:
                        into[b] = list(tps)  # (never the kept list itself: it is extended)
        self._by_topic = kept
        return replica_of, leader_of


def _request(version: int, replica_id: int, tps: list[TopicPartition], timestamp: int = LATEST_TIMESTAMP) -> object:
    from kafka.protocol.list_offsets import ListOffsetsRequest

    by_topic: dict[str, list[int]] = {}
    for t, p in tps:
        by_topic.setdefault(t, []).append(p)
    if version in (4, 5):  # the versions every broker since Kafka 2.1 answers: encoded by hand (collectors/wire.py)
        return wire.offsets_request(version, replica_id, READ_UNCOMMITTED, by_topic.items(), timestamp)
    topics: list[tuple[str, list[tuple[int, ...]]]]
    if version >= 4:
        topics = [(t, [(p, -1, timestamp) for p in ps]) for t, ps in by_topic.items()]  # -1: no epoch check
    else:
        topics = [(t, [(p, timestamp) for p in ps]) for t, ps in by_topic.items()]
    if version >= 2:
        return ListOffsetsRequest[version](replica_id=replica_id, isolation_level=READ_UNCOMMITTED, topics=topics)
    return ListOffsetsRequest[version](replica_id=replica_id, topics=topics)


class Announced:
    """Whether each broker's current connection can answer ListOffsets v9, as the broker itself said.

    kafka-python asks ApiVersions on its first connection only and gives every later connection its
    own table for the release it inferred (kafka/client_async.py, `api_version`), so the versions a
    connection carries are not the broker's. During a rolling upgrade the brokers run different
    releases, and one before 3.9 closes the connection on a v9 request, failing the core offsets
    requests it shares. So krm asks each broker ApiVersions itself, once per socket: a reconnect (a
    restart, perhaps into another release) asks again."""

    def __init__(self) -> None:
        self._known: dict[int, tuple[object, bool]] = {}  # broker -> (socket, announces v9)
        self._asking: dict[int, tuple[object, Future]] = {}  # broker -> (socket, the ApiVersions future)

    def v9(self, client: Client, broker: int, timeout_ms: int) -> bool | None:
        """True/False once the broker said on this socket; None while its answer is awaited (asked here)."""
        from kafka.protocol.api_versions import ApiVersionsRequest

        sock = getattr(client._conns.get(broker), "_sock", None)
        known = self._known.get(broker)
        if known is not None and known[0] is sock:
            return known[1]
        asking = self._asking.get(broker)
        if asking is None or asking[0] is not sock:
            future = client.send(broker, ApiVersionsRequest[0](), wakeup=False, request_timeout_ms=timeout_ms)
            self._asking[broker] = asking = (sock, future)
        future = asking[1]
        if not future.is_done:
            return None
        del self._asking[broker]
        if future.failed() or future.value.error_code != 0:
            return False  # not this round; asked again next poll
        said = {k: (lo, hi) for k, lo, hi in future.value.api_versions}
        self._known[broker] = (sock, tiered.supported(said))
        return self._known[broker][1]

    def forget_others(self, brokers: set[int]) -> None:
        for gone in (set(self._known) | set(self._asking)) - brokers:
            self._known.pop(gone, None)
            self._asking.pop(gone, None)


class Requests:
    """The last poll's requests, per broker and kind, with the partitions each asked for. A cluster's
    assignment rarely changes between polls, so most polls send the same bytes again: comparing
    the partition lists (C speed) is cheaper than encoding ~10,000 partitions per broker anew."""

    def __init__(self) -> None:
        self._last: dict[tuple[int, str, int], tuple[list[TopicPartition], object]] = {}
        self.announced = Announced()  # which brokers may be asked the tiered questions
        # the last round: per (broker, kind) its decoded answer and topic -> (that topic's part of the
        # answer, partition -> offset); and the round's maps, handed on for topics that did not move
        self.pieces: dict[tuple[int, str], tuple[Any, dict[str, tuple[Any, dict[int, int]]]]] = {}
        self.last_round: OffsetsRound | None = None
        self.seq = 0

    def get(self, broker: int, kind: str, version: int, tps: list[TopicPartition]) -> object:
        key = (broker, kind, version)
        last = self._last.get(key)
        if last is not None and last[0] == tps:
            return last[1]
        request: object
        if kind in tiered.KINDS:
            request = tiered.request(kind, tps)
            self._last[key] = (tps, request)
            return request
        replica_id = DEBUGGING_REPLICA_ID if kind == "leo" else CONSUMER_REPLICA_ID
        request = _request(version, replica_id, tps, EARLIEST_TIMESTAMP if kind == "log_start" else LATEST_TIMESTAMP)
        self._last[key] = (tps, request)
        return request

    def forget_others(self, brokers: set[int]) -> None:
        """Drop what was asked of brokers no longer asked anything (a broker removed for good)."""
        for key in [k for k in self._last if k[0] not in brokers]:
            del self._last[key]
        self.announced.forget_others(brokers)


def fetch(client: Client, replica_of: dict[int, list[TopicPartition]], leader_of: dict[int, list[TopicPartition]],
          timeout_s: float, requests: Requests | None = None,
          tiered_of: dict[int, list[TopicPartition]] | None = None,
          judged_at: dict[int, float] | None = None) -> OffsetsRound:
    """Send both kinds of request to every broker concurrently; collect answers until `timeout_s`.

    `client` is kafka-python's KafkaClient (the admin client's). Requests still unanswered at the
    deadline are abandoned: the client fails them after the same timeout and drops the connection.
    `requests`: the caller's memory of the previous poll's requests, reused when unchanged.
    `tiered_of`: leader -> its partitions of tiered topics (asked their local start and remote offset).
    `judged_at`: broker -> when (time.monotonic()) its silence so far will have lasted long enough to
    call it unreachable (collectors/reachability.py), for brokers not yet called so. Once every
    broker still awaited is one whose moment has come, the round ends there, not at the deadline:
    the verdict is out, and waiting longer only delays it. A broker an earlier poll already called
    unreachable has no moment here: it is waited for until the deadline, so one that is back can
    answer on a fresh connection.
    """
    from kafka.protocol.list_offsets import ListOffsetsRequest

    version = client.api_version(ListOffsetsRequest, max_version=5)
    made = requests if requests is not None else Requests()
    result = OffsetsRound()
    todo: list[tuple[int, str, object]] = []  # per broker in this order (see the module docstring)
    for b, tps in leader_of.items():
        todo.append((b, "log_start", made.get(b, "log_start", version, tps)))
        todo.append((b, "hw", made.get(b, "hw", version, tps)))
    for b, tps in (tiered_of or {}).items():
        for kind in tiered.KINDS:
            todo.append((b, kind, made.get(b, kind, tiered.VERSION, tps)))
    for b, tps in replica_of.items():
        todo.append((b, "leo", made.get(b, "leo", version, tps)))
    made.forget_others(set(leader_of) | set(replica_of))
    result.asked = {b for b, _, _ in todo}
    result.requests = len(todo)
    timeout_ms = max(1, int(timeout_s * 1000))
    result.sent_at = sent_at = time.monotonic()
    deadline = sent_at + timeout_s
    sent: list[tuple[int, str, Future]] = []
    refused: set[int] = set()
    while True:
        for item in list(todo):
            b = item[0]
            if client.ready(b, metadata_priority=False):
                if item[1] in tiered.KINDS:
                    v9 = made.announced.v9(client, b, timeout_ms)
                    if v9 is None:
                        continue  # its ApiVersions answer is on the way
                    if not v9:  # an older release (a rolling upgrade): it would close the connection
                        todo.remove(item)
                        continue
                todo.remove(item)
                sent.append((b, item[1], client.send(b, item[2], wakeup=False, request_timeout_ms=timeout_ms)))
            elif client.connection_failed(b):
                refused.add(b)  # connection refused: a dead broker answers nothing, stop waiting for it
                todo.remove(item)
        now = time.monotonic()
        remaining = deadline - now
        waiting = {b for b, _, _ in todo} | {b for b, _, f in sent if not f.is_done}
        if not waiting or remaining <= 0:
            break
        if judged_at and all(judged_at.get(b, math.inf) <= now for b in waiting):
            break  # every broker still awaited has now been silent long enough: judged (see above)
        client.poll(timeout_ms=max(1, min(50, int(remaining * 1000))))
    failed = {b for b, kind, _ in todo if kind not in tiered.KINDS} | refused  # reachability: core questions only
    answers: dict[tuple[int, str], object] = {}
    for b, kind, f in sent:
        if not f.is_done or f.failed():
            if kind not in tiered.KINDS:  # reachability is judged on the core questions alone
                failed.add(b)
            continue
        answers[(b, kind)] = f.value
    _gather(result, answers, made)
    result.answered = result.asked - failed
    if failed:
        log.debug("offsets: no answer within %.1fs from brokers %s", timeout_s, sorted(failed))
        for b in failed:
            redial(client, b)
    return result


def _offsets_of(raw: Any, flat: bool, kind: str) -> dict[int, int]:
    """partition -> offset of one topic's part of an answer. An error or a negative offset: not (or no
    longer) a replica / the leader: left out, never guessed (the highest remote offset is -1 while no
    segment is copied: kept, it says so)."""
    if flat:
        pids, errors, offs = raw[0::5], raw[1::5], raw[3::5]
    else:
        pids, errors, offs = (tuple(p[0] for p in raw), tuple(p[1] for p in raw), tuple(p[3] for p in raw))
    if not any(errors) and (kind == "remote" or not offs or min(offs) >= 0):
        return dict(zip(pids, offs))  # every partition answered (the usual case): at C speed
    return {p: o for p, e, o in zip(pids, errors, offs) if e == 0 and (o >= 0 or kind == "remote")}


def _refusals_of(raw: Any, flat: bool) -> dict[int, int]:
    """partition -> error code (REFUSALS only) of one topic's part of an answer; empty in the usual case."""
    errors = raw[1::5] if flat else tuple(p[1] for p in raw)
    if not any(errors):
        return {}
    pids = raw[0::5] if flat else tuple(p[0] for p in raw)
    return {p: e for p, e in zip(pids, errors) if e in REFUSALS}


def _pieces(answer: Any, kind: str, last: tuple[Any, dict[str, tuple[Any, dict[int, int]]]] | None
            ) -> tuple[dict[str, tuple[Any, dict[int, int]]], set[str]]:
    """One answer by topic: topic -> (its part of the answer, partition -> offset), and the topics
    whose part differs from `last`'s (the same broker's answer of that kind a round ago: (answer,
    its parts)) or is new or gone. A topic's part as it was keeps its map (the same object)."""
    flat = getattr(answer, "flat", None)  # collectors/wire.py's v4/v5 answers: a flat tuple per topic
    before = last[1] if last is not None else {}
    base = getattr(answer, "base", None)
    if flat is not None and base is not None and last is not None and base() is last[0]:
        # read against last round's answer (wire.decode_like): it says which topics differ
        out = dict(before)
        moved: set[str] = set()
        for i in answer.changed:
            topic, raw = flat[i]
            out[topic] = (raw, _offsets_of(raw, True, kind))
            moved.add(topic)
        return out, moved
    out = {}
    moved = set()
    for topic, raw in (flat if flat is not None else answer.topics):
        was = before.get(topic)
        if was is not None and was[0] == raw:  # compared whole, at C speed
            out[topic] = was
            continue
        moved.add(topic)
        out[topic] = (raw, _offsets_of(raw, flat is not None, kind))
    moved.update(t for t in before if t not in out)
    return out, moved


def _gather(result: OffsetsRound, answers: dict[tuple[int, str], object], made: Requests) -> None:
    """The round's maps from its answers ((broker, kind) -> decoded answer). A topic whose every part
    of every answer is the last round's takes the last round's maps (the same objects: nothing is
    built for it, and the caller may test them with `is`); the others are built from their parts."""
    last_round = made.last_round
    moved: set[str] = set()
    now: dict[tuple[int, str], tuple[Any, dict[str, tuple[Any, dict[int, int]]]]] = {}
    for key, answer in answers.items():
        last = made.pieces.get(key)
        if last is not None and last[0] is answer:  # the same bytes as a round ago (wire.SameAnswer)
            now[key] = last
            continue
        by_topic, changed = _pieces(answer, key[1], last)
        moved |= changed
        now[key] = (answer, by_topic)
    for key, (_, by_topic) in made.pieces.items():
        if key not in now:  # not asked or not answered this round: whatever it said is gone
            moved.update(by_topic)
    maps = result.by_kind()
    if last_round is not None:
        before = last_round.by_kind()
        for kind, into in maps.items():
            into.update((t, m) for t, m in before[kind].items() if t not in moved)
    else:
        moved = {t for _, by_topic in now.values() for t in by_topic}
    if moved:
        refused = result.refused
        for (b, kind), (answer, by_topic) in now.items():
            into = maps[kind]
            flat = getattr(answer, "flat", None) is not None
            for topic in moved.intersection(by_topic):
                raw, found = by_topic[topic]
                if kind == "hw" and (errors := _refusals_of(raw, flat)):
                    refused.setdefault(topic, {}).update(errors)
                if kind == "leo":
                    into.setdefault(topic, {})[b] = found
                elif topic in into:
                    into[topic].update(found)
                else:
                    into[topic] = dict(found)  # a fresh map: the part's own may be handed on next round
    made.seq += 1
    result.seq = made.seq
    result.moved = moved if last_round is not None else None
    made.pieces = now
    made.last_round = result


def redial(client: Client, broker: int) -> None:
    """Drop the connection to a broker that left this round unanswered and forget its reconnect
    back-off, so the next poll dials it afresh. A connection whose packets are being dropped only
    recovers at TCP's next retransmission (seconds to a minute once backed off), and a connection
    attempt pending on a dropped SYN at the client's back-off: either would keep a broker that is
    reachable again looking silent long after the path came back (a gray failure's page outliving
    it: RELIABILITY.md). A new connection answers within a round trip once it is."""
    try:
        if broker in client._conns:
            client.close(broker)  # kafka-python drops the BrokerConnection: the next one starts without back-off
    except Exception as e:  # noqa: BLE001 - the client's own back-off applies then
        log.debug("offsets: could not reset the connection to broker %s: %s", broker, e)
