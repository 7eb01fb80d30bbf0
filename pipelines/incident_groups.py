"""Incidents that share one cause, read as one: a broker down and the partitions it leaves offline,
under-replicated or stalled; a cut replication link and the high-watermark stalls it holds; a failed log
directory and the partitions it leaves offline. The on-call fixes the cause once, not each partition.

Pure, computed whenever incidents are listed (the console, `krm incidents`), never stored: the incidents
table keeps one row per incident, and `krm incidents --json` one object per incident with its `group`.

- A BROKER_DOWN or BROKER_SLOW incident heads the group of every partition incident of its cluster that names
  that broker as one to act on (its details' `act_on`: must_return, holding_back, out_of_sync,
  unreachable_brokers, adding) and opened while it was down or slow (from LEAD_MS before its opening: a partition
  whose leader stopped answering opens as the broker does). A broker both down and slow heads with the earlier.
- A BROKER_SLOW incident also heads the partition pages it explains (SLOWED, as pipelines/slowed.py holds them):
  those whose clients wait on it (its leader, ISR or replicas too) and whose present spell began while it was
  slow (`spell_began`). Before a cut link: a follower that answers late holds a stall back as a cut one would, and
  krm cannot tell the two apart from the stall alone.
- HW_STALL incidents with the same cut side (details.replication_link: pipelines/replication_links.py).
- OFFLINE_PARTITION `log_dir_offline` incidents of the same broker's failed directory (its must_return).
Stalls and failed directories group while they overlap in time (each opening before the group's last
one ended, LEAD_MS allowed), so two cuts an hour apart are two groups.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass
from typing import Iterable

from pipelines.detectors import availability, hw_stall, isr
from pipelines.detectors.details import PartitionDetails
from pipelines.detectors.hw_stall import StallDetails
from pipelines.detectors.offline import OfflineDetails
from pipelines.incidents import Incident

LEAD_MS = 60_000
HEADS = ("BROKER_DOWN", "BROKER_SLOW")  # broker incidents the partitions they hold up are grouped under
SLOWED = (hw_stall.TYPE, availability.TYPE, isr.UNDER_MIN_ISR)  # the partition pages a slow broker explains
_SEVERITY = {"critical": 0, "warning": 1, "info": 2}
_OPEN_END = 2**62


@dataclass(frozen=True)
class Group:
    key: str | None  # None: an incident on its own
    title: str  # what the members share, for a person: "broker 2 down (not_registered)"
    members: tuple[Incident, ...]  # the head (the BROKER_DOWN incident, if any) first, then by opening

    @property
    def head(self) -> Incident:
        return self.members[0]

    @property
    def severity(self) -> str:
        return min((i.severity for i in self.members), key=lambda s: _SEVERITY.get(s, 3))

    @property
    def status(self) -> str:
        return "open" if any(i.status == "open" for i in self.members) else "resolved"

    @property
    def opened_at_ms(self) -> int:
        return min(i.opened_at_ms for i in self.members)

    @property
    def resolved_at_ms(self) -> int | None:
        if self.status == "open":
            return None
        return max(i.resolved_at_ms or i.last_seen_at_ms for i in self.members)

    @property
    def partitions(self) -> list[str]:
        """The partitions it affects, as topic-partition, sorted."""
        return sorted({f"{i.topic}-{i.partition}" for i in self.members if i.topic is not None},
                      key=lambda tp: (tp.rsplit("-", 1)[0], int(tp.rsplit("-", 1)[1])))

    def counts(self) -> list[tuple[str, int]]:
        """(type or type/cause, how many) of its partition incidents, the most first."""
        c = Counter(f"{i.type} {i.cause}" if i.cause else i.type for i in self.members if i.topic is not None)
        return sorted(c.items(), key=lambda kv: (-kv[1], kv[0]))


def _end(i: Incident) -> int:
    return _OPEN_END if i.resolved_at_ms is None else i.resolved_at_ms


def _link_key(i: Incident) -> tuple[str, str] | None:
    facts = i.facts
    link = facts.replication_link if isinstance(facts, StallDetails) else None
    if link is None or link.broker is None:
        return None
    return f"cut:{i.cluster}:{link.side}:{link.broker}", link.summary or "a cut replication link"


def _disk_key(i: Incident) -> tuple[str, str] | None:
    facts = i.facts
    if not isinstance(facts, OfflineDetails) or i.cause != "log_dir_offline":
        return None
    brokers = ",".join(str(b) for b in sorted(facts.must_return))
    return f"disk:{i.cluster}:{brokers}", f"failed log directory on broker {brokers}"


def spell_began(i: Incident) -> int | None:
    """When the incident's present spell began: a stall's `hw_stalled_since_ms`, else its opening, unless it reopened
    (an incident reopening within the flap window keeps its first `opened_at`, maybe from an earlier spell of the
    same broker): None, not known."""
    facts = i.facts
    if isinstance(facts, StallDetails) and facts.hw_stalled_since_ms is not None:
        return facts.hw_stalled_since_ms
    return i.opened_at_ms if i.reopen_count == 0 else None


def _slow_head(i: Incident, heads: list[Incident]) -> Incident | None:
    """The BROKER_SLOW incident that explains a partition page of SLOWED (the earliest, if several)."""
    if i.type not in SLOWED or not isinstance(i.facts, PartitionDetails):
        return None
    waited, began = i.facts.brokers_waited_on(), spell_began(i)
    found = [d for d in heads if d.type == "BROKER_SLOW" and d.cluster == i.cluster and d.broker in waited
             and (d.opened_at_ms - LEAD_MS <= began <= _end(d) if began is not None  # else: overlapping in time
                  else i.opened_at_ms <= _end(d) and _end(i) >= d.opened_at_ms - LEAD_MS)]
    return min(found, key=lambda d: (d.opened_at_ms, d.broker or 0)) if found else None


def group(incidents: Iterable[Incident]) -> list[Group]:
    """Every incident in exactly one group, the groups ordered as their heads were (the first member's place)."""
    items = list(incidents)
    order = {id(i): n for n, i in enumerate(items)}
    downs = [i for i in items if i.type in HEADS and i.broker is not None]
    by_down: dict[int, list[Incident]] = {id(d): [] for d in downs}
    chains: dict[str, list[tuple[str, list[Incident], int]]] = {}  # raw key -> [(title, members, end)]
    alone: list[Incident] = []
    for i in sorted(items, key=lambda i: i.opened_at_ms):
        if i.type in HEADS and i.broker is not None:
            continue
        slow_head = _slow_head(i, downs)
        keyed = _link_key(i) or _disk_key(i)
        if keyed is not None and slow_head is None:
            raw, title = keyed
            runs = chains.setdefault(raw, [])
            if runs and i.opened_at_ms <= runs[-1][2] + LEAD_MS:
                t, members, end = runs[-1]
                members.append(i)
                runs[-1] = (t, members, max(end, _end(i)))
            else:
                runs.append((title, [i], _end(i)))
            continue
        named = i.facts.brokers_named() if isinstance(i.facts, PartitionDetails) else set()
        anchors = [d for d in downs if d.cluster == i.cluster and d.broker in named
                   and d.opened_at_ms - LEAD_MS <= i.opened_at_ms <= _end(d)] + ([slow_head] if slow_head else [])
        if anchors:
            by_down[id(min(anchors, key=lambda d: (d.opened_at_ms, d.broker or 0)))].append(i)
        else:
            alone.append(i)
    groups: list[Group] = []
    for d in downs:
        members = by_down[id(d)]
        key = f"broker:{d.cluster}:{d.broker}@{d.opened_at_ms}" if members else None
        how = "down" if d.type == "BROKER_DOWN" else "slow"
        groups.append(Group(key, f"broker {d.broker} {how} ({d.cause})", (d, *members)))
    for raw, runs in chains.items():
        for title, members, _ in runs:
            key = f"{raw}@{members[0].opened_at_ms}" if len(members) > 1 else None
            groups.append(Group(key, title, tuple(members)))
    groups.extend(Group(None, "", (i,)) for i in alone)
    groups.sort(key=lambda g: min(order[id(m)] for m in g.members))
    return groups


def keys(incidents: Iterable[Incident]) -> dict[str, str | None]:
    """incident_id -> its group's key (None: on its own)."""
    return {m.incident_id: g.key for g in group(incidents) for m in g.members}
