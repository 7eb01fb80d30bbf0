"""The latest JMX scrape of every broker, kept on the driver (bounded by brokers), and the
controller split-brain check over each complete scrape round."""

from __future__ import annotations

from dataclasses import dataclass

from pipelines.detectors import controllers
from pipelines.incidents import Finding, ScopePoll

SCOPE = "jmx"


@dataclass(frozen=True)
class JmxSample:
    cluster: str
    broker: int
    poll_id: int
    observed_at_ms: int
    error: str | None
    gauges: dict[str, float]
    scrape_ms: float | None = None  # how long its exporter took to answer (its JVM's own pace)


class JmxView:
    def __init__(self) -> None:
        self.latest: dict[tuple[str, int], JmxSample] = {}

    def update(self, samples: list[JmxSample]) -> tuple[list[ScopePoll], list[Finding]]:
        rounds: dict[tuple[str, int], list[JmxSample]] = {}
        for s in sorted(samples, key=lambda s: s.observed_at_ms):
            prev = self.latest.get((s.cluster, s.broker))
            if prev is None or s.observed_at_ms >= prev.observed_at_ms:
                self.latest[(s.cluster, s.broker)] = s
            rounds.setdefault((s.cluster, s.poll_id), []).append(s)
        polls, found = [], []
        for (cluster, poll_id), round_ in sorted(rounds.items()):
            at = max(s.observed_at_ms for s in round_)
            polls.append(ScopePoll(cluster, SCOPE, poll_id, at))
            counts = {s.broker: s.gauges["active_controller_count"] for s in round_
                      if s.error is None and "active_controller_count" in s.gauges}
            claimants = controllers.split_brain(counts)
            if claimants:
                found.append(Finding(cluster, SCOPE, controllers.TYPE, controllers.RULE.severity_of(controllers.MULTIPLE),
                                     None, None, claimants[0], controllers.MULTIPLE, {"active_controllers": claimants},
                                     at, poll_id))
        return polls, found

    def snapshot(self) -> dict[tuple[str, int], JmxSample]:
        return dict(self.latest)
