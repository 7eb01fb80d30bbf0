"""How long each krm table's `_delta_log` keeps its commits: `[pipeline] delta_log_retention_hours`.

Every history micro-batch is one commit per table, and a commit is a JSON file plus, from Spark, a
`.crc` file that lists every data file of a table with fewer than 50 of them. Delta keeps both for
`delta.logRetentionDuration`, 30 days by default: far more than the data's own growth calls for
(RELIABILITY.md, Soak). krm reads no old version of its
tables (no time travel), so the log needs to outlive only the readers in flight.

The table property is the whole mechanism: each engine deletes expired log files itself, after a
checkpoint (Spark every 10 commits, cutting off at a day boundary, so a log holds at most the
retention plus a day; delta-rs after its commits). Tables get the property when they are created
(Spark: the session's table defaults; delta-rs: the write's configuration) and, for tables an
earlier release created, at pipeline start, before the queries write (a property change is a
metadata commit, which a concurrent append would lose to).
"""

from __future__ import annotations

import logging
from collections.abc import Iterable

from foundation.storage import Location

log = logging.getLogger(__name__)

KEY = "delta.logRetentionDuration"
SPARK_TABLE_DEFAULTS = "spark.databricks.delta.properties.defaults."  # DeltaConfigs: defaults of new tables


def table_properties(hours: int) -> dict[str, str]:
    """The Delta table properties krm sets on every table it writes."""
    return {KEY: f"interval {hours} hours"}


def spark_defaults(properties: dict[str, str]) -> dict[str, str]:
    """The same properties as Spark settings, which Delta applies to each table Spark creates."""
    return {SPARK_TABLE_DEFAULTS + k.removeprefix("delta."): v for k, v in properties.items()}


def apply(paths: Iterable[Location], properties: dict[str, str]) -> list[str]:
    """Set `properties` on each existing table that lacks them (one commit each, delta-rs); returns
    the names of the tables changed. Call it while nothing else writes those tables. A table that
    cannot be changed now (a `krm maintain` commit won the race, a read-only store) keeps its old
    log retention until the next start: a warning, not a reason to stop monitoring."""
    changed = []
    for path in paths:
        try:
            missing = _missing(path, properties)
            if missing:
                path.table().alter.set_table_properties(missing)
        except Exception as e:  # noqa: BLE001 - see above
            log.warning("%s: table properties not set (%s: %s); its _delta_log keeps its current retention until "
                        "the pipeline starts again", path, type(e).__name__, e)
            continue
        if missing:
            log.info("%s: table properties set: %s", path, ", ".join(f"{k}={v}" for k, v in missing.items()))
            changed.append(path.name)
    return changed


def _missing(path: Location, properties: dict[str, str]) -> dict[str, str]:
    """The properties an existing table lacks or holds with another value ({} for no table yet)."""
    if not path.is_table():
        return {}
    current = path.table().metadata().configuration
    return {k: v for k, v in properties.items() if current.get(k) != v}
