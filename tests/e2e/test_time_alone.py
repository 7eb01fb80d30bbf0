"""What time alone changes is judged on the pipeline's clock, not when a poll happens to be published.

A broker that holds nothing stops; every poll after the first that sees it gone finds the same cluster,
so the collector keeps them home (collectors/unchanged.py). The departure still turns critical once
`planned_stop_max_s` has passed since it went (pipelines/clock.py), while polls stay home.
"""

from datetime import datetime, timezone

import pytest

from foundation.config import load_config
from krm.runner import Monitor
from krm.scrape import scrape, series
from lab.harness import kafka_admin, local_cluster, stored_incidents, wait_for, write_config

pytestmark = pytest.mark.e2e

IDLE = 3  # holds no replica of anything
PLANNED_STOP_MAX_S = 20


def _kept_home(url):
    return sum(s.value for s in series(scrape(url), "krm_collector_polls_kept_home_total"))


def _down(url, cluster):
    return {(s.labels["cause"], s.labels["severity"]) for s in series(scrape(url), "krm_broker_down", cluster=cluster)
            if s.labels["broker"] == str(IDLE)}


def test_a_stopped_broker_turns_critical_on_time_while_polls_stay_home(kraft_cluster, spark, tmp_path, tmp_path_factory):
    from kafka.admin import NewTopic

    cluster = local_cluster(tmp_path_factory, "zk")
    monitor = None
    try:
        admin = kafka_admin(cluster)
        try:
            admin.create_topics([NewTopic("busy", -1, -1, replica_assignments={p: [1, 2] for p in range(3)})])
        finally:
            admin.close()
        # no steady poll republished meanwhile (unchanged_publish_s): the escalation can come from the clock alone
        config_path = write_config(cluster, tmp_path, observations_on=kraft_cluster,
                                   collector_extra="unchanged_publish_s = 600\n",
                                   pipeline_extra=f"planned_stop_max_s = {PLANNED_STOP_MAX_S}\n")
        monitor = Monitor(load_config(config_path), spark=spark).start()
        url = monitor.metrics_url
        wait_for(lambda: _kept_home(url) >= 3, 90, "healthy, unchanged polls kept home")

        cluster.stop(IDLE)
        (cause,) = wait_for(lambda: {c for c, sev in _down(url, cluster.name) if sev == "warning"} or None, 60,
                            f"broker {IDLE} down (warning)")
        home_before = _kept_home(url)
        (inc,) = wait_for(lambda: [i for i in stored_incidents("--open", "--type", "BROKER_DOWN", "--config", str(config_path))
                                   if i["broker"] == IDLE] or None, 30, "the BROKER_DOWN incident in the table")
        down_since = inc["details"]["down_since_ms"]
        assert down_since is not None, inc

        wait_for(lambda: _down(url, cluster.name) == {(cause, "critical")}, 3 * PLANNED_STOP_MAX_S + 30,
                 f"broker {IDLE} critical after planned_stop_max_s")
        kept = _kept_home(url) - home_before
        print(f"\n[time alone] {cause}: critical with {kept:.0f} polls kept home since the departure")
        assert kept >= 3, "the escalation came from a published poll, not from the clock"
        (raised,) = wait_for(lambda: [i for i in stored_incidents("--open", "--type", "BROKER_DOWN", "--config",
                                                                  str(config_path))
                                      if i["broker"] == IDLE and i["severity"] == "critical"] or None, 30,
                             "the raised incident in the table")
        # raised at the moment the rule names, whatever tick found it
        due = datetime.fromtimestamp((down_since + PLANNED_STOP_MAX_S * 1000 + 1) / 1000, timezone.utc)
        assert datetime.fromisoformat(raised["last_seen_at"].replace("Z", "+00:00")) == due, (raised, due)
    finally:
        if monitor is not None:
            monitor.stop()
        cluster.down()
