"""Topic and broker configs the detectors need (min.insync.replicas, unclean.leader.election.enable,
remote.storage.enable, replica.lag.time.max.ms, leader.imbalance.per.broker.percentage), asked by DescribeConfigs on a slower
cadence than the poll, and never in a way that could hurt a broker.
"""

from __future__ import annotations

import logging
import time

from collectors import access
from collectors.kafka_client import Client, NodeId
from collectors.metadata import ask
from foundation.backoff import Backoff, Retry

log = logging.getLogger(__name__)

TOPIC_CONFIGS = ("min.insync.replicas", "unclean.leader.election.enable", "remote.storage.enable")
BROKER_CONFIGS = ("replica.lag.time.max.ms", "leader.imbalance.per.broker.percentage")


def config_backoff(refresh_s: float) -> Backoff:
    """DescribeConfigs after failures: the refresh interval (at least 30 s), doubling, at most an hour.
    Each unanswered request may hold a broker thread (see `TopicConfigs.may_ask`), so over a long
    outage only a handful are ever sent."""
    return Backoff(first_s=max(30.0, refresh_s), cap_s=3600.0)


class TopicConfigs:
    """The effective configs (topic override, else broker default) as last answered."""

    def __init__(self, cluster: str, refresh_s: float, timeout_ms: int) -> None:
        self.cluster, self.refresh_s, self.timeout_ms = cluster, refresh_s, timeout_ms
        self._configs: dict[str, tuple[int | None, bool | None]] = {}
        self.tiered: set[str] = set()  # topics with remote.storage.enable=true (KIP-405)
        self._at = 0.0
        self._retry = Retry(config_backoff(refresh_s))  # DescribeConfigs that failed in a row
        self.denied: set[str] = set()  # ACLs DescribeConfigs found missing (kept until the next refresh)
        self.replica_lag_time_max_ms: int | None = None  # one broker's: the default HW-stall window
        self.leader_imbalance_pct: int | None = None

    def of(self, topic: str) -> tuple[int | None, bool | None]:
        """(min.insync.replicas, unclean.leader.election.enable) of `topic`, None where unknown."""
        return self._configs.get(topic, (None, None))

    def may_ask(self, zookeeper_connected: bool) -> bool:
        """Not while a DescribeConfigs backs off, nor while krm's own ZooKeeper session is down in
        ZooKeeper mode: the broker would hold a request handler thread per request until ZooKeeper is
        back, and a few of them stop it answering anyone (docs/collector.md, "Topic configs")."""
        return self._retry.due() and zookeeper_connected

    def refresh_or_back_off(self, client: Client, node: NodeId, topics: list[str], brokers: list[int]) -> None:
        """`refresh`, and after a failure the last known values stay while the next try waits."""
        try:
            self.refresh(client, node, topics, brokers)
            self._retry.succeeded()
        except Exception as e:  # noqa: BLE001 - stale configs beat a lost poll
            backoff = self._retry.failed()
            log.warning("cluster %s: topic configs not refreshed (%s); using the last known values, asking again "
                        "in %.0fs", self.cluster, e, backoff)

    def refresh(self, client: Client, node: NodeId, topics: list[str], brokers: list[int]) -> None:
        """Topic configs change rarely: all of them every refresh_s, new topics at once; asked of
        `node` (the broker that just answered Metadata), which alone answers for its broker config."""
        from kafka.admin import ConfigResourceType
        from kafka.protocol.admin import DescribeConfigsRequest

        due = time.monotonic() - self._at >= self.refresh_s
        wanted = topics if due else [t for t in topics if t not in self._configs]
        if not wanted and self.replica_lag_time_max_ms is not None:
            return
        if node not in brokers:
            return
        resources = [(ConfigResourceType.TOPIC.value, t, list(TOPIC_CONFIGS)) for t in wanted]
        if due or self.replica_lag_time_max_ms is None:
            resources.append((ConfigResourceType.BROKER.value, str(node), list(BROKER_CONFIGS)))
        version = client.api_version(DescribeConfigsRequest, max_version=2)
        request = (DescribeConfigsRequest[version](resources=resources) if version == 0 else
                   DescribeConfigsRequest[version](resources=resources, include_synonyms=False))
        fresh: dict[str, tuple[int | None, bool | None]] = {}
        tiered: dict[str, bool] = {}
        denied: set[str] = set()
        response = ask(client, node, request, self.timeout_ms)
        for res in response.to_object()["resources"]:
            if res["error_code"] in (access.TOPIC_AUTHORIZATION_FAILED, access.CLUSTER_AUTHORIZATION_FAILED):
                kind = "TOPIC" if res["resource_type"] == ConfigResourceType.TOPIC.value else "CLUSTER"
                denied.add(f"DESCRIBE_CONFIGS on {kind} {res['resource_name'] if kind == 'TOPIC' else ''}".rstrip())
            if res["error_code"] != 0:
                continue
            entries = {e["config_names"]: e["config_value"] for e in res["config_entries"]}
            if res["resource_type"] == ConfigResourceType.BROKER.value:
                lag = entries.get("replica.lag.time.max.ms")
                pct = entries.get("leader.imbalance.per.broker.percentage")
                self.replica_lag_time_max_ms = int(lag) if lag is not None else None
                self.leader_imbalance_pct = int(pct) if pct is not None else None
                continue
            min_isr = entries.get("min.insync.replicas")
            unclean = entries.get("unclean.leader.election.enable")
            tiered[res["resource_name"]] = (entries.get("remote.storage.enable") or "").lower() == "true"
            fresh[res["resource_name"]] = (
                int(min_isr) if min_isr is not None else None,
                unclean.lower() == "true" if unclean is not None else None,
            )
        on = {t for t, yes in tiered.items() if yes}
        if due:
            self._configs = fresh
            self.tiered = on
            self._at = time.monotonic()
            self.denied = denied
        else:
            self._configs.update(fresh)
            self.tiered = (self.tiered - set(tiered)) | on
            self.denied |= denied
