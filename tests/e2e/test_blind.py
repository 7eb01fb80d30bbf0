"""Never blind in silence: the observations topic on the watched cluster, and its leader cut off.

The configuration a new user writes first (`krm local-cluster up`) keeps the observations topic on the
cluster krm watches. krm warns at start (a log line and krm_observations_share_fate). Then the broker
leading the observations partition is cut off (nftables drops what arrives on its listener; Kafka
still counts it alive): no observation reaches the pipeline, so the pipeline's own series go quiet. A
real Prometheus evaluating the shipped rules pages anyway: KrmBrokerUnreachableWhileBlind from the
collector's own series, KrmViewStale from the view's age; the console (a real browser) marks the
cluster stale at the top of its pages. Once the path is back, all of it clears.
"""

from __future__ import annotations

import logging
import time

import pytest
import requests

from foundation.config import load_config
from krm.runner import Monitor
from krm.scrape import scrape, series
from tests.browser import chromium, shot
from lab.harness import every_isr_whole, partition_leaders, wait_for, write_config

pytestmark = pytest.mark.e2e


def _alerts(prometheus: str, state: str) -> set[tuple[str, str]]:
    """(alertname, cluster) of the alerts Prometheus holds in `state` (pending or firing)."""
    got = requests.get(f"{prometheus}/api/v1/alerts", timeout=5).json()["data"]["alerts"]
    return {(a["labels"]["alertname"], a["labels"].get("cluster", "")) for a in got if a["state"] == state}


def _value(url: str, name: str, **labels: str) -> float | None:
    found = series(scrape(url), name, **labels)
    return found[0].value if found else None


def test_observations_on_the_watched_cluster_blinded_by_a_cut_still_page(zk_cluster, spark, tmp_path, alerting,
                                                                          caplog):
    cluster = zk_cluster
    prometheus, _, _, start_prometheus = alerting
    config = load_config(write_config(cluster, tmp_path))  # observations on the watched cluster itself
    obs_topic = config.observations.topic
    caplog.set_level(logging.WARNING, logger="pipelines.job")
    with caplog.at_level(logging.WARNING, logger="krm.runner"):
        monitor = Monitor(config, spark=spark).start()
    url = monitor.metrics_url
    victim = None
    try:
        assert any("lives on cluster " + cluster.name in r.getMessage() for r in caplog.records), caplog.text
        start_prometheus(url.split("//")[1].split("/")[0])
        wait_for(lambda: _value(url, "krm_cluster_view_stale", cluster=cluster.name) == 0, 90, "a fresh view")
        assert _value(url, "krm_observations_share_fate", cluster=cluster.name) == 1
        wait_for(lambda: _value(url, "krm_collector_broker_reachable", cluster=cluster.name,
                                broker=str(cluster.broker_ids[0])) == 1, 30, "the collector's own broker series")
        time.sleep(5)  # Prometheus scraped and evaluated the healthy state
        assert not {a for a in _alerts(prometheus, "pending") | _alerts(prometheus, "firing")
                    if a[0] in ("KrmViewStale", "KrmBrokerUnreachableWhileBlind")}

        victim = partition_leaders(cluster, obs_topic)[0][0]
        cluster.cut(victim)
        t_cut = time.monotonic()
        wait_for(lambda: _value(url, "krm_collector_broker_reachable", cluster=cluster.name, broker=str(victim)) == 0,
                 60, f"the collector's krm_collector_broker_reachable for broker {victim} at 0")
        collector_s = time.monotonic() - t_cut
        wait_for(lambda: ("KrmBrokerUnreachableWhileBlind", cluster.name) in _alerts(prometheus, "firing"), 90,
                 "KrmBrokerUnreachableWhileBlind firing")
        blind_page_s = time.monotonic() - t_cut
        wait_for(lambda: ("KrmViewStale", cluster.name) in _alerts(prometheus, "firing"), 90, "KrmViewStale firing")
        stale_page_s = time.monotonic() - t_cut
        print(f"\n[blind] cut of the observations leader (broker {victim}) -> collector's broker_reachable 0 "
              f"{collector_s:.1f}s, KrmBrokerUnreachableWhileBlind firing {blind_page_s:.1f}s, KrmViewStale firing "
              f"{stale_page_s:.1f}s")
        # the pipeline saw none of it: what it last knew still says the broker is fine
        assert _value(url, "krm_broker_up", cluster=cluster.name, broker=str(victim)) == 1
        # and its log says when it went blind and why: its alert query hangs on the topic's offsets (docs/deploying.md)
        said = [r.getMessage() for r in caplog.records if r.name == "pipelines.job"
                and r.getMessage().startswith(f"cluster {cluster.name}: krm's view is ")]
        assert said and "the observations topic does not answer the pipeline's reads" in said[0], caplog.text[-2000:]
        # the collector beside it says its side: it goes on polling while its records wait
        assert "; the collector here " in said[0] and " records" in said[0], said[0]
        print(f"[blind] the log: {said[0]}")

        console = url.removesuffix("/metrics")
        with chromium() as browser:
            for page in ("/", f"/brokers/{cluster.name}/{victim}", "/incidents"):
                browser.get(console + page)
                banner = browser.find_element("id", f"stale-{cluster.name}")
                assert banner.is_displayed() and banner.text.startswith("STALE"), (page, banner.text)
            shot(browser, "console-stale")

        cluster.heal(victim)
        t_heal = time.monotonic()
        wait_for(lambda: _value(url, "krm_cluster_view_stale", cluster=cluster.name) == 0, 120, "a fresh view again")
        wait_for(lambda: not {a for a in _alerts(prometheus, "firing")
                              if a[0] in ("KrmViewStale", "KrmBrokerUnreachableWhileBlind")}, 60, "the pages resolved")
        print(f"[blind] heal -> view fresh and pages resolved {time.monotonic() - t_heal:.1f}s")
        with chromium() as browser:
            browser.get(console + "/")
            assert not browser.find_elements("id", f"stale-{cluster.name}")
    finally:
        if victim is not None:
            cluster.heal(victim, missing_ok=True)  # healed above unless the test failed first
        monitor.stop()
        wait_for(lambda: every_isr_whole(cluster), 120, "every ISR of the cluster whole after the heal")
