"""REPLICA_LAG: a follower behind its leader, in messages and in estimated seconds.

Lag in messages is the leader's LEO minus the follower's LEO, both read in the same poll with
ListOffsets (collectors/offsets.py). The time lag is an estimate: that many messages divided by the
rate at which the leader's log grew since the previous poll (`write_rate`); it is unknown (null) for
a partition nobody writes to, whose lag in messages then says everything. A follower opens an
incident when either figure reaches its threshold; followers that did not answer are not judged
here (BROKER_DOWN, UNDER_REPLICATED and HW_STALL cover them). Nor are the replicas a reassignment is
adding: they copy the log from its start, often throttled on purpose, and PARTITION_REASSIGNING
reports their progress instead.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from pipelines.columns import leo_of, let
from pipelines.detectors.details import PartitionDetails, parse
from pipelines.detectors.exports import Alert, Series, incident_info
from pipelines.detectors.rule import PartitionView, Rule

if TYPE_CHECKING:
    from pyspark.sql import Column

TYPE = "REPLICA_LAG"


def lag_columns(p: Column, max_messages: Column, max_seconds: Column) -> Column:
    """The same rule as a Spark Column: array<struct<broker, messages, seconds, in_isr, leader_leo,
    follower_leo>> of the lagging followers of one partition struct."""
    from pyspark.sql import functions as F

    offsets = F.coalesce(p["replica_offsets"], F.array())
    rate = p["write_rate"]

    def lagging(leader_leo: Column) -> Column:
        def one(o: Column) -> Column:
            messages = F.greatest(leader_leo - o["log_end_offset"], F.lit(0))
            seconds = F.when(rate > 0, messages / rate)
            return F.struct(o["broker"].alias("broker"), messages.alias("messages"), seconds.alias("seconds"),
                            F.array_contains(p["isr"], o["broker"]).alias("in_isr"), leader_leo.alias("leader_leo"),
                            o["log_end_offset"].alias("follower_leo"))

        adding = F.coalesce(p["adding_replicas"], F.array().cast("array<int>"))
        cands = F.transform(F.filter(offsets, lambda o: (o["broker"] != p["leader"]) & leader_leo.isNotNull()
                                     & ~F.array_contains(adding, o["broker"])), one)
        return F.filter(cands, lambda x: (x["messages"] > 0) & (
            (x["messages"] >= max_messages) | F.coalesce(x["seconds"] >= max_seconds, F.lit(False))))

    # The leader's LEO is looked up once per partition, not once per follower (pipelines/columns.let).
    return let(leo_of(offsets, p["leader"]), lagging)


def of(view: PartitionView) -> Column:
    from pyspark.sql import functions as F

    s = view.settings
    return view.memo("lag", lambda: lag_columns(view.p, F.lit(s.lag_messages), F.lit(s.lag_seconds)))


def _plan(view: PartitionView) -> Column:
    from pyspark.sql import functions as F

    return F.transform(of(view), lambda x: view.finding(RULE, None, view.details(
        x["messages"].alias("lag_messages"), x["seconds"].alias("lag_seconds"), x["in_isr"].alias("in_isr"),
        x["leader_leo"].alias("leader_leo"), x["follower_leo"].alias("follower_leo"),
        view.p["write_rate"].alias("write_rate")), broker=x["broker"]))


def _affected(view: PartitionView) -> Column:
    from pyspark.sql import functions as F

    return F.size(of(view)) > 0


class LagDetails(PartitionDetails):
    """A REPLICA_LAG incident's details (the incident's `broker` is the follower)."""

    lag_messages: int | None = None  # the leader's LEO minus the follower's
    lag_seconds: float | None = None  # estimated from the partition's write rate
    in_isr: bool | None = None
    leader_leo: int | None = None
    follower_leo: int | None = None
    write_rate: float | None = None  # messages per second into the partition


SERIES = (Series("krm_replica_lag_messages", "Leader LEO minus this follower's LEO.", ("topic", "partition", "broker"),
                 value=lambda inc, now: parse(LagDetails, inc.details).lag_messages),)

ALERTS = (
    Alert("KafkaReplicaLagging", "krm_replica_lag_messages > 0", "warning", wait="2m",
          summary=("{{ $labels.cluster }}: broker {{ $labels.broker }} is {{ $value }} messages behind on {{ $labels.topic "
                   "}}-{{ $labels.partition }}"),
          runbook=("A follower has been over the REPLICA_LAG threshold for two minutes. details of the incident give the lag"
                   " in seconds and ISR membership (`krm incidents --open --type REPLICA_LAG --json`); `krm lag --topic T "
                   "--since 1h --plot lag.png` shows how it evolved. Check that broker's disk, network and replication "
                   "throttles."),
          links=(("incident", incident_info(TYPE, "url", by=("topic", "partition", "broker"))),)),
)


RULE = Rule(TYPE, {None: "warning"}, "partition", "a follower behind its leader (messages or estimated seconds)",
            scope="offsets", plan=_plan, affected=_affected, details=LagDetails,
            series=SERIES, alerts=ALERTS, routine=(
            "A restarted broker catches up (warning, 2-minute alert); replicas a reassignment adds are progress "
            "(PARTITION_REASSIGNING), not lag."))
