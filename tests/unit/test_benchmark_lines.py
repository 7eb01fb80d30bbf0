"""The benchmarks' `--json` lines keep the keys other tools read (the documented contract)."""

import pytest

from benchmarks.pipeline_throughput import last_line

pytestmark = pytest.mark.unit


def test_pipeline_throughput_lists_each_size_with_its_figures():
    r = {"size": 200_000, "krm-alerts": {"p50": 1.2, "p95": 1.8}, "poll_delay_p95": 2.4, "age_p95": 3.0,
         "krm-history_rows_total": 9, "records_published": 9, "peak_heap_mb": 1700.4, "bytes_per_partition": 19.0,
         "krm-history": {"p95": 3.3}}
    line = last_line([r])
    (size,) = line["sizes"]
    assert size["partitions"] == 200_000
    for key in ("alert_p50_s", "alert_p95_s", "poll_to_metrics_p95_s", "age_p95_s", "records_published",
                "history_records_reached", "heap_peak_mb"):
        assert key in size, key
    assert line["200000"]["alert_p95_s"] == 1.8
