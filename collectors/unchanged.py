"""Polls that need not cross Spark: steady (healthy, or a broker not answering) and the same as the last
one published.

At rest nearly every poll of a cluster finds what the one before it found, yet each published poll
costs the pipeline a micro-batch (planning, a Kafka read, the offset and commit logs) whatever it
carries. When the pipeline runs in this process (`krm run`), such a poll stays home: the collector
tells the pipeline directly that its view still holds at this poll's time, and the view's age and
krm_cluster_view_stale stay exact without a batch. Only a steady poll stays home: every partition
left out as quiet (schemas/quiet.py), every broker registered, the KRaft quorum whole
(schemas/quorum.py), no error, nothing denied. Such a poll may still say that a registered broker did
not answer (BROKER_DOWN `unreachable`, pipelines/detectors/brokers.py): that finding has nothing that
changes with time, and a poll that says it again says nothing new, while its batch would hold up the
next poll's. So while a broker's silence grows toward `unreachable_after_s`, the poll that first found
it silent goes out and the ones after it stay home; the verdict's poll (its partitions named in the
topic records) goes out to an idle alert query. What the pipeline judges by time passing (an event's
hold ending, a deleted topic forgotten) it asks for: past the view's `due_ms` it holds no poll, and
the next one is published (pipelines/metrics.py `hold_view`). A poll is still published at least every
`resend_s`, so the history keeps a trace of the cluster and /readyz sees batches. Meanwhile what
/metrics shows of the cluster is the last published poll's, numbers included (a KRaft voter's fetch
age, a log directory's used bytes or a fill forecast hours out, say): the same states, up to `resend_s` old.
A failed log directory, or one full within `URGENT_S` (schemas/disks.py), makes every poll go out. Pure.
"""

from __future__ import annotations

from typing import Any, Callable

from schemas import quorum
from schemas.disks import URGENT_S

def steady_digest(records: list[dict[str, Any]]) -> tuple[Any, ...] | None:
    """What two steady polls of one cluster must share to be the same poll; None when this poll has
    something a rule may find other than a registered broker not answering (or is not a full poll's
    records). The KRaft quorum's offsets and timestamps move at every poll even when nothing happens:
    it counts by its voters' states."""
    out: list[Any] = []
    cluster_records = 0
    for rec in records:
        kind = rec.get("kind")
        if kind == "cluster":
            cs = rec["cluster_state"]
            if cs.get("error") is not None or cs.get("denied") or cs.get("controller_id") is None:
                return None
            if any(not b.get("live") for b in cs["brokers"]):  # not registered: judged by how long (planned_stop_max_s)
                return None
            brokers = cs["brokers"]
            if any("log_dirs" in b for b in brokers):  # their bytes move at every sampling: compared by state
                if any(d["failed"] or d.get("full_in_s", URGENT_S) < URGENT_S for b in brokers
                       for d in b.get("log_dirs") or ()):
                    return None  # a failed directory, or one full within URGENT_S: every poll goes out
                brokers = [{k: v for k, v in b.items() if k != "log_dirs"} for b in brokers]
            q = cs.get("quorum")
            if not quorum.whole(q):
                return None
            # a KRaft broker names a random live broker as "controller" at each Metadata request (KIP-590;
            # pipelines/detectors/brokers.py): only where the quorum answers is the cluster known to be KRaft
            kraft = q is not None or "quorum" in (cs.get("capabilities") or ())
            state = {k: v for k, v in cs.items() if k != "quorum" and not (kraft and k == "controller_id")}
            state["brokers"] = brokers
            voters = None if q is None else (q["leader_id"], q.get("leader_epoch"), q.get("observers"),
                                             tuple(v["id"] for v in q["voters"]))
            out.append((kind, rec.get("source"), rec.get("v"), state, voters))
            cluster_records += 1
        elif kind == "topic":
            ts = rec["topic_state"]
            # a partition in the record is one a rule may find something on, or one the history keeps
            if ts["partitions"] or ts.get("assignment") or ts.get("unreachable_brokers") or "partition_count" not in ts:
                return None
            out.append((kind, rec.get("source"), rec.get("v"), ts))
        else:
            return None
    return tuple(out) if cluster_records == 1 else None


class UnchangedPolls:
    """Each cluster's last published poll: its digest, poll id and when. `offer` says whether a new
    poll may stay home; the caller publishes it otherwise."""

    def __init__(self, resend_s: float) -> None:
        self.resend_s = resend_s  # 0: every poll is published
        self.kept_home = 0
        self._last: dict[str, tuple[tuple[Any, ...] | None, int, float]] = {}

    def offer(self, cluster: str, records: list[dict[str, Any]], now: float,
              taken: Callable[[int, int], bool]) -> bool:
        """True: `records` stay home. That needs a steady poll equal to the last published one, published
        less than `resend_s` ago, and `taken(last_poll_id, observed_at_ms)`: the pipeline has processed that
        poll and takes this one's time as its view's, or has it still to process. False: publish them (they
        are remembered as the last)."""
        digest = steady_digest(records) if self.resend_s > 0 else None
        last = self._last.get(cluster)
        head = next((r for r in records if r.get("kind") == "cluster"), None)
        if (digest is not None and head is not None and last is not None and last[0] == digest
                and now - last[2] < self.resend_s and taken(last[1], head["observed_at_ms"])):
            self.kept_home += 1
            return True
        self._last[cluster] = (digest, head["poll_id"] if head is not None else -1, now)
        return False

    def forget(self, cluster: str) -> None:
        """Records other than full polls were published (ZooKeeper's quick records): the next poll goes out."""
        self._last.pop(cluster, None)
