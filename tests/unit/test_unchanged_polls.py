"""Which polls may stay home (collectors/unchanged.py), and the pipeline's side of it (PipelineState.hold_view)."""

from __future__ import annotations

import copy

import pytest

from collectors.records import cluster_record, summarized, topic_record
from collectors.unchanged import UnchangedPolls, steady_digest
from pipelines.metrics import ClusterView, PipelineState

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
    (poll(1, 10_000, brokers=[{**b, "live": b["id"] != 2} for b in BROKERS]), "a broker not registered"),
    (poll(1, 10_000, controller=None), "no controller"),
    (poll(1, 10_000, error="timed out"), "a failed poll"),
    (poll(1, 10_000, denied=["DESCRIBE_CONFIGS"]), "an ACL missing"),
    (poll(1, 10_000, q=quorum(10_000, (100, 5000))), "a voter not fetching"),
    (poll(1, 10_000, q={**quorum(10_000), "leader_id": -1}), "no quorum leader"),
    (poll(1, 10_000, loud=[{"partition": 0, "leader": 1, "replicas": [1, 2, 3], "isr": [1, 2]}]), "a loud partition"),
])
def test_a_poll_a_rule_may_find_something_on_has_no_digest(records, why):
    assert steady_digest(records) is None, why


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


class Holder:
    """Stands in for PipelineState.hold_view: it takes polls kept home in place of those up to `processed`
    and refuses the others (as a pipeline with no view yet, or past its view's due time, refuses), and
    says what it was told. The real one's answer for a poll still on its way is tested below."""

    def __init__(self, processed: int) -> None:
        self.processed = processed
        self.told: list[tuple[int, int]] = []

    def __call__(self, poll_id: int, at_ms: int) -> bool:
        if self.processed < poll_id:
            return False
        self.told.append((poll_id, at_ms))
        return True


def test_a_poll_stays_home_only_when_unchanged_recent_and_held():
    gate, holder = UnchangedPolls(resend_s=15.0), Holder(processed=0)
    assert not gate.offer("c1", poll(1, 10_000), now=0.0, taken=holder)  # the first poll goes out
    assert not gate.offer("c1", poll(2, 12_000), now=2.0, taken=holder)  # refused for poll 1: out
    holder.processed = 2
    assert gate.offer("c1", poll(3, 14_000), now=4.0, taken=holder)  # same as poll 2, which the pipeline has
    assert holder.told == [(2, 14_000)]
    assert not gate.offer("c1", poll(4, 16_000, controller=2), now=6.0, taken=holder)  # news: out
    holder.processed = 4
    assert gate.offer("c1", poll(5, 18_000, controller=2), now=8.0, taken=holder)
    assert not gate.offer("c1", poll(6, 36_000, controller=2), now=21.0, taken=holder)  # resend_s since poll 4
    assert gate.kept_home == 2


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
    gate, holder = UnchangedPolls(resend_s=60.0), Holder(processed=0)
    assert not gate.offer("c1", poll(1, 10_000), now=0.0, taken=holder)
    holder.processed = 1
    assert not gate.offer("c1", silent(2, 11_000), now=1.0, taken=holder)  # first silent: out
    holder.processed = 2
    assert gate.offer("c1", silent(3, 12_000), now=2.0, taken=holder)  # the same again: home
    assert gate.offer("c1", silent(4, 13_000), now=3.0, taken=holder)
    assert not gate.offer("c1", silent(5, 13_900, judged=True), now=3.9, taken=holder)  # the verdict: out
    holder.processed = 5
    assert not gate.offer("c1", poll(6, 15_000), now=5.0, taken=holder)  # answered again: out
    assert holder.told == [(2, 12_000), (2, 13_000)]


def test_after_a_quick_publish_or_with_resend_off_every_poll_goes_out():
    gate, holder = UnchangedPolls(resend_s=15.0), Holder(processed=10)
    gate.offer("c1", poll(1, 10_000), now=0.0, taken=holder)
    gate.forget("c1")
    assert not gate.offer("c1", poll(2, 12_000), now=2.0, taken=holder)
    off = UnchangedPolls(resend_s=0.0)
    assert not any(off.offer("c1", poll(i, 10_000 + i), now=float(i), taken=holder) for i in range(5))


def view(poll_id: int, at_ms: int, **kw: object) -> ClusterView:
    return ClusterView(brokers=((1, True),), controller_id=1, error=None, newest_observed_ms=at_ms, poll_id=poll_id,
                       **kw)  # type: ignore[arg-type]


def test_the_pipeline_holds_its_view_for_a_poll_it_processed_or_has_on_its_way():
    state = PipelineState()
    assert not state.hold_view("c1", 1, 12_000)  # no view yet
    state.update(clusters={"c1": view(4, 10_000)})
    assert state.hold_view("c1", 5, 12_000), "poll 5 still on its way: its batch says what this poll would"
    assert state.snapshot.clusters["c1"].newest_observed_ms == 10_000, "the view's time is that batch's to set"
    assert state.hold_view("c1", 4, 12_000)
    assert state.snapshot.clusters["c1"].newest_observed_ms == 12_000
    assert state.stale(now=13.0) == {} and state.stale(now=19.0) == {"c1": 7.0}
    assert state.hold_view("c1", 4, 11_000) and state.snapshot.clusters["c1"].newest_observed_ms == 12_000  # never older


def test_a_broken_pipeline_or_a_split_cluster_holds_nothing():
    state = PipelineState()
    state.update(clusters={"c1": view(4, 10_000), "c2": view(4, 10_000, share_count=2)}, pipeline_error="no executors")
    assert not state.hold_view("c1", 4, 12_000)
    state.update(pipeline_error=None)
    assert not state.hold_view("c2", 4, 12_000)


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


class _Store:  # the incidents table is not this test's subject
    def upsert(self, changed: object) -> None:
        pass


def _alert_path(state: PipelineState) -> object:
    from pipelines.alert_path import AlertPath
    from pipelines.incidents import IncidentBook

    book = IncidentBook(flap_window_ms=0, hold_ms={"UNCLEAN_LEADER_ELECTION": 60_000})
    return AlertPath(state, book, _Store(), deleted_after_ms=30_000)  # type: ignore[arg-type]


def test_a_held_event_ending_makes_the_poll_at_its_end_go_out():
    """An event stays open for its hold; while polls stay home no batch would end it, so the view asks
    for the poll at the hold's end, and that poll's batch resolves the event."""
    state = PipelineState()
    path = _alert_path(state)
    path(_Batch(_rows(10_000, 1, ("a",), event_on="a")), 0)
    assert state.snapshot.clusters["c1"].due_ms == 70_000
    path(_Batch(_rows(12_000, 2, ("a",))), 1)  # the next poll, healthy: the event is held open
    assert [i.type for i in state.snapshot.open_incidents] == ["UNCLEAN_LEADER_ELECTION"]
    assert state.hold_view("c1", 2, 14_000) and state.hold_view("c1", 2, 68_000)
    assert not state.hold_view("c1", 2, 70_000)  # the collector publishes this one
    path(_Batch(_rows(70_000, 3, ("a",))), 2)
    assert state.snapshot.open_incidents == () and state.snapshot.clusters["c1"].due_ms is None
    assert state.hold_view("c1", 3, 72_000)


def test_a_deleted_topic_is_forgotten_on_time_and_a_held_one_never():
    """Polls kept home found every topic of the poll they repeat: a topic that poll observed is not
    taken for deleted however long they stayed home (a ZooKeeper quick record, listing one topic, comes
    next). A topic missing from the polls is forgotten 30 s after it was last seen: the view asks for
    that poll."""
    state = PipelineState()
    path = _alert_path(state)
    path(_Batch(_rows(10_000, 1, ("a", "b", "gone"))), 0)
    path(_Batch(_rows(12_000, 2, ("a", "b"))), 1)  # "gone" was deleted
    assert state.snapshot.clusters["c1"].due_ms == 40_001  # unseen for more than 30 s
    assert state.hold_view("c1", 2, 40_000) and not state.hold_view("c1", 2, 40_001)
    path(_Batch(_rows(40_001, 3, ("a", "b"))), 2)
    assert state.snapshot.broker_load["c1"][1] == (2, 2, 2, 0) and state.snapshot.clusters["c1"].due_ms is None
    assert state.hold_view("c1", 3, 100_000)  # a minute at home
    path(_Batch(_rows(101_000, 4, ("a",))), 3)  # a quick record of topic a alone
    assert state.snapshot.broker_load["c1"][1] == (2, 2, 2, 0), "topic b was seen by the polls kept home"
    assert state.snapshot.clusters["c1"].due_ms == 40_001 + 30_001  # b, as its last published poll saw it
