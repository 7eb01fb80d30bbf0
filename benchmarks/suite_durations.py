"""What a pytest run's time went to, from its `--durations=N` report: by file, and what the e2e tier
would take if each scenario (test function) ran once, on its cheapest parametrization only.

The second figure answers "would the scenarios fit a time budget if the Kafka lines and security modes
of each were dropped?" without changing the suite. Setup and teardown count with their test (a
dedicated cluster's start is reported as the setup of its first test).

Usage: .venv/bin/python benchmarks/suite_durations.py LOG [LOG ...]
  (LOG: the output of `pytest --durations=0`, or of `.ci/run` with --durations added to its pytest
  arguments; with --durations=N < all tests, tests below the N-th are missing from every figure)
"""

from __future__ import annotations

import argparse
import re
from collections import defaultdict
from pathlib import Path

LINE = re.compile(r"^([0-9.]+)s (?:call|setup|teardown) +(\S+)$", re.M)
TOTAL = re.compile(r"(\d+) passed\b.* in ([0-9.]+)s", re.M)  # also "1 failed, 667 passed in ..."


def per_test(text: str) -> dict[str, float]:
    """Seconds per test id (call + setup + teardown) from the durations report."""
    report = text.split("slowest", 1)[1] if "slowest" in text else text
    out: dict[str, float] = defaultdict(float)
    for m in LINE.finditer(report):
        out[m.group(2)] += float(m.group(1))
    return dict(out)


def once_each(tests: dict[str, float]) -> float:
    """The e2e tier with one parametrization per test function: the cheapest."""
    families: dict[str, list[float]] = defaultdict(list)
    for test_id, seconds in tests.items():
        families[test_id.split("[", 1)[0]].append(seconds)
    return sum(min(v) for v in families.values())


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("logs", nargs="+", type=Path)
    args = ap.parse_args()
    for log in args.logs:
        text = log.read_text(errors="replace")
        tests = per_test(text)
        total = TOTAL.search(text)
        e2e = {k: v for k, v in tests.items() if k.startswith("tests/e2e/")}
        by_file: dict[str, float] = defaultdict(float)
        for test_id, seconds in tests.items():
            by_file[test_id.split("::", 1)[0]] += seconds
        print(f"{log}: pytest {total.group(2) if total else '?'} s, {total.group(1) if total else '?'} passed; "
              f"{len(tests)} tests reported, {sum(tests.values()):.0f} s")
        print(f"  e2e: {len(e2e)} tests {sum(e2e.values()):.0f} s; one parametrization per scenario "
              f"({len({k.split('[', 1)[0] for k in e2e})}): {once_each(e2e):.0f} s")
        for name, seconds in sorted(by_file.items(), key=lambda kv: -kv[1])[:10]:
            print(f"  {seconds:7.1f}  {name}")


if __name__ == "__main__":
    main()
