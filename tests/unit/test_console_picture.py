"""The cluster at a glance (krm/picture.py), the fleet and cluster pages with their live fragments, the
history charts of a topic and a broker (krm/history_charts.py, pipelines/broker_history.py), and the
console's 404s: from a pipeline snapshot and delta-rs tables, called as a WSGI app."""

import datetime as dt
import re
from types import SimpleNamespace

import pytest

from foundation.storage import Location
from krm import picture
from krm.console import Console
from krm.history_charts import broker_chart, lag_chart
from pipelines import broker_history
from pipelines.incidents import Incident
from pipelines.load import TopicLoad
from pipelines.state import ClusterView, PipelineState

pytestmark = pytest.mark.unit

NOW_MS = 1_700_000_000_000


class Missing:
    def is_table(self):
        return False


def inc(iid, typ, sev, topic=None, partition=None, broker=None, cause=None, details=None, cluster="prod"):
    return Incident(iid, cluster, f"topic:{topic}", typ, sev, topic, partition, broker, cause, details or {},
                    NOW_MS, NOW_MS, None, "open")


def _get(app, path, query=""):
    got = {}
    body = b"".join(app({"PATH_INFO": path, "QUERY_STRING": query}, lambda s, h: got.update(status=s))).decode()
    return got["status"], body


def snapshot_state(fresh_ms=None):
    """Broker 3 of four down (a crash); orders has one partition offline needing broker 3 back and two out of
    sync on it; payments is healthy but holds nothing on broker 4 (an expansion left it out)."""
    state = PipelineState()
    loads = {"orders": TopicLoad("prod", "orders", NOW_MS, {1: (2, 3, 2, 0), 2: (2, 3, 2, 0), 3: (0, 3, 2, 2)}, 6),
             "payments": TopicLoad("prod", "payments", NOW_MS, {1: (1, 2, 1, 0), 2: (1, 2, 1, 0), 3: (1, 2, 1, 0)}, 3)}
    incidents = (inc("down-3", "BROKER_DOWN", "critical", broker=3, cause="not_registered"),
                 inc("off-1", "OFFLINE_PARTITION", "critical", "orders", 1, cause="all_isr_replicas_dead",
                     details={"must_return": [3]}),
                 inc("ur-2", "UNDER_REPLICATED", "warning", "orders", 2, details={"out_of_sync": [3]}),
                 inc("ur-4", "UNDER_REPLICATED", "warning", "orders", 4, details={"out_of_sync": [3]}),
                 inc("skew", "CONTROLLER_ANOMALY", "warning", cause="quorum_at_risk"))
    import time

    state.update(clusters={"prod": ClusterView(((1, True), (2, True), (3, False), (4, True)), 1, None,
                                               fresh_ms or int(time.time() * 1000))},
                 open_incidents=incidents, topic_load={"prod": loads},
                 broker_load={"prod": {1: (3, 5, 3, 0), 2: (3, 5, 3, 0), 3: (1, 5, 3, 2)}}, batches=1)
    return state


def test_the_grid_puts_what_hurts_where_and_says_it_in_words():
    snap = snapshot_state().snapshot
    g = picture.cluster_grid("prod", snap.clusters["prod"], snap.topic_load["prod"], snap.broker_load["prod"],
                             snap.open_incidents)
    assert [(h.id, h.state, h.severity) for h in g.brokers] == [
        (1, "up", None), (2, "up", None), (3, "down: not_registered", "critical"), (4, "up", None)]
    assert [r.topic for r in g.rows] == ["orders", "payments"]  # the unhealthy first
    orders = {h.id: c for h, c in zip(g.brokers, g.rows[0].cells)}
    assert orders[3].severity == "critical" and orders[3].label == "offline, 2 out of sync"
    assert orders[3].href == "/incidents?cluster=prod&topic=orders&broker=3"  # several: their list
    assert orders[1].severity is None and orders[1].label == "" and orders[1].href == "/topics/prod/orders"
    payments = {h.id: c for h, c in zip(g.brokers, g.rows[1].cells)}
    assert payments[4].replicas == 0 and payments[4].shade == 0  # the pale column after an expansion
    assert payments[1].shade == 4
    assert [i.incident_id for i in g.cluster_incidents] == ["skew"]
    one = picture.cluster_grid("prod", snap.clusters["prod"], snap.topic_load["prod"], snap.broker_load["prod"],
                               [i for i in snap.open_incidents if i.incident_id != "ur-2" and i.incident_id != "ur-4"])
    assert {h.id: c for h, c in zip(one.brokers, one.rows[0].cells)}[3].href == "/incidents/off-1"  # one: itself
    capped = picture.cluster_grid("prod", snap.clusters["prod"], snap.topic_load["prod"], snap.broker_load["prod"],
                                  snap.open_incidents, max_topics=1)
    assert [r.topic for r in capped.rows] == ["orders"] and (capped.hidden_healthy, capped.hidden_unhealthy) == (1, 0)


def test_the_cluster_page_draws_the_grid_and_reloads_it_live_without_a_full_reload():
    console = Console(snapshot_state(), SimpleNamespace(incidents="/nonexistent", partition_state=Missing(),
                                                        replica_lag=Missing(), broker_state=Missing()))
    status, body = _get(console, "/clusters/prod")
    assert status == "200 OK"
    assert 'data-live="/clusters/prod?fragment=1"' in body and "<script>" in body and "fetch(" in body
    assert 'class="sev-critical" data-broker="3"' in body and "offline, 2 out of sync" in body
    assert 'href="/incidents?cluster=prod&amp;topic=orders&amp;broker=3"' in body
    status, fragment = _get(console, "/clusters/prod", "fragment=1")
    assert status == "200 OK" and "<html" not in fragment and "<script" not in fragment
    assert "offline, 2 out of sync" in fragment and re.search(r"krm's view of prod is \d+s old", fragment)
    # the list a crowded cell links to: the incidents of that topic naming that broker
    body = _get(console, "/incidents", "cluster=prod&topic=orders&broker=3")[1]
    assert all(f'href="/incidents/{i}"' in body for i in ("off-1", "ur-2", "ur-4"))
    assert 'href="/incidents/skew"' not in body


def test_a_stale_view_says_so_in_the_live_part():
    console = Console(snapshot_state(fresh_ms=NOW_MS), SimpleNamespace(incidents="/nonexistent", partition_state=Missing(),
                                                                       replica_lag=Missing(), broker_state=Missing()))
    fragment = _get(console, "/clusters/prod", "fragment=1")[1]
    assert 'class="stale" id="age">STALE: ' in fragment
    assert " STALE" in _get(console, "/", "fragment=1")[1]
    banners = _get(console, "/", "fragment=stale")[1]  # every page's banners, reloaded live
    assert 'id="stale-prod"' in banners and "<html" not in banners
    assert 'data-live="/?fragment=stale"' in _get(console, "/incidents")[1]


def test_the_fleet_shows_every_clusters_brokers_in_their_state():
    state = snapshot_state()
    import time

    state.update(clusters={**state.snapshot.clusters,
                           "dev": ClusterView(((1, True),), 1, None, int(time.time() * 1000))})
    console = Console(state, SimpleNamespace(incidents="/nonexistent", partition_state=Missing(),
                                             replica_lag=Missing(), broker_state=Missing()))
    status, body = _get(console, "/")
    assert status == "200 OK" and 'data-live="/?fragment=1"' in body
    assert 'href="/clusters/prod"' in body and 'href="/clusters/dev"' in body
    assert 'class="sev-critical" id="b-prod-3"' in body and "down: not_registered" in body
    assert "3 / 4 up" in body and "1 / 1 up" in body


def test_unknown_things_answer_404_with_what_exists():
    console = Console(snapshot_state(), SimpleNamespace(incidents="/nonexistent", partition_state=Missing(),
                                                        replica_lag=Missing(), broker_state=Missing()))
    status, body = _get(console, "/clusters/nope")
    assert status.startswith("404") and 'href="/clusters/prod"' in body
    status, body = _get(console, "/brokers/prod/9")
    assert status.startswith("404") and 'href="/brokers/prod/4"' in body
    status, body = _get(console, "/topics/prod/nope")
    assert status.startswith("404") and 'href="/topics/prod/orders"' in body and 'href="/topics/prod/payments"' in body
    status, body = _get(console, "/partitions/prod/payments/3")
    assert status.startswith("404") and 'href="/partitions/prod/payments/2"' in body
    status, body = _get(console, "/partitions/nope/orders/0")
    assert status.startswith("404")
    status, body = _get(console, "/brokers/prod/3", "since=fortnight")
    assert status.startswith("400") and "fortnight" in body and "knows of" not in body
    status, body = _get(console, "/partitions/prod/payments/2")
    assert status == "200 OK" and "the partition_state table is not written yet" in body


def test_the_broker_page_charts_its_load_from_the_sampled_history(tmp_path):
    state = snapshot_state()
    table = Location(str(tmp_path / "broker_state"))
    import time

    now_ms = int(time.time() * 1000)
    for n, (registered, oos) in enumerate([(True, 0), (False, 2), (True, 1)]):
        rows = broker_history.samples(state.snapshot, set(), now_ms - (3 - n) * 600_000)
        for r in rows:
            if r["broker"] == 3:
                r["registered"], r["out_of_sync"] = registered, oos
        broker_history.append(table, rows)
    console = Console(state, SimpleNamespace(incidents="/nonexistent", partition_state=Missing(),
                                             replica_lag=Missing(), broker_state=table))
    status, body = _get(console, "/brokers/prod/3")
    assert status == "200 OK" and "<svg" in body
    assert "not registered</text>" in body  # the band of its absence, labelled
    assert "■ out of sync 1" in body and "■ replicas 5" in body  # every line named in words, newest value
    assert 'href="?since=24h"' in body
    status, body = _get(console, "/brokers/prod/3", "since=7d")
    assert "the history goes back to" in body  # a range past what the table holds says how far it goes


def test_samples_count_what_open_incidents_name_and_skip_a_stale_view():
    snap = snapshot_state().snapshot
    rows = {r["broker"]: r for r in broker_history.samples(snap, set(), NOW_MS)}
    assert rows[3]["out_of_sync"] == 2 and rows[3]["offline_needing"] == 1 and rows[3]["registered"] is False
    assert rows[1]["leaders"] == 3 and rows[1]["out_of_sync"] == 0 and rows[4]["replicas"] == 0
    assert broker_history.samples(snap, {"prod"}, NOW_MS) == []


def test_the_sampler_keeps_samples_until_it_writes_and_loses_none_to_a_bad_table(tmp_path):
    state = PipelineState()
    sampler = broker_history.BrokerHistory(Location(str(tmp_path / "bs")), state, 60)
    assert sampler.sample_once() == 0 and sampler.write() == 0 and not (tmp_path / "bs").exists()  # no batch yet
    state = snapshot_state()
    (tmp_path / "file").write_text("not a directory")
    broken = broker_history.BrokerHistory(Location(str(tmp_path / "file" / "bs")), state, 60)
    assert broken.sample_once() == 4 and broken.sample_once() == 4
    assert broken.write() == 0 and broken.failures == 1 and len(state.broker_samples) == 8  # kept for the next
    broken.table = Location(str(tmp_path / "bs"))
    assert broken.write() == 8 and len(state.broker_samples) == 0


def test_the_broker_chart_draws_samples_not_written_yet(tmp_path):
    state = snapshot_state()
    sampler = broker_history.BrokerHistory(Location(str(tmp_path / "bs")), state, 60)
    sampler.sample_once()
    console = Console(state, SimpleNamespace(incidents="/nonexistent", partition_state=Missing(),
                                             replica_lag=Missing(), broker_state=Location(str(tmp_path / "bs"))))
    body = _get(console, "/brokers/prod/3")[1]
    assert "<svg" in body and "■ out of sync 2" in body and "not registered</text>" in body


def test_the_lag_chart_draws_the_partitions_that_lagged_most():
    t = dt.datetime(2026, 12, 1, 12, 0, tzinfo=dt.timezone.utc)
    rows = []
    for p in range(8):
        for k, lag in enumerate((0, 100 * (p + 1), 0)):
            rows.append({"observed_at": t + dt.timedelta(minutes=10 * k), "partition": p, "broker": 2,
                         "lag_messages": lag, "lag_seconds": lag / 10, "in_isr": lag == 0})
    svg = lag_chart(rows, t - dt.timedelta(minutes=5), t + dt.timedelta(minutes=30))
    assert "■ p7" in svg and "■ p2" in svg and "■ p1 " not in svg  # the six that lagged most
    assert "and 2 partition(s) that lagged less" in svg and "seconds at the partition" in svg
    assert lag_chart([r | {"lag_messages": 0} for r in rows], t, t) == ""
    assert broker_chart([], t, t) == ""


def test_the_partition_page_draws_each_followers_lag_and_the_effective_min_isr(tmp_path):
    import pyarrow as pa
    from deltalake import write_deltalake

    from krm.charts import partition_chart

    now = dt.datetime.now(dt.timezone.utc)
    rows = [{"cluster": "prod", "topic": "payments", "partition": 2, "broker": b, "observed_at": now - dt.timedelta(minutes=m),
             "leader": 1, "is_leader": b == 1, "in_isr": b != 3, "log_end_offset": 10, "leader_leo": 10 + lag,
             "lag_messages": lag, "lag_seconds": lag / 5, "date": now.date()}
            for m, lag in ((20, 0), (10, 500), (5, 900), (1, 0)) for b in (1, 2, 3)]
    for r in rows:
        r["lag_messages"] = 0 if r["broker"] != 3 else r["lag_messages"]
    write_deltalake(str(tmp_path / "rl"), pa.Table.from_pylist(rows), partition_by=["date", "cluster"])
    console = Console(snapshot_state(), SimpleNamespace(incidents="/nonexistent", partition_state=Missing(),
                                                        replica_lag=Location(str(tmp_path / "rl")), broker_state=Missing()))
    status, body = _get(console, "/partitions/prod/payments/2")
    assert status == "200 OK" and "each follower behind its leader" in body and "■ broker 3 0" in body
    assert "■ broker 2" not in body  # a follower that never lagged draws no line
    state = [{"observed_at": now, "cluster": "prod", "leader": 1, "leader_epoch": 0, "replicas": [1, 2, 3], "isr": [1, 2],
              "high_watermark": 1, "leader_leo": 1}]
    svg = partition_chart(state, [], now - dt.timedelta(minutes=5), now, min_isr=2)
    assert "effective min ISR 2" in svg and "<title>effective min ISR</title>" in svg


def test_the_broker_page_draws_krm_plans_layout_beside_the_current_one_only_when_asked():
    from krm.snapshot import ClusterSnapshot

    looks = []
    # broker 4 joined and holds nothing: the plan moves replicas onto it
    topics = [{"topic": "orders", "partitions": [{"partition": p, "replicas": [1 + p % 3, 1 + (p + 1) % 3]}
                                                 for p in range(6)]}]

    def look(cluster):
        looks.append(cluster)
        return ClusterSnapshot(cluster, "kraft", {1, 2, 3, 4}, {}, {1, 2, 3, 4}, topics)

    console = Console(snapshot_state(), SimpleNamespace(incidents="/nonexistent", partition_state=Missing(),
                                                        replica_lag=Missing(), broker_state=Missing()), look=look)
    body = _get(console, "/brokers/prod/4")[1]
    assert looks == [] and 'href="?check=plan"' in body
    status, body = _get(console, "/brokers/prod/4", "check=plan")
    assert status == "200 OK" and looks == ["prod"]
    assert "replica move(s)" in body and "krm plan rebalance: now and after" in body
    assert '<text x="0" y="15" font-size="11" font-weight="normal">broker 1</text>' in body
    assert 'font-weight="bold">broker 4</text>' in body  # this broker stands out
    assert "broker 4 replicas now: 0" in body and "broker 4 replicas after: 3" in body
