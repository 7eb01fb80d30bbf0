"""One cluster split across collector processes (collectors/topic_share.py): the shares' topic records
together are exactly the unsplit collector's, share 1's cluster record speaks for the whole cluster,
and the pipeline's view of it is as fresh as its stalest share."""

import copy
import random

import pytest

from collectors import topic_share
from collectors.topic_share import TopicShare, share_of
from foundation.config import ClusterConfig, CollectorConfig
from pipelines.state import ClusterView
from schemas.observation import check
from schemas.quiet import Thresholds
from tests.unit.test_collector_fast_path import Cluster

pytestmark = pytest.mark.unit


def test_a_topic_belongs_to_one_share_the_same_everywhere():
    names = [f"topic-{i}" for i in range(3000)]
    for n in (1, 2, 3, 7):
        counts = [0] * n
        for t in names:
            owners = [i for i in range(1, n + 1) if TopicShare(i, n).holds(t)]
            assert owners == [share_of(t, n)]
            counts[owners[0] - 1] += 1
        assert min(counts) > 0.8 * len(names) / n, counts  # CRC-32 spreads names evenly enough
    # pinned: processes of different hosts and krm releases must agree on every topic's share, so the
    # hash may never change (Python's own str hash is salted per process and would not do)
    assert [share_of(t, n) for t in ("orders", "payments", "krm.canary") for n in (2, 3)] == [1, 3, 1, 1, 2, 2]


@pytest.mark.parametrize("text", ["0/2", "3/2", "2", "a/b", "1/0", "/2"])
def test_a_malformed_share_is_refused_with_the_form_expected(text):
    with pytest.raises(ValueError, match="I/N|1 <= I <= N"):
        topic_share.parse(text)


def _source(share: str | None):
    from collectors.admin import AdminSource

    src = AdminSource(ClusterConfig(name="c", bootstrap_servers="h:1"),
                      CollectorConfig(assignment_snapshot_s=40, history_keyframe_s=15, topic_share=share),
                      quiet=Thresholds(lag_messages=60, lag_seconds=2.0, hw_stall_window_ms=6_000))
    src._elr_known = True
    return src


def _without_share(records):
    out = copy.deepcopy(records)
    for r in out:
        if r["kind"] == "cluster":
            r["cluster_state"].pop("topic_share", None)
    return out


@pytest.mark.parametrize("seed", range(6))
def test_the_shares_publish_together_what_one_collector_publishes(seed):
    rng = random.Random(seed)
    cluster = Cluster(rng, kraft_elr=seed % 2 == 0)
    for t in ("d", "e", "f", "g"):  # more topics, so each share holds several
        cluster.create(t, 4)
    whole, first, second = _source(None), _source("1/2"), _source("2/2")
    at = 1_000_000
    for poll_id in range(1, 60):
        cluster.step()
        md, topics, found, unreachable = cluster.poll()
        at += rng.choice((1000, 2000))
        one = whole._records(md, topics, at, found, poll_id, unreachable=unreachable)
        a = first.parts.share.stamp(first._records(md, topics, at, found, poll_id, unreachable=unreachable))
        b = second.parts.share.stamp(second._records(md, topics, at, found, poll_id, unreachable=unreachable))
        for r in a + b:
            check(r)  # the contract holds a share's records too
        assert a[0]["cluster_state"]["topic_share"] == {"index": 1, "count": 2}
        assert b[0]["cluster_state"]["topic_share"] == {"index": 2, "count": 2}
        # share 1's cluster record is the cluster's: totals, brokers and how each went, as one collector's
        assert _without_share(a[:1]) == one[:1], f"poll {poll_id}"
        by_topic = {r["topic_state"]["topic"]: r for r in one[1:]}
        mine = {r["topic_state"]["topic"]: r for r in a[1:]} | {r["topic_state"]["topic"]: r for r in b[1:]}
        assert set(mine) == set(by_topic) and len(a) + len(b) - 2 == len(by_topic), f"poll {poll_id}"
        assert mine == by_topic, f"poll {poll_id}"
        assert all(share_of(r["topic_state"]["topic"], 2) == 1 for r in a[1:])
        assert all(share_of(r["topic_state"]["topic"], 2) == 2 for r in b[1:])


def test_a_split_clusters_view_is_as_fresh_as_its_stalest_share():
    view = ClusterView(brokers=(), controller_id=1, error=None, newest_observed_ms=50_000, share_count=3,
                       share_newest=((2, 48_000), (3, 49_000)))
    assert view.fresh_ms == 48_000
    assert ClusterView(brokers=(), controller_id=1, error=None, newest_observed_ms=50_000, share_count=3,
                       share_newest=((2, 48_000),)).fresh_ms == 0, "a share never seen: no fresh view"
    assert ClusterView(brokers=(), controller_id=1, error=None, newest_observed_ms=50_000).fresh_ms == 50_000


class _Batch:
    def __init__(self, rows):
        self.rows = rows

    def collect(self):
        return self.rows


class _Store:  # the incidents table is not this test's subject
    def upsert(self, changed):
        pass


def _cluster_row(at: int, index: int, count: int = 2, poll_id: int = 1, error: str | None = None):
    import json

    from collectors.records import cluster_record
    from tests.unit.test_capabilities import _row

    rec = cluster_record("c", "admin", poll_id, at, controller_id=1, brokers=[{"id": 1, "live": True}],
                         topic_count=1, partition_count=1, error=error)
    rec["cluster_state"]["topic_share"] = {"index": index, "count": count}
    return _row(cluster="c", poll_id=poll_id, observed_at_ms=at, row_type="cluster", scope="cluster",
                details=json.dumps(rec["cluster_state"]))


def test_the_pipeline_ages_a_split_cluster_by_its_stalest_share():
    """A batch of share 1 alone keeps share 2's last sighting; a share that stops publishing ages the
    view (krm_observation_age_seconds, the stale view) while share 1 goes on."""
    from pipelines.alert_path import AlertPath
    from pipelines.incidents import IncidentBook
    from pipelines.state import PipelineState

    state = PipelineState()
    path = AlertPath(state, IncidentBook(flap_window_ms=0), _Store())  # type: ignore[arg-type]
    path(_Batch([_cluster_row(10_000, 1), _cluster_row(10_400, 2)]), 0)
    assert state.snapshot.clusters["c"].fresh_ms == 10_000
    path(_Batch([_cluster_row(12_000, 1)]), 1)  # share 2 said nothing in this batch
    assert state.snapshot.clusters["c"].fresh_ms == 10_400
    path(_Batch([_cluster_row(14_000, 1), _cluster_row(13_900, 2)]), 2)
    assert state.snapshot.clusters["c"].fresh_ms == 13_900
    path(_Batch([_cluster_row(16_000, 1), _cluster_row(16_100, 2, error="no broker answered")]), 3)
    assert state.snapshot.clusters["c"].fresh_ms == 13_900, "a share whose poll failed saw nothing"
    for at in (18_000, 20_000):  # share 2's process is gone
        path(_Batch([_cluster_row(at, 1)]), 4)
    view = state.snapshot.clusters["c"]
    assert (view.newest_observed_ms, view.fresh_ms) == (20_000, 13_900)
    assert state.stale(now=20.5) == {"c": pytest.approx(6.6)}
    from pipelines.metrics import KrmCollector

    families = list(KrmCollector(state, clock=lambda: 20.5).collect())
    ages = {s.labels["share"]: s.value for f in families if f.name == "krm_cluster_share_age_seconds"
            for s in f.samples}
    assert ages == {"1": pytest.approx(0.5), "2": pytest.approx(6.6)}, "the share that is late, named"
