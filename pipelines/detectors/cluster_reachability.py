"""CLUSTER_UNREACHABLE: krm cannot see the cluster at all.

A poll failed: no broker answered the Admin API, and the collector wrote a `cluster` record with
`error` and `error_reason` (collectors/access.py says how the reason is told). It is this incident
only when nothing else said who is registered either: KRaft mode (the brokers are krm's only way
in), or ZooKeeper mode with krm's ZooKeeper session down too. In ZooKeeper mode with ZooKeeper
answering, the failed poll's record still lists the brokers with their registrations, and the
partitions' state comes from ZooKeeper: krm sees the cluster, and every broker down is BROKER_DOWN
per broker, not this.

Causes, the collector's reasons (schemas/observation.py, the values of `error_reason`):
- `unreachable`: nothing answered (the cluster is down, or the path from the collector is);
- `authentication_failed`, `tls_failed`, `protocol_mismatch`: the brokers refused krm's login,
  certificate or listener protocol ([clusters.security]); clients may be fine;
- `authorization_failed`: logged in, but refused the Metadata krm needs (an ACL). Missing ACLs on a
  poll that succeeded show on krm_cluster_reachable alone: krm sees the cluster, in part.
A reason this version does not know reads as `unreachable`.
All critical: while it lasts, every other detection for the cluster is blind, so no other page
can come (the shipped KrmClusterUnreachable alert pages on krm_cluster_reachable after 1 min).
A successful poll resolves it; a failed one that ZooKeeper still describes resolves nothing.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from pipelines.detectors.details import Details
from pipelines.detectors.exports import Alert, console
from pipelines.detectors.rule import ClusterRecordView, Rule
from schemas.observation import (AUTHENTICATION_FAILED, AUTHORIZATION_FAILED, PROTOCOL_MISMATCH, TLS_FAILED,
                                 UNREACHABLE)

if TYPE_CHECKING:
    from pyspark.sql import Column

TYPE = "CLUSTER_UNREACHABLE"


def _plan(view: ClusterRecordView) -> Column:
    from pyspark.sql import functions as F

    cs = view.cs
    blind = cs["error"].isNotNull() & (F.coalesce(F.size(cs["brokers"]), F.lit(0)) <= 0)
    reason = cs["error_reason"]
    cause = F.when(reason.isin(*RULE.causes), reason).otherwise(F.lit(UNREACHABLE))
    details = F.to_json(F.struct(cs["error"].alias("error")))
    return F.array(F.when(blind, view.finding(RULE, cause, details, severity=RULE.severity_column(cause))))


ALERTS = (
    Alert("KrmClusterUnreachable", "krm_cluster_reachable == 0", "critical", wait="1m",
          summary="krm cannot use {{ $labels.cluster }} through the Admin API ({{ $labels.reason }})",
          runbook=("unreachable: check the brokers and the network path from the collector host. authentication_failed / "
                   "tls_failed / protocol_mismatch: the collector's log has one line naming the cause (wrong password, CA "
                   "that did not sign the brokers' certificates, listener protocol); fix [clusters.security]. krm retries "
                   "such refusals slowly (up to once a minute). authorization_failed: krm polls but misses an ACL (its log "
                   "and the cluster record's `denied` name it); grant krm's minimum ACLs (docs/security.md)."),
          links=(("console", console()),
                 ("incidents", console("/incidents?cluster={{ $labels.cluster }}&type=CLUSTER_UNREACHABLE")))),
)


class UnreachableDetails(Details):
    """A CLUSTER_UNREACHABLE incident's details: the poll's error as the client said it."""

    error: str | None = None


RULE = Rule(TYPE, {UNREACHABLE: "critical", AUTHENTICATION_FAILED: "critical", TLS_FAILED: "critical",
                   PROTOCOL_MISMATCH: "critical", AUTHORIZATION_FAILED: "critical"},
            "cluster", "krm cannot see the cluster at all: no broker answered its poll and nothing else (ZooKeeper) "
            "said who is registered", plan=_plan, failed_polls=True,
            details=UnreachableDetails,
            alerts=ALERTS, routine=(
            "A rolling restart or upgrade keeps brokers answering: never. Stopping a whole KRaft cluster opens it "
            "until the first broker answers again (nothing tells a stop from a cut network); the shipped alert "
            "waits 1 min. In ZooKeeper mode ZooKeeper still says who is registered: BROKER_DOWN per broker instead."))
