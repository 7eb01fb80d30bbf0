"""One back-off for every retry krm makes: waits that double from a first wait up to a cap.

Used where a retry sooner cannot help and may hurt: a refused login (the broker logs each one), a
DescribeConfigs a broker could not answer (each may hold one of its threads), the observations
topic out of reach (the spool holds the records meanwhile).
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Callable


@dataclass(frozen=True)
class Backoff:
    first_s: float
    cap_s: float

    def delay(self, failures: int) -> float:
        """The wait after `failures` failures in a row: first_s, twice that, ... at most cap_s."""
        return 0.0 if failures <= 0 else min(self.cap_s, self.first_s * 2 ** (failures - 1))


class Retry:
    """A Backoff in use: the failures in a row, and when the next try may run (a monotonic clock)."""

    def __init__(self, policy: Backoff, clock: Callable[[], float] = time.monotonic) -> None:
        self.policy, self.clock = policy, clock
        self.failures = 0
        self.retry_at = 0.0

    def failed(self) -> float:
        """One more failure; returns the wait before the next try."""
        self.failures += 1
        wait = self.policy.delay(self.failures)
        self.retry_at = self.clock() + wait
        return wait

    def succeeded(self) -> None:
        self.failures, self.retry_at = 0, 0.0

    def due(self) -> bool:
        return self.clock() >= self.retry_at
