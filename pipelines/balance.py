"""Runs the balance detectors (pipelines/detectors/balance.py) on the driver's per-broker and
per-topic counts after each alert batch, as one more incident scope per cluster (`balance`).

Only complete views are judged: a cluster is evaluated when its latest cluster record is newer than
the last evaluation and the pipeline holds counts for at least as many topics as that record says
the cluster has, so a pipeline that just started (or a poll still arriving) raises no false skew.
Nothing is judged while a partition reassignment runs (as Kafka's own auto leader rebalance skips
partitions being reassigned); open balance incidents then stay as they are.
"""

from __future__ import annotations

from dataclasses import dataclass

from foundation.config import PipelineConfig, from_pipeline, setting
from pipelines.detectors import balance
from pipelines.incidents import Finding, ScopePoll
from pipelines.load import BrokerLoad, TopicLoad
from pipelines.state import ClusterView

SCOPE = "balance"


@dataclass(frozen=True)
class BalanceSettings:
    leader_skew_tolerance: float = setting("leader_skew_tolerance")
    replica_imbalance_tolerance: float = setting("replica_imbalance_tolerance")

    @classmethod
    def of(cls, pipeline: PipelineConfig) -> BalanceSettings:
        return from_pipeline(cls, pipeline)


class BalanceCheck:
    def __init__(self, settings: BalanceSettings | None = None, history: balance.AssignmentHistory | None = None
                 ) -> None:
        self.settings = settings or BalanceSettings()
        self.history = history or balance.AssignmentHistory()
        self._evaluated: dict[str, int] = {}

    def evaluate(self, load: BrokerLoad, batch_topics: list[TopicLoad], clusters: dict[str, ClusterView]
                 ) -> tuple[list[ScopePoll], list[Finding]]:
        for t in batch_topics:
            self.history.observe_topic(t.cluster, t.topic, t.partitions, t.observed_at_ms)
        polls: list[ScopePoll] = []
        found: list[Finding] = []
        totals = load.totals()
        for name, view in sorted(clusters.items()):
            if view.error or view.reassigning or view.newest_observed_ms <= self._evaluated.get(name, -1):
                continue  # a running reassignment is imbalance on purpose: judge the result, not the move
            live = {b for b, up in view.brokers if up}
            self.history.observe_brokers(name, live, view.newest_observed_ms)
            topics = load.topics(name)
            if view.topic_count is None or len(topics) < view.topic_count:
                continue
            self._evaluated[name] = view.newest_observed_ms
            counts = totals.get(name, {})
            pct = view.leader_imbalance_percentage or balance.DEFAULT_IMBALANCE_PERCENTAGE
            results = [
                *balance.preferred_leader_imbalance(counts, live, pct),
                *balance.leader_skew(counts, live, self.settings.leader_skew_tolerance),
                *balance.topic_replica_imbalance(name, topics, live, self.history),
                *balance.cluster_replica_imbalance(name, counts, live, self.settings.replica_imbalance_tolerance,
                                                   self.history),
            ]
            at = view.newest_observed_ms
            polls.append(ScopePoll(name, SCOPE, at, at))
            found.extend(Finding(name, SCOPE, r.type, balance.RULES[r.type].severity_of(r.cause), r.topic, None,
                                 r.broker, r.cause, r.details, at, at) for r in results)
        return polls, found
