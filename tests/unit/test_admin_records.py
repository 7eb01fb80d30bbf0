"""AdminSource._records from a Metadata response (no broker needed): assignment history flags and the
ZooKeeper overlay."""

import time

import pytest

from collectors.admin import AdminSource
from collectors.offsets import OffsetsRound
from collectors.zookeeper import ZkPartition
from foundation.config import ClusterConfig, CollectorConfig

pytestmark = pytest.mark.unit


def md(replicas=(1, 2), leader=1, epoch=0):
    brokers = [{"node_id": b, "host": "h", "port": 9092 + b, "rack": None} for b in (1, 2)]
    part = {"partition": 0, "leader": leader, "leader_epoch": epoch, "replicas": list(replicas), "isr": list(replicas)}
    topics = [{"topic": "t", "error_code": 0, "partitions": [part]}]
    return {"brokers": brokers, "controller_id": 1, "topics": topics}, topics


def topic_state(records):
    return next(r for r in records if r["kind"] == "topic")["topic_state"]


def test_assignment_recorded_on_first_sight_on_change_and_not_otherwise():
    src = AdminSource(ClusterConfig(name="c", bootstrap_servers="h:1"), CollectorConfig(assignment_snapshot_s=3600))
    m, t = md()
    assert topic_state(src._records(m, t, 1000, OffsetsRound(), 1))["assignment"] == "changed"
    assert topic_state(src._records(m, t, 2000, OffsetsRound(), 2))["assignment"] is None
    m, t = md(replicas=(2, 1))
    assert topic_state(src._records(m, t, 3000, OffsetsRound(), 3))["assignment"] == "changed"


def test_quiet_partitions_are_left_out_with_the_topic_counts_in_their_place():
    """A healthy partition is sent on first sight, then left out (schemas/quiet.py) while the record
    says the topic's size and per-broker counts; it comes back the moment it is not quiet."""
    src = AdminSource(ClusterConfig(name="c", bootstrap_servers="h:1"),
                      CollectorConfig(assignment_snapshot_s=3600, history_keyframe_s=1e9))  # no keyframe here
    m, t = md()
    first = topic_state(src._records(m, t, 1000, OffsetsRound(), 1))
    assert [p["partition"] for p in first["partitions"]] == [0] and "broker_load" not in first  # first sight: all
    quiet = topic_state(src._records(m, t, 2000, OffsetsRound(), 2))
    assert quiet["partitions"] == [] and quiet["partition_count"] == 1
    assert quiet["broker_load"] == [[1, 1, 1, 1, 0], [2, 0, 1, 0, 0]]  # [broker, leaders, replicas, preferred, not leading]
    m, t = md()
    t[0]["partitions"][0]["isr"] = [1]  # broker 2 left the ISR
    shrunk = topic_state(src._records(m, t, 3000, OffsetsRound(), 3))
    assert [p["isr"] for p in shrunk["partitions"]] == [[1]]


def test_leave_out_quiet_false_publishes_every_partition_at_every_poll():
    src = AdminSource(ClusterConfig(name="c", bootstrap_servers="h:1"), CollectorConfig(leave_out_quiet=False))
    m, t = md()
    for i in range(3):
        state = topic_state(src._records(m, t, 1000 + i * 1000, OffsetsRound(), i + 1))
        assert len(state["partitions"]) == 1 and "broker_load" not in state


def test_a_periodic_assignment_snapshot_carries_every_partition():
    src = AdminSource(ClusterConfig(name="c", bootstrap_servers="h:1"),
                      CollectorConfig(assignment_snapshot_s=10, history_keyframe_s=1e9))
    m, t = md()
    states = [topic_state(src._records(m, t, 1000 + i * 2000, OffsetsRound(), i + 1)) for i in range(12)]
    snapshots = [s for s in states if s["assignment"] == "snapshot"]
    assert len(snapshots) == 2 and all(len(s["partitions"]) == 1 and "broker_load" not in s for s in snapshots)
    assert all(s["partitions"] == [] for s in states[1:] if s["assignment"] is None)


class FakeZk:
    """The reads AdminSource makes of collectors.zookeeper.ZkState."""

    reassigning = False
    connected = True
    kraft_in_charge = False

    def __init__(self, live, state, assignments=None, moves=None):
        self._live, self._state, self._assignments = live, state, assignments or {}
        self._moves = moves or {}

    def moves(self, topic):
        return dict(self._moves.get(topic) or {})

    def live_brokers(self):
        return set(self._live)

    def controller(self):
        return 2

    def partition(self, topic, partition):
        return self._state.get((topic, partition))

    def assignment(self, topic):
        return self._assignments.get(topic)

    def topics(self):
        return sorted(self._assignments)

    def migration_phase(self):
        return 4  # Kafka's ZkMigrationState ZK: no migration

    def migration_phase_since_ms(self):
        return None


def test_zookeeper_state_wins_when_its_epoch_is_newer():
    zk = FakeZk({2}, {("t", 0): ZkPartition(leader=-1, leader_epoch=1, isr=(1,), controller_epoch=3,
                                             mtime_ms=990, version=4)})
    src = AdminSource(ClusterConfig(name="c", bootstrap_servers="h:1", zookeeper="zk:2181"), CollectorConfig(), zk)
    m, t = md(leader=1, epoch=0)  # the brokers' metadata still says broker 1 leads
    records = src._records(m, t, 1000, OffsetsRound(), 1)
    (p,) = topic_state(records)["partitions"]
    assert (p["leader"], p["leader_epoch"], p["isr"], p["zk_mtime_ms"]) == (-1, 1, [1], 990)
    cluster = next(r for r in records if r["kind"] == "cluster")["cluster_state"]
    assert cluster["controller_id"] == 2 and {b["id"]: b["live"] for b in cluster["brokers"]} == {1: False, 2: True}


def test_zookeeper_replicas_come_with_its_leader_and_isr():
    """Mid-reassignment the Admin API's replicas can trail the controller's: a leader or ISR member
    from ZooKeeper must never be published beside replicas that do not contain it."""
    zk = FakeZk({1, 2, 3}, {("t", 0): ZkPartition(leader=3, leader_epoch=2, isr=(3, 1), controller_epoch=3,
                                                   mtime_ms=990, version=4)}, {"t": {0: (3, 1)}})
    src = AdminSource(ClusterConfig(name="c", bootstrap_servers="h:1", zookeeper="zk:2181"), CollectorConfig(), zk)
    m, t = md(leader=1, epoch=0)  # metadata: replicas [1, 2]
    (p,) = topic_state(src._records(m, t, 1000, OffsetsRound(), 1))["partitions"]
    assert (p["leader"], p["replicas"], p["isr"]) == (3, [3, 1], [3, 1])


def test_zookeeper_triggered_records_start_with_a_consistent_cluster_record():
    state = {("t", 0): ZkPartition(leader=-1, leader_epoch=1, isr=(1,), controller_epoch=3, mtime_ms=990, version=4)}
    zk = FakeZk({2}, state)
    zk.assignment = lambda topic: {0: (1,)}
    src = AdminSource(ClusterConfig(name="c", bootstrap_servers="h:1", zookeeper="zk:2181"), CollectorConfig(), zk)
    assert src.quick_records({"t"})[0]["kind"] == "topic"  # no full poll yet: nothing to base a cluster record on
    m, t = md()
    src._records(m, t, 1000, OffsetsRound(), 1)
    cluster, topic = src.quick_records({"t"})
    assert cluster["source"] == "zookeeper" and cluster["poll_id"] == topic["poll_id"]
    assert {b["id"]: b["live"] for b in cluster["cluster_state"]["brokers"]} == {1: False, 2: True}
    assert cluster["cluster_state"]["controller_id"] == 2 and cluster["cluster_state"]["topic_count"] == 1


def test_a_zookeeper_triggered_record_never_goes_back_in_leader_epoch():
    """Found by the fault loops (RELIABILITY.md): at a broker's return the full poll's Metadata
    already named the new leader (epoch 5) while the mirror's watch for that partition had not
    fired yet (epoch 4, leader -1); a quick record for another partition's change, stamped a few ms
    later, republished the stale state, and the resolved OFFLINE_PARTITION reopened for 2 ms."""
    state = {("t", 0): ZkPartition(leader=-1, leader_epoch=4, isr=(1,), controller_epoch=3, mtime_ms=900, version=4)}
    zk = FakeZk({1, 2}, state, {"t": {0: (1,)}})
    src = AdminSource(ClusterConfig(name="c", bootstrap_servers="h:1", zookeeper="zk:2181"), CollectorConfig(), zk)
    m, t = md(replicas=(1,), leader=1, epoch=5)  # the brokers' metadata is ahead of the mirror
    (p,) = topic_state(src._records(m, t, 1000, OffsetsRound(), 1))["partitions"]
    assert (p["leader"], p["leader_epoch"]) == (1, 5)
    (p,) = topic_state(src.quick_records({"t"}))["partitions"]
    assert (p["leader"], p["leader_epoch"], p["isr"]) == (1, 5, [1]) and "zk_mtime_ms" not in p
    state[("t", 0)] = ZkPartition(leader=-1, leader_epoch=6, isr=(1,), controller_epoch=3, mtime_ms=1100, version=5)
    (p,) = topic_state(src.quick_records({"t"}))["partitions"]
    assert (p["leader"], p["leader_epoch"], p["zk_mtime_ms"]) == (-1, 6, 1100)  # a newer epoch: the mirror's
    # the topic deleted and created again (epochs from 0, another assignment): not overridden
    state[("t", 0)] = ZkPartition(leader=2, leader_epoch=0, isr=(2,), controller_epoch=3, mtime_ms=1200, version=0)
    zk._assignments = {"t": {0: (2,)}}
    (p,) = topic_state(src.quick_records({"t"}))["partitions"]
    assert (p["leader"], p["leader_epoch"]) == (2, 0)


def test_a_quick_record_during_a_full_poll_does_not_publish_what_its_metadata_already_replaced():
    """Found by the fault loops (RELIABILITY.md): at a broker's return a full poll's Metadata named
    the new leader (epoch 6) and stamped the poll; during its offsets round the mirror's watch for
    another partition fired, and the quick record, stamped 29 ms later, still had this partition's
    old state from the mirror (leader -1, epoch 5): an OFFLINE_PARTITION reopened for 1 ms."""
    state = {("t", 0): ZkPartition(leader=-1, leader_epoch=5, isr=(1,), controller_epoch=3, mtime_ms=900, version=4)}
    zk = FakeZk({1, 2}, state, {"t": {0: (1,)}})
    src = AdminSource(ClusterConfig(name="c", bootstrap_servers="h:1", zookeeper="zk:2181"), CollectorConfig(), zk)
    m, t = md(replicas=(1,), leader=1, epoch=6)
    stamped = src.parts.published.arrive({x["topic"]: x["partitions"] for x in t})  # Metadata in; offsets asked
    (p,) = topic_state(quick := src.quick_records({"t"}))["partitions"]
    assert quick[0]["observed_at_ms"] >= stamped
    assert (p["leader"], p["leader_epoch"], p["isr"]) == (1, 6, [1]) and "zk_mtime_ms" not in p
    (p,) = topic_state(src._records(m, t, stamped, OffsetsRound(), 1))["partitions"]
    assert (p["leader"], p["leader_epoch"]) == (1, 6)
    assert src.parts.published.arrived is None, "handed over to parts.published once the poll's records are built"
    # without a full poll in flight the mirror's newer state is published as before
    state[("t", 0)] = ZkPartition(leader=-1, leader_epoch=7, isr=(1,), controller_epoch=3, mtime_ms=1100, version=5)
    (p,) = topic_state(src.quick_records({"t"}))["partitions"]
    assert (p["leader"], p["leader_epoch"], p["zk_mtime_ms"]) == (-1, 7, 1100)


def test_a_quick_record_carries_the_last_polls_offline_replicas():
    """ZooKeeper holds no log-dir state: a partition whose only in-sync copy sits on a failed log
    directory (Metadata's offline replicas) would read `live_isr_but_no_leader` in every record the
    mirror builds for its topic, and its OFFLINE_PARTITION's cause would flap with each poll."""
    state = {("t", 0): ZkPartition(leader=-1, leader_epoch=2, isr=(1,), controller_epoch=3, mtime_ms=900, version=4)}
    zk = FakeZk({1, 2}, state, {"t": {0: (1,)}})
    src = AdminSource(ClusterConfig(name="c", bootstrap_servers="h:1", zookeeper="zk:2181"), CollectorConfig(), zk)
    m, t = md(replicas=(1,), leader=-1, epoch=2)
    t[0]["partitions"][0]["offline_replicas"] = [1]
    (p,) = topic_state(src._records(m, t, 1000, OffsetsRound(), 1))["partitions"]
    assert p["offline_replicas"] == [1]
    (p,) = topic_state(src.quick_records({"t"}))["partitions"]
    assert (p["leader"], p["isr"], p["offline_replicas"]) == (-1, [1], [1])
    # the broker restarted on a new disk: the next poll lists none, and neither do the quick records
    t[0]["partitions"][0]["offline_replicas"] = []
    src._records(m, t, 2000, OffsetsRound(), 2)
    (p,) = topic_state(src.quick_records({"t"}))["partitions"]
    assert "offline_replicas" not in p


def test_a_poll_that_reaches_no_broker_still_publishes_the_zookeeper_view():
    """Found by the cluster-down fault loop (RELIABILITY.md): with every broker down no controller is
    left to write leader -1; the state znodes keep naming dead leaders, which is offline by Kafka's
    definition, but a poll that reached no broker published only its failure: no OFFLINE_PARTITION
    for minutes."""
    from collectors.access import AccessProblem

    state = {("t", 0): ZkPartition(leader=1, leader_epoch=3, isr=(1, 2), controller_epoch=3, mtime_ms=900, version=4),
             ("t", 1): ZkPartition(leader=2, leader_epoch=2, isr=(2,), controller_epoch=3, mtime_ms=900, version=3)}
    zk = FakeZk(set(), state, {"t": {0: (1, 2), 1: (2,)}})  # no broker registered
    src = AdminSource(ClusterConfig(name="c", bootstrap_servers="h:1", zookeeper="zk:2181"), CollectorConfig(), zk)
    src.parts.access.failed(AccessProblem("unreachable", "cluster c: no broker answered"))
    failure, topic = src._failed_poll(7)
    assert failure["kind"] == "cluster" and failure["cluster_state"]["error"] == "cluster c: no broker answered"
    # who is registered is known without a broker: every replica holder down (BROKER_DOWN opens during
    # the outage, not at the restart); whether one answers is unknown
    assert [(b["id"], b["live"], b["reachable"]) for b in failure["cluster_state"]["brokers"]] == [
        (1, False, None), (2, False, None)]
    ts = topic["topic_state"]
    assert (topic["source"], topic["poll_id"], topic["observed_at_ms"]) == ("zookeeper", 7, failure["observed_at_ms"])
    assert ts["live_brokers"] == [] and ts["has_offsets"] is False
    assert [(p["partition"], p["leader"]) for p in ts["partitions"]] == [(0, 1), (1, 2)]
    assert ts["resolves"] is False, "a registration alone does not make a partition available"
    # ZooKeeper-triggered records meanwhile resolve nothing either; once a poll reaches a broker, they do
    zk._live = {1, 2}
    src.parts.brokers.last_state = failure["cluster_state"]
    assert [r["topic_state"].get("resolves", True) for r in src.quick_records({"t"}) if r["kind"] == "topic"] == [False]
    src.parts.access.degraded = False
    assert [r["topic_state"].get("resolves", True) for r in src.quick_records({"t"}) if r["kind"] == "topic"] == [True]
    zk._live = set()
    # KRaft (no mirror), or krm's own ZooKeeper session lost: the failure alone, as before
    kraft = AdminSource(ClusterConfig(name="k", bootstrap_servers="h:1"), CollectorConfig())
    kraft.parts.access.failed(AccessProblem("unreachable", "cluster k: no broker answered"))
    assert [r["kind"] for r in kraft._failed_poll(1)] == ["cluster"]
    zk._live = None  # FakeZk: live_brokers() None, as when krm's own ZooKeeper session is down
    zk.live_brokers = lambda: None
    assert [r["kind"] for r in src._failed_poll(8)] == ["cluster"]


def test_brokers_changed_watches_the_live_brokers_not_kraft_s_random_controller(monkeypatch):
    """A KRaft broker answers each Metadata request with a random live broker as "controller"
    (KIP-590): that must not look like a change, or every check would run a full poll."""
    from types import SimpleNamespace

    import collectors.metadata as metadata_module

    src = AdminSource(ClusterConfig(name="c", bootstrap_servers="h:1"), CollectorConfig())
    assert src.brokers_changed() is False, "before a first poll there is nothing to compare"
    m, t = md()
    src._records(m, t, 1000, OffsetsRound(), 1)  # live brokers 1, 2
    from kafka.errors import KafkaConnectionError, KafkaTimeoutError

    client = SimpleNamespace(api_version=lambda *a, **k: 8)
    src._admin, src._last_node = SimpleNamespace(_client=client), 1
    answers = iter([[1, 2], [1, 2], [1], KafkaConnectionError("refused"), KafkaTimeoutError("no answer in 500 ms")])
    controllers = iter([1, 2, 2])

    def fake_ask(client, node, request, timeout_ms):
        got = next(answers)
        if isinstance(got, Exception):
            raise got
        return SimpleNamespace(to_object=lambda: {"brokers": [{"node_id": b} for b in got],
                                                  "controller_id": next(controllers)})

    monkeypatch.setattr(metadata_module, "ask", fake_ask)
    assert [src.brokers_changed() for _ in range(4)] == [False, False, True, True]
    assert src.parts.brokers.probes.silent(client, 0.0) == {}, "a refusal is not silence (the poll's refusal probe judges it)"
    assert src.brokers_changed() is True
    assert set(src.parts.brokers.probes.silent(client, 0.0)) == {1}, "an unanswered check: silent since it went out"


def test_a_closed_port_refuses_and_a_listening_one_does_not():
    import socket

    from collectors.reachability import refusing
    from lab.local_cluster import free_port

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        s.listen(1)  # accepts, never answers: what a SIGSTOPped broker looks like
        t0 = time.monotonic()
        got = refusing({1: ("127.0.0.1", free_port()), 2: ("127.0.0.1", s.getsockname()[1]),
                        3: ("127.0.0.1", free_port())}, timeout_s=0.3)
        assert got == {1, 3}
        assert time.monotonic() - t0 < 1.0, "probed at once, bounded by the timeout"


def test_unreachable_is_refused_at_once_and_silent_only_after_unreachable_after_s(monkeypatch):
    import collectors.reachability as reachability

    clock = [100.0]
    monkeypatch.setattr(reachability.time, "monotonic", lambda: clock[0])
    dead = {3}
    monkeypatch.setattr(reachability, "refusing", lambda addresses: {b for b, (_h, port) in addresses.items()
                                                                     if port - 9092 in dead})
    src = AdminSource(ClusterConfig(name="c", bootstrap_servers="h:1"), CollectorConfig(unreachable_after_s=4.0))
    src.parts.brokers.known = {b: {"host": "h", "port": 9092 + b} for b in (1, 2, 3)}

    def poll(answered):
        return src.parts.brokers.unreachable(OffsetsRound(answered=set(answered), asked={1, 2, 3}))

    assert poll({1, 2}) == {3}, "refused: at once"
    assert poll({1}) == {3}, "2 silent for 0 s"
    clock[0] += 3.0
    assert poll({1}) == {3}, "2 silent for 3 s: a pause, not yet"
    clock[0] += 1.5
    assert poll({1}) == {2, 3}, "2 silent for 4.5 s"
    clock[0] += 1.0
    assert poll({1, 2}) == {3}, "2 answers again: forgiven at once"
    clock[0] += 1.0
    assert poll({1}) == {3}, "and its silence counts from zero again"


def test_a_broker_that_just_became_live_may_refuse_for_unreachable_after_s(monkeypatch):
    """Kafka registers (ZooKeeper) or unfences (KRaft) a broker before it opens its ports, and may make
    it a leader in between: a refusal then is start-up, not death, until it has been live a while."""
    import collectors.reachability as reachability

    clock = [100.0]
    monkeypatch.setattr(reachability.time, "monotonic", lambda: clock[0])
    refusing_now = {3}
    monkeypatch.setattr(reachability, "refusing", lambda addresses: {b for b, (_h, port) in addresses.items()
                                                                     if port - 9092 in refusing_now})
    src = AdminSource(ClusterConfig(name="c", bootstrap_servers="h:1"), CollectorConfig(unreachable_after_s=4.0))
    src.parts.brokers.known = {b: {"host": "h", "port": 9092 + b} for b in (1, 2, 3)}

    def poll(live, answered):
        src.parts.brokers.reach.note_live(set(live))
        return src.parts.brokers.unreachable(OffsetsRound(answered=set(answered), asked=set(live)))

    assert poll({1, 2, 3}, {1, 2}) == {3}, "live at krm's first view: a refusal is definitive at once"
    assert poll({1, 2}, {1, 2}) == set(), "3's registration is gone"
    clock[0] += 10
    assert poll({1, 2, 3}, {1, 2}) == set(), "3 registered again, its port not open yet"
    clock[0] += 3.9
    assert poll({1, 2, 3}, {1, 2}) == set(), "live for 3.9 s"
    clock[0] += 0.2
    assert poll({1, 2, 3}, {1, 2}) == {3}, "live for 4.1 s and still refusing: gone"


def test_after_a_poll_that_reached_no_broker_every_broker_gets_the_start_up_grace(monkeypatch):
    import collectors.reachability as reachability
    from collectors import access

    clock = [100.0]
    monkeypatch.setattr(reachability.time, "monotonic", lambda: clock[0])
    monkeypatch.setattr(reachability, "refusing", lambda addresses: {2})
    # KRaft: no ZooKeeper
    src = AdminSource(ClusterConfig(name="c", bootstrap_servers="h:1"), CollectorConfig(unreachable_after_s=4.0))
    src.parts.brokers.known = {b: {"host": "h", "port": 9092 + b} for b in (1, 2)}
    src.parts.brokers.reach.note_live({1, 2})
    assert src.parts.brokers.unreachable(OffsetsRound(answered={1}, asked={1, 2})) == {2}
    src.parts.access.problem = access.AccessProblem("unreachable", "cluster c unreachable")
    src._failed_poll(7)  # the whole cluster may restart while nobody answers
    src.parts.brokers.reach.note_live({1, 2})
    assert src.parts.brokers.unreachable(OffsetsRound(answered={1}, asked={1, 2})) == set()
    clock[0] += 4.0
    assert src.parts.brokers.unreachable(OffsetsRound(answered={1}, asked={1, 2})) == {2}


def test_a_controlled_shutdown_is_judged_on_the_controllers_writes_not_the_brokers_caches():
    """ZooKeeper mode under load: broker 2 stopped cleanly (the controller moved its leadership and
    took it out of the ISR, then its registration went) while the brokers' metadata caches still name
    it leader and in the ISR. Judged on the same view krm publishes (ZooKeeper's state), it is a
    controlled shutdown (BROKER_DOWN `stopped`), not a crash."""
    zk = FakeZk({1}, {("t", 0): ZkPartition(leader=1, leader_epoch=3, isr=(1,), controller_epoch=3,
                                             mtime_ms=990, version=4)}, {"t": {0: (2, 1)}})
    src = AdminSource(ClusterConfig(name="c", bootstrap_servers="h:1", zookeeper="zk:2181"), CollectorConfig(), zk)
    # the poll before: 2 led t/0 (what it held is the evidence that it handed over)
    src.parts.brokers.departures.annotate([{"id": b, "live": True, "reachable": True} for b in (1, 2)],
                             lambda: [{"leader": 2, "isr": [2, 1], "replicas": [2, 1]}], 500)
    m, t = md(replicas=(2, 1), leader=2, epoch=2)  # the caches: 2 leads, ISR [2, 1]
    cluster = next(r for r in src._records(m, t, 1000, OffsetsRound(), 1) if r["kind"] == "cluster")["cluster_state"]
    (b2,) = [b for b in cluster["brokers"] if b["id"] == 2]
    assert (b2["live"], b2["departure"], b2["controlled_shutdown"], b2["down_since_ms"]) == (False, "controlled", True, 1000)


def test_silence_counts_from_the_first_unanswered_request(monkeypatch):
    """A gray failure: the broker's silence started when the request it left unanswered went out (the
    poll's Metadata request, or the offsets round's), not when the round stopped waiting for it."""
    import collectors.reachability as reachability

    clock = [100.0]
    monkeypatch.setattr(reachability.time, "monotonic", lambda: clock[0])
    monkeypatch.setattr(reachability, "refusing", lambda addresses: set())
    src = AdminSource(ClusterConfig(name="c", bootstrap_servers="h:1"), CollectorConfig(unreachable_after_s=4.0))
    src.parts.brokers.known = {b: {"host": "h", "port": 9092 + b} for b in (1, 2)}

    def poll(sent_at, answered):
        clock[0] = sent_at + 1.0  # the round waited its 1 s deadline
        return src.parts.brokers.unreachable(OffsetsRound(answered=set(answered), asked={1, 2}, sent_at=sent_at))

    assert poll(100.0, {1}) == set()
    assert poll(102.0, {1}) == set(), "silent for 3 s"
    assert poll(103.0, {1}) == {2}, "silent for 4 s: since 100.0, when its first unanswered request went out"
    # its Metadata request timed out first: the silence counts from then
    src2 = AdminSource(ClusterConfig(name="c", bootstrap_servers="h:1"), CollectorConfig(unreachable_after_s=4.0))
    src2.parts.brokers.known = src.parts.brokers.known
    src2.parts.brokers.reach.note_silent({2: 98.0})
    clock[0] = 102.0
    assert src2.parts.brokers.unreachable(OffsetsRound(answered={1}, asked={1, 2}, sent_at=101.0)) == {2}


def test_a_broker_left_unanswered_is_dialled_afresh():
    """The offsets round drops a silent broker's connection (kafka-python then starts the next one
    without back-off), so a path that comes back is seen at the next poll."""
    from collectors.offsets import redial

    class Client:
        def __init__(self):
            self._conns = {2: object()}
            self.closed = []

        def close(self, node):
            self.closed.append(node)
            self._conns.pop(node)

    c = Client()
    redial(c, 2)
    redial(c, 2)  # no connection left: nothing to close
    assert c.closed == [2] and 2 not in c._conns


def test_a_new_topic_whole_in_the_mirror_is_recorded_by_its_quick_record():
    """A topic created and grown between two full polls: the quick record of its creation carries its
    first layout to the assignments table (a restarted pipeline then knows it grew); a partial one
    (a state znode not written yet) or a topic a full poll recorded already carries none."""
    state = {("t", 0): ZkPartition(leader=1, leader_epoch=0, isr=(1,), controller_epoch=3, mtime_ms=900, version=0)}
    zk = FakeZk({1, 2}, state, {"t": {0: (1,), 1: (2,)}})
    src = AdminSource(ClusterConfig(name="c", bootstrap_servers="h:1", zookeeper="zk:2181"), CollectorConfig(), zk)
    assert topic_state(src.quick_records({"t"})).get("assignment") is None  # partition 1's state not written yet
    state[("t", 1)] = ZkPartition(leader=2, leader_epoch=0, isr=(2,), controller_epoch=3, mtime_ms=910, version=0)
    ts = topic_state(src.quick_records({"t"}))
    assert ts["assignment"] == "changed" and [p["replicas"] for p in ts["partitions"]] == [[1], [2]]
    m, t = md(replicas=(1,), leader=1, epoch=0)  # a full poll records the topic
    src._records(m, t, 1000, OffsetsRound(), 1)
    assert topic_state(src.quick_records({"t"})).get("assignment") is None


def test_a_leader_refusing_its_partition_is_published_with_since_when_it_refuses():
    """A leader that answers the offsets round but refuses the partition (collectors/offsets.py REFUSALS):
    `leader_error` with the time of the first poll that saw it, the clock kept while it is refused (in any
    way: one outage to the clients), gone when it gives a HW (PARTITION_UNAVAILABLE reads it)."""
    src = AdminSource(ClusterConfig(name="c", bootstrap_servers="h:1"), CollectorConfig(leave_out_quiet=False))
    m, t = md()

    def part(at, seq, refused, hw=None):
        found = OffsetsRound(refused=refused, hw={"t": {0: hw}} if hw is not None else {}, seq=seq)
        (p,) = topic_state(src._records(m, t, at, found, seq))["partitions"]
        return p

    assert "leader_error" not in part(1000, 1, {}, hw=5)
    first = part(2000, 2, {"t": {0: 6}})
    assert (first["leader_error"], first["leader_error_since_ms"]) == ("NOT_LEADER_OR_FOLLOWER", 2000)
    assert part(3000, 3, {"t": {0: 6}})["leader_error_since_ms"] == 2000
    other = part(4000, 4, {"t": {0: 78}})
    assert (other["leader_error"], other["leader_error_since_ms"]) == ("OFFSET_NOT_AVAILABLE", 2000)
    assert "leader_error" not in part(5000, 5, {}, hw=5)
    assert part(6000, 6, {"t": {0: 78}})["leader_error_since_ms"] == 6000  # a new refusal: a new clock


def test_brokers_metadata_naming_another_leader_than_the_controller_is_published_with_since_when():
    """ZooKeeper mode: the controller elected broker 2, the brokers' metadata (what clients read) still names
    broker 1: `leader_error` STALE_METADATA from the first poll that saw it, gone once the metadata agrees."""
    state = {("t", 0): ZkPartition(leader=2, leader_epoch=1, isr=(2,), controller_epoch=3, mtime_ms=990, version=4)}
    zk = FakeZk({1, 2}, state)
    src = AdminSource(ClusterConfig(name="c", bootstrap_servers="h:1", zookeeper="zk:2181"),
                      CollectorConfig(leave_out_quiet=False), zk)
    m, t = md(leader=1, epoch=0)
    (p,) = topic_state(src._records(m, t, 1000, OffsetsRound(seq=1), 1))["partitions"]
    assert (p["leader"], p["leader_error"], p["leader_error_since_ms"]) == (2, "STALE_METADATA", 1000)
    (p,) = topic_state(src._records(m, t, 2000, OffsetsRound(seq=2), 2))["partitions"]
    assert p["leader_error_since_ms"] == 1000
    m, t = md(leader=2, epoch=1)  # the controller's UpdateMetadata arrived
    (p,) = topic_state(src._records(m, t, 3000, OffsetsRound(seq=3), 3))["partitions"]
    assert "leader_error" not in p
    state[("t", 0)] = ZkPartition(leader=-1, leader_epoch=2, isr=(2,), controller_epoch=3, mtime_ms=990, version=4)
    m, t = md(leader=2, epoch=1)
    (p,) = topic_state(src._records(m, t, 4000, OffsetsRound(seq=4), 4))["partitions"]
    assert p["leader"] == -1 and "leader_error" not in p  # no leader at all: OFFLINE_PARTITION's case
