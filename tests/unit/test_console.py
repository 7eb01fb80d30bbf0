"""The console's pages (krm/console.py) from a pipeline snapshot, called as a WSGI app: no server, no JVM."""

from types import SimpleNamespace

import pytest

from krm.charts import partition_chart
from krm.console import Console
from pipelines.incidents import Incident
from pipelines.state import ClusterView, PipelineState

pytestmark = pytest.mark.unit


class Missing:
    """A table location that does not exist (yet)."""

    def is_table(self):
        return False

    def __str__(self):
        return "/nowhere"


def _get(app, path, query=""):
    got = {}

    def start(status, headers):
        got["status"] = status

    body = b"".join(app({"PATH_INFO": path, "QUERY_STRING": query}, start)).decode()
    return got["status"], body


@pytest.fixture
def console(tmp_path):
    offline = Incident("inc-1", "prod", "topic:orders", "OFFLINE_PARTITION", "critical", "orders", 3, None,
                       "all_isr_replicas_dead", {"must_return": [2], "isr": [2], "leader": -1, "note": "<b>x</b>"},
                       1_700_000_000_000, 1_700_000_001_000, None, "open")
    down = Incident("inc-2", "prod", "cluster", "BROKER_DOWN", "warning", None, None, 4, "stopped",
                    {"controlled_shutdown": True}, 1_700_000_000_000, 1_700_000_001_000, None, "open")
    state = PipelineState()
    state.update(clusters={"prod": ClusterView(((1, True), (2, False), (4, False)), 1, None, 1_700_000_001_000)},
                 open_incidents=(offline, down), broker_load={"prod": {1: (5, 9, 5, 0)}})
    tables = SimpleNamespace(incidents=tmp_path / "incidents", partition_state=Missing(), replica_lag=Missing(),
                             broker_state=Missing())
    return Console(state, tables)


def test_overview_lists_clusters_brokers_and_open_incidents(console):
    status, body = _get(console, "/")
    assert status == "200 OK"
    assert "prod" in body and "1 / 3" in body and "1 critical" in body and "1 warning" in body
    assert 'href="/brokers/prod/2"' in body


def test_incidents_page_names_the_broker_to_bring_back(console):
    status, body = _get(console, "/incidents", "severity=critical")
    assert status == "200 OK" and 'href="/incidents/inc-1"' in body and "must_return [2]" in body
    assert "inc-2" not in body  # filtered out: a warning


def test_incident_page_is_whole_and_escaped(console):
    status, body = _get(console, "/incidents/inc-1")
    assert status == "200 OK"
    assert "all_isr_replicas_dead" in body and "must_return [2]" in body and "no live leader" in body
    assert "<b>x</b>" not in body and "&lt;b&gt;x&lt;/b&gt;" in body
    assert 'href="/partitions/prod/orders/3"' in body


def test_broker_page_lists_what_names_it(console):
    status, body = _get(console, "/brokers/prod/2")
    assert status == "200 OK" and "NOT registered" in body and "must_return" in body and "inc-1" in body


def test_unknown_incident_and_path_are_404(console):
    assert _get(console, "/incidents/none")[0] == "404 Not Found"
    assert not console.handles("/metrics") and console.handles("/incidents/x")


def test_partition_page_without_history_says_so(console):
    status, body = _get(console, "/partitions/prod/orders/3")
    assert status == "200 OK" and "not written yet" in body


def test_the_partition_chart_draws_the_fault_its_incident_and_has_no_script():
    import datetime as dt

    t = dt.datetime(2026, 1, 1, tzinfo=dt.timezone.utc)
    states = [{"observed_at": t + dt.timedelta(seconds=s), "leader": ld, "isr": isr, "replicas": [1, 2, 3],
               "high_watermark": hw, "leader_leo": leo}
              for s, ld, isr, hw, leo in ((0, 1, [1, 2, 3], 100, 100), (5, -1, [], 100, None), (9, 2, [2], 120, 130))]
    ms = int((t + dt.timedelta(seconds=5)).timestamp() * 1000)
    offline = Incident("o", "prod", "s", "OFFLINE_PARTITION", "critical", "t", 0, None, "all_isr_replicas_dead", {},
                       ms, ms + 4000, ms + 4000, "resolved")
    svg = partition_chart(states, [offline], t - dt.timedelta(seconds=5), t + dt.timedelta(seconds=15))
    assert svg.startswith("<svg") and svg.endswith("</svg>") and "<script" not in svg
    assert "critical: OFFLINE_PARTITION (all_isr_replicas_dead)" in svg  # the band says what it is, not only a colour
    assert "<title>no leader</title>" in svg and ">none</text>" in svg
    assert "ISR (blue) of RF 3 (grey)" in svg and "high watermark (blue)" in svg
    assert svg.count("<path") == 5  # RF, ISR, leader, LEO, HW
    assert partition_chart([], [], t, t) == ""


def test_topic_page_shows_each_partitions_newest_state_and_the_spread_over_brokers(console, tmp_path):
    import datetime as dt

    import pyarrow as pa
    from deltalake import write_deltalake

    from foundation.storage import Location

    now = dt.datetime.now(dt.timezone.utc)
    rows = []
    for ago, leader, isr in ((60, 1, [1, 2]), (5, -1, [2])):  # partition 3: the newer poll has no leader
        rows.append({"cluster": "prod", "topic": "orders", "partition": 3, "observed_at": now - dt.timedelta(seconds=ago),
                     "leader": leader, "leader_epoch": 4, "replicas": [2, 1], "isr": isr, "high_watermark": 100,
                     "leader_leo": 100, "date": (now - dt.timedelta(seconds=ago)).date()})
    rows.append({"cluster": "prod", "topic": "orders", "partition": 0, "observed_at": now - dt.timedelta(seconds=5),
                 "leader": 1, "leader_epoch": 0, "replicas": [1, 2], "isr": [1, 2], "high_watermark": 7,
                 "leader_leo": 7, "date": now.date()})
    rows.append({"cluster": "prod", "topic": "other", "partition": 0, "observed_at": now, "leader": 2,
                 "leader_epoch": 0, "replicas": [2], "isr": [2], "high_watermark": 0, "leader_leo": 0, "date": now.date()})
    write_deltalake(str(tmp_path / "ps"), pa.Table.from_pylist(rows), partition_by=["date", "cluster"])
    console.tables.partition_state = Location(str(tmp_path / "ps"))

    status, body = _get(console, "/topics/prod/orders")
    assert status == "200 OK"
    assert "2 partition(s)" in body and "1 under-replicated" in body and "1 without a leader" in body
    assert 'href="/partitions/prod/orders/3"' in body and 'href="/partitions/prod/orders/0"' in body
    assert "other" not in body.split("<h1>", 1)[1]  # another topic's rows are not read
    # broker 1: leads partition 0, holds 2 replicas, preferred leader of partition 0; broker 2 of partition 3
    assert '<a href="/brokers/prod/1">1</a></td><td>1</td>\n<td>2</td><td>1</td>' in body
    assert '<a href="/brokers/prod/2">2</a></td><td>0</td>\n<td>2</td><td>1</td>' in body
    assert 'href="/incidents/inc-1"' in body  # its open incident, live
    assert _get(console, "/incidents/inc-1")[1].count('href="/topics/prod/orders"') == 1


def test_broker_page_runs_the_shutdown_check_only_when_asked(console):
    looks = []

    def look(cluster):
        looks.append(cluster)
        return SimpleNamespace(live={1, 2, 3}, topics=[
            {"topic": "rf1", "min_insync_replicas": 1, "unclean_leader_election": False,
             "partitions": [{"partition": 0, "leader": 2, "replicas": [2], "isr": [2]}]},
            {"topic": "rf3", "min_insync_replicas": 2, "unclean_leader_election": False,
             "partitions": [{"partition": 0, "leader": 2, "replicas": [2, 1, 3], "isr": [2, 1, 3]},
                            {"partition": 1, "leader": 1, "replicas": [1, 2, 3], "isr": [1, 3]}]}])  # 2 out of sync

    console.look = look
    status, body = _get(console, "/brokers/prod/2")
    assert status == "200 OK" and looks == [] and 'href="?check=shutdown"' in body  # no Admin poll per view
    status, body = _get(console, "/brokers/prod/2", "check=shutdown")
    assert looks == ["prod"] and "UNSAFE: 1 partition(s)" in body
    assert body.index("becomes_leaderless") < body.index("at_min_isr")  # worst first
    assert "rf1-0" in body and "rf3-0" in body and "rf3-1" not in body  # a follower copy only: counted, not listed
    assert "1 becomes_leaderless, 1 at_min_isr, 1 follower_only" in body

    def unreachable(cluster):
        raise ConnectionError("no broker answered")

    console.look = unreachable
    body = _get(console, "/brokers/prod/2", "check=shutdown")[1]
    assert "could not look at the cluster from this host: ConnectionError: no broker answered" in body


def test_an_incident_page_says_which_side_of_a_replication_link_is_cut(tmp_path):
    link = {"side": "follower", "broker": 3, "peers": [1, 2], "summary": "broker 3 fetches nothing from brokers 1, 2"}
    stall = Incident("inc-9", "prod", "offsets:orders", "HW_STALL", "critical", "orders", 1, None,
                     "isr_follower_not_caught_up", {"leader": 1, "holding_back": [3], "replication_link": link},
                     1_700_000_000_000, 1_700_000_001_000, None, "open")
    state = PipelineState()
    state.update(clusters={"prod": ClusterView(((1, True), (2, True), (3, True)), 1, None, 1_700_000_001_000)},
                 open_incidents=(stall,))
    console = Console(state, SimpleNamespace(incidents=tmp_path / "incidents", partition_state=Missing(),
                                             replica_lag=Missing(), broker_state=Missing()))
    status, body = _get(console, "/incidents/inc-9")
    assert status == "200 OK" and "broker 3 fetches nothing from brokers 1, 2 (follower side)" in body


def test_an_incident_page_shows_the_disks_a_broker_went_down_with():
    dirs = [{"path": "/data", "failed": False, "total_bytes": 64 << 20, "usable_bytes": 1 << 19, "full_in_s": 2.4},
            {"path": "/data-2", "failed": True}]
    down = Incident("inc-7", "prod", "cluster", "BROKER_DOWN", "warning", None, None, 2, "log_dir_full",
                    {"departure": "crash", "disk_full": True, "log_dirs": dirs}, 1_700_000_000_000, 1_700_000_001_000,
                    None, "open")
    state = PipelineState()
    state.update(clusters={"prod": ClusterView(((1, True), (2, False)), 1, None, 1_700_000_001_000)},
                 open_incidents=(down,))
    console = Console(state, SimpleNamespace(incidents="/nonexistent", partition_state=Missing(),
                                             replica_lag=Missing(), broker_state=Missing()))
    status, body = _get(console, "/incidents/inc-7")
    assert status == "200 OK"
    assert "/data 0.5 of 64.0 MiB free, full in 2 s at its rate; /data-2 failed (the last look before it went)" in body
