"""`krm sql "QUERY"`: SQL over krm's Delta tables without starting Spark.

Each table is opened by delta-rs (the `deltalake` package krm already uses for the incidents table and
`krm lag`), handed to DuckDB as a pyarrow dataset, and registered under its table name. Why this pair:
delta-rs reads the Delta log itself, on local paths and on the object stores it supports (s3, abfss,
gs) with krm's own storage settings, and DuckDB scans an Arrow dataset lazily with the query's
column projection and filters pushed down (a `WHERE date >= ...` skips whole partitions). DuckDB's
own delta extension would be downloaded at run time, which a monitoring host may not allow.

For data that outgrows one machine, the same questions run as Spark SQL over the same tables
(docs/queries.md).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

from foundation.errors import KrmError

READ_WHOLE = frozenset({"incidents", "data_quality", "broker_state"})
TABLES = ("observations", "partition_state", "replica_lag", "assignments", "incidents", "quarantine", "data_quality",
          "broker_state")


@dataclass(frozen=True)
class Result:
    columns: list[str]
    rows: list[tuple[Any, ...]]


def locations(tables: Any) -> dict[str, Any]:
    """Table name -> Location, from pipelines.tables.Tables."""
    return {name: getattr(tables, name) for name in TABLES}


def run(query: str, where: dict[str, Any]) -> Result:
    """Run one query; a table it names that does not exist (yet) is an error naming table and path."""
    import duckdb

    con = duckdb.connect(":memory:")
    missing: dict[str, str] = {}
    for name, loc in where.items():
        if not _mentions(query, name):
            continue  # open only what the query names: each open reads that table's Delta log
        try:
            if not loc.is_table():
                missing[name] = f"no Delta table at {loc} (the pipeline writes it; has `krm run` run yet?)"
                continue
            table = loc.table()
            # incidents and data_quality are small tables delta-rs writes with string views in their
            # files: pushed-down string filters fail on those (Arrow has no string = string_view
            # kernel), so they are read whole; the history tables are scanned lazily
            con.register(name, table.to_pyarrow_table() if name in READ_WHOLE else loc.dataset(table))
        except Exception as e:  # noqa: BLE001 - an unreadable table is the user's answer, not a traceback
            missing[name] = f"table {name} at {loc} cannot be read: {e}"
    try:
        cur = con.execute(query)
        columns = [d[0] for d in cur.description or ()]
        return Result(columns, [tuple(r) for r in cur.fetchall()])
    except duckdb.Error as e:
        named = [m for n, m in missing.items() if re.search(rf"\b{re.escape(n)}\b", str(e))]
        if named:
            raise KrmError(named[0]) from None
        raise KrmError(f"SQL error: {str(e).splitlines()[0]} (tables: {', '.join(TABLES)})") from None
    finally:
        con.close()


def _mentions(query: str, name: str) -> bool:
    return re.search(rf"\b{re.escape(name)}\b", query, flags=re.IGNORECASE) is not None
