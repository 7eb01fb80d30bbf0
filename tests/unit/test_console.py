"""The console's pages (krm/console.py) from a pipeline snapshot, called as a WSGI app: no server, no JVM."""

from types import SimpleNamespace

import pytest

from krm.console import Console, svg_chart
from pipelines.incidents import Incident
from pipelines.metrics import ClusterView, PipelineState

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
    tables = SimpleNamespace(incidents=tmp_path / "incidents", partition_state=Missing())
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


def test_svg_chart_has_no_script():
    import datetime as dt

    t = dt.datetime(2026, 1, 1, tzinfo=dt.timezone.utc)
    states = [{"observed_at": t + dt.timedelta(seconds=s), "leader": ld, "isr": isr}
              for s, ld, isr in ((0, 1, [1, 2]), (5, -1, [2]), (9, 2, [2]))]
    svg = svg_chart(states)
    assert svg.startswith("<svg") and "<script" not in svg and svg.count("<path") == 2
