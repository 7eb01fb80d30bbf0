"""Polls that need not cross Spark: steady and the same as the last one published.

At rest nearly every poll finds what the one before it found, yet each published poll costs the
pipeline a micro-batch whatever it carries. With the pipeline in this process (`krm run`) such a poll
stays home and the collector vouches for the last published one at this poll's time, so the view's age
stays exact without a batch (pipelines/state.py `PipelineState.vouch`). Whether a poll stays home is decided here
alone, from the poll: what changes with time passing alone (a held event's end, an escalation, a
vanished topic) the pipeline judges on its own clock (pipelines/clock.py). Steady: every partition left
out as quiet (schemas/quiet.py), the KRaft quorum whole (schemas/quorum.py), no error, nothing denied, no
failed log directory or one full within `URGENT_S` (schemas/disks.py), no broker answering late, not
even mildly against its peers and its own usual (schemas/latency.py). A poll still goes out at least every
`resend_s` (the history's trace, /readyz); until then /metrics shows the last published poll's numbers (a
log directory's bytes, say), up to `resend_s` old (docs/history.md). Pure.
"""

from __future__ import annotations

from typing import Any, Mapping, Sequence

from schemas import quorum
from schemas.disks import URGENT_S
from schemas.latency import SLOW_MIN_S, mildly_late
from schemas.typed import Observation

def steady_digest(records: Sequence[Observation], usual_ms: Mapping[int, float] | None = None) -> tuple[Any, ...] | None:
    """What two steady polls of one cluster must share to be the same poll; None when the poll is not
    steady (or not a full poll's records). A broker down or not answering is steady: the same finding
    again, its escalation the pipeline's clock's. The KRaft quorum's offsets and timestamps move at every
    poll even when nothing happens: it counts by its voters' states. `usual_ms`: each broker's usual answer
    time (collectors/broker_book.py); a broker without one is not mildly late (the pipeline would not say it)."""
    out: list[Any] = []
    cluster_records = 0
    for rec in records:
        if rec["kind"] == "cluster":
            cs = rec["cluster_state"]
            if cs.get("error") is not None or cs.get("denied") or cs.get("controller_id") is None:
                return None
            brokers: list[Any] = cs["brokers"]
            if any("log_dirs" in b for b in brokers):  # their bytes move at every sampling: compared by state
                if any(d["failed"] or ((eta := d.get("full_in_s")) is not None and eta < URGENT_S) for b in brokers
                       for d in b.get("log_dirs") or ()):
                    return None  # a failed directory, or one full within URGENT_S: every poll goes out
                brokers = [{k: v for k, v in b.items() if k != "log_dirs"} for b in brokers]
            # round trips move at every poll: compared by lateness
            if any("answer_ms" in b or "answer_steady_ms" in b for b in brokers):
                if any(b["answer_ms"] >= SLOW_MIN_S * 1000 for b in brokers if b.get("answer_ms") is not None):
                    return None  # a broker answering late: every poll goes out, BROKER_SLOW judges each
                if mildly_late({b["id"]: ms for b in brokers if (ms := b.get("answer_steady_ms")) is not None},
                               usual_ms or {}):
                    return None  # ... and so does one answering mildly late against its peers (a warning's)
                brokers = [{k: v for k, v in b.items() if k not in ("answer_ms", "answer_steady_ms")} for b in brokers]
            q = cs.get("quorum")
            if not quorum.whole(q):
                return None
            # a KRaft broker names a random live broker as "controller" at each Metadata request (KIP-590;
            # pipelines/detectors/brokers.py): only where the quorum answers is the cluster known to be KRaft
            kraft = q is not None or "quorum" in (cs.get("capabilities") or ())
            state = {k: v for k, v in cs.items()
                     if k not in ("quorum", "holds_s") and not (kraft and k == "controller_id")}
            state["brokers"] = brokers
            voters = None if q is None else (q["leader_id"], q.get("leader_epoch"), q.get("observers"),
                                             tuple(v["id"] for v in q["voters"]))
            out.append(("cluster", rec["source"], rec["v"], state, voters))
            cluster_records += 1
        elif rec["kind"] == "topic":
            ts = rec["topic_state"]
            # a partition in the record is one a rule may find something on, or one the history keeps
            if ts["partitions"] or ts.get("assignment") or ts.get("unreachable_brokers") or "partition_count" not in ts:
                return None
            out.append(("topic", rec["source"], rec["v"], ts))
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

    def offer(self, cluster: str, records: Sequence[Observation], now: float, holds_s: float | None = None,
              usual_ms: Mapping[int, float] | None = None) -> int | None:
        """The id of the last published poll when `records` stay home: a steady poll equal to it, published
        less than `resend_s` ago; the caller vouches for that poll at this one's time. None: publish them
        (they are remembered as the last). `holds_s`: no pipeline in this process hears vouches, so a steady
        poll published says itself how long the polls repeating it may stay home (its record's `holds_s`).
        `usual_ms`: see `steady_digest`."""
        digest = steady_digest(records, usual_ms) if self.resend_s > 0 else None
        last = self._last.get(cluster)
        head = next((r for r in records if r["kind"] == "cluster"), None)
        if (digest is not None and head is not None and last is not None and last[0] == digest
                and now - last[2] < self.resend_s):
            self.kept_home += 1
            return last[1]
        self._last[cluster] = (digest, head["poll_id"] if head is not None else -1, now)
        if digest is not None and head is not None and holds_s is not None:
            head["cluster_state"]["holds_s"] = holds_s
        return None

    def forget(self, cluster: str) -> None:
        """Records other than full polls were published (ZooKeeper's quick records): the next poll goes out."""
        self._last.pop(cluster, None)
