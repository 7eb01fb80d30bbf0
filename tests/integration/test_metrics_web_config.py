"""krm's /metrics behind TLS and basic auth (web_config_file), scraped by a real Prometheus as any
exporter is: with the credentials it gets 200 and the series, without them 401 and `up` 0."""

import json
import os
import shutil
import subprocess
import urllib.parse
import urllib.request

import bcrypt
import pytest
import requests

from lab.local_cluster import free_port
from pipelines.metrics import serve
from pipelines.state import ClusterView, PipelineState
from lab.harness import wait_for

pytestmark = pytest.mark.integration


def _pki(tmp_path):
    from cryptography.hazmat.primitives import serialization

    from lab.local_security import _ca, _signed_cert

    ca_key, ca_cert = _ca()
    key, cert = _signed_cert(ca_key, ca_cert, "localhost", server=True)
    (tmp_path / "ca.pem").write_bytes(ca_cert.public_bytes(serialization.Encoding.PEM))
    (tmp_path / "server.crt").write_bytes(cert.public_bytes(serialization.Encoding.PEM))
    (tmp_path / "server.key").write_bytes(key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                                                            serialization.NoEncryption()))
    os.chmod(tmp_path / "server.key", 0o600)


@pytest.fixture
def secured_metrics(tmp_path):
    _pki(tmp_path)
    hashed = bcrypt.hashpw(b"scrape-me", bcrypt.gensalt(rounds=10)).decode()
    web = tmp_path / "web.yml"
    web.write_text(f"tls_server_config:\n  cert_file: server.crt\n  key_file: server.key\n"
                   f"basic_auth_users:\n  prometheus: '{hashed}'\n")
    os.chmod(web, 0o600)
    state = PipelineState()
    state.update(clusters={"prod-eu-1": ClusterView(((1, True),), 1, None, 10_000)})
    port = free_port()
    from krm.console import Console
    from pipelines.tables import Tables

    server = serve(state, "127.0.0.1", port, web_config_file=web, pages=Console(state, Tables(tmp_path / "data")))
    yield f"https://127.0.0.1:{port}/metrics", port, tmp_path
    server.shutdown()


def test_metrics_need_credentials(secured_metrics):
    url, port, tmp = secured_metrics
    ca = str(tmp / "ca.pem")
    assert requests.get(url, verify=ca, timeout=5).status_code == 401
    assert requests.get(url, verify=ca, auth=("prometheus", "wrong"), timeout=5).status_code == 401
    ok = requests.get(url, verify=ca, auth=("prometheus", "scrape-me"), timeout=5)
    assert ok.status_code == 200 and 'krm_cluster_reachable{cluster="prod-eu-1",reason=""} 1.0' in ok.text
    with pytest.raises(requests.exceptions.ConnectionError):  # no plaintext beside TLS
        requests.get(f"http://127.0.0.1:{port}/metrics", timeout=5)


def test_console_is_under_the_same_tls_and_basic_auth(secured_metrics):
    _url, port, tmp = secured_metrics
    ca = str(tmp / "ca.pem")
    for path in ("/", "/incidents", "/incidents/nope", "/clusters/prod-eu-1", "/?fragment=1", "/?fragment=stale"):
        assert requests.get(f"https://127.0.0.1:{port}{path}", verify=ca, timeout=5).status_code == 401, path
    page = requests.get(f"https://127.0.0.1:{port}/", verify=ca, auth=("prometheus", "scrape-me"), timeout=5)
    assert page.status_code == 200 and "prod-eu-1" in page.text
    assert "<script src" not in page.text and "http" not in page.text.split("<script>", 1)[1]  # nothing fetched elsewhere


def test_a_browser_without_credentials_is_refused(secured_metrics):
    """In a real browser (chromium): no credentials, no page; with them, the clusters page."""
    from selenium.webdriver.common.by import By

    from tests.browser import chromium

    _url, port, _tmp = secured_metrics
    with chromium() as browser:
        browser.get(f"https://127.0.0.1:{port}/")
        # the Basic challenge holds the page (headless Chrome asks no one): nothing of the console shows
        assert "prod-eu-1" not in browser.page_source and "open incidents" not in browser.page_source
        browser.get(f"https://prometheus:scrape-me@127.0.0.1:{port}/")
        assert "prod-eu-1" in browser.find_element(By.TAG_NAME, "body").text
        # the live part reloads under the same credentials, without the page asking again
        browser.get(f"https://prometheus:scrape-me@127.0.0.1:{port}/clusters/prod-eu-1")
        from lab.harness import wait_for

        wait_for(lambda: browser.execute_script("return document.getElementById('grid').dataset.updated"), 30,
                 "the grid's live part reloaded")
        assert not browser.find_elements(By.CLASS_NAME, "lost-note")


def test_prometheus_scrapes_with_the_web_config(secured_metrics):
    url, port, tmp = secured_metrics
    prometheus = shutil.which("prometheus")
    assert prometheus, "`make test` installs Debian's prometheus"
    (tmp / "scrape.pw").write_text("scrape-me\n")
    os.chmod(tmp / "scrape.pw", 0o600)
    target = f"127.0.0.1:{port}"
    (tmp / "prom.yml").write_text(
        "global:\n  scrape_interval: 1s\nscrape_configs:\n"
        f"  - job_name: krm\n    scheme: https\n    tls_config:\n      ca_file: {tmp / 'ca.pem'}\n"
        f"    basic_auth:\n      username: prometheus\n      password_file: {tmp / 'scrape.pw'}\n"
        f"    static_configs:\n      - targets: ['{target}']\n"
        f"  - job_name: anonymous\n    scheme: https\n    tls_config:\n      ca_file: {tmp / 'ca.pem'}\n"
        f"    static_configs:\n      - targets: ['{target}']\n")
    prom_port = free_port()
    proc = subprocess.Popen([prometheus, f"--config.file={tmp / 'prom.yml'}", f"--storage.tsdb.path={tmp / 'tsdb'}",
                             f"--web.listen-address=127.0.0.1:{prom_port}"], stdout=open(tmp / "prom.log", "w"),
                            stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL)

    def query(q):
        with urllib.request.urlopen(f"http://127.0.0.1:{prom_port}/api/v1/query?query={urllib.parse.quote(q)}",
                                    timeout=5) as r:
            return {s["metric"].get("job"): float(s["value"][1]) for s in json.load(r)["data"]["result"]}

    try:
        wait_for(lambda: len(query("up")) == 2, 60, "both scrape jobs to run")
        assert query("up") == {"krm": 1.0, "anonymous": 0.0}
        assert query('krm_cluster_reachable{cluster="prod-eu-1"}') == {"krm": 1.0}
    finally:
        proc.terminate()
        proc.wait(timeout=30)
