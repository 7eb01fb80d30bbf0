"""The parts of one cluster's poller, each owning its own state: the poll (collectors/admin.py), the records
it builds (collectors/poll_records.py) and the ZooKeeper mirror's records (collectors/zk_mirror_records.py)
are handed the same parts. Here too what every record of a partition goes through: ZooKeeper's overlay."""

from __future__ import annotations

from collectors import topic_share
from collectors.access import AccessState
from collectors.broker_book import BrokerBook
from collectors.dir_state import DirState
from collectors.memory import PartitionMemory
from collectors.published import Published
from collectors.reassignments import Carried
from collectors.side_channel import Notes, SideChannel
from collectors.topic_configs import TopicConfigs
from collectors.topic_views import TopicViews
from collectors.wire import MdTopic
from collectors.zookeeper import ZkState
from foundation.config import ClusterConfig, CollectorConfig
from schemas.quiet import Thresholds
from schemas.typed import Partition


class PollerParts:
    """One cluster's poller's parts; construct validates nothing and opens nothing."""

    def __init__(self, cluster: ClusterConfig, settings: CollectorConfig, zk: ZkState | None = None,
                 quiet: Thresholds | None = None) -> None:
        self.cluster = cluster
        self.settings = settings
        # the pipeline's thresholds: which partitions a topic record may leave out (schemas/quiet.py)
        self.quiet = quiet or Thresholds()
        self.zk_state = zk  # ZooKeeper mode: leader, epoch, ISR and live brokers come from the controller's writes
        self.configs = TopicConfigs(cluster.name, settings.config_refresh_s, settings.request_timeout_ms)
        self.memory = PartitionMemory(settings.history_keyframe_s, settings.history_lag_floor_s)
        self.published = Published()
        self.carried = Carried()  # the moves the last records carried (reassignments.annotate)
        self.views = TopicViews()
        self.brokers = BrokerBook(cluster, settings)
        self.dirs = DirState(cluster.name, settings)
        self.access = AccessState(cluster.name, cluster.security)
        self.notes = Notes(cluster.name)  # side requests' failures, logged once
        self.side = SideChannel(cluster, settings.request_timeout_ms, self.notes)  # DescribeQuorum, moves
        # `krm collect --topic-share I/N`: only these topics' offsets and records (collectors/topic_share.py)
        self.share = topic_share.parse(settings.topic_share) if settings.topic_share else None

    @property
    def zk(self) -> ZkState | None:
        """The ZooKeeper mirror while ZooKeeper holds the metadata. None once a KRaft controller does
        (a migration's dual writes, then for good): KRaft brokers never register in ZooKeeper, so
        the cluster is read as a KRaft cluster is, through the Admin API."""
        zk = self.zk_state
        return zk if zk is not None and not zk.kraft_in_charge else None

    def mine(self, topics: list[MdTopic]) -> list[MdTopic]:
        """The topics this process polls: its share's (`--topic-share`), else all."""
        share = self.share
        return topics if share is None else [t for t in topics if share.holds(t["topic"])]

    def overlay_zk(self, topic: str, part: Partition, zk_assignment: dict[int, tuple[int, ...]] | None) -> None:
        """Leader, epoch and ISR as the controller wrote them to ZooKeeper, which the brokers'
        metadata caches (and so the Admin API) trail by up to a metadata propagation."""
        if self.zk is None:
            return
        zs = self.zk.partition(topic, part["partition"])
        epoch = part.get("leader_epoch")
        if zs is not None and zs.leader_epoch >= (epoch if epoch is not None else -1):
            part["leader"], part["leader_epoch"], part["isr"] = zs.leader, zs.leader_epoch, list(zs.isr)
            part["zk_mtime_ms"] = zs.mtime_ms
            replicas = (zk_assignment or {}).get(part["partition"])
            if replicas:  # the controller's own assignment beside its leader and ISR: one consistent view
                part["replicas"] = list(replicas)  # (the Admin API's can trail a reassignment's writes)
