"""A slow broker, not a stopped one, on a real Kafka 4 cluster (observations on a separate cluster): one broker's
JVM capped at 5 % of a core (`krm local-cluster slow --cpu`: slow, still acknowledging the canary's writes), the
canary writing every second and the JMX exporter scraped every 2 s. krm opens one BROKER_SLOW naming that broker
and the kind (cpu_starved: its JVM answers its own metrics markedly later than its peers', or not in time, while it
still acknowledges writes), none for its peers (whose leaders wait on it as a follower), shows it on /metrics and
in every reader, and resolves it once the broker is fast again. Then at 2 %, where the canary's writes through it
fail and its exporter answers nothing, as a paused broker's would: it still answers krm's answer-time prober,
seconds late, so it is slow and hurting clients (BROKER_SLOW critical), never BROKER_DOWN unreachable, and the
partition pages it explains are held under its one page (krm_partition_slowed_by)."""

import pytest
import requests

from foundation.config import load_config
from krm.runner import Monitor
from krm.scrape import scrape, series
from lab.harness import krm_json, slow_evidence_config, stored_incidents, wait_equal, wait_for

pytestmark = pytest.mark.e2e


def _slow(config_path):
    return sorted((i["broker"], i["cause"]) for i in stored_incidents("--open", "--type", "BROKER_SLOW",
                                                                     "--config", str(config_path)))


def test_a_cpu_starved_broker_is_named_slow_not_down(kraft4_cluster, zk_cluster, spark, tmp_path):
    cluster, victim = kraft4_cluster, 2
    config_path = slow_evidence_config(cluster, tmp_path, observations_on=zk_cluster)
    monitor = Monitor(load_config(config_path), spark=spark).start()
    url = monitor.metrics_url
    try:
        # the canary's latency is per leader: after the suite's earlier faults a broker may lead no canary partition
        wait_for(lambda: series(scrape(url), "krm_broker_client_latency_seconds", cluster=cluster.name),
                 120, "the canary's latency on /metrics")
        wait_for(lambda: {s.labels["broker"] for s in series(scrape(url), "krm_broker_request_latency_seconds",
                                                            cluster=cluster.name)} == {"1", "2", "3"},
                 60, "every broker's request latency on /metrics")
        wait_equal(lambda: _slow(config_path), [], 60, "no broker slow at rest")

        cluster.slow(victim, cpu_pct=5)
        # settled, not the first sight: the cause follows the evidence as each round brings it
        wait_equal(lambda: _slow(config_path), [(victim, "cpu_starved")], 90, f"BROKER_SLOW cpu_starved for broker {victim}")
        slow_series = wait_for(lambda: [s for s in series(scrape(url), "krm_broker_slow", cluster=cluster.name)], 30,
                               "krm_broker_slow")
        assert {s.labels["broker"] for s in slow_series} == {str(victim)}, slow_series
        # the evidence, as the CLI prints it: its JVM answers its own metrics markedly later than its peers' (at
        # 5 % of a core the canary's one small write a second still goes through in tens of ms: the broker's own
        # Produce time and its exporter's pace say it)
        (inc,) = krm_json("incidents", "--open", "--type", "BROKER_SLOW", "--config", str(config_path))
        d = inc["details"]
        assert d.get("jmx_error") or d["jmx_scrape_ms"] >= 3 * d["peers_jmx_scrape_ms"], d
        assert inc["cause"] == "cpu_starved" and inc["broker"] == victim, inc
        print(f"\nBROKER_SLOW at 5 % of a core: {inc['severity']}, {inc['details']}")
        page = requests.get(f"{url.removesuffix('/metrics')}/incidents/{inc['incident_id']}", timeout=30)
        assert page.status_code == 200 and "cpu_starved" in page.text and "JMX" in page.text

        cluster.fast(victim)
        wait_equal(lambda: _slow(config_path), [], 90, "BROKER_SLOW resolved once the broker is fast again")

        # 2 % of a core: its exporter times out and the canary's writes through it fail, as a paused broker's
        # would; it still answers krm's probes, seconds late. Slow and hurting clients, not unreachable: one
        # critical BROKER_SLOW, no BROKER_DOWN, and every partition page it explains held under it
        cluster.slow(victim, cpu_pct=2)
        wait_equal(lambda: [(i["broker"], i["cause"], i["severity"]) for i in stored_incidents(
            "--open", "--type", "BROKER_SLOW", "--config", str(config_path))], [(victim, "cpu_starved", "critical")], 90,
            f"BROKER_SLOW cpu_starved critical for broker {victim}")
        (inc,) = krm_json("incidents", "--open", "--type", "BROKER_SLOW", "--config", str(config_path))
        print(f"\nBROKER_SLOW at 2 % of a core: {inc['details']}")
        assert inc["details"]["answer_ms"] >= 200, inc["details"]
        downs = krm_json("incidents", "--type", "BROKER_DOWN", "--config", str(config_path))
        assert [d for d in downs if d["broker"] == victim and d["opened_at"] >= inc["opened_at"]] == [], downs
        metrics = scrape(url)
        held = {(s.labels["topic"], s.labels["partition"]) for s in series(metrics, "krm_partition_slowed_by",
                                                                            cluster=cluster.name)}
        paging = [(s.name, s.labels) for name in ("krm_partition_hw_stall_seconds", "krm_partition_unavailable")
                  for s in series(metrics, name, cluster=cluster.name)
                  if (s.labels["topic"], s.labels["partition"]) not in held]
        print(f"held under it: {sorted(held)}; paging on their own: {paging}")
        assert paging == [], paging
        cluster.fast(victim)
        wait_equal(lambda: _slow(config_path), [], 90, "BROKER_SLOW resolved once the broker is fast again")
    finally:
        cluster.fast(victim, missing_ok=True)
        monitor.stop()
