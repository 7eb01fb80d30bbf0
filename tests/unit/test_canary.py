"""The canary: which partitions it adds, how a round is judged, what /metrics shows (pure)."""

import json

import pytest

from collectors.canary import plan_partitions
from pipelines.detectors import canary
from pipelines.findings import ROW_FIELDS
from pipelines.incidents import IncidentBook
from pipelines.alert_path import split_rows
from pipelines.metrics import KrmCollector
from pipelines.state import PipelineState

pytestmark = pytest.mark.unit


def test_every_live_broker_gets_a_partition_it_leads():
    assert plan_partitions([1, 2, 3], {}, 3) == {0: [1, 2, 3], 1: [2, 3, 1], 2: [3, 1, 2]}
    assert plan_partitions([1, 2], {}, 3) == {0: [1, 2], 1: [2, 1]}  # RF capped by the brokers
    current = {0: [1, 2, 3], 1: [2, 3, 1], 2: [3, 1, 2]}
    assert plan_partitions([1, 2, 3], current, 3) == {}
    # broker 4 joins: one more partition, led by it; broker 3 gone: its partition stays as it is
    assert plan_partitions([1, 2, 4], current, 3) == {3: [4, 1, 2]}


def _row(**fields):
    from pyspark.sql import Row

    names = ["cluster", "poll_id", "observed_at_ms"] + [n for n, _ in ROW_FIELDS]
    return Row(*names)(*[fields.get(n) for n in names])


ROUND = {"topic": "krm.canary", "partitions": [
    {"partition": 0, "broker": 1, "leader": 1, "produced": True, "produce_ms": 40.0, "consumed": True, "e2e_ms": 45.0},
    {"partition": 1, "broker": 2, "leader": 2, "produced": False, "error": "KafkaTimeoutError: Expiring 1 record(s)"},
]}


def test_a_failed_write_is_a_partition_clients_cannot_use():
    rows = [_row(cluster="c", poll_id=7, observed_at_ms=1_000, row_type="canary", scope="canary", topic="krm.canary",
                 details=json.dumps(ROUND))]
    samples: list = []
    polls, found, *_ = split_rows(rows, samples)
    assert [(p.scope, p.poll_id) for p in polls] == [("canary", 7)]
    assert [(f.type, f.severity, f.topic, f.partition, f.broker, f.cause) for f in found] == [
        ("PARTITION_UNAVAILABLE", "critical", "krm.canary", 1, 2, "canary_failed")]
    assert found[0].details["error"].startswith("KafkaTimeoutError")

    book = IncidentBook(flap_window_ms=0)
    book.apply(polls, found)
    state = PipelineState()
    state.update(open_incidents=tuple(book.open_incidents()), canary={(s.cluster, s.partition): s for s in samples})
    from prometheus_client import CollectorRegistry

    reg = CollectorRegistry(auto_describe=False)
    reg.register(KrmCollector(state, clock=lambda: 2.0))
    assert reg.get_sample_value("krm_partition_unavailable", {"cluster": "c", "topic": "krm.canary", "partition": "1",
                                                              "cause": "canary_failed"}) == 1
    assert reg.get_sample_value("krm_canary_produce_up", {"cluster": "c", "broker": "1"}) == 1
    assert reg.get_sample_value("krm_canary_produce_up", {"cluster": "c", "broker": "2"}) == 0
    assert reg.get_sample_value("krm_canary_e2e_latency_seconds", {"cluster": "c", "broker": "1"}) == 0.045
    assert reg.get_sample_value("krm_canary_produce_latency_seconds", {"cluster": "c", "broker": "2"}) is None

    # the next round writes everywhere: the incident resolves
    ok = {"topic": "krm.canary", "partitions": [dict(p, produced=True, produce_ms=41.0) for p in ROUND["partitions"]]}
    polls, found, *_ = split_rows([_row(cluster="c", poll_id=8, observed_at_ms=6_000, row_type="canary",
                                        scope="canary", topic="krm.canary", details=json.dumps(ok))])
    book.apply(polls, found)
    assert book.open_incidents() == []


def test_judge_is_the_failed_partitions():
    assert [(f.partition, f.broker) for f in canary.judge(ROUND)] == [(1, 2)]


def test_a_round_that_cannot_start_is_counted_on_metrics():
    """No canary topic (CREATE denied, cluster down at start): no partition to report, so the only sign
    is the rounds counter (and one WARNING)."""
    from types import SimpleNamespace

    from collectors.canary import CanarySource
    from collectors.spool import Spool
    from collectors.stats import CollectorMetrics
    from foundation.config import ClusterConfig, CollectorConfig

    source = CanarySource(ClusterConfig(name="c1", bootstrap_servers="127.0.0.1:1", canary=True), CollectorConfig())

    def refused():
        raise PermissionError("TopicAuthorizationFailedError: CREATE on krm.canary")

    source._connect = refused
    assert source.poll() == [] and source.poll() == []
    collector = SimpleNamespace(publisher=SimpleNamespace(spool=Spool(10), sent=0, dropped=0, invalid=0), polls=0,
                                quick_publishes=0, unchanged=SimpleNamespace(kept_home=0), last_poll_s={},
                                canaries=[source], zookeeper_connected=dict,
                                migration_phases=dict)
    samples = {(s.labels["cluster"], s.labels["result"]): s.value for fam in CollectorMetrics(collector).collect()
               for s in fam.samples if s.name == "krm_collector_canary_rounds_total"}
    assert samples == {("c1", "ok"): 0, ("c1", "partition_failed"): 0, ("c1", "not_started"): 2}


def test_the_isr_a_write_waited_on_holds_its_page_behind_a_slow_follower():
    """The round carries each partition's ISR as the producer knew it: a failed write through a healthy leader whose
    ISR holds a critically slow broker is that broker's (krm_canary_slowed_by), and its incident names the ISR."""
    from types import SimpleNamespace

    from collectors.canary import _isr
    from pipelines.incidents import Incident

    metadata = SimpleNamespace(_partitions={"krm.canary": {1: SimpleNamespace(isr=[3, 2])}})
    assert _isr(metadata, "krm.canary", 1) == [2, 3]
    assert _isr(metadata, "krm.canary", 0) is None and _isr(object(), "krm.canary", 1) is None

    rnd = {"topic": "krm.canary", "partitions": [dict(p, isr=[p["broker"], 3]) for p in ROUND["partitions"]]}
    (finding,) = canary.judge(rnd)
    assert finding.details["isr"] == [2, 3]
    samples = canary.samples("c", rnd, 1_000)
    slow = Incident(incident_id="s", cluster="c", scope="slow", type="BROKER_SLOW", severity="critical", topic=None,
                    partition=None, broker=3, cause="slow_disk", details={}, opened_at_ms=500, last_seen_at_ms=900,
                    resolved_at_ms=None, status="open")
    state = PipelineState()
    state.update(open_incidents=(slow,), canary={(s.cluster, s.partition): s for s in samples})
    from prometheus_client import CollectorRegistry

    reg = CollectorRegistry(auto_describe=False)
    reg.register(KrmCollector(state, clock=lambda: 2.0))
    assert reg.get_sample_value("krm_canary_slowed_by", {"cluster": "c", "broker": "2", "slow_broker": "3"}) == 1
    assert reg.get_sample_value("krm_canary_slowed_by", {"cluster": "c", "broker": "1", "slow_broker": "3"}) == 1
    assert reg.get_sample_value("krm_canary_slowed_by", {"cluster": "c", "broker": "2", "slow_broker": "2"}) is None


def test_a_write_still_waiting_past_the_objective_is_said_before_the_round_ends():
    """A round's early record names the writes not answered yet and how long they waited: no verdict on the partition
    (no poll, no finding, its produce_up untouched), only how long clients wait, until the round's own record says how
    the write ended."""
    from kafka.future import Future

    from collectors.canary import _waiting, _Write
    from collectors.records import canary_record
    from pipelines import latency
    from schemas.observation import check

    done, pending, later = _Write(Future(), 10.0), _Write(Future(), 10.2), _Write(Future(), 11.0)
    done.future.success(None)
    sent = {0: [done], 1: [pending, later]}
    early = _waiting(sent, {0: [1, 2, 3], 1: [2, 3, 1]}, 12.25, {0: 1, 1: 2}, at_least_s=2.0)
    assert early == [{"partition": 1, "broker": 2, "produced": False, "waiting_ms": 2050.0, "leader": 2}]
    assert _waiting({1: [pending]}, {1: [2, 3, 1]}, 12.25, {})[0].get("leader") is None
    assert _waiting({1: [later]}, {1: [2, 3, 1]}, 12.25, {}, at_least_s=2.0) == []  # not waiting that long yet
    record = canary_record("c", 7, 3_000, topic="krm.canary", partitions=early, waiting=True)
    check(record)
    assert record["canary_state"]["waiting"] is True
    assert "waiting" not in canary_record("c", 7, 3_000, topic="krm.canary", partitions=early)["canary_state"]

    rows = [_row(cluster="c", poll_id=7, observed_at_ms=3_000, row_type="canary", scope="canary", topic="krm.canary",
                 details=json.dumps(record["canary_state"]))]
    samples: list = []
    polls, found, *_ = split_rows(rows, samples)
    assert polls == [] and found == []
    (s,) = samples
    assert (s.partition, s.broker, s.produced, s.waiting_ms) == (1, 2, False, 2050.0)
    assert latency.failed_leaders(samples) == set() and latency.client_latencies(samples) == {}
    assert latency.waiting_leaders(samples) == {("c", 2): 2.05}

    held = canary.still_waiting({}, samples)
    assert list(held) == [("c", 1)]
    # the round's own record, later: the write was acknowledged (or failed at the timeout); the wait is over
    (answered,) = canary.samples("c", {"topic": "krm.canary", "partitions": [ROUND["partitions"][1]]}, 4_500)
    assert canary.still_waiting(held, [answered]) == {}
    # an older round's record does not end a newer round's wait
    (older,) = canary.samples("c", {"topic": "krm.canary", "partitions": [ROUND["partitions"][1]]}, 2_000)
    assert canary.still_waiting(held, [older]) == held


class _TimedProducer:
    """A producer whose writes are answered after `answer_s(partition, n)` seconds (its n-th write to it)."""

    def __init__(self, answer_s):
        import itertools

        self.answer_s, self.counts, self.timers = answer_s, {}, []
        self._n = itertools.count()

    def send(self, topic, value, partition):
        import threading

        from kafka.future import Future

        n = self.counts[partition] = self.counts.get(partition, 0) + 1
        future = Future()
        timer = threading.Timer(self.answer_s(partition, n), future.success, args=(next(self._n),))
        self.timers.append(timer)
        timer.start()
        return future


def _source(answer_s, publish=None):
    from collectors.canary import CanarySource
    from foundation.config import ClusterConfig, CollectorConfig

    source = CanarySource(ClusterConfig(name="c1", bootstrap_servers="127.0.0.1:1", canary=True, latency_objective_s=1.0),
                          CollectorConfig(canary_timeout_ms=3000), publish)
    source._producer = _TimedProducer(answer_s)
    source._partitions = {0: [1, 2, 3], 1: [2, 3, 1], 2: [3, 1, 2]}
    source._leaders_now = lambda parts: ({p: source._partitions[p][0] for p in parts}, {})
    return source


def test_a_broker_answering_late_gets_a_train_of_writes_and_its_slowest_is_timed_alone():
    """While a broker answers krm late, the partitions it holds get a write every TRAIN_GAP_S for the objective's length:
    a CPU quota lets some writes through at once, and only the one of the train that waited in its tail says clients
    wait. Each write is timed when its answer arrives: a quick partition's write is not timed to the round's end."""
    early: list = []
    # partition 1 (led by broker 2): its third write waits 1.5 s, past the 1 s objective; the others answer at once
    source = _source(lambda p, n: 1.5 if (p, n) == (1, 3) else 0.02, publish=early.extend)
    sent = source._write([0, 1, 2], [1], 1.0, 3.0)
    assert len(sent[0]) == len(sent[2]) == 1
    assert 3 <= len(sent[1]) <= 6  # one at once, then one every 0.2 s for 1 s (fewer if the host is slow)
    took = {p: max(w.took_s(0.0) for w in ws) for p, ws in sent.items()}
    assert took[0] < 1.0 and took[2] < 1.0 and took[1] >= 1.5
    ((record,),) = [early]
    (waiting,) = record["canary_state"]["partitions"]
    assert (waiting["partition"], waiting["leader"]) == (1, 2) and waiting["waiting_ms"] >= 1000


def test_the_train_goes_to_every_partition_a_late_broker_holds():
    from collectors.canary import held_by

    replicas = {0: [1, 2], 1: [2, 3], 2: [3, 1], 3: [4, 1]}
    assert held_by(replicas, {2}) == [0, 1] and held_by(replicas, set()) == []
    source = _source(lambda p, n: 0.02)
    source.suspects = lambda: frozenset({3})
    source.hurry(1)
    assert source.hurried.is_set() and source._hurried_by == {1}


def test_no_late_broker_one_write_a_partition():
    """At rest (no broker answering late) a round is one write to each partition, as before the train."""
    source = _source(lambda p, n: 0.02)
    sent = source._write([0, 1, 2], [], 1.0, 3.0)
    assert {p: len(ws) for p, ws in sent.items()} == {0: 1, 1: 1, 2: 1}
    assert all(w.done_at is not None for ws in sent.values() for w in ws)


def test_an_attempt_waits_the_latency_objective_at_least():
    """Cut before the objective, an attempt is retried on a new connection and a write clients would have had in
    time reads past it."""
    from collectors.canary import attempt_timeout_ms

    assert attempt_timeout_ms(3000, 2.0) == 2000  # the defaults: the objective, not half the timeout
    assert attempt_timeout_ms(10000, 2.0) == 5000  # half the round's timeout leaves room for a second attempt
    assert attempt_timeout_ms(1500, 2.0) == 1500  # never past the round's own timeout
    assert attempt_timeout_ms(600, 0.1) == 500
