"""The shipped rules in a real Prometheus, alerting a real Alertmanager (Debian's packages), scraping
the real pipeline: docs/cases/rf1-outage-zk-chroot.md's leaderless partitions fire KafkaPartitionOffline, which reaches
Alertmanager and its webhook receiver, and resolves when the broker returns.

Printed (pytest -s): kill -> /metrics, -> Prometheus firing, -> Alertmanager, -> webhook.
"""

from __future__ import annotations

import time

import pytest
import requests

from foundation.config import load_config
from krm.runner import Monitor
from krm.scrape import scrape, series
from tests.browser import LiveWatch, chromium, shot
from lab.harness import create_topic, wait_for, write_config

pytestmark = pytest.mark.e2e

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
    # the broker chart samples every 2 s (and draws what it has not written yet)
    # (the history every 5 s, so the partition's chart holds the fault while the test looks at it)
    config_path = write_config(cluster, tmp_path, observations_on=kraft_cluster, pipeline_extra="broker_history_s = 2\n",
                               history_trigger_s=5.0)
    config = load_config(config_path)
    monitor = Monitor(config, spark=spark).start()
    watches: list[LiveWatch] = []
    url = monitor.metrics_url
    start_prometheus(f"{config.pipeline.metrics_host}:{config.pipeline.metrics_port}")
    try:
        wait_for(lambda: series(scrape(url), "krm_cluster_offline_partitions", cluster=cluster.name), 90, "/metrics")
        wait_for(lambda: requests.get(f"{prom_url}/api/v1/targets", timeout=5).json()["data"]["activeTargets"][0][
            "health"] == "up", 60, "Prometheus scraping the pipeline")
        watch = LiveWatch(f"{monitor.console_url}/clusters/{cluster.name}").__enter__()
        watches.append(watch)
        wait_for(lambda: any(cls == "" and "up" in text for _, cls, text in watch.heads(victim)), 60,
                 "the grid drawing the victim up")
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
        # this topic's alert: the session cluster's other single-replica topics on the victim go offline too
        note = wait_for(lambda: next((a for _, m in hook.received for a in m["alerts"]
                                      if a["labels"]["alertname"] == "KafkaPartitionOffline"
                                      and a["status"] == "firing" and a["labels"].get("topic") == topic), None),
                        30, f"the webhook's alert for {topic}")
        assert note["labels"]["cause"] == "single_replica_on_dead_broker" and note["labels"]["severity"] == "critical"
        assert "bring that broker back" in note["annotations"]["runbook"]
        # the answer in the page: the broker that must return, and the incident's console page
        assert note["annotations"]["must_return"] == str(victim), note["annotations"]
        page = requests.get(note["annotations"]["incident"], timeout=10)
        assert page.status_code == 200 and "OFFLINE_PARTITION" in page.text and topic in page.text, page.text[:500]
        assert note["annotations"]["incident"].startswith(monitor.console_url + "/incidents/")
        _watch_the_grid(watch, victim, killed, "down")
        _click_through_the_console(monitor.console_url, cluster.name, topic, victim, note["annotations"]["incident"])

        watch = LiveWatch(f"{monitor.console_url}/clusters/{cluster.name}").__enter__()
        watches.append(watch)
        back = time.time()
        cluster.start(victim)
        # this topic's resolved notification (the victim's other single-replica topics resolve in their
        # own notifications, in any order), then Alertmanager's settled view
        wait_for(lambda: any(a["labels"]["alertname"] == "KafkaPartitionOffline" and a["status"] == "resolved"
                             and a["labels"].get("topic") == topic for _, m in hook.received for a in m["alerts"]),
                 90, f"the resolved notification for {topic}")
        wait_for(lambda: not _alertmanager_active(am_url, "KafkaPartitionOffline", topic), 30,
                 "Alertmanager to hold no active alert for the topic")
        _watch_the_grid(watch, victim, back, "up")
    finally:
        for w in watches:
            w.close()
        monitor.stop()
        if cluster.status()["brokers"][str(victim)]["state"] != "running":
            cluster.start(victim)


def _click_through_the_console(console: str, cluster: str, topic: str, victim: int, incident_url: str) -> None:
    """In a real browser: the open incidents list the partition with its cause and the broker that
    must return — on a row of its own, or, once krm has the broker's departure, inside the group that
    broker heads (incidents sharing one cause read as one row, a click opens it); its link reaches the
    incident, whose partition-timeline link reaches the partition's history, which lists the incident's
    opening (once the incidents table holds it); the broker page charts its absence, the topic page its
    spread and incident, the fleet colours the broker by its state."""
    from selenium.webdriver.common.by import By

    incident_id = incident_url.rsplit("/", 1)[1]
    with chromium() as browser:
        browser.get(console + "/incidents")
        for summary in browser.find_elements(By.TAG_NAME, "summary"):
            if f"broker {victim} down" in summary.text:
                summary.click()  # the group of the broker's departure: its members a click away
        # the incident's own entry: a plain row, or a group's member
        found = browser.find_elements(By.XPATH, f"//tr[td/a[contains(@href, '/incidents/{incident_id}')]]"
                                                f" | //li[a[contains(@href, '/incidents/{incident_id}')]]")
        assert found, browser.page_source[:3000]
        row = found[0]
        assert f"{topic}-" in row.text and "OFFLINE_PARTITION" in row.text, row.text
        assert "single_replica_on_dead_broker" in row.text and f"must_return [{victim}]" in row.text, row.text
        shot(browser, "console-incidents")
        row.find_element(By.LINK_TEXT, "OFFLINE_PARTITION").click()
        assert browser.current_url == incident_url
        body = browser.find_element(By.TAG_NAME, "body").text
        assert "OFFLINE_PARTITION / single_replica_on_dead_broker" in body and f"must_return [{victim}]" in body, body
        shot(browser, "console-incident")
        browser.find_element(By.LINK_TEXT, "partition timeline").click()
        assert "/partitions/" in browser.current_url and browser.current_url.endswith(
            f"/{topic}/" + browser.current_url.rsplit("/", 1)[1])

        def lists_the_incident() -> bool:
            browser.refresh()
            return any(incident_id in (a.get_attribute("href") or "") for a in browser.find_elements(By.TAG_NAME, "a"))

        wait_for(lists_the_incident, 60, "the partition's timeline listing the incident")

        def charts_the_fault() -> bool:  # the chart: its leaderless stretch and the incident's band
            browser.refresh()
            svg = "".join(e.get_attribute("innerHTML") for e in browser.find_elements(By.TAG_NAME, "svg"))
            return "<title>no leader</title>" in svg and "OFFLINE_PARTITION" in svg

        wait_for(charts_the_fault, 60, "the partition's chart drawing the fault")
        # and the partition before it: the first poll's row (published while Spark was starting, read by a
        # new history from the collector's start), well before the first keyframe
        body = browser.find_element(By.TAG_NAME, "body").text
        assert f"leader {victim} (epoch" in body and body.index(f"leader {victim} (epoch") < body.index("leader -1"), body
        shot(browser, "console-partition")

        # the broker's load over time: its absence a labelled band (samples every 2 s, drawn before written)
        browser.get(f"{console}/brokers/{cluster}/{victim}?since=15m")
        wait_for(lambda: browser.refresh() or "not registered" in browser.find_element(By.TAG_NAME, "svg").text, 60,
                 "the broker chart's band of its absence")
        assert "NOT registered" in browser.find_element(By.TAG_NAME, "body").text
        shot(browser, "console-broker")
        browser.get(f"{console}/topics/{cluster}/{topic}")
        assert "partitions per broker" in browser.page_source and "OFFLINE_PARTITION" in browser.page_source
        shot(browser, "console-topic")
        browser.get(console + "/")
        cell = browser.find_element(By.ID, f"b-{cluster}-{victim}")
        assert cell.get_attribute("class").startswith("sev-") and "down" in cell.text, cell.text
        shot(browser, "console-fleet")


def _watch_the_grid(watch: LiveWatch, victim: int, since: float, state: str) -> None:
    """The cluster page left open since before the fault, never reloaded: the victim's head turns `state`
    ("down": coloured by its incident's severity, its cause in words; "up": plain again) by itself, and
    stays so in the last reads (a settled state, not a first sight)."""
    try:
        def settled() -> bool:
            heads = [h for h in watch.heads(victim) if h[0] >= since]
            last = heads[-3:]
            if state == "down":
                return len(last) == 3 and all(cls.startswith("sev-") and "down" in text for _, cls, text in last)
            return len(last) == 3 and all(cls == "" and "up" in text for _, cls, text in last)

        wait_for(settled, 90, f"the open grid showing broker {victim} {state}")
        first = next(t for t, cls, text in watch.heads(victim) if t >= since and (
            (state == "down" and "down" in text) or (state == "up" and "up" in text and cls == "")))
        watch.stop()
        assert not watch.reloaded(), "the live grid must change without reloading the page"
        assert not watch.errors, watch.errors[:3]
        print(f"\n[console] the open grid showed broker {victim} {state} {first - since:.1f}s after the "
              f"{'kill' if state == 'down' else 'start'}")
        if state == "down":
            shot(watch.browser, "console-cluster")
    finally:
        watch.close()
