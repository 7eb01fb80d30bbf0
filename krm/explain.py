"""`krm assign explain --topic T`: where a topic's replicas are, and why. Pure.

Three questions an operator asks about an uneven topic:
1. How are replicas and preferred leaders spread over the brokers (every live broker listed, also
   those holding nothing)?
2. Is it Kafka's ZooKeeper-mode partition expansion (docs/cases/partition-expansion.md)? Creation places partitions over the
   controller's *unsorted* broker list; `kafka-topics --alter --partitions` continues over the
   *sorted* list from partition 0's first replica (krm/assignment.py, `expansion_inputs`). A suffix
   of partitions that this rule reproduces exactly — or that the assignment history shows appearing
   later — was added by an expansion, and its own spread shows whether it caused the imbalance.
3. Or brokers added later? Kafka never moves existing replicas onto a new broker: a live broker
   that holds none of the topic's replicas and joined after the topic was laid out (the history's
   `broker_expansion` incidents say when) is empty for that reason.
Plus: where the next N partitions would land if the topic were expanded now. In ZooKeeper mode that
is exact. KRaft controllers place new partitions with `StripedReplicaPlacer` (metadata/.../placement/
StripedReplicaPlacer.java: a random starting broker per placement, striped over racks), so there the
projection is what a ZooKeeper-mode cluster would do, and says so.
"""

from __future__ import annotations

import datetime as dt
from collections import Counter
from dataclasses import dataclass, field
from typing import Any, Mapping, Sequence, TypedDict

from krm.assignment import assign, expansion_inputs, replica_index
from pipelines.assignment_history import SizeChange

# a partition-count increase of the topic's history: when, from how many, to how many
Growth = TypedDict("Growth", {"at": dt.datetime, "from": int, "to": int})


@dataclass(frozen=True)
class Segment:
    first: int
    last: int
    origin: str  # "creation" (or a reassignment) | "expansion"
    evidence: str
    replicas_by_broker: dict[int, int]


@dataclass
class Explanation:
    topic: str
    partitions: int
    replication_factor: int
    brokers: list[dict[str, Any]]  # id, live, replicas, preferred_leaders, leaders (when known)
    segments: list[Segment]
    balanced: bool
    findings: list[str]
    next_partitions: dict[int, list[int]]
    next_note: str
    history: list[Growth] = field(default_factory=list)


def spread_is_even(counts: Sequence[int]) -> bool:
    return not counts or max(counts) - min(counts) <= 1


def expansion_suffixes(assignment: Mapping[int, list[int]], broker_lists: Sequence[Sequence[int]],
                       known_starts: Sequence[int] = ()) -> list[tuple[int, int, str]]:
    """(first, last, evidence) of each trailing run of partitions that Kafka's expansion rule reproduces
    exactly, latest first. `known_starts`: partition counts the history saw the topic grow from."""
    n = len(assignment)
    p0 = assignment[0]
    rf = len(p0)
    out: list[tuple[int, int, str]] = []
    end = n
    while end > 1:
        found = None
        for brokers in broker_lists:
            if rf > len(brokers):
                continue
            ordered, start, _ = expansion_inputs(brokers, p0, 0)
            # every candidate start k shares the first replicas: the trailing run where they match bounds k
            lo = end
            while lo > 1 and assignment[lo - 1][:1] == [ordered[(lo - 1 + start) % len(ordered)]]:
                lo -= 1
            k = next((k for k in range(lo, end) if _reproduces(assignment, ordered, start, k, end)), None)
            if k is not None:
                found = (k, ordered)
                break
        if not found:
            break
        k, ordered = found
        if k in known_starts:
            evidence = f"history: the topic grew from {k} partitions; Kafka's expansion rule over {ordered} reproduces them"
        elif _reproduces(assignment, ordered, expansion_inputs(ordered, p0, 0)[1], 0, end):
            break  # one placement over the sorted list explains everything: no sign of an expansion
        else:
            evidence = (f"Kafka's expansion rule reproduces them exactly: sorted broker list {ordered}, start at "
                        f"partition 0's first replica ({p0[0]}), continuing from partition {k}")
        out.append((k, end - 1, evidence))
        end = k
    return out


def _reproduces(assignment: Mapping[int, list[int]], ordered: list[int], start: int, k: int, end: int) -> bool:
    """Does `assign(ordered, end - k, rf, start_index=start, start_partition=k)` give partitions k..end-1?
    Partition by partition, stopping at the first difference."""
    n = len(ordered)
    shift = start
    for p in range(k, end):
        if p > 0 and p % n == 0:
            shift += 1
        first = (p + start) % n
        want = assignment[p]
        if want[0] != ordered[first] or any(want[j + 1] != ordered[replica_index(first, shift, j, n)]
                                            for j in range(len(want) - 1)):
            return False
    return True


def explain(topic: str, assignment: Mapping[int, list[int]], live: Sequence[int], *, mode: str | None = None,
            leaders: Mapping[int, int] | None = None, history: Sequence[SizeChange] = (),
            broker_joins: Mapping[int, dt.datetime] | None = None, next_n: int = 0,
            first_seen: dt.datetime | None = None) -> Explanation:
    """`assignment`: partition -> replicas; `live`: registered brokers; `history`: the topic's
    partition-count changes [{observed_at, partition_count}], oldest first; `broker_joins`: when
    brokers joined (from the history), if known."""
    n = len(assignment)
    rf = max(len(r) for r in assignment.values())
    replicas = Counter(b for r in assignment.values() for b in r)
    preferred = Counter(r[0] for r in assignment.values() if r)
    led = Counter(leaders.values()) if leaders else None
    ids = sorted(set(live) | set(replicas))
    brokers = [{"id": b, "live": b in live, "replicas": replicas[b], "preferred_leaders": preferred[b],
                **({"leaders": led[b]} if led is not None else {})} for b in ids]
    live_sorted = sorted(live)
    balanced = _even_enough(replicas, live_sorted, rf)

    grew_from = [h["from"] for h in _growth(history)]
    assigned = sorted(replicas)
    lists = [live_sorted] + ([assigned] if assigned != live_sorted else [])
    suffixes = expansion_suffixes(assignment, lists, grew_from)
    cut = suffixes[-1][0] if suffixes else n
    for k in grew_from:  # the history knows of growth the rule does not reproduce (a manual assignment?)
        if 0 < k < cut and all(k != s[0] for s in suffixes):
            suffixes.append((k, cut - 1, "history: the topic grew from %d partitions (not Kafka's rule: a manual "
                                         "assignment or a KRaft controller)" % k))
            cut = k
    segments = [Segment(0, cut - 1, "creation", "placed when the topic was created (or by a reassignment)",
                        dict(Counter(b for p in range(cut) for b in assignment[p])))]
    for first, last, why in sorted(suffixes):
        segments.append(Segment(first, last, "expansion", why,
                                dict(Counter(b for p in range(first, last + 1) for b in assignment[p]))))

    findings = _findings(segments, live_sorted, replicas, broker_joins or {}, first_seen, balanced, rf)
    nxt: dict[int, list[int]] = {}
    note = ""
    if next_n > 0 and live_sorted and rf <= len(live_sorted):
        ordered, start, k = expansion_inputs(live_sorted, assignment[0], n)
        nxt = assign(ordered, next_n, rf, start_index=start, start_partition=k)
        note = ("exact: Kafka's ZooKeeper-mode expansion (sorted live brokers, start at partition 0's first replica)"
                if mode != "kraft" else
                "KRaft controllers use StripedReplicaPlacer (random start per placement): this is what a "
                "ZooKeeper-mode cluster would do, not a prediction for this cluster")
    return Explanation(topic, n, rf, brokers, segments, balanced, findings, nxt, note, list(_growth(history)))


def _growth(history: Sequence[SizeChange]) -> list[Growth]:
    out: list[Growth] = []
    prev = None
    for h in history:
        c = h["partition_count"]
        if prev is not None and c > prev:
            out.append({"at": h["observed_at"], "from": prev, "to": c})
        prev = c
    return out


def _findings(segments: list[Segment], live: list[int], replicas: Counter, joins: Mapping[int, dt.datetime],
              first_seen: dt.datetime | None, balanced: bool, rf: int) -> list[str]:
    out: list[str] = []
    if balanced:
        out.append("replicas are spread evenly over the live brokers (within one)")
    creation = segments[0]
    if _even_enough(creation.replicas_by_broker, live, rf):
        out.append(f"partitions 0-{creation.last} (as created or last reassigned) are even over today's live brokers")
    else:
        out.append(f"partitions 0-{creation.last} are already uneven as created or reassigned: "
                   + _by_broker(creation.replicas_by_broker, live))
    cumulative = Counter(creation.replicas_by_broker)
    left_out: dict[int, Segment] = {}
    for s in segments[1:]:
        was_even = _even_enough(cumulative, live, rf)
        cumulative.update(s.replicas_by_broker)
        what = f"partitions {s.first}-{s.last} were added by a partition expansion ({s.evidence})"
        if was_even and not _even_enough(cumulative, live, rf):
            fewest = min(cumulative[b] - s.replicas_by_broker.get(b, 0) for b in live)
            starved = [b for b in live if cumulative[b] - s.replicas_by_broker.get(b, 0) == fewest
                       and s.replicas_by_broker.get(b, 0) == 0]
            for b in starved:
                left_out.setdefault(b, s)
            out.append(what + "; this expansion made the topic uneven: it placed " + _by_broker(s.replicas_by_broker, live)
                       + (f", none on {starved} which held the fewest" if starved else "")
                       + ". Creation used the controller's unsorted broker list, expansion the sorted one, so the "
                         "expansion does not continue creation's rotation (docs/cases/partition-expansion.md)")
        else:
            out.append(what + ("; the topic stayed even" if _even_enough(cumulative, live, rf) else
                               "; the topic was uneven before it"))
    empty = [b for b in live if replicas[b] == 0]
    for b in empty:
        when = joins.get(b)
        if b in left_out:
            seg = left_out[b]
            out.append(f"broker {b} holds none of its replicas: the expansion of partitions {seg.first}-{seg.last} "
                       "skipped it")
        elif when is not None and (first_seen is None or when > first_seen):
            out.append(f"broker {b} joined at {when:%Y-%m-%d %H:%M:%S} UTC, after the topic was laid out: Kafka moves no "
                       "existing replica to a new broker (broker expansion); `krm plan rebalance` moves some")
        elif when is not None:
            out.append(f"broker {b} holds none of its replicas although it was there when the topic was first seen")
        else:
            out.append(f"broker {b} holds none of its replicas (no assignment history says when it joined; if it "
                       "was added after the topic, Kafka never moves replicas to it by itself)")
    return out


def _even_enough(counts: Mapping[int, int], live: list[int], rf: int) -> bool:
    """Even within one, or too few replicas to give every broker one and none has two."""
    c = [counts.get(b, 0) for b in live]
    return spread_is_even(c) or (sum(c) < len(live) and max(c, default=0) <= 1)


def _by_broker(counts: Mapping[int, int], live: list[int]) -> str:
    return ", ".join(f"broker {b}: {counts.get(b, 0)}" for b in live)
