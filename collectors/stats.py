"""The collector's own health on /metrics (served with the pipeline's in `krm run`)."""

from __future__ import annotations

from typing import Any, Iterator

from prometheus_client.metrics_core import Metric


class CollectorMetrics:
    """A prometheus-client collector reading the live counters of a collectors.daemon.Collector."""

    def __init__(self, collector: Any) -> None:
        self.collector = collector

    def describe(self) -> list[Metric]:
        return []

    def collect(self) -> Iterator[Metric]:
        from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily

        c = self.collector
        pub = c.publisher
        yield GaugeMetricFamily("krm_collector_spool_records",
                                "Observation records waiting for the observations topic.", value=pub.spool.depth)
        yield GaugeMetricFamily("krm_collector_spool_bytes", "Bytes waiting in the spool.", value=pub.spool.size_bytes)
        yield CounterMetricFamily("krm_collector_records_sent", "Records acknowledged by the observations topic.",
                                  value=pub.sent)
        dropped = CounterMetricFamily("krm_collector_records_dropped", "Records not published, by reason.",
                                      labels=["reason"])
        dropped.add_metric(["spool_full"], pub.dropped)
        dropped.add_metric(["invalid"], pub.invalid)
        yield dropped
        yield CounterMetricFamily("krm_collector_polls", "Full polls run.", value=c.polls)
        yield CounterMetricFamily("krm_collector_polls_kept_home",
                                  "Healthy polls that found what the last published one did, told to the pipeline in "
                                  "this process instead of published.", value=c.unchanged.kept_home)
        yield CounterMetricFamily("krm_collector_zookeeper_publishes",
                                  "Topics published at once on a ZooKeeper state change.", value=c.quick_publishes)
        zk = GaugeMetricFamily("krm_collector_zookeeper_connected",
                               "1 while the ZooKeeper session of a cluster with `zookeeper` set is up; 0 while krm "
                               "sees that cluster through the Admin API alone.", labels=["cluster"])
        for name, up in sorted(c.zookeeper_connected().items()):
            zk.add_metric([name], 1.0 if up else 0.0)
        yield zk
        phase = GaugeMetricFamily("krm_cluster_migration_state",
                                  "ZooKeeper-mode clusters: the ZooKeeper → KRaft migration phase, numbered as Kafka's "
                                  "ZkMigrationState: 4 none, 2 metadata being copied, 1 dual writes, 3 finalized.",
                                  labels=["cluster"])
        zk_brokers = GaugeMetricFamily("krm_cluster_migration_zk_brokers",
                                       "Brokers still registered in ZooKeeper (ZooKeeper mode or migration mode); 0 "
                                       "once every broker runs in KRaft mode.", labels=["cluster"])
        for name, (state, registered) in sorted(c.migration_phases().items()):
            phase.add_metric([name], float(state))
            if registered is not None:
                zk_brokers.add_metric([name], float(registered))
        yield phase
        yield zk_brokers
        rounds = CounterMetricFamily("krm_collector_canary_rounds",
                                     "Canary rounds by outcome: ok, partition_failed (a write or read-back failed), "
                                     "not_started (no canary topic or no connection: nothing else shows it).",
                                     labels=["cluster", "result"])
        for canary in getattr(c, "canaries", []):
            for result, n in canary.rounds.items():
                rounds.add_metric([canary.cluster.name, result], n)
        yield rounds
        reachable = GaugeMetricFamily("krm_collector_broker_reachable",
                                      "1 if the collector's last poll reached the broker (registered and answering "
                                      "within unreachable_after_s), 0 if not: served by the collector, so known even "
                                      "while the observations path is down.", labels=["cluster", "broker"])
        leads = GaugeMetricFamily("krm_collector_broker_leaderships",
                                  "Partitions the broker led at the collector's last poll that reached the cluster.",
                                  labels=["cluster", "broker"])
        for src in getattr(c, "sources", []):
            for broker, (ok, n) in sorted(src.broker_view.items()):
                reachable.add_metric([src.cluster.name, str(broker)], 1 if ok else 0)
                leads.add_metric([src.cluster.name, str(broker)], n)
        yield reachable
        yield leads
        last = GaugeMetricFamily("krm_collector_last_poll_seconds", "Duration of the last full poll.",
                                 labels=["cluster"])
        for name, seconds in sorted(c.last_poll_s.items()):
            last.add_metric([name], seconds)
        yield last
