"""Build observation records (schemas/observation.py) from what a source read. Pure functions."""

from __future__ import annotations

from typing import Iterable

from schemas.observation import SCHEMA_VERSION
from schemas.quiet import Thresholds, broker_load, is_quiet
from schemas.typed import (Broker, CanaryObservation, CanaryPartition, CanaryState, ClusterObservation, ClusterState,
                           Partition, Quorum, TopicObservation, TopicState)


def cluster_record(cluster: str, source: str, poll_id: int, observed_at_ms: int, *, controller_id: int | None,
                   brokers: Iterable[Broker], topic_count: int, partition_count: int,
                   error: str | None = None, replica_lag_time_max_ms: int | None = None,
                   leader_imbalance_per_broker_percentage: int | None = None,
                   reassignment_in_progress: bool | None = None,
                   quorum: Quorum | None = None, error_reason: str | None = None,
                   denied: Iterable[str] = (), capabilities: dict[str, bool] | None = None,
                   migration: tuple[int, int | None] | None = None) -> ClusterObservation:
    cs: ClusterState = {
        "controller_id": controller_id, "brokers": sorted(brokers, key=lambda b: b["id"]),
        "topic_count": topic_count, "partition_count": partition_count, "error": error,
        "replica_lag_time_max_ms": replica_lag_time_max_ms,
        "leader_imbalance_per_broker_percentage": leader_imbalance_per_broker_percentage,
        "reassignment_in_progress": reassignment_in_progress,
    }
    if quorum is not None:
        cs["quorum"] = quorum
    if error_reason is not None:
        cs["error_reason"] = error_reason
    if denied:
        cs["denied"] = sorted(set(denied))
    if migration is not None:  # ZooKeeper mode: (ZkMigrationState, since when krm sees it)
        cs["migration_phase"], cs["migration_phase_since_ms"] = migration
    if capabilities:
        cs["capabilities"] = sorted(k for k, ok in capabilities.items() if ok)
        cs["unsupported"] = sorted(k for k, ok in capabilities.items() if not ok)
    return {"v": SCHEMA_VERSION, "kind": "cluster", "cluster": cluster, "source": source, "poll_id": poll_id,
            "observed_at_ms": observed_at_ms, "cluster_state": cs}


def topic_record(cluster: str, source: str, poll_id: int, observed_at_ms: int, *, topic: str,
                 live_brokers: Iterable[int], partitions: Iterable[Partition],
                 min_insync_replicas: int | None, unclean_leader_election: bool | None,
                 replica_lag_time_max_ms: int | None = None, has_offsets: bool = True,
                 unreachable_brokers: Iterable[int] = (), resolves: bool = True,
                 remote_storage: bool = False) -> TopicObservation:
    ts: TopicState = {
        "has_offsets": has_offsets,
        "topic": topic, "min_insync_replicas": min_insync_replicas,
        "unclean_leader_election": unclean_leader_election, "live_brokers": sorted(live_brokers),
        "replica_lag_time_max_ms": replica_lag_time_max_ms,
        "partitions": sorted(partitions, key=lambda p: p["partition"]),
    }
    if unreachable_brokers:
        ts["unreachable_brokers"] = sorted(unreachable_brokers)
    if not resolves:
        ts["resolves"] = False
    if remote_storage:
        ts["remote_storage"] = True
    return {"v": SCHEMA_VERSION, "kind": "topic", "cluster": cluster, "source": source, "poll_id": poll_id,
            "observed_at_ms": observed_at_ms, "topic_state": ts}


def leave_out_quiet(rec: TopicObservation, thresholds: Thresholds) -> TopicObservation:
    """`rec` (a topic record of a full poll, every partition in it) without its quiet partitions
    (schemas/quiet.py), with the topic's size and per-broker counts in their place. In place."""
    ts = rec["topic_state"]
    parts = ts["partitions"]
    live, unreachable = set(ts["live_brokers"]), set(ts.get("unreachable_brokers") or ())
    at, window = rec["observed_at_ms"], thresholds.window_ms(ts.get("replica_lag_time_max_ms"))
    loud = [p for p in parts if not is_quiet(p, {r["broker"]: r["log_end_offset"] for r in p.get("replica_offsets") or ()},
                                             live, unreachable, at, window, thresholds)]
    return summarized(rec, len(parts), broker_load(parts), loud)


def summarized(rec: TopicObservation, count: int, load: list[list[int]], published: list[Partition]) -> TopicObservation:
    """`rec` carrying `published` of the topic's `count` partitions, with what the pipeline needs of all of
    them (schemas/observation.py, v4): the topic's size and its per-broker counts (schemas/quiet.py
    `broker_load`). In place."""
    ts = rec["topic_state"]
    ts["partition_count"] = count
    ts["broker_load"] = load
    ts["partitions"] = sorted(published, key=lambda p: p["partition"])
    return rec


def canary_record(cluster: str, poll_id: int, observed_at_ms: int, *, topic: str,
                  partitions: Iterable[CanaryPartition], waiting: bool = False) -> CanaryObservation:
    """A canary round's record; `waiting`: its early record, the writes still waiting past the latency objective."""
    state: CanaryState = {"topic": topic, "partitions": sorted(partitions, key=lambda p: p["partition"])}
    if waiting:
        state["waiting"] = True
    return {"v": SCHEMA_VERSION, "kind": "canary", "cluster": cluster, "source": "canary", "poll_id": poll_id,
            "observed_at_ms": observed_at_ms, "canary_state": state}

