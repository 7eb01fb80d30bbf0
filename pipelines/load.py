"""Leaders and replicas per broker, kept per topic so each topic record replaces only its share.

Driver work per batch is bounded by the topics in it (times their brokers), never by partitions:
the per-partition counting happens in Spark (`findings.broker_counts`).
"""

from __future__ import annotations

from dataclasses import dataclass, field

Counts = tuple[int, int, int, int]  # leaders, replicas, preferred (first replica), preferred but led elsewhere
N = 4


@dataclass(frozen=True)
class TopicLoad:
    cluster: str
    topic: str
    observed_at_ms: int
    by_broker: dict[int, Counts]
    partitions: int = 0


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
                    for i in range(N):
                        t[i] -= c[i]
            for b, c in load.by_broker.items():
                t = totals.setdefault(b, [0] * N)
                for i in range(N):
                    t[i] += c[i]
            self._topics[key] = load

    def totals(self) -> dict[str, dict[int, Counts]]:
        """cluster -> broker -> Counts; an immutable copy."""
        return {c: {b: (t[0], t[1], t[2], t[3]) for b, t in brokers.items()} for c, brokers in self._totals.items()}

    def by_topic(self) -> dict[str, dict[str, TopicLoad]]:
        """cluster -> topic -> its newest TopicLoad (the console's grid); a copy of the mapping, the loads
        themselves are immutable."""
        out: dict[str, dict[str, TopicLoad]] = {}
        for (c, topic), load in self._topics.items():
            out.setdefault(c, {})[topic] = load
        return out

    def topics(self, cluster: str) -> list[TopicLoad]:
        return [t for (c, _), t in self._topics.items() if c == cluster]

    def forget_stale(self, cluster: str, before_ms: int, vouched: tuple[int, int] | None = None) -> list[str]:
        """Drop the topics of `cluster` last observed before `before_ms`: every successful poll
        observes every topic, so a topic missing from polls for that long was deleted. Returns them.
        `vouched` (polled_ms, held_ms): polls kept home since the poll of `polled_ms` found the same
        topics (collectors/unchanged.py), so a topic that poll observed was observed at `held_ms` too."""
        def seen(t: TopicLoad) -> int:
            if vouched is not None and t.observed_at_ms >= vouched[0]:
                return max(t.observed_at_ms, vouched[1])
            return t.observed_at_ms

        gone = [topic for (c, topic), t in self._topics.items() if c == cluster and seen(t) < before_ms]
        if gone:
            self.forget_topics(cluster, {topic for (c, topic) in self._topics if c == cluster} - set(gone))
        return gone

    def forget_topics(self, cluster: str, keep: set[str]) -> None:
        """Drop deleted topics (not in the cluster's latest topic list) from the totals."""
        for (c, topic) in [k for k in self._topics if k[0] == cluster and k[1] not in keep]:
            old = self._topics.pop((c, topic))
            for b, counts in old.by_broker.items():
                t = self._totals[c][b]
                for i in range(N):
                    t[i] -= counts[i]
