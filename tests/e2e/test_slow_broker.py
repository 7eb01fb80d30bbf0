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


def test_a_write_waiting_on_a_starved_broker_is_said_before_it_ends(kraft4_cluster, tmp_path):
    """The collector's side at 2 % of a core: the answer-time prober calls the broker late at once (what hurries the
    canary's next round), and a canary write to the partition it leads, still unanswered once the latency objective
    passed, goes out in the round's early record, before the round's own record says how it ended; and while the
    broker answers late, a round writes a train to the partitions it holds (`writes`)."""
    from collectors.answer_times import AnswerTimes
    from collectors.canary import CanarySource
    from lab.harness import write_config

    cluster, victim = kraft4_cluster, 2
    config = load_config(write_config(cluster, tmp_path, cluster_extra=(
        'canary = true\ncanary_topic = "krm.canary.early"\nlatency_objective_s = 0.5\n'),
        collector_extra="canary_timeout_ms = 4000\n"))
    early: list = []
    late: list = []
    canary = CanarySource(config.clusters[0], config.collector, publish=early.extend)
    prober = AnswerTimes(config.clusters[0], 0.25, 10_000)
    prober.on_late = late.append
    try:
        def written_everywhere():
            parts = [p for r in canary.poll() for p in r["canary_state"]["partitions"]]
            return len(parts) == 3 and all(p["produced"] for p in parts)

        wait_for(written_everywhere, 60, "the canary topic written everywhere")
        prober.start()
        wait_for(lambda: set(prober.answers()[1]) == {1, 2, 3}, 30, "every broker answering the prober")
        early.clear()
        cluster.slow(victim, cpu_pct=2)
        wait_for(lambda: victim in late, 30, f"the prober calling broker {victim} late")
        print(f"\nlate: {late}")

        def a_round_said_early():
            said = len(early)
            (done,) = canary.poll()
            waits = [p for r in early[said:] for p in r["canary_state"]["partitions"]]
            return (waits, done) if any(p["broker"] == victim for p in waits) else None

        waits, done = wait_for(a_round_said_early, 90, f"a write to broker {victim}'s partition said while it waits")
        print(f"waiting: {waits}\nthe round: {done['canary_state']['partitions']}")
        assert all(r["canary_state"].get("waiting") is True for r in early), early
        ended = {p["partition"]: p for p in done["canary_state"]["partitions"]}
        for w in waits:
            assert w["produced"] is False and w["waiting_ms"] >= 500 and w.get("leader") in {1, 2, 3}, w
            end = ended[w["partition"]]
            assert not end["produced"] or end["produce_ms"] >= w["waiting_ms"], (w, end)

        # while the prober calls it late, each round writes a train to the partitions it holds (all three here: RF 3)
        canary.suspects = prober.late_now

        def a_train():
            (done,) = canary.poll()
            parts = done["canary_state"]["partitions"]
            return parts if any(p.get("writes", 1) > 1 for p in parts) else None

        trained = wait_for(a_train, 90, f"a round writing a train to broker {victim}'s partitions")
        print(f"a train: {trained}")
        assert all(p.get("writes", 1) >= 2 for p in trained), trained
        assert all(p["produce_ms"] > 0 for p in trained if p["produced"]), trained
    finally:
        cluster.fast(victim, missing_ok=True)
        prober.close()
        try:
            if canary._admin is not None:
                canary._admin.delete_topics(["krm.canary.early"])
        finally:
            canary.close()
