"""When krm goes blind to a cluster, the log says which side fell behind: the pipeline (its alert query
busy) or what feeds it (the query idle, waiting for data); and a slow poll says which of its steps took
the time."""

from __future__ import annotations

import pytest

from pipelines.state import ClusterView, PipelineState, Snapshot, alert_query_said, blindness_said

pytestmark = pytest.mark.unit

NOW = 1_000_000.0


def _snap(newest_s: float, last_batch_s_ago: float | None) -> Snapshot:
    view = ClusterView(brokers=((1, True),), controller_id=1, error=None, newest_observed_ms=int(newest_s * 1000),
                       poll_id=41)
    return Snapshot(clusters={"c": view}, last_batch_s=0.35,
                    last_batch_at=0.0 if last_batch_s_ago is None else NOW - last_batch_s_ago)


def _stale(snap: Snapshot) -> dict[str, float]:
    state = PipelineState(stale_after_s={"c": 6.0})
    state._snapshot = snap
    return state.stale(NOW)


def test_an_idle_alert_query_blames_what_feeds_the_pipeline():
    snap = _snap(NOW - 9.0, last_batch_s_ago=8.2)
    idle = alert_query_said({"message": "Waiting for data to arrive", "isTriggerActive": False}, None)
    (line,) = blindness_said(set(), _stale(snap), snap, NOW, idle)
    assert "cluster c: krm's view is 9.0 s old (poll 41)" in line
    assert "finished 8.2 s ago after 0.35 s" in line
    assert "idle (Waiting for data to arrive): nothing newer reached the pipeline" in line


def test_a_busy_alert_query_blames_the_pipeline():
    # the last batch finished after the view's newest observation (it brought it): its time alone
    # cannot say which side is behind; what the query is doing now can
    snap = _snap(NOW - 9.0, last_batch_s_ago=7.5)
    for doing in (alert_query_said({"message": "Processing new data", "isTriggerActive": True}, None),
                  alert_query_said({"message": "Waiting for data to arrive", "isTriggerActive": False}, 6.9)):
        (line,) = blindness_said(set(), _stale(snap), snap, NOW, doing)
        assert "the pipeline is behind" in line, line
    asking = alert_query_said({"message": "Getting offsets from KafkaV2[Subscribe[krm.obs]]",
                               "isTriggerActive": True}, None)
    (line,) = blindness_said(set(), _stale(snap), snap, NOW, asking)
    assert "the observations topic does not answer the pipeline's reads" in line
    (line,) = blindness_said(set(), _stale(snap), snap, NOW, alert_query_said(None, 6.9))
    assert "busy (a micro-batch in its handler for 6.9 s)" in line
    (line,) = blindness_said(set(), _stale(snap), snap, NOW, None)
    assert "state unknown" in line


def test_said_once_when_it_turns_stale_and_once_when_fresh_again():
    stale = _snap(NOW - 9.0, last_batch_s_ago=1.0)
    assert blindness_said({"c"}, _stale(stale), stale, NOW) == []
    fresh = _snap(NOW - 1.0, last_batch_s_ago=1.0)
    assert _stale(fresh) == {}
    assert blindness_said({"c"}, {}, fresh, NOW) == ["cluster c: krm's view is fresh again (poll 41)"]
    assert blindness_said(set(), {}, fresh, NOW) == []


def test_a_slow_poll_says_what_each_step_took():
    from collectors.admin import AdminSource

    src = AdminSource.__new__(AdminSource)  # only its last poll's marks are read
    src.poll_phases = [("start", 10.0), ("metadata", 10.02), ("configs", 14.22), ("offsets", 14.5)]
    assert src.phases_said() == "metadata 0.02 s, configs 4.20 s, offsets 0.28 s"
    src.poll_phases = [("start", 10.0)]
    assert "reached no broker" in src.phases_said()


def test_the_collector_in_this_process_says_its_side():
    """Polls that went out and were acknowledged while the alert query waits for data: the records are
    in the topic but not readable yet (its high watermark); a poll that hangs or an outage says so."""
    from types import SimpleNamespace

    from collectors.daemon import Collector
    from collectors.publisher import Publisher
    from collectors.spool import Spool

    pub = Publisher.__new__(Publisher)
    pub.spool, pub._producer, pub._outage, pub.sent, pub.acked_at = Spool(1 << 20), object(), False, 212, NOW - 6.5
    c = Collector.__new__(Collector)
    c.publisher = pub
    c.poll_started_at, c.last_poll_at, c.last_poll_s = {"c": NOW - 1.3}, {"c": NOW - 0.4}, {"c": 0.9}
    c.last_published, c._poll_threads = {"c": (57, NOW - 6.6)}, {}
    said = c.said("c", NOW)
    assert said == ("the collector here last polled it 0.4 s ago (took 0.9 s), published poll 57 6.6 s ago, kept "
                    "the steady ones since home; the observations topic acknowledged every record sent (212, the "
                    "last 6.5 s ago)")
    snap = _snap(NOW - 9.0, last_batch_s_ago=8.2)
    idle = alert_query_said({"message": "Waiting for data to arrive", "isTriggerActive": False}, None)
    (line,) = blindness_said(set(), _stale(snap), snap, NOW, idle, {"c": said})
    assert line.endswith("(the collector's polls or the observations topic); " + said)

    c.poll_started_at["c"], c.last_poll_at["c"] = NOW - 7.0, NOW - 8.0  # a poll that has not ended
    assert c.said("c", NOW).startswith("the collector here is in a poll of it for 7.0 s (at unknown), published poll 57")
    pub.spool.put([(b"k", b"v")])
    assert c.said("c", NOW).endswith("1 records wait to be sent (212 acknowledged, the last 6.5 s ago)")
    pub._producer = None
    assert c.said("c", NOW).endswith("the observations topic is out of reach (1 records spooled)")
    assert Collector.said(SimpleNamespace(poll_started_at={}, last_poll_at={}, last_published={}, publisher=pub,
                                          _poll_threads={}),
                          "c", NOW).startswith("the collector here has not polled it yet, published no poll of it yet")


def test_a_poll_that_does_not_end_says_where_its_thread_waits_while_it_waits():
    import threading
    import time
    from types import SimpleNamespace

    from collectors.daemon import Collector

    release = threading.Event()

    def _recv_bytes_blocking():  # stands for the library call a poll hangs in
        release.wait(10)

    t = threading.Thread(target=_recv_bytes_blocking, daemon=True)
    t.start()
    try:
        src = SimpleNamespace(cluster=SimpleNamespace(name="c"), settings=SimpleNamespace(poll_interval_s=1.0),
                              phases_said=lambda: "metadata 0.01 s")
        c = Collector.__new__(Collector)
        c.sources, c._poll_threads = [src], {"c": t}
        now = time.time()
        c.poll_started_at, c.last_poll_at = {"c": now - 12.0}, {"c": now - 13.0}
        said: dict[str, float] = {}
        (line,) = c.stuck_polls(now, said)
        assert line.startswith("poll of cluster c has run for 12 s and not ended; its thread is at threading.py:")
        assert "<- tests/unit/test_blindness_said.py:" in line and "_recv_bytes_blocking" in line, line
        assert line.endswith("(steps done: metadata 0.01 s)"), line
        assert c.stuck_polls(now + 5, said) == [], "each stuck poll is said once"
        c.poll_started_at["c"] = now - 3.0  # a new poll, not yet long
        assert c.stuck_polls(now, said) == []
        c.last_poll_at["c"] = now - 1.0  # ended
        assert c.stuck_polls(now + 20, said) == []
    finally:
        release.set()
        t.join()


def test_a_split_cluster_s_blind_moment_names_its_stalest_share():
    """Share 3 of 4 stopped publishing: the view is as old as it, and the line names it (and the command that
    runs it); a share never heard from is said so."""
    view = ClusterView(brokers=((1, True),), controller_id=1, error=None, newest_observed_ms=int((NOW - 1.0) * 1000),
                       poll_id=41, share_count=4, share_newest=((2, int((NOW - 1.2) * 1000)), (3, int((NOW - 12.5) * 1000)),
                                                                (4, int((NOW - 0.9) * 1000))))
    snap = Snapshot(clusters={"c": view}, last_batch_s=0.35, last_batch_at=NOW - 0.5)
    (line,) = blindness_said(set(), _stale(snap), snap, NOW, None)
    assert "krm's view is 12.5 s old" in line
    assert "its stalest share is 3 of 4 (krm collect --topic-share 3/4), newest observation 12.5 s old" in line, line
    unseen = Snapshot(clusters={"c": ClusterView(brokers=((1, True),), controller_id=1, error=None,
                                                 newest_observed_ms=int((NOW - 1.0) * 1000), share_count=2)},
                      last_batch_s=0.35, last_batch_at=NOW - 0.5)
    (line,) = blindness_said(set(), _stale(unseen), unseen, NOW, None)
    assert "its stalest share is 2 of 2 (krm collect --topic-share 2/2), never heard from" in line, line
