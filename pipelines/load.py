"""Leaders and replicas per broker, kept per topic so each topic record replaces only its share.

Driver work per batch is bounded by the topics in it (times their brokers), never by partitions:
the per-partition counting happens in Spark (`findings.broker_counts`).
"""

from __future__ import annotations

from dataclasses import dataclass, field

Counts = tuple[int, int, int]  # leaders, replicas, partitions preferring this broker but led elsewhere


@dataclass(frozen=True)
class TopicLoad:
    cluster: str
    topic: str
    observed_at_ms: int
    by_broker: dict[int, Counts]


@dataclass
class BrokerLoad:
    _topics: dict[tuple[str, str], TopicLoad] = field(default_factory=dict)
    _totals: dict[str, dict[int, list[int]]] = field(default_factory=dict)

    def update(self, loads: list[TopicLoad]) -> None:
        for load in sorted(loads, key=lambda t: t.observed_at_ms):
            key = (load.cluster, load.topic)
            old = self._topics.get(key)
            if old is not None and old.observed_at_ms > load.observed_at_ms:
                continue
            totals = self._totals.setdefault(load.cluster, {})
            if old is not None:
                for b, c in old.by_broker.items():
                    t = totals[b]
                    for i in range(3):
                        t[i] -= c[i]
            for b, c in load.by_broker.items():
                t = totals.setdefault(b, [0, 0, 0])
                for i in range(3):
                    t[i] += c[i]
            self._topics[key] = load

    def totals(self) -> dict[str, dict[int, Counts]]:
        """cluster -> broker -> (leaders, replicas, preferred-but-not-leading); an immutable copy."""
        return {c: {b: (t[0], t[1], t[2]) for b, t in brokers.items()} for c, brokers in self._totals.items()}
