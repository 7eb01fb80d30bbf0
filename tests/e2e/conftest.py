"""Fixtures of the e2e tier: a real Alertmanager and a real Prometheus evaluating the shipped rules."""

from __future__ import annotations

import json
import shutil
import subprocess
import threading
import time
from http.server import BaseHTTPRequestHandler, HTTPServer
from pathlib import Path

import pytest

from foundation.paths import REPO_ROOT
from lab.local_cluster import free_port

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


