"""BROKER_DOWN: judged on each successful `cluster` record (with CONTROLLER_ANOMALY's
`no_active_controller`, declared in pipelines/detectors/controllers.py), and on a failed poll's
when ZooKeeper still says who is registered (the whole cluster down: opened then, it resolves broker
by broker as they return; a failed poll resolves nothing).

- BROKER_DOWN: a broker the cluster knows (it holds replicas, or the collector saw it alive) is not
  in the Metadata response's broker list, i.e. it is not registered: its ZooKeeper session expired
  (ZooKeeper mode) or the controller fenced it (KRaft). Cause `not_registered`, critical.
  Before that, cause `unreachable` (warning): still registered, but it did not answer the
  collector's offsets requests in time (collectors/offsets.py): dead, paused or overloaded, and the
  controller has not noticed yet (it waits for the ZooKeeper session, 18 s by default, or the KRaft
  broker session). The incident is the same one when it then turns `not_registered`.
- CONTROLLER_ANOMALY, cause `no_active_controller`: the Metadata response names no controller
  (ZooKeeper mode: no broker holds /controller). KRaft answers clients with a random live broker
  as "controller" (KIP-590), so this cause only fires in ZooKeeper mode; more than one active
  controller needs every broker's ActiveControllerCount (JMX source).
"""

from __future__ import annotations

from typing import Any, Iterable

from pipelines.detectors.rule import ClusterView, Rule

BROKER_DOWN = "BROKER_DOWN"
NOT_REGISTERED = "not_registered"
UNREACHABLE = "unreachable"


def down_brokers(brokers: Iterable[dict[str, Any]]) -> list[tuple[int, str]]:
    """(broker, cause) for every broker that is down or not answering."""
    out = []
    for b in brokers:
        if not b["live"]:
            out.append((b["id"], NOT_REGISTERED))
        elif b.get("reachable") is False:
            out.append((b["id"], UNREACHABLE))
    return sorted(out)


def broker_columns(cluster_state: Any) -> dict[str, Any]:
    """Spark form: {"down": broker structs not registered, "unreachable": registered but not answering}."""
    from pyspark.sql import functions as F

    return {
        "down": F.filter(cluster_state["brokers"], lambda b: ~b["live"]),
        "unreachable": F.filter(cluster_state["brokers"], lambda b: b["live"] & (b["reachable"] == F.lit(False))),
    }


def _plan(view: ClusterView) -> Any:
    from pyspark.sql import functions as F

    b = broker_columns(view.cs)

    def each(brokers: Any, cause: str) -> Any:
        return F.transform(brokers, lambda br: view.finding(RULE, cause, F.to_json(F.struct(
            br["host"].alias("host"), br["port"].alias("port"), br["rack"].alias("rack"))), broker=br["id"]))
    return F.concat(each(b["down"], NOT_REGISTERED), each(b["unreachable"], UNREACHABLE))


RULE = Rule(BROKER_DOWN, {NOT_REGISTERED: "critical", UNREACHABLE: "warning"}, "cluster",
            "a broker not registered (critical) or not answering while still registered (warning)", plan=_plan)
