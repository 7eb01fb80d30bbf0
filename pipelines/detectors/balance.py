"""PREFERRED_LEADER_IMBALANCE, LEADER_SKEW and REPLICA_IMBALANCE: how leadership and replicas are
spread over the live brokers. Pure functions over per-broker and per-topic counts (pipelines/load.py),
so the driver's work grows with topics x brokers, never with partitions.

- PREFERRED_LEADER_IMBALANCE (per broker), Kafka's own rule (`KafkaController.
  checkAndTriggerAutoLeaderRebalance`, core/src/main/scala/kafka/controller/KafkaController.scala):
  of the partitions whose preferred replica (first in the assignment) is broker B, the share led by
  another broker (or by nobody); above leader.imbalance.per.broker.percentage (default 10) the
  controller would run a preferred election when auto.leader.rebalance.enable is on.
- LEADER_SKEW (per broker): a live broker leading more or fewer partitions than the cluster's mean
  by more than `tolerance` of the mean (default 50 %), when there are at least two leaders per
  broker to spread. Preferred-leader imbalance says "Kafka would fix it"; skew says "it is uneven",
  which also happens with a perfectly preferred assignment that is itself uneven.
- REPLICA_IMBALANCE per topic: a live broker holds none of the topic's replicas although the topic
  has enough to cover every broker, or the spread exceeds the replication factor and the largest
  share is 1.5x the mean. Kafka's placement spreads one topic evenly when it is created; a later
  partition expansion in ZooKeeper mode starts over from a sorted broker list and can leave brokers
  out (docs/cases/partition-expansion.md): cause `partition_expansion` when the topic grew while watched, else
  `uneven_assignment`. Topics whose only uncovered brokers joined after the topic was laid out are
  not reported one by one: that is the cluster-level incident below.
- REPLICA_IMBALANCE per cluster (one per underloaded broker): a live broker holds fewer than
  (1 - tolerance) of the mean replicas per broker (default 20 %). Cause `broker_expansion` when that
  broker joined the cluster while watched (Kafka never moves existing replicas to a new broker by
  itself), else `uneven_assignment`. The history survives restarts (`AssignmentHistory.restore`,
  from the `assignments` table and the `broker_expansion` incidents); a broker that joined while no
  pipeline ran is `uneven_assignment`.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from pydantic import model_validator

from pipelines.detectors.details import Brokers, Details
from pipelines.detectors.exports import Alert, INCIDENTS_OF_TYPE, console
from pipelines.detectors.rule import Rule
from pipelines.load import Counts, TopicLoad

PREFERRED = "PREFERRED_LEADER_IMBALANCE"
LEADER_SKEW = "LEADER_SKEW"
REPLICA_IMBALANCE = "REPLICA_IMBALANCE"
PARTITION_EXPANSION = "partition_expansion"
BROKER_EXPANSION = "broker_expansion"
UNEVEN = "uneven_assignment"


LEADERSHIP_ALERTS = (
    Alert("KafkaLeadershipImbalanced",
          'krm_incidents_open{type=~"LEADER_SKEW|PREFERRED_LEADER_IMBALANCE"} > 0',
          "warning", wait="10m",
          summary="{{ $labels.cluster }}: {{ $value }} broker(s) with skewed leadership ({{ $labels.type }})",
          runbook=("Leaders are unevenly spread, so are produce and fetch load. For PREFERRED_LEADER_IMBALANCE run a "
                   "preferred leader election (`kafka-leader-election --election-type preferred`) or let "
                   "auto.leader.rebalance.enable do it; for LEADER_SKEW the assignment itself is uneven: `krm plan "
                   "rebalance` reorders preferred leaders (and moves replicas if needed)."),
          links=(("incidents", console(INCIDENTS_OF_TYPE)),)),
)


REPLICA_ALERTS = (
    Alert("KafkaReplicasImbalanced", 'krm_incidents_open{type="REPLICA_IMBALANCE"} > 0', "warning", wait="30m",
          summary="{{ $labels.cluster }}: {{ $value }} replica imbalance(s)",
          runbook=("cause=partition_expansion: a topic grew and its new partitions skipped brokers "
                   "(docs/cases/partition-expansion.md); cause=broker_expansion: Kafka moved nothing onto a new broker. "
                   "Neither fixes itself: `krm assign explain --topic T` shows why, `krm plan rebalance --output plan.json` "
                   "writes the fewest moves for kafka-reassign-partitions --execute."),
          links=(("incidents", console(INCIDENTS_OF_TYPE)),)),
)


class PreferredDetails(Details):
    """A PREFERRED_LEADER_IMBALANCE incident's details (the incident's `broker` is the preferred leader)."""

    preferred_partitions: int | None = None  # partitions whose first replica is the broker
    led_elsewhere: int | None = None  # of those, led by another broker or by nobody
    imbalance_ratio: float | None = None
    threshold_percentage: int | None = None  # leader.imbalance.per.broker.percentage


class SkewDetails(Details):
    """A LEADER_SKEW incident's details (the incident's `broker` is the skewed broker)."""

    leaders: int | None = None  # partitions it leads
    mean_leaders: float | None = None
    deviation: float | None = None  # leaders / mean - 1
    tolerance: float | None = None


class ImbalanceDetails(Details):
    """A REPLICA_IMBALANCE incident's details: per topic (the incident's `topic`) or per underloaded broker
    (its `broker`, with `replica_count` and `mean_replicas`). `too_few` / `too_many` name the brokers an
    operator moves replicas onto and off (`krm plan rebalance`)."""

    ACT_ON = ("too_few",)
    replicas_by_broker: dict[str, int] = {}  # live broker -> the replicas it holds (of the topic, or of all)
    too_few: Brokers = ()
    too_many: Brokers = ()
    uncovered_brokers: Brokers = ()  # live brokers holding none of the topic's replicas
    partitions: int | None = None  # the topic's partition count
    replication_factor: float | None = None
    replica_count: int | None = None  # the underloaded broker's replicas
    mean_replicas: float | None = None
    tolerance: float | None = None

    @model_validator(mode="before")
    @classmethod
    def _count_was_replicas(cls, data: object) -> object:
        """Rows written before `replica_count` named the count `replicas`, a broker list everywhere else."""
        if isinstance(data, dict) and isinstance(data.get("replicas"), int) and "replica_count" not in data:
            data = {k: v for k, v in data.items() if k != "replicas"} | {"replica_count": data["replicas"]}
        return data

    def headline(self) -> str | None:
        if not self.replicas_by_broker:
            return None
        spread = " ".join(f"{b}:{n}" for b, n in self.replicas_by_broker.items())
        few = f"; too few on {', '.join(map(str, self.too_few))}" if self.too_few else ""
        many = f"; too many on {', '.join(map(str, self.too_many))}" if self.too_many else ""
        return f"replicas by broker {spread}{few}{many}"


RULES = {
    PREFERRED: Rule(PREFERRED, {None: "warning"}, "driver",
                    "a broker not leading more than leader.imbalance.per.broker.percentage of its preferred partitions",
                    details=PreferredDetails,
            alerts=LEADERSHIP_ALERTS, routine=(
            "After a rolling restart the restarted brokers lead nothing until the preferred election "
            "(auto.leader.rebalance.enable): a warning, its alert waits 10 minutes.")),
    LEADER_SKEW: Rule(LEADER_SKEW, {None: "warning"}, "driver", "a broker leading far more or fewer than the mean",
            details=SkewDetails, routine=(
            "As PREFERRED_LEADER_IMBALANCE after a restart; a warning with a 10-minute alert.")),
    REPLICA_IMBALANCE: Rule(REPLICA_IMBALANCE, {PARTITION_EXPANSION: "warning", BROKER_EXPANSION: "warning",
                                                UNEVEN: "warning"}, "driver",
                            "replicas unevenly spread: a broker left out by an expansion or an uneven assignment",
                            details=ImbalanceDetails,
            alerts=REPLICA_ALERTS, routine=(
            "A broker added (expansion) holds nothing until a reassignment: a warning with a 30-minute alert; "
            "nothing is judged while a reassignment runs.")),
}
DEFAULT_IMBALANCE_PERCENTAGE = 10  # Kafka's leader.imbalance.per.broker.percentage


@dataclass(frozen=True)
class BalanceFinding:
    type: str
    broker: int | None
    topic: str | None
    cause: str | None
    details: dict[str, Any]


@dataclass(frozen=True)
class TopicLayout:
    """A topic as the `assignments` table recorded it (pipelines/assignment_history.py reads it)."""

    first_ms: int  # first recorded
    laid_out_ms: int  # first recorded with its current partition count
    partitions: int  # the current (largest recorded) partition count


@dataclass
class AssignmentHistory:
    """What the pipeline saw change: when each broker and each topic's partition count first
    appeared, and when a topic's partition count last grew. Kept across restarts by `restore`."""

    cluster_first_ms: dict[str, int] = field(default_factory=dict)
    broker_first_ms: dict[tuple[str, int], int] = field(default_factory=dict)
    topic_partitions: dict[tuple[str, str], int] = field(default_factory=dict)
    topic_laid_out_ms: dict[tuple[str, str], int] = field(default_factory=dict)  # first seen or last grown
    topic_expanded_ms: dict[tuple[str, str], int] = field(default_factory=dict)
    _restored: set[str] = field(default_factory=set)  # clusters whose first sight now is not their first

    @classmethod
    def restore(cls, layouts: dict[tuple[str, str], TopicLayout], joins: dict[tuple[str, int], int]
                ) -> AssignmentHistory:
        """The history a pipeline had before it restarted, from what it wrote: topic layouts and
        growth from the `assignments` table, broker joins from its `broker_expansion` incidents
        (`joins`: (cluster, broker) -> when first seen). A live broker known to neither is taken
        as present from the start: one that joined while no pipeline ran is `uneven_assignment`."""
        h = cls()
        for (cluster, topic), t in layouts.items():
            key = (cluster, topic)
            h.topic_partitions[key] = t.partitions
            h.topic_laid_out_ms[key] = t.laid_out_ms
            if t.laid_out_ms > t.first_ms:
                h.topic_expanded_ms[key] = t.laid_out_ms
            h.cluster_first_ms[cluster] = min(t.first_ms, h.cluster_first_ms.get(cluster, t.first_ms))
        for (cluster, broker), at in joins.items():
            h.broker_first_ms[(cluster, broker)] = at
            h.cluster_first_ms[cluster] = min(at - 1, h.cluster_first_ms.get(cluster, at - 1))
        h._restored = set(h.cluster_first_ms)
        return h

    def observe_brokers(self, cluster: str, live: set[int], at_ms: int) -> None:
        self.cluster_first_ms.setdefault(cluster, at_ms)
        # after a restore, the brokers first seen now were there before (as far as the tables know)
        first = self.cluster_first_ms[cluster] if cluster in self._restored else at_ms
        self._restored.discard(cluster)
        for b in live:
            self.broker_first_ms.setdefault((cluster, b), first)

    def observe_topic(self, cluster: str, topic: str, partitions: int, at_ms: int) -> None:
        key = (cluster, topic)
        before = self.topic_partitions.get(key)
        if before is None:
            self.topic_laid_out_ms[key] = at_ms
        elif partitions > before:
            self.topic_expanded_ms[key] = at_ms
            self.topic_laid_out_ms[key] = at_ms
        self.topic_partitions[key] = partitions

    def joined_while_watched(self, cluster: str, broker: int) -> bool:
        first = self.broker_first_ms.get((cluster, broker))
        return first is not None and first > self.cluster_first_ms.get(cluster, first)

    def joined_after(self, cluster: str, broker: int, at_ms: int) -> bool:
        first = self.broker_first_ms.get((cluster, broker))
        return first is not None and first > at_ms


def preferred_leader_imbalance(totals: dict[int, Counts], live: set[int], percentage: int) -> list[BalanceFinding]:
    out = []
    for b in sorted(live):
        _leaders, _replicas, preferred, not_led = totals.get(b, (0, 0, 0, 0))
        if preferred and not_led / preferred > percentage / 100:
            out.append(BalanceFinding(PREFERRED, b, None, None, {
                "preferred_partitions": preferred, "led_elsewhere": not_led,
                "imbalance_ratio": round(not_led / preferred, 4), "threshold_percentage": percentage}))
    return out


def leader_skew(totals: dict[int, Counts], live: set[int], tolerance: float) -> list[BalanceFinding]:
    if not live:
        return []
    leaders = {b: totals.get(b, (0, 0, 0, 0))[0] for b in live}
    total = sum(leaders.values())
    if total < 2 * len(live):
        return []
    mean = total / len(live)
    return [BalanceFinding(LEADER_SKEW, b, None, None, {
                "leaders": n, "mean_leaders": round(mean, 3), "deviation": round(n / mean - 1, 4),
                "tolerance": tolerance})
            for b, n in sorted(leaders.items()) if abs(n - mean) > tolerance * mean]


def topic_replica_imbalance(cluster: str, loads: list[TopicLoad], live: set[int],
                            history: AssignmentHistory) -> list[BalanceFinding]:
    out: list[BalanceFinding] = []
    if not live:
        return out
    for load in sorted(loads, key=lambda t: t.topic):
        counts = {b: load.by_broker.get(b, (0, 0, 0, 0))[1] for b in live}
        total = sum(c[1] for c in load.by_broker.values())
        if not load.partitions or not total:
            continue
        rf = total / load.partitions
        mean = total / len(live)
        lo, hi = min(counts.values()), max(counts.values())
        uncovered = sorted(b for b, n in counts.items() if n == 0)
        if not ((uncovered and total >= len(live)) or (hi - lo > rf and hi > 1.5 * mean)):
            continue
        key = (cluster, load.topic)
        laid_out = history.topic_laid_out_ms.get(key, 0)
        lows = sorted(b for b, n in counts.items() if n == lo)
        if all(history.joined_after(cluster, b, laid_out) for b in lows):
            continue  # only brokers newer than the topic's layout are short: the cluster-level incident
        cause = PARTITION_EXPANSION if key in history.topic_expanded_ms else UNEVEN
        out.append(BalanceFinding(REPLICA_IMBALANCE, None, load.topic, cause, {
            "replicas_by_broker": {str(b): n for b, n in sorted(counts.items())}, "uncovered_brokers": uncovered,
            "too_few": lows, "too_many": sorted(b for b, n in counts.items() if n == hi and hi > lo),
            "partitions": load.partitions, "replication_factor": round(rf, 3)}))
    return out


def cluster_replica_imbalance(cluster: str, totals: dict[int, Counts], live: set[int], tolerance: float,
                              history: AssignmentHistory) -> list[BalanceFinding]:
    if len(live) < 2:
        return []
    replicas = {b: totals.get(b, (0, 0, 0, 0))[1] for b in live}
    mean = sum(replicas.values()) / len(live)
    if mean < 1:
        return []
    out = []
    for b, n in sorted(replicas.items()):
        if n < (1 - tolerance) * mean:
            cause = BROKER_EXPANSION if history.joined_while_watched(cluster, b) else UNEVEN
            out.append(BalanceFinding(REPLICA_IMBALANCE, b, None, cause, {
                "replica_count": n, "mean_replicas": round(mean, 3), "tolerance": tolerance, "too_few": [b],
                "too_many": sorted(k for k, v in replicas.items() if v > (1 + tolerance) * mean),
                "replicas_by_broker": {str(k): v for k, v in sorted(replicas.items())}}))
    return out
