"""The shipped rules in a real Prometheus, alerting a real Alertmanager (Debian's packages), scraping
the real pipeline: docs/cases/rf1-outage-zk-chroot.md's leaderless partitions fire KafkaPartitionOffline, which reaches
Alertmanager and its webhook receiver, and resolves when the broker returns.

Printed (pytest -s): kill -> /metrics, -> Prometheus firing, -> Alertmanager, -> webhook.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import threading
import time
from http.server import BaseHTTPRequestHandler, HTTPServer
from pathlib import Path

import pytest
import requests

from krm.config import load_config
from krm.local_cluster import free_port
from krm.paths import REPO_ROOT
from krm.runner import Monitor
from krm.scrape import scrape, series
from tests.helpers import create_topic, wait_for, write_config

pytestmark = pytest.mark.e2e

RULES = REPO_ROOT / "dashboards" / "prometheus" / "krm-alerts.yml"


class Webhook:
    """Alertmanager's receiver: records every notification with its arrival time."""

    def __init__(self) -> None:
        self.received: list[tuple[float, dict]] = []
        hook = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:  # noqa: N802 - http.server's naming
                body = self.rfile.read(int(self.headers["Content-Length"]))
                hook.received.append((time.time(), json.loads(body)))
                self.send_response(200)
                self.end_headers()

            def log_message(self, *args: object) -> None:
                pass

        self.server = HTTPServer(("127.0.0.1", free_port()), Handler)
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.server.server_port}/hook"

    def first(self, alertname: str, status: str) -> float | None:
        for at, msg in self.received:
            if any(a["labels"].get("alertname") == alertname and a["status"] == status for a in msg["alerts"]):
                return at
        return None


def _start(cmd: list[str], log: Path) -> subprocess.Popen:
    return subprocess.Popen(cmd, stdout=open(log, "w"), stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL)


@pytest.fixture()
def alerting(tmp_path):
    """Alertmanager (webhook receiver, 1 s group wait) and a Prometheus evaluating the shipped rules
    every second; returns (prometheus url, alertmanager url, webhook, function to add a scrape target)."""
    prometheus, alertmanager = shutil.which("prometheus"), shutil.which("prometheus-alertmanager")
    assert prometheus and alertmanager, "`make test` installs Debian's prometheus and prometheus-alertmanager"
    hook = Webhook()
    am_port, prom_port = free_port(), free_port()
    (tmp_path / "am.yml").write_text(
        "route:\n  receiver: hook\n  group_by: [alertname, cluster, topic, partition]\n"
        "  group_wait: 1s\n  group_interval: 1s\n  repeat_interval: 1h\n"
        f"receivers:\n  - name: hook\n    webhook_configs:\n      - url: {hook.url}\n        send_resolved: true\n")
    procs = [_start([alertmanager, f"--config.file={tmp_path / 'am.yml'}", f"--storage.path={tmp_path / 'am-data'}",
                     f"--web.listen-address=127.0.0.1:{am_port}", "--cluster.listen-address="], tmp_path / "am.log")]
    targets: list[str] = []

    def start_prometheus(target: str) -> None:
        targets.append(target)
        (tmp_path / "prom.yml").write_text(
            "global:\n  scrape_interval: 1s\n  evaluation_interval: 1s\n"
            f"rule_files:\n  - {RULES}\n"
            f"alerting:\n  alertmanagers:\n    - static_configs:\n        - targets: ['127.0.0.1:{am_port}']\n"
            f"scrape_configs:\n  - job_name: krm\n    static_configs:\n        - targets: ['{target}']\n")
        procs.append(_start([prometheus, f"--config.file={tmp_path / 'prom.yml'}",
                             f"--storage.tsdb.path={tmp_path / 'prom-data'}",
                             f"--web.listen-address=127.0.0.1:{prom_port}"], tmp_path / "prom.log"))

    try:
        yield f"http://127.0.0.1:{prom_port}", f"http://127.0.0.1:{am_port}", hook, start_prometheus
    finally:
        for p in procs:
            p.terminate()
        for p in procs:
            p.wait(timeout=30)
        hook.server.shutdown()


def _prometheus_firing(prom_url: str, alertname: str, topic: str) -> bool:
    alerts = requests.get(f"{prom_url}/api/v1/alerts", timeout=5).json()["data"]["alerts"]
    return any(a["labels"]["alertname"] == alertname and a["labels"].get("topic") == topic and a["state"] == "firing"
               for a in alerts)


def _alertmanager_active(am_url: str, alertname: str, topic: str) -> bool:
    alerts = requests.get(f"{am_url}/api/v2/alerts", params={"active": "true"}, timeout=5).json()
    return any(a["labels"]["alertname"] == alertname and a["labels"].get("topic") == topic for a in alerts)


def test_offline_partition_alert_reaches_alertmanager_and_resolves(zk_cluster, kraft_cluster, spark, tmp_path, alerting):
    prom_url, am_url, hook, start_prometheus = alerting
    cluster = zk_cluster
    topic = "alerting-rf1"
    assignment = create_topic(cluster, topic, partitions=3, rf=1)
    victim = assignment[0][0]
    config_path = write_config(cluster, tmp_path, observations_on=kraft_cluster)
    config = load_config(config_path)
    monitor = Monitor(config, spark=spark).start()
    url = monitor.metrics_url
    start_prometheus(f"{config.pipeline.metrics_host}:{config.pipeline.metrics_port}")
    try:
        wait_for(lambda: series(scrape(url), "krm_cluster_offline_partitions", cluster=cluster.name), 90, "/metrics")
        wait_for(lambda: requests.get(f"{prom_url}/api/v1/targets", timeout=5).json()["data"]["activeTargets"][0][
            "health"] == "up", 60, "Prometheus scraping the pipeline")
        killed = time.time()
        cluster.kill(victim)
        wait_for(lambda: [s for s in series(scrape(url), "krm_partition_offline", cluster=cluster.name)
                          if s.labels["topic"] == topic], 60, "/metrics", interval_s=0.05)
        t_metrics = time.time()
        wait_for(lambda: _prometheus_firing(prom_url, "KafkaPartitionOffline", topic), 60, "Prometheus firing",
                 interval_s=0.1)
        t_prom = time.time()
        wait_for(lambda: _alertmanager_active(am_url, "KafkaPartitionOffline", topic), 60, "Alertmanager",
                 interval_s=0.1)
        t_am = time.time()
        t_hook = wait_for(lambda: hook.first("KafkaPartitionOffline", "firing"), 30, "webhook notified")
        print(f"\n[alerting] kill -> /metrics {t_metrics - killed:.1f}s, -> Prometheus firing {t_prom - killed:.1f}s, "
              f"-> Alertmanager {t_am - killed:.1f}s, -> webhook {t_hook - killed:.1f}s")
        note = next(a for _, m in hook.received for a in m["alerts"]
                    if a["labels"]["alertname"] == "KafkaPartitionOffline" and a["status"] == "firing")
        assert note["labels"]["cause"] == "single_replica_on_dead_broker" and note["labels"]["severity"] == "critical"
        assert "bring that broker back" in note["annotations"]["runbook"]

        cluster.start(victim)
        wait_for(lambda: hook.first("KafkaPartitionOffline", "resolved"), 90, "resolved notification")
        assert not _alertmanager_active(am_url, "KafkaPartitionOffline", topic)
    finally:
        monitor.stop()
        if cluster.status()["brokers"][str(victim)]["state"] != "running":
            cluster.start(victim)
