"""Which polls may stay home (collectors/unchanged.py), the pipeline's side of it (PipelineState.vouch), and what
the pipeline's clock then changes with no poll (pipelines/clock.py)."""

from __future__ import annotations

import copy

import pytest

from collectors.records import cluster_record, summarized, topic_record
from collectors.unchanged import UnchangedPolls, steady_digest
from pipelines.state import ClusterView, PipelineState

pytestmark = pytest.mark.unit

BROKERS = [{"id": b, "host": "h", "port": 9092, "rack": None, "live": True, "reachable": True} for b in (1, 2, 3)]


def quorum(at: int, follower_ages: tuple[int, int] = (100, 100)) -> dict:
    """A DescribeQuorum state on the leader's (1) clock `at`; followers 2 and 3 fetched `follower_ages` ago."""
    return {"leader_id": 1, "leader_epoch": 4, "high_watermark": at, "observers": 3,
            "voters": [{"id": 1, "log_end_offset": at, "last_fetch_ms": at, "last_caught_up_ms": at}]
            + [{"id": v, "log_end_offset": at - 1, "last_fetch_ms": at - age, "last_caught_up_ms": at - age}
               for v, age in zip((2, 3), follower_ages)]}


def poll(poll_id: int, at: int, controller: int | None = 1, brokers: list | None = None, q: dict | None = None,
         loud: list | None = None, **cluster: object) -> list[dict]:
    """A poll's records as AdminSource publishes them: a cluster record, one summarized topic record (a KRaft
    cluster's when `q` is given, a ZooKeeper-mode cluster's otherwise)."""
    caps = {"quorum": True} if q is not None else None
    head = cluster_record("c1", "admin", poll_id, at, controller_id=controller, brokers=copy.deepcopy(brokers or BROKERS),
                          topic_count=1, partition_count=3, quorum=q, capabilities=caps, **cluster)  # type: ignore[arg-type]
    topic = topic_record("c1", "admin", poll_id, at, topic="t", live_brokers=[1, 2, 3], partitions=(),
                         min_insync_replicas=2, unclean_leader_election=False)
    topic["topic_state"]["assignment"] = None
    return [head, summarized(topic, 3, [[1, 1, 3, 1, 0], [2, 1, 3, 1, 0], [3, 1, 3, 1, 0]], loud or [])]


def test_two_healthy_polls_share_a_digest_whatever_their_stamps_and_the_quorums_offsets():
    a = poll(1, 10_000, q=quorum(10_000))
    b = poll(2, 12_000, controller=3, q=quorum(12_000, (300, 50)))  # KRaft: "controller" is any live broker
    assert steady_digest(a) is not None
    assert steady_digest(a) == steady_digest(b)


def test_in_zookeeper_mode_a_new_controller_is_news():
    assert steady_digest(poll(1, 10_000, controller=1)) != steady_digest(poll(2, 12_000, controller=2))


@pytest.mark.parametrize("records, why", [
    (poll(1, 10_000, controller=None), "no controller"),
    (poll(1, 10_000, error="timed out"), "a failed poll"),
    (poll(1, 10_000, denied=["DESCRIBE_CONFIGS"]), "an ACL missing"),
    (poll(1, 10_000, q=quorum(10_000, (100, 5000))), "a voter not fetching"),
    (poll(1, 10_000, q={**quorum(10_000), "leader_id": -1}), "no quorum leader"),
    (poll(1, 10_000, loud=[{"partition": 0, "leader": 1, "replicas": [1, 2, 3], "isr": [1, 2]}]), "a loud partition"),
])
def test_a_poll_a_rule_may_find_something_on_has_no_digest(records, why):
    assert steady_digest(records) is None, why


def _answering(answer: dict[int, float], steady: dict[int, float]) -> list[dict]:
    return [b | {"answer_ms": answer[b["id"]], "answer_steady_ms": steady[b["id"]]} for b in BROKERS]


def test_answer_times_stay_home_unless_a_broker_answers_late_or_mildly_late_against_its_peers():
    """Round trips move at every poll: two polls at rest share a digest whatever they are. A broker answering
    SLOW_MIN_S late, or whose steady answer time is mildly late against its peers' (schemas/latency.py), sends every
    poll: the pipeline judges BROKER_SLOW on each. Everyone equally slower (a loaded host) is no one's spell."""
    quick = poll(1, 10_000, brokers=_answering({1: 1.2, 2: 1.9, 3: 0.8}, {1: 1.0, 2: 2.1, 3: 0.9}))
    other = poll(2, 12_000, brokers=_answering({1: 3.0, 2: 0.7, 3: 9.0}, {1: 1.4, 2: 1.6, 3: 4.0}))
    assert steady_digest(quick) is not None and steady_digest(quick) == steady_digest(other)
    assert steady_digest(poll(3, 14_000, brokers=_answering({1: 1.0, 2: 250.0, 3: 1.0}, {1: 1.0, 2: 2.0, 3: 1.0}))) is None
    usual = {1: 1.0, 2: 2.0, 3: 1.2}
    assert steady_digest(poll(4, 16_000, brokers=_answering({1: 1.0, 2: 3.0, 3: 1.0}, {1: 1.0, 2: 40.0, 3: 1.5})),
                         usual) is None
    loaded = poll(5, 18_000, brokers=_answering({1: 30.0, 2: 35.0, 3: 28.0}, {1: 30.0, 2: 40.0, 3: 25.0}))
    assert steady_digest(loaded, usual) == steady_digest(quick, usual)


def test_a_broker_always_mildly_slower_than_its_peers_keeps_its_polls_home():
    """Against its own usual (collectors/broker_book.py) a broker whose steady answer time has always been mildly late
    against its peers' (a slower host) is no spell: the pipeline would not say it, so its polls stay home; twice its
    usual is a spell again, and a broker with no usual yet is not late (the pipeline says nothing milder either)."""
    slower = poll(1, 10_000, brokers=_answering({1: 1.0, 2: 3.0, 3: 1.0}, {1: 1.0, 2: 40.0, 3: 1.5}))
    quick = poll(2, 12_000, brokers=_answering({1: 1.2, 2: 1.9, 3: 0.8}, {1: 1.0, 2: 2.1, 3: 0.9}))
    assert steady_digest(slower, {1: 1.0, 2: 35.0, 3: 1.2}) == steady_digest(quick)
    assert steady_digest(slower, {1: 1.0, 3: 1.2}) == steady_digest(quick)
    assert steady_digest(slower, {1: 1.0, 2: 15.0, 3: 1.2}) is None
    assert steady_digest(slower) == steady_digest(quick)


def test_a_topic_record_with_an_assignment_or_not_summarized_has_no_digest():
    snapshot = poll(1, 10_000)
    snapshot[1]["topic_state"]["assignment"] = "snapshot"
    whole = poll(1, 10_000)
    del whole[1]["topic_state"]["partition_count"]  # leave_out_quiet = false: every partition, every poll
    assert steady_digest(snapshot) is None and steady_digest(whole) is None


def test_a_changed_broker_load_is_news():
    a, b = poll(1, 10_000), poll(2, 12_000)
    b[1]["topic_state"]["broker_load"] = [[1, 2, 3, 1, 0], [2, 0, 3, 1, 1], [3, 1, 3, 1, 0]]  # a leader moved
    assert steady_digest(a) != steady_digest(b)


def test_a_poll_stays_home_only_when_unchanged_and_recent():
    gate = UnchangedPolls(resend_s=15.0)
    assert gate.offer("c1", poll(1, 10_000), now=0.0) is None  # the first poll goes out
    assert gate.offer("c1", poll(2, 12_000), now=2.0) == 1  # the same as poll 1: home, vouching for poll 1
    assert gate.offer("c1", poll(3, 14_000, controller=2), now=4.0) is None  # news: out
    assert gate.offer("c1", poll(4, 16_000, controller=2), now=6.0) == 3
    assert gate.offer("c1", poll(5, 36_000, controller=2), now=19.0) is None  # resend_s since poll 3
    assert gate.kept_home == 2


def test_a_broker_down_is_steady_its_escalation_is_the_clocks():
    down = [{**b, "live": b["id"] != 2, "departure": None if b["id"] != 2 else "controlled",
             "down_since_ms": None if b["id"] != 2 else 9_000} for b in BROKERS]
    assert steady_digest(poll(1, 10_000, brokers=down)) is not None
    assert steady_digest(poll(1, 10_000, brokers=down)) != steady_digest(poll(1, 10_000)), "a departure is news"
    assert steady_digest(poll(1, 10_000, brokers=down)) == steady_digest(poll(2, 12_000, brokers=down))


def silent(poll_id: int, at: int, judged: bool = False) -> list[dict]:
    """A poll of a cluster whose broker 2 is registered and does not answer; `judged`: its silence has
    reached unreachable_after_s, so the partition it leads is in the topic record."""
    brokers = [{**b, "reachable": b["id"] != 2, "departure": None if b["id"] != 2 else "unknown",
                "down_since_ms": None if b["id"] != 2 else 9_000} for b in BROKERS]
    loud = [{"partition": 1, "leader": 2, "replicas": [2, 3, 1], "isr": [2, 3, 1]}] if judged else []
    records = poll(poll_id, at, brokers=brokers, loud=loud)
    if judged:
        records[1]["topic_state"]["unreachable_brokers"] = [2]
    return records


def test_a_broker_falling_silent_is_published_once_then_its_verdict():
    """While a broker's silence grows toward unreachable_after_s, each poll says the same: the broker does
    not answer (BROKER_DOWN `unreachable`, nothing about it changes with time). The first such poll goes
    out, the ones after it stay home, so the alert query is idle when the verdict's poll comes; a broker
    that answers again is news."""
    assert steady_digest(silent(1, 10_000)) is not None
    assert steady_digest(silent(1, 10_000)) != steady_digest(poll(1, 10_000)), "silence is news"
    assert steady_digest(silent(1, 10_000, judged=True)) is None, "a partition named: a rule finds it"
    gate = UnchangedPolls(resend_s=60.0)
    assert gate.offer("c1", poll(1, 10_000), now=0.0) is None
    assert gate.offer("c1", silent(2, 11_000), now=1.0) is None  # first silent: out
    assert gate.offer("c1", silent(3, 12_000), now=2.0) == 2  # the same again: home
    assert gate.offer("c1", silent(4, 13_000), now=3.0) == 2
    assert gate.offer("c1", silent(5, 13_900, judged=True), now=3.9) is None  # the verdict: out
    assert gate.offer("c1", poll(6, 15_000), now=5.0) is None  # answered again: out


def test_after_a_quick_publish_or_with_resend_off_every_poll_goes_out():
    gate = UnchangedPolls(resend_s=15.0)
    gate.offer("c1", poll(1, 10_000), now=0.0)
    gate.forget("c1")
    assert gate.offer("c1", poll(2, 12_000), now=2.0) is None
    off = UnchangedPolls(resend_s=0.0)
    assert all(off.offer("c1", poll(i, 10_000 + i), now=float(i)) is None for i in range(5))


def view(poll_id: int, at_ms: int, **kw: object) -> ClusterView:
    return ClusterView(brokers=((1, True),), controller_id=1, error=None, newest_observed_ms=at_ms, poll_id=poll_id,
                       **kw)  # type: ignore[arg-type]


def test_a_vouch_moves_the_view_once_its_poll_is_processed():
    state = PipelineState()
    state.vouch("c1", 1, 12_000)  # no view yet: waits for poll 1's batch
    state.update(clusters={"c1": view(1, 10_000)})
    assert state.snapshot.clusters["c1"].newest_observed_ms == 12_000
    state.vouch("c1", 5, 14_000)  # poll 5 still on its way: its batch takes the view's time first
    assert state.snapshot.clusters["c1"].newest_observed_ms == 12_000
    state.update(clusters={"c1": view(5, 13_000)})
    assert state.snapshot.clusters["c1"].newest_observed_ms == 14_000
    state.vouch("c1", 5, 16_000)
    assert state.snapshot.clusters["c1"].newest_observed_ms == 16_000
    assert state.stale(now=17.0) == {} and state.stale(now=23.0) == {"c1": 7.0}
    state.vouch("c1", 5, 15_000)
    assert state.snapshot.clusters["c1"].newest_observed_ms == 16_000  # never older


def _rows(at: int, poll_id: int, topics: tuple[str, ...], event_on: str | None = None) -> list[object]:
    """An alert batch's rows for one full poll of cluster c1: its cluster record, each topic's marker with
    its per-broker counts, and (`event_on`) an unclean election found on that topic."""
    import json

    from tests.unit.test_capabilities import _row

    rec = cluster_record("c1", "admin", poll_id, at, controller_id=1, brokers=[{"id": 1, "live": True}],
                         topic_count=len(topics), partition_count=len(topics))
    rows = [_row(cluster="c1", poll_id=poll_id, observed_at_ms=at, row_type="cluster", scope="cluster",
                 details=json.dumps(rec["cluster_state"]))]
    for t in topics:
        rows.append(_row(cluster="c1", poll_id=poll_id, observed_at_ms=at, row_type="poll", scope=f"topic:{t}",
                         topic=t, details=json.dumps({"brokers": [[1, 1, 1, 1, 0]], "partitions": 1})))
    if event_on is not None:
        rows.append(_row(cluster="c1", poll_id=poll_id, observed_at_ms=at, row_type="finding", scope=f"topic:{event_on}",
                         type="UNCLEAN_LEADER_ELECTION", severity="critical", topic=event_on, partition=0,
                         cause="not_eligible", details="{}"))
    return rows


class _Batch:
    def __init__(self, rows: list[object]) -> None:
        self.rows = rows

    def collect(self) -> list[object]:
        return self.rows


class _Store:  # the incidents table is not this test's subject: what was written, in order
    def __init__(self) -> None:
        self.written: list = []

    def upsert(self, changed) -> None:
        self.written.extend(changed)


def _alert_path(state: PipelineState) -> object:
    from pipelines.alert_path import AlertPath
    from pipelines.incidents import IncidentBook

    book = IncidentBook(flap_window_ms=0, hold_ms={"UNCLEAN_LEADER_ELECTION": 60_000})
    return AlertPath(state, book, _Store(), deleted_after_ms=30_000)  # type: ignore[arg-type]


def test_a_held_event_ends_on_the_clock_at_its_end_with_polls_kept_home():
    """An event stays open for its hold; while polls stay home no batch comes, and the pipeline's clock
    ends it at the hold's end once the view is known that far."""
    state = PipelineState()
    path = _alert_path(state)
    path(_Batch(_rows(10_000, 1, ("a",), event_on="a")), 0)
    path(_Batch(_rows(12_000, 2, ("a",))), 1)  # the next poll, healthy: the event is held open
    state.vouch("c1", 2, 68_000)
    assert path.tick() == [] and [i.type for i in state.snapshot.open_incidents] == ["UNCLEAN_LEADER_ELECTION"]
    state.vouch("c1", 2, 72_000)
    (ended,) = path.tick()
    assert (ended.status, ended.resolved_at_ms) == ("resolved", 70_000) and state.snapshot.open_incidents == ()
    assert path.tick() == []


def test_a_held_event_ends_at_the_same_moment_when_a_batch_comes_first():
    state = PipelineState()
    path = _alert_path(state)
    path(_Batch(_rows(10_000, 1, ("a",), event_on="a")), 0)
    path(_Batch(_rows(75_000, 2, ("a",))), 1)
    assert state.snapshot.open_incidents == () and path.store.written[-1].resolved_at_ms == 70_000


def test_a_deleted_topic_is_forgotten_on_the_clock_and_one_polls_kept_home_saw_never():
    """Polls kept home found every topic of the poll they repeat: a topic that poll observed is not
    taken for deleted however long they stayed home (a ZooKeeper quick record, listing one topic, comes
    next). A topic missing from the polls is forgotten once unseen for 30 s, by the clock."""
    state = PipelineState()
    path = _alert_path(state)
    path(_Batch(_rows(10_000, 1, ("a", "b", "gone"))), 0)
    path(_Batch(_rows(12_000, 2, ("a", "b"))), 1)  # "gone" was deleted
    state.vouch("c1", 2, 40_000)
    path.tick()
    assert state.snapshot.broker_load["c1"][1] == (3, 3, 3, 0), "unseen for 30 s only"
    state.vouch("c1", 2, 40_001)
    path.tick()
    assert state.snapshot.broker_load["c1"][1] == (2, 2, 2, 0)
    state.vouch("c1", 2, 100_000)  # a minute at home
    path.tick()
    path(_Batch(_rows(101_000, 4, ("a",))), 3)  # a quick record of topic a alone
    assert state.snapshot.broker_load["c1"][1] == (2, 2, 2, 0), "topic b was seen by the polls kept home"


def _down_incident(path, at, down_since):
    """BROKER_DOWN `stopped` of broker 2 found by the poll at `at` (its batch's rows)."""
    import json

    from tests.unit.test_capabilities import _row

    rows = _rows(at, 1, ("a",))
    rows.append(_row(cluster="c1", poll_id=1, observed_at_ms=at, row_type="finding", scope="cluster",
                     type="BROKER_DOWN", severity="warning", broker=2, cause="stopped",
                     details=json.dumps({"down_since_ms": down_since, "departure": "controlled"})))
    path(_Batch(rows), 0)


def test_a_broker_down_past_planned_stop_max_escalates_on_the_clock_and_after_a_restart_at_the_same_moment():
    from pipelines.alert_path import AlertPath
    from pipelines.findings import DetectorSettings
    from pipelines.incidents import IncidentBook

    settings = DetectorSettings(planned_stop_max_ms=600_000)
    state = PipelineState()
    path = AlertPath(state, IncidentBook(flap_window_ms=0), _Store(), settings=settings)
    _down_incident(path, 10_000, down_since=9_000)
    state.vouch("c1", 1, 609_000)
    assert path.tick() == []
    state.vouch("c1", 1, 612_000)
    (raised,) = path.tick()
    assert (raised.severity, raised.last_seen_at_ms) == ("critical", 609_001)
    assert [i.severity for i in state.snapshot.open_incidents] == ["critical"] and path.tick() == []
    # a pipeline restarted in the middle: its book from the table, its first view a poll kept home since
    before = path.store.written[0]
    restarted = AlertPath(PipelineState(), IncidentBook.from_incidents(0, [before]), _Store(), settings=settings)
    restarted.state.update(clusters={"c1": view(1, 10_000)})
    restarted.state.vouch("c1", 1, 700_000)
    (again,) = restarted.tick()
    assert (again.severity, again.last_seen_at_ms) == ("critical", 609_001)


def test_a_collector_with_no_pipeline_beside_it_says_in_a_steady_record_how_long_it_holds():
    gate = UnchangedPolls(resend_s=15.0)
    first = poll(1, 10_000)
    assert gate.offer("c1", first, now=0.0, holds_s=17.0) is None
    assert first[0]["cluster_state"]["holds_s"] == 17.0
    assert gate.offer("c1", poll(2, 12_000), now=2.0, holds_s=17.0) == 1, "its own stamp is no news"
    loud = poll(3, 14_000, loud=[{"partition": 0, "leader": 1, "replicas": [1, 2, 3], "isr": [1, 2]}])
    assert gate.offer("c1", loud, now=4.0, holds_s=17.0) is None and "holds_s" not in loud[0]["cluster_state"]


def _leased_rows(at: int, poll_id: int, holds_s: float | None) -> list[object]:
    import json

    rows = _rows(at, poll_id, ("a",))
    cs = json.loads(rows[0].details)
    if holds_s is not None:
        cs["holds_s"] = holds_s
    from tests.unit.test_capabilities import _row

    rows[0] = _row(cluster="c1", poll_id=poll_id, observed_at_ms=at, row_type="cluster", scope="cluster",
                   details=json.dumps(cs))
    return rows


def test_a_record_that_holds_vouches_for_its_cluster_on_the_clock_until_then_a_margin_ago():
    from pipelines.alert_path import LEASE_MARGIN_MS

    state = PipelineState()
    path = _alert_path(state)
    path(_Batch(_leased_rows(10_000, 1, holds_s=17.0)), 0)
    margin = LEASE_MARGIN_MS + int(state.snapshot.last_batch_s * 1000)
    path.tick(now_ms=20_000)
    assert state.snapshot.clusters["c1"].newest_observed_ms == 20_000 - margin
    path.tick(now_ms=40_000)
    assert state.snapshot.clusters["c1"].newest_observed_ms == 27_000, "no further than the record holds"
    assert state.stale(now=40.0) == {"c1": 13.0}, "the next record is late: the view ages"
    path(_Batch(_leased_rows(28_000, 2, holds_s=None)), 1)  # a change: published, holding nothing
    path.tick(now_ms=50_000)
    assert state.snapshot.clusters["c1"].newest_observed_ms == 28_000


def _migration_rows(at: int, poll_id: int, phase: int, since: int) -> list[object]:
    import json

    from tests.unit.test_capabilities import _row

    rec = cluster_record("c1", "admin", poll_id, at, controller_id=1, brokers=[{"id": 1, "live": True}], topic_count=0,
                         partition_count=0, migration=(phase, since))
    return [_row(cluster="c1", poll_id=poll_id, observed_at_ms=at, row_type="cluster", scope="cluster",
                 details=json.dumps(rec["cluster_state"])),
            _row(cluster="c1", poll_id=poll_id, observed_at_ms=at, row_type="poll", scope="cluster")]


def test_a_migration_stuck_in_a_phase_opens_on_the_clock_at_its_moment_and_a_new_phase_resolves_it():
    from pipelines.alert_path import AlertPath
    from pipelines.detectors.controllers import COPYING, DUAL_WRITE, MIGRATION_COPY_STUCK
    from pipelines.findings import DetectorSettings
    from pipelines.incidents import IncidentBook

    settings = DetectorSettings(migration_copy_stuck_ms=300_000)
    state = PipelineState()
    path = AlertPath(state, IncidentBook(flap_window_ms=0), _Store(), settings=settings)
    path(_Batch(_migration_rows(10_000, 1, COPYING, since=5_000)), 0)
    state.vouch("c1", 1, 304_999)
    assert path.tick() == []
    state.vouch("c1", 1, 310_000)
    (opened,) = path.tick()
    assert (opened.type, opened.cause, opened.opened_at_ms, opened.severity) == (
        "CONTROLLER_ANOMALY", MIGRATION_COPY_STUCK, 305_000, "warning")
    assert opened.details["migration_phase"] == COPYING and path.tick() == []
    path(_Batch(_migration_rows(320_000, 2, DUAL_WRITE, since=315_000)), 1)  # copied at last: dual writes
    assert state.snapshot.open_incidents == ()


def test_a_collector_restarted_in_the_middle_of_an_escalation_escalates_it_at_the_same_moment():
    """A restarted collector first sees the broker down at its own start (`down_since_ms` anew): the
    incident keeps the earlier moment, escalates when it would have, and a raised page stays raised."""
    from pipelines.alert_path import AlertPath
    from pipelines.clock import SINCE
    from pipelines.findings import DetectorSettings
    from pipelines.incidents import IncidentBook

    settings = DetectorSettings(planned_stop_max_ms=600_000)
    for restart_at in (300_000, 650_000):  # before the escalation is due, and after it was raised
        state = PipelineState()
        path = AlertPath(state, IncidentBook(flap_window_ms=0, earliest=dict(SINCE)), _Store(), settings=settings)
        _down_incident(path, 10_000, down_since=9_000)
        if restart_at > 609_000:
            state.vouch("c1", 1, 612_000)
            (raised,) = path.tick()
            assert raised.severity == "critical"
        _down_incident(path, restart_at, down_since=restart_at - 1_000)  # the restarted collector's word
        (inc,) = state.snapshot.open_incidents
        assert inc.details["down_since_ms"] == 9_000
        assert inc.severity == ("critical" if restart_at > 609_000 else "warning"), restart_at
        if restart_at < 609_000:
            state.vouch("c1", 1, 612_000)
            (raised,) = path.tick()
            assert (raised.severity, raised.last_seen_at_ms) == ("critical", 609_001)
