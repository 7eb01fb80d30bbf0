"""What a poller knows of each broker between polls: every broker seen live, those live at the last poll,
how each answers (silence, round trips) and how each down one went; and the cluster record's broker list,
built from it by a pure function."""

from __future__ import annotations

import time
from typing import Iterable, Mapping

from collectors import offsets
from collectors.answer_times import AnswerTimes
from collectors.departures import Departures
from collectors.reachability import Probes, Reachability
from collectors.wire import MdBroker
from foundation.config import ClusterConfig, CollectorConfig
from schemas import latency
from schemas.typed import Broker, ClusterState


class BrokerBook:
    """One cluster's brokers as its poller knows them (see the module's docstring)."""

    def __init__(self, cluster: ClusterConfig, settings: CollectorConfig) -> None:
        self.known: dict[int, MdBroker] = {}  # every broker seen live since start
        self.live_last: dict[int, MdBroker] = {}  # brokers alive at the last successful poll
        self.live_last_ids: set[int] | None = None  # their ids, for AdminSource.brokers_changed
        self.last_state: ClusterState | None = None  # the last full poll's cluster state (quick records read it)
        self.reach = Reachability(settings.unreachable_after_s)
        # between polls, each live broker asked a tiny question (AdminSource.probe); a probe waits as long as a
        # silence takes to count, so it never closes a connection a poll would still wait on
        self.probes = Probes(max(settings.request_timeout_ms, int(settings.unreachable_after_s * 1000)),
                             settings.reach_probe_s)
        # how late each broker answers, on a thread and client of its own (collectors/answer_times.py)
        self.answer_times = AnswerTimes(cluster, settings.reach_probe_s,
                                        max(settings.request_timeout_ms, int(3000 * settings.unreachable_after_s)))
        self.contact: dict[int, float] = {}  # broker -> when it was last heard from (time.monotonic())
        self.answer_s: dict[int, float] = {}  # broker -> how late it answers now (the median round trip)
        self.steady_s: dict[int, float] = {}  # broker -> how late it answered over the last few seconds
        self.usual_ms: dict[int, float] = {}  # broker -> its usual answer time before the last poll's moved it
        self._usual: dict[int, latency.Usual] = {}
        self.departures = Departures()  # how each down broker went down (controlled shutdown or not)
        # broker -> (reachable, partitions it leads) as the last poll saw it: the collector's own /metrics
        # (collectors/stats.py) says it even while the observations path is down
        self.view: dict[int, tuple[bool, int]] = {}
        self._after_s = settings.unreachable_after_s

    def saw(self, live: dict[int, MdBroker]) -> None:
        """A poll's Metadata answer listed these brokers live."""
        self.known.update(live)
        self.live_last = live
        self.live_last_ids = set(live)

    def listen(self) -> None:
        """Read the answer-time prober's latest (starting it the first time), and move each broker's usual by them
        as the pipeline does its own (pipelines/slow_view.py): a milder spell is said against it."""
        self.contact, self.answer_s, self.steady_s = self.answer_times.start().answers()
        now = time.monotonic()
        self.usual_ms = {b: u[0] for b, u in self._usual.items()}
        for b, s in {**self.answer_s, **self.steady_s}.items():
            self._usual[b] = latency.moved(self._usual.get(b), s * 1000, now)

    def unreachable(self, found: offsets.OffsetsRound) -> set[int]:
        """Registered brokers clients cannot use now (collectors/reachability.py)."""
        return self.reach.unreachable(found, self.known, self.contact)

    def answering(self, found: offsets.OffsetsRound, unreachable: set[int] | frozenset[int]) -> set[int]:
        """The brokers that answered the offsets round, and those that left it unanswered but answered the
        answer-time prober within unreachable_after_s: late (BROKER_SLOW's), not down (BROKER_DOWN's)."""
        now = time.monotonic()
        return found.answered | {b for b, t in self.contact.items() if now - t < self._after_s and b not in unreachable}

    def close(self) -> None:
        self.answer_times.close()


def broker_list(known: Mapping[int, MdBroker], live: Mapping[int, MdBroker], referenced: Iterable[int],
                asked: set[int], answering: set[int], answer_s: Mapping[int, float],
                steady_s: Mapping[int, float] | None = None) -> list[Broker]:
    """The cluster record's brokers: every broker known or named by a replica list, live when `live` has it,
    reachable when asked and answering (None when not asked), with how late it answers (`answer_ms`) and answered
    over the last few seconds (`answer_steady_ms`)."""
    out: list[Broker] = []
    for bid in sorted(set(known) | set(referenced)):
        m = live.get(bid) or known.get(bid)
        broker: Broker = {"id": bid, "host": m.get("host") if m else None, "port": m.get("port") if m else None,
                          "rack": m.get("rack") if m else None, "live": bid in live,
                          "reachable": (bid in answering) if bid in asked else None}
        if (late := answer_s.get(bid)) is not None:  # BROKER_SLOW reads it
            broker["answer_ms"] = round(late * 1000, 1)
        if (steady := (steady_s or {}).get(bid)) is not None:
            broker["answer_steady_ms"] = round(steady * 1000, 1)
        out.append(broker)
    return out
