"""The shipped alert file, dashboards/prometheus/krm-alerts.yml: every incident type's alerts (declared
on its rule, in registry order), the log directories' (pipelines/disks.py), then krm's alerts about
itself (declared here: its view gone stale, its pipeline down, its canary not starting). The file is
generated; regenerate it after changing an alert with `.venv/bin/python -m pipelines.alert_rules >
dashboards/prometheus/krm-alerts.yml` (tests/unit/test_alert_rules.py fails until the file says the same).
"""

from __future__ import annotations

from pipelines import disks
from pipelines.detectors.exports import Alert, console, render_alert_file
from pipelines.detectors.registry import RULES

HEADER = """Prometheus alert rules for kafka-replication-monitor. Load with `rule_files:` in prometheus.yml.
Generated from the rules' declarations (pipelines/alert_rules.py says how); do not edit by hand.
Tested by tests/integration/test_prometheus_rules.py (`promtool check rules`, `promtool test rules`)."""

SELF_ALERTS = (
    Alert("KrmCanaryNotRunning",
          ('increase(krm_collector_canary_rounds_total{result="not_started"}[5m]) > 0 and on (cluster) sum by (cluster) '
           '(increase(krm_collector_canary_rounds_total{result!="not_started"}[5m])) == 0'),
          "warning", wait="5m",
          summary="{{ $labels.cluster }}: krm's canary rounds do not start",
          runbook=("The collector's log has a WARNING `canary round failed` with the cause. Usually krm lacks CREATE / ALTER"
                   ' / WRITE / READ on the canary topic (docs/security.md), or the cluster refuses connections '
                   "(see KrmClusterUnreachable). Produce availability is not measured meanwhile."),
          links=(("console", console()),),
          why=("A canary that cannot even start (no canary topic: CREATE denied, or no connection) has no partition to "
               "report; only its rounds counter shows it.")),
    Alert("KrmObservationsStale", "krm_observation_age_seconds > 60", "critical", wait="1m",
          summary="krm has seen nothing new from {{ $labels.cluster }} for {{ $value | humanizeDuration }}",
          runbook=("Alerts for this cluster are blind. Check the collector (`krm collect` logs), the observations topic and "
                   "the pipeline (`krm pipeline` logs under data_dir/logs)."),
          links=(("console", console()),)),
    Alert("KrmViewStale", "krm_cluster_view_stale == 1", "critical", wait="20s",
          summary="krm's view of {{ $labels.cluster }} is stale: no observation arrived for three polls",
          runbook=("krm is blind to this cluster: no new incident can open and none can resolve. Is the collector running "
                   "(`krm collect` logs, its /metrics)? Does the observations topic accept its records "
                   "(krm_collector_spool_records growing)? Does the pipeline process them (krm_pipeline_up, `krm pipeline` "
                   "logs under data_dir/logs)? If krm_observations_share_fate is 1, the observations topic lives on this "
                   "very cluster and a fault there blinds krm: KrmBrokerUnreachableWhileBlind says which broker the "
                   "collector cannot reach."),
          links=(("console", console()),),
          why=("Blind within half a minute: the view is stale once older than three polls (at least 6 s, "
               "krm_cluster_view_stale); 20 s more of it before a page, so a slow micro-batch or a query restarting from its"
               " checkpoint never pages.")),
    Alert("KrmBrokerUnreachableWhileBlind",
          ("(krm_collector_broker_reachable == 0 and on(cluster, broker) krm_collector_broker_leaderships > 0)\n"
           "unless on(cluster) (krm_cluster_view_stale == 0)\n"),
          "critical", wait="5s",
          summary=("{{ $labels.cluster }}: the collector cannot reach broker {{ $labels.broker }}, which leads partitions, "
                   "and krm's pipeline sees nothing new"),
          runbook=("Clients of the partitions this broker leads fail (it is down, hung or cut off), and the pipeline cannot "
                   "say more because no observation reaches it. Check the broker first, then the observations path "
                   "(KrmViewStale). If the observations topic lives on this cluster (krm_observations_share_fate 1), move it"
                   " to a cluster krm does not watch (docs/deploying.md)."),
          why=("The collector's own view while the observations path is down (a fault on the cluster holding the "
               "observations topic, or the pipeline gone): a broker the collector cannot reach leads partitions, so their "
               "clients fail. Silent while the pipeline's view is fresh, where KafkaPartitionLeaderUnreachable and "
               "OFFLINE_PARTITION page for the same partitions.")),
    Alert("KrmDown", "absent(krm_pipeline_batches_total)", "critical", wait="2m",
          summary="kafka-replication-monitor's /metrics is gone",
          runbook="Restart `krm run` (or `krm pipeline`); its logs are under data_dir/logs."),
    Alert("KrmPipelineQueryRestarting", "increase(krm_pipeline_query_restarts_total[10m]) > 2", "warning",
          summary="krm's {{ $labels.query }} streaming query keeps failing and restarting",
          runbook=("Each failure is an ERROR line `streaming query {{ $labels.query }} failed; restarting it from its "
                   "checkpoint: <cause>` in the pipeline's log (data_dir/logs). Usual causes: the data_dir's disk full (`No "
                   "space left on device`), the object store refusing writes, the observations cluster unreachable. "
                   "krm-alerts restarting delays pages; krm-history restarting delays the tables. Nothing is lost: each "
                   "restart resumes from the checkpoint."),
          links=(("console", console()),)),
    Alert("KrmDataQualityFailing", "krm_data_quality_expectation_failing == 1", "warning", wait="15m",
          summary="observations fail {{ $labels.expectation }} on {{ $labels.column }}",
          runbook=("The data-quality suite beside the alert path keeps finding observations that break an expectation: a "
                   "collector, a clock or the brokers' answers are off, and detections built on them may be wrong. The "
                   "`data_quality` Delta table holds each run's failing partitions (examples column); records that broke "
                   "Kafka's own invariants are in `quarantine`."),
          links=(("console", console()),)),
)


def groups() -> tuple[tuple[str, tuple[Alert, ...]], ...]:
    return (("krm-replication", tuple(a for rule in RULES for a in rule.alerts)), ("krm-disks", disks.ALERTS),
            ("krm-self", SELF_ALERTS))


def alert_file() -> str:
    return render_alert_file(groups(), HEADER)


if __name__ == "__main__":
    print(alert_file(), end="")
