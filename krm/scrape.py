"""Read a /metrics page the way Prometheus would (used by the demo and the end-to-end tests)."""

from __future__ import annotations

import urllib.request
from dataclasses import dataclass


@dataclass(frozen=True)
class Sample:
    name: str
    labels: dict[str, str]
    value: float


def scrape(url: str, timeout_s: float = 2.0) -> list[Sample]:
    from prometheus_client.parser import text_string_to_metric_families

    with urllib.request.urlopen(url, timeout=timeout_s) as resp:
        text = resp.read().decode()
    return [Sample(s.name, dict(s.labels), s.value) for fam in text_string_to_metric_families(text) for s in fam.samples]


def series(samples: list[Sample], name: str, **match: str) -> list[Sample]:
    return [s for s in samples if s.name == name and all(s.labels.get(k) == v for k, v in match.items())]
