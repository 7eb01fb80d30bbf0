"""A pytest plugin for reading an e2e run as a timeline: the collector's polls and offsets rounds and
the alert path's micro-batches, at DEBUG, with wall-clock stamps, into one file (KRM_TIMELINE, default
krm-timeline.log), whatever pytest captures. Where a page's seconds go (benchmarks/BENCHMARKS.md,
"Where the gray failure's 7 s go"):

    .venv/bin/python -m pytest -s -p lab.debug_timeline "tests/e2e/test_gray_failure.py::...[zk]"
"""

from __future__ import annotations

import logging
import os
from typing import Any

LOGGERS = ("collectors.admin", "collectors.offsets", "collectors.reachability", "pipelines.alert_path",
           "lab.packet_filter")


def pytest_configure(config: Any) -> None:
    handler = logging.FileHandler(os.environ.get("KRM_TIMELINE", "krm-timeline.log"), mode="w")
    handler.setFormatter(logging.Formatter("%(created).3f %(threadName)s %(name)s %(message)s"))
    for name in LOGGERS:
        logger = logging.getLogger(name)
        logger.setLevel(logging.DEBUG)
        logger.addHandler(handler)
