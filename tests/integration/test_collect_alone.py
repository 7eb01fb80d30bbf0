"""`krm collect` alone, as the production shape runs it beside a `krm pipeline` on the same host with
the same config file: its own /metrics and /readyz on [collector] metrics_port, the pipeline's port
left to the pipeline."""

import re
import socket
import urllib.request

import pytest

from foundation.config import load_config
from krm.runner import Monitor
from krm.scrape import scrape, series
from lab.harness import free_port_pair, wait_for, write_config

pytestmark = pytest.mark.integration


def test_krm_collect_serves_its_own_port_beside_the_pipelines(kraft_cluster, tmp_path):
    path = write_config(kraft_cluster, tmp_path, poll_interval_s=0.5)
    # `krm collect` serves on the pipeline's port + 1: both must be free
    path.write_text(re.sub(r"(?m)^metrics_port = \d+$", f"metrics_port = {free_port_pair()}", path.read_text()))
    config = load_config(path)
    pipeline_port = config.pipeline.metrics_port
    with socket.socket() as pipeline_side:  # the pipeline, already serving on its port
        pipeline_side.bind(("127.0.0.1", pipeline_port))
        pipeline_side.listen()
        monitor = Monitor(config, collect=True, pipeline=False).start()
        try:
            url = monitor.metrics_url
            assert url == f"http://127.0.0.1:{pipeline_port + 1}/metrics"
            wait_for(lambda: any(s.value > 0 for s in series(scrape(url), "krm_collector_polls_total")), 60,
                     "the collector's polls on its own /metrics")
            ready = wait_for(lambda: urllib.request.urlopen(url.replace("/metrics", "/readyz"), timeout=5).status == 200,
                             60, "/readyz 200 once every cluster was polled")
            assert ready
        finally:
            monitor.stop()
