"""Helpers for building Spark Columns that stay cheap on arrays of 100k+ partitions."""

from __future__ import annotations

from typing import Any, Callable


def let(value: Any, body: Callable[[Any], Any]) -> Any:
    """body(value) with `value` computed once. Spark re-evaluates a column every time a lambda body
    refers to it (no common-subexpression elimination inside higher-order functions); binding it as
    the lambda variable of a one-element transform evaluates it once."""
    from pyspark.sql import functions as F

    return F.element_at(F.transform(F.array(value), body), 1)


def leo_of(replica_offsets: Any, broker: Any) -> Any:
    """The LEO a replica reported (a partition's `replica_offsets`), as a Column; null when it did not
    answer."""
    from pyspark.sql import functions as F

    return F.get(F.transform(F.filter(replica_offsets, lambda o: o["broker"] == broker),
                             lambda o: o["log_end_offset"]), 0)
