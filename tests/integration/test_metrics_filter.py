"""/metrics?name[]=F answers only the families asked for (prometheus-client's filter), as a tool watching one
series scrapes it: krm's collectors describe nothing up front, which must not filter every family out."""

import pytest

from krm.scrape import scrape
from lab.local_cluster import free_port
from pipelines.metrics import serve
from pipelines.state import ClusterView, PipelineState

pytestmark = pytest.mark.integration


def test_a_name_filter_keeps_only_the_families_asked_for():
    state = PipelineState()
    state.update(clusters={"c1": ClusterView(((1, True), (2, False)), 1, None, 10_000)})
    port = free_port()
    server = serve(state, "127.0.0.1", port)
    try:
        url = f"http://127.0.0.1:{port}/metrics"
        everything = {s.name for s in scrape(url)}
        assert {"krm_broker_up", "krm_pipeline_up", "krm_cluster_reachable"} <= everything
        asked = scrape(f"{url}?name[]=krm_broker_up&name[]=krm_pipeline_up")
        assert {s.name for s in asked} == {"krm_broker_up", "krm_pipeline_up"}
        assert {s.labels["broker"]: s.value for s in asked if s.name == "krm_broker_up"} == {"1": 1.0, "2": 0.0}
        assert scrape(f"{url}?name[]=krm_no_such_family") == []
    finally:
        server.shutdown()
