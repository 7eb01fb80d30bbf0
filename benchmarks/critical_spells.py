"""The alert path's added work for the slow broker's holds: `slowed.CriticalSpells.ended`, one pass over the open
incidents each micro-batch (pipelines/alert_path.py `_incidents`). Before it the batch did not make this pass, so
its cost is the whole difference. Measured at rest (10 open incidents) and after a broker's death at 200k partitions
(40,000 open HW_STALL incidents).

Usage: .venv/bin/python benchmarks/critical_spells.py
"""

from __future__ import annotations

import time

from pipelines.incidents import Incident
from pipelines.slowed import CriticalSpells


def _stall(i: int) -> Incident:
    return Incident(incident_id=str(i), cluster="c", scope="offsets", type="HW_STALL", severity="critical", topic="t",
                    partition=i, broker=None, cause="isr_follower_unreachable", details={}, opened_at_ms=1,
                    last_seen_at_ms=1, resolved_at_ms=None, status="open")


def main() -> None:
    for n, rounds in ((10, 20_000), (40_000, 200)):
        items = tuple(_stall(i) for i in range(n))
        spells = CriticalSpells()
        t0 = time.perf_counter()
        for _ in range(rounds):
            spells.ended(items, [])
        print(f"{n:,} open incidents: {(time.perf_counter() - t0) / rounds * 1e6:.1f} us a batch")


if __name__ == "__main__":
    main()
