"""BROKER_SLOW: a broker that stays registered and answers, but late (a CPU-starved JVM, a slow disk, a degraded
replication path): one incident per slow broker, naming it and the kind, instead of a page per partition it
holds up. Pure, judged on the driver at each canary or JMX round of a cluster.

What a broker is compared with is its peers at the same moment (Cruise Control's slow-broker finder compares a
broker's log flush time with its peers' and its own past over minutes of samples; krm must say it in seconds,
so it compares what every broker answers now):
- the client's view: the slowest acks=all write of the newest canary round to the partitions the broker leads
  (pipelines/latency.py). Slow when it is at least `SLOW_MIN_S` and `PEER_FACTOR` times the median of its
  peers'. Writes to the partitions it follows are slow too (acks=all waits for it): the leaders' RemoteTime
  grows, not their own time, so only the broker's own time (queue + local) ever counts against it; and a canary
  write counts against the member of the ISR it waited on that answers krm markedly later than its leader, when
  one does (pipelines/slow_view.py waited_on).
- the broker's own word (its RequestMetrics, from the JMX exporter): Produce queue + local time at the median
  at least `SLOW_MIN_S` and `PEER_FACTOR` times its peers'. The median, not the 99th percentile: Kafka's
  histograms decay old samples by weight, and at a quiet broker's few requests a slow spell's tail holds the
  p99 long after it ended.
- its JMX endpoint answering markedly later than its peers' (the same floor and factor), or timing out while its
  peers answer and it still acknowledges writes or answers the collector, late: the agent runs in the broker's JVM and
  reads no disk, so a whole JVM starved of CPU (or stopped by long GC pauses) answers its own metrics late or not
  at all. A scrape is the latest for `jmx_interval_s`: once the probes answered since say the broker keeps its
  peers' pace, they say its pace now (a JVM just out of a starved spell answers the scrape after it late).
- the collector's own probes (a brokers-only Metadata request every `reach_probe_s`, collectors/reachability.py):
  their median round trip over the last seconds markedly above its peers'. A starved broker answers them seconds
  late where a paused one answers nothing (the collector then calls it unreachable: BROKER_DOWN's), so this is
  what tells a broker too slow for any client from a stopped one.
- a milder spell of the same: its probes' round trips over the last few seconds at a high quantile
  (`answer_steady_ms`, many answers: one poll says it) at least `MILD_MIN_S` and `MILD_FACTOR` times its peers', and
  `PAST_FACTOR` times its own usual (schemas/latency.py `moved`: up over half an hour, down within minutes); from an older
  collector, which publishes only the short median, two rounds in a row. A broker at a tenth of a core answers some
  probes tens of ms late where its peers answer in one or two: clients are not hurt yet, but an on-call wants to
  know. Its own past keeps a broker that was always a little slower than its peers (older hardware, a far rack) from
  a standing warning. Only ever a warning: answers tens of ms late cannot hold a client's write past the objective, so
  writes waiting that long through it wait on something else (a follower cut off).

The cause, read from the evidence: `cpu_starved` (its JVM answers nothing in time, or requests wait in its
queue longer than they are served: RequestQueueTime above LocalTime, its handlers not idle), `slow_disk` (its
own LocalTime's 99th percentile markedly above its peers' median, or its LocalTime or log flushes dominating, while
the JVM answers at its peers' pace), `slow_replication` (it waits on its followers:
RemoteTime dominates its Produce time while its own part is fast), else `unknown` (only the canary says so).

Severity: a warning while clients stay within the cluster's `latency_objective_s`; critical once clients are
hurt (`clients_hurt`): the canary waited longer than that on a partition it leads (a write still unanswered counts
as soon as its wait passes the objective: the round's early record), or its write there was not acknowledged at
all within the canary's timeout while the broker answers, late, and in either case markedly longer than the writes
through its peers (a wait every leader shares is a follower's: one cut off or paused); or a write's answers from it
alone pass the objective (an acks=all write to a partition it leads needs three: the producer's request, the
followers' fetch that takes the data, and their next fetch that moves the high watermark); or the partitions'
own signals: an open critical partition page (HW_STALL, PARTITION_UNAVAILABLE, UNDER_MIN_ISR) names it. Never
critical on its canary writes alone while it answers krm promptly and its own part of a Produce is its peers': those
writes wait on its followers (a replication link cut, as in a gray failure), whose own pages name the fault. The
partitions' own pages it explains (HW_STALL, PARTITION_UNAVAILABLE and the canary naming the broker) are grouped
under it (pipelines/incident_groups.py) and held in the shipped rules while it pages (`krm_partition_slowed_by`,
pipelines/slowed.py).
"""

from __future__ import annotations

import math
import statistics
from dataclasses import dataclass, replace
from typing import Any, Callable, Collection, Mapping, Sequence

from pipelines.detectors.details import Details
from pipelines.detectors.exports import Alert, BROKER_PAGE, Series, console, incident_info
from pipelines.detectors.rule import Escalation, Rule
from schemas.latency import MILD_MIN_S, SLOW_MIN_S, mild_spell

TYPE = "BROKER_SLOW"
CPU_STARVED, SLOW_DISK, SLOW_REPLICATION, UNKNOWN = "cpu_starved", "slow_disk", "slow_replication", "unknown"
CLIENTS_HURT = "clients_hurt"  # escalation: the canary waited past the latency objective
SCOPE = "slow"

# an acks=all write to a partition it leads needs it to answer this often at least: the producer's request, the
# followers' fetch that takes the data, and their next fetch, whose offset tells it they have it and moves the
# high watermark (Partition.updateFollowerFetchState then maybeIncrementLeaderHW, core/src/main/scala/kafka/
# cluster/Partition.scala); the produce is answered only then
ANSWERS_PER_WRITE = 3
PEER_FACTOR = 3.0  # ... and at least this many times the median of its peers
TIMED_OUT = "timed out"  # in a JMX scrape's error: the endpoint accepted and did not answer in time
# its exporter's answer this late (and PEER_FACTOR its peers') reads as a JVM short of CPU: above what one scrape on a
# loaded host takes, below a starved JVM's (the measured cases in tests/unit/test_slow_rule.py)
JVM_SLOW_MIN_S = 0.5
# a scrape's pace is the JVM's pace when it was taken; probes answered this long after it, at its peers' pace, say the
# JVM's pace now (a scrape comes every jmx_interval_s, ten seconds by default; the probes every quarter second)
SCRAPE_SUPERSEDED_MS = 2000.0


@dataclass(frozen=True)
class Evidence:
    """What one live broker answers now. None: not known (no canary partition led, no JMX scrape)."""

    client_s: float | None = None  # the canary's slowest acknowledged write to a partition it leads
    jmx_error: str | None = None
    gauges: Mapping[str, float] | None = None  # its JMX gauges (collectors/jmx.py names), when it answered
    scrape_ms: float | None = None  # how long its JMX exporter took to answer: its JVM's own pace, no disk in it
    answer_ms: float | None = None  # how late it answers the collector's probes now (their median round trip)
    client_failed: bool = False  # the canary's newest write to a partition it leads was not acknowledged in time
    answer_past_ms: float | None = None  # how late it answered the collector's probes over its recent past
    # the longest a canary write to a partition it leads has waited so far, unanswered (the round's early record):
    # clients hurt when past the objective, but never itself a slow broker (a dead or paused leader answers no write)
    client_waiting_s: float | None = None
    # how long before its probes' answers (`answer_ms`) its JMX scrape was taken (None: not known)
    scrape_age_ms: float | None = None
    # how late it answered the collector's probes over the last few seconds (many answers; None: not said)
    answer_steady_ms: float | None = None

    def mild_ms(self) -> float | None:
        """Its answer time a milder spell is read from: the steady one, else (an older collector) the short one."""
        return self.answer_ms if self.answer_steady_ms is None else self.answer_steady_ms

    def own_s(self) -> float | None:
        """Its own share of a Produce request at the median (queue + local): what the broker itself takes."""
        g = self.gauges or {}
        queue, local = g.get("produce_queue_p50_ms"), g.get("produce_local_p50_ms")
        return None if queue is None or local is None else (queue + local) / 1000

    @property
    def jmx_timed_out(self) -> bool:
        return self.jmx_error is not None and TIMED_OUT in self.jmx_error.lower()

    def answers(self, peers_answer_ms: Sequence[float], peers_client_s: Sequence[float] = ()) -> bool:
        """It answers someone now, late: the canary's newest write to its partition acknowledged (none waiting since),
        or the collector's probes, markedly later than its peers'. An answer at its peers' pace says nothing here: a
        paused broker's last answers were quick, while its newest request waits (collectors/answer_times.py), and so
        was a write it acknowledged just before it stopped."""
        return ((self.client_waiting_s is None and _markedly(self.client_s, peers_client_s, MILD_MIN_S))
                or _markedly(None if self.answer_ms is None else self.answer_ms / 1000,
                             [ms / 1000 for ms in peers_answer_ms], MILD_MIN_S))


@dataclass(frozen=True)
class SlowFinding:
    broker: int
    cause: str
    severity: str
    details: dict[str, Any]
    # said by how late it answers krm: a median over several answers, already more than one late answer (the
    # other evidence, one round's, wants a second round to agree: pipelines/slow_view.py)
    settled: bool = False


class SlowDetails(Details):
    """A BROKER_SLOW incident's details (the incident's `broker` is the slow broker)."""

    client_latency_s: float | None = None  # the canary's slowest write to a partition it leads
    peers_client_latency_s: float | None = None  # the median of its peers'
    own_latency_s: float | None = None  # its Produce queue + local time at the median
    peers_own_latency_s: float | None = None
    produce_queue_p50_ms: float | None = None
    produce_local_p50_ms: float | None = None
    produce_remote_p50_ms: float | None = None
    request_handler_idle: float | None = None
    log_flush_p99_ms: float | None = None
    jmx_error: str | None = None
    jmx_scrape_ms: float | None = None  # how long its exporter took to answer
    peers_jmx_scrape_ms: float | None = None
    answer_ms: float | None = None  # how late it answers the collector's probes (their median round trip)
    peers_answer_ms: float | None = None
    answer_past_ms: float | None = None  # its own answer time over its recent past (a moving average)
    answer_steady_ms: float | None = None  # how late it answered krm's probes over the last few seconds (their 90th percentile)
    peers_answer_steady_ms: float | None = None
    client_failed: bool | None = None  # the canary's write to a partition it leads was not acknowledged in time
    client_waiting_s: float | None = None  # a canary write to a partition it leads, unanswered so far, has waited this
    latency_objective_s: float | None = None

    def headline(self) -> str | None:
        said = []
        if self.client_latency_s is not None:
            peers = f" (peers {self.peers_client_latency_s:.2f} s)" if self.peers_client_latency_s is not None else ""
            said.append(f"clients wait {self.client_latency_s:.2f} s on its partitions{peers}")
        elif self.client_failed:
            said.append("the canary's write to its partition was not acknowledged in time")
        elif self.client_waiting_s is not None:
            said.append(f"the canary's write to its partition has waited {self.client_waiting_s:.2f} s, unanswered")
        if self.own_latency_s is not None:
            peers = f" (peers {self.peers_own_latency_s:.2f} s)" if self.peers_own_latency_s is not None else ""
            said.append(f"it takes {self.own_latency_s:.2f} s of a median Produce itself{peers}")
        if self.answer_ms is not None:
            peers = f" (peers {self.peers_answer_ms:.0f} ms)" if self.peers_answer_ms is not None else ""
            if self.answer_past_ms is not None:
                peers = f"{peers[:-1]}; its own usual {self.answer_past_ms:.0f} ms)" if peers else \
                    f" (its own usual {self.answer_past_ms:.0f} ms)"
            said.append(f"it answers krm's probes in {self.answer_ms:.0f} ms{peers}")
        if self.answer_steady_ms is not None:
            peers = (f" (peers {self.peers_answer_steady_ms:.0f} ms)" if self.peers_answer_steady_ms is not None
                     else "")
            said.append(f"{self.answer_steady_ms:.0f} ms over the last few seconds{peers}")
        if self.jmx_error is not None:
            said.append(f"its JMX endpoint: {self.jmx_error}")
        elif self.jmx_scrape_ms is not None:
            peers = f" (peers {self.peers_jmx_scrape_ms:.0f} ms)" if self.peers_jmx_scrape_ms is not None else ""
            said.append(f"its JMX endpoint answers in {self.jmx_scrape_ms:.0f} ms{peers}")
        return "; ".join(said) or None


def _median(values: Sequence[float]) -> float | None:
    return statistics.median(values) if values else None


def _markedly(value: float | None, peers: Sequence[float], floor_s: float = SLOW_MIN_S) -> bool:
    """At least `floor_s` and PEER_FACTOR times the peers' median (no peer: the floor alone is not enough)."""
    median = _median(peers)
    return value is not None and median is not None and value >= max(floor_s, PEER_FACTOR * median)


def _mildly(e: Evidence, peers_mild_ms: Sequence[float]) -> bool:
    """A milder spell of late answers to the collector's probes (`Evidence.mild_ms`, its peers' the same), against its
    peers' median and its own usual (schemas/latency.py `mild_spell`)."""
    median, ms = _median(peers_mild_ms), e.mild_ms()
    return ms is not None and median is not None and mild_spell(ms, median, e.answer_past_ms)


def _client_wait(e: Evidence) -> float | None:
    """How long the canary's newest write to a partition it leads waited: acknowledged, still waiting, or never
    acknowledged (without end)."""
    if e.client_failed:
        return math.inf
    waits = [w for w in (e.client_s, e.client_waiting_s) if w is not None]
    return max(waits) if waits else None


def _clients_wait_on(e: Evidence, peers: Sequence[Evidence], objective_s: float) -> bool:
    """The canary's write through it waited past the objective, and markedly longer than its peers' writes: a wait
    they share (every leader's writes held by one follower cut off or paused) is not its own."""
    wait = _client_wait(e)
    if wait is None or wait <= objective_s:
        return False
    median = _median([w for p in peers if (w := _client_wait(p)) is not None])
    return median is None or (median != math.inf and wait >= PEER_FACTOR * median)


def cause_of(e: Evidence, peers_scrape_ms: Sequence[float] = (), peers_own_s: Sequence[float] = (),
             peers_answer_ms: Sequence[float] = (), peers_local_ms: Sequence[float] = (),
             peers_remote_ms: Sequence[float] = (), peers_mild_ms: Sequence[float] | None = None) -> str:
    """The kind of slowness its evidence reads as (see the module's docstring). The exporter runs in the broker's
    JVM and reads no disk: its answer timing out, or coming markedly later than its peers', is the whole JVM
    short of CPU. Only then do the request phases decide (a starved JVM is slow in every phase, LocalTime too)."""
    if e.jmx_timed_out or _markedly(None if e.scrape_ms is None else e.scrape_ms / 1000,
                                    [ms / 1000 for ms in peers_scrape_ms], JVM_SLOW_MIN_S):
        return CPU_STARVED
    answers_late = _markedly(None if e.answer_ms is None else e.answer_ms / 1000,
                             [ms / 1000 for ms in peers_answer_ms]) or _mildly(
        e, peers_answer_ms if peers_mild_ms is None else peers_mild_ms)
    if e.gauges is None and answers_late:
        return CPU_STARVED  # no JMX to say more: a broker late to the smallest question is short of CPU
    g = e.gauges or {}
    # its own appends markedly slower than its peers' now (its LocalTime's 99th percentile against their median: a
    # decaying histogram's median follows a new slowness only after many requests, and a peer's 99th percentile
    # holds an earlier spell's tail for minutes) while its JVM answers its metrics at its peers' pace: the disk.
    # Its answers to krm may be late too (a slow disk holds its request handlers), so they do not say CPU here.
    # Said before the phases' medians, which a slow disk sets against each other: its followers' fetches wait
    # behind its slow appends, so its Produce RemoteTime grows as a slow replication's would.
    local_p99 = g.get("produce_local_p99_ms")
    if (e.scrape_ms is not None and peers_scrape_ms
            and _markedly(None if local_p99 is None else local_p99 / 1000, [ms / 1000 for ms in peers_local_ms])):
        return SLOW_DISK
    queue, local = g.get("produce_queue_p50_ms"), g.get("produce_local_p50_ms")
    remote, flush = g.get("produce_remote_p50_ms"), g.get("log_flush_p99_ms")
    idle = g.get("request_handler_idle")
    if queue is None or local is None:
        return UNKNOWN
    # waits on its followers while its own part is no slower than its peers' (a starved leader serves its
    # followers' fetches late too, so its RemoteTime grows with its own time), and markedly longer than its peers
    # wait on theirs (a few ms against one or two is no slow replication)
    if (remote is not None and remote > 2 * (queue + local) and not _markedly(e.own_s(), peers_own_s)
            and _markedly(remote / 1000, [ms / 1000 for ms in peers_remote_ms])):
        return SLOW_REPLICATION
    if queue > local and (idle is None or idle < 0.5):
        return CPU_STARVED
    # LocalTime or log flushes dominate and its LocalTime stands out from its peers': the disk, once its JVM is known
    # to answer at its peers' pace (a starved JVM is slow in LocalTime too). A LocalTime at its peers' (a few ms)
    # says nothing, however it compares with a queue time of 0.
    if ((local >= queue or (flush is not None and flush >= local)) and e.scrape_ms is not None and peers_scrape_ms
            and _markedly(local / 1000, [ms / 1000 for ms in peers_local_ms], MILD_MIN_S)):
        return SLOW_DISK
    # late to the smallest question, with nothing in its phases pointing at its disk or its followers: short of CPU
    return CPU_STARVED if answers_late else UNKNOWN


def _pace_now(e: Evidence, peers_answer_ms: Sequence[float]) -> Evidence:
    """Its evidence without its JMX scrape's pace when the probes answered since say its JVM keeps its peers' pace:
    a JVM just out of a starved spell answers the scrape that follows late, and that scrape stays the latest for
    `jmx_interval_s`. Nor while it answers the probes nothing at all and its peers answer them: paused, cut off or
    gone (BROKER_DOWN's and its partitions' pages), whatever its last scrape took (one taken just after a pause, its
    JVM serving the backlog, or while its network was cut), a slow broker still answers them, late."""
    if e.scrape_ms is None or not peers_answer_ms:
        return e
    if e.answer_ms is None:
        return replace(e, scrape_ms=None)
    if (e.scrape_age_ms is None or e.scrape_age_ms < SCRAPE_SUPERSEDED_MS
            or _markedly(e.answer_ms / 1000, [ms / 1000 for ms in peers_answer_ms], MILD_MIN_S)):
        return e
    return replace(e, scrape_ms=None)


def judge(evidence: Mapping[int, Evidence], objective_s: float,
          hurting: Callable[[], Collection[int]] | None = None) -> list[SlowFinding]:
    """The live brokers (`evidence` holds one entry each) markedly slower than their peers now. `hurting`: the
    brokers the cluster's open critical partition pages name (asked only when a broker is slow)."""
    out = []
    asked: list[Collection[int]] = []

    def named(ask: Callable[[], Collection[int]]) -> Collection[int]:
        if not asked:
            asked.append(ask())
        return asked[0]

    for b, e in sorted(evidence.items()):
        peers = [p for q, p in evidence.items() if q != b]
        e = _pace_now(e, [p.answer_ms for p in peers if p.answer_ms is not None])  # its peers' scrapes stay the measure
        peer_client = [p.client_s for p in peers if p.client_s is not None]
        peer_own = [s for p in peers if (s := p.own_s()) is not None]
        answered = [p for p in peers if p.jmx_error is None and p.gauges is not None]
        slow_client = _markedly(e.client_s, peer_client)
        slow_own = _markedly(e.own_s(), peer_own)
        # its exporter, in the same JVM, answering markedly later than its peers': the whole JVM is slow, now
        # (no decaying histogram in it)
        slow_jvm = _markedly(None if e.scrape_ms is None else e.scrape_ms / 1000,
                             [p.scrape_ms / 1000 for p in peers if p.scrape_ms is not None])
        # the collector's probes: late to the smallest question (a paused broker answers none: BROKER_DOWN's)
        peer_answer = [p.answer_ms for p in peers if p.answer_ms is not None]
        slow_answer = _markedly(None if e.answer_ms is None else e.answer_ms / 1000, [ms / 1000 for ms in peer_answer])
        # its JVM answers nothing in time while its peers' endpoints do, yet it acknowledges writes or answers the
        # collector, late: alive, starved (a paused or dead broker answers none: BROKER_DOWN's, not a slow one)
        starved = e.jmx_timed_out and bool(answered) and e.answers(peer_answer, peer_client)
        markedly = slow_client or slow_own or slow_jvm or slow_answer or starved
        peer_mild = [ms for p in peers if (ms := p.mild_ms()) is not None]
        mild = _mildly(e, peer_mild)
        if not (markedly or mild):
            continue
        # an acks=all write to a partition it leads waits for ANSWERS_PER_WRITE of its answers at least. A milder
        # spell alone (answers tens of ms late) cannot hold a write past the objective: a write waiting that long
        # through it waits on something else (a follower cut off, as in a gray failure), so it stays a warning
        # its canary writes slow while it answers krm promptly and nothing of its own says slow (its part of a
        # Produce, its JVM, its answers): the writes wait on its followers (a cut replication link, as in a gray
        # failure), whose own pages name the fault; a warning at most
        elsewhere = (slow_client and not (slow_own or slow_jvm or slow_answer or starved)
                     and e.answer_ms is not None and not mild)
        hurt = markedly and not elsewhere and (
            _clients_wait_on(e, peers, objective_s)
            or (e.answer_ms is not None and ANSWERS_PER_WRITE * e.answer_ms / 1000 > objective_s)
            or (hurting is not None and b in named(hurting)))
        g = e.gauges or {}
        details: dict[str, Any] = {
            "client_latency_s": e.client_s, "peers_client_latency_s": _median(peer_client),
            "own_latency_s": e.own_s(), "peers_own_latency_s": _median(peer_own),
            "produce_queue_p50_ms": g.get("produce_queue_p50_ms"), "produce_local_p50_ms": g.get("produce_local_p50_ms"),
            "produce_remote_p50_ms": g.get("produce_remote_p50_ms"), "request_handler_idle": g.get("request_handler_idle"),
            "log_flush_p99_ms": g.get("log_flush_p99_ms"), "jmx_error": e.jmx_error, "jmx_scrape_ms": e.scrape_ms,
            "peers_jmx_scrape_ms": _median([p.scrape_ms for p in peers if p.scrape_ms is not None]),
            "answer_ms": e.answer_ms, "peers_answer_ms": _median(peer_answer), "answer_past_ms": e.answer_past_ms,
            "answer_steady_ms": e.answer_steady_ms,
            "peers_answer_steady_ms": _median([ms for p in peers if (ms := p.answer_steady_ms) is not None]),
            "client_failed": e.client_failed or None, "client_waiting_s": e.client_waiting_s,
            "latency_objective_s": objective_s}
        cause = cause_of(e, [p.scrape_ms for p in peers if p.scrape_ms is not None], peer_own, peer_answer,
                         [ms for p in peers if (ms := (p.gauges or {}).get("produce_local_p50_ms")) is not None],
                         [ms for p in peers if (ms := (p.gauges or {}).get("produce_remote_p50_ms")) is not None],
                         peer_mild)
        # how late it answers krm says it at once: the short median when markedly, or the steady one (many answers)
        # when it alone says a milder spell; anything else wants a second round (pipelines/slow_view.py)
        settled = slow_answer or (mild and not markedly and e.answer_steady_ms is not None)
        out.append(SlowFinding(b, cause, RULE.severity_of(cause, [CLIENTS_HURT] if hurt else []),
                               {k: v for k, v in details.items() if v is not None}, settled=settled))
    return out


SERIES = (Series("krm_broker_slow", "1 while the broker is registered and answers, but markedly slower than its peers "
                 "(BROKER_SLOW): cause cpu_starved, slow_disk, slow_replication or unknown; severity as the incident's.",
                 ("broker", "cause", "severity")),)

_RUNBOOK = ("The broker answers, late, so every partition it leads or follows waits on it (acks=all producers most). "
            "cause=cpu_starved: its JVM gets too little CPU (a noisy neighbour, a container's CPU limit, long GC): "
            "check the host's steal and throttling, the container's quota, the GC log. cause=slow_disk: its own "
            "LocalTime or log flushes dominate: check the disk's latency and saturation. cause=slow_replication: its "
            "produces wait on followers (RemoteTime). Moving its leaderships away relieves clients at once "
            "(`kafka-leader-election` after lowering its preference, or stopping it cleanly with `krm check shutdown "
            "--broker ID --wait 600` first). `krm incidents` groups the partitions it holds up under it.")


def _cause(severity: str) -> str:
    """An annotation template: the kind krm_broker_slow names for the alert's broker now."""
    return (f'{{{{ with printf "krm_broker_slow{{cluster=%q,broker=%q,severity=\\"{severity}\\"}}" $labels.cluster '
            f'$labels.broker | query }}}}{{{{ . | first | label "cause" }}}}{{{{ end }}}}')


ALERTS = (
    Alert("KafkaBrokerSlow", 'max by (cluster, broker) (krm_broker_slow{severity="critical"}) == 1', "critical",
          summary=("{{ $labels.cluster }}: broker {{ $labels.broker }} is slow (" + _cause("critical") + "): clients "
                   "wait past the latency objective"),
          runbook=_RUNBOOK,
          links=(("incident", incident_info(TYPE, "url", by=("broker",))), ("cause", _cause("critical")),
                 ("broker_page", console(BROKER_PAGE))),
          why=("Clients are hurt now: the canary's acks=all write to a partition the broker leads waited past the "
               "cluster's latency_objective_s. One page names the broker and the kind: the alert is the broker's, the "
               "kind its annotation, so evidence that reads another kind as the spell goes on pages nobody again.")),
    Alert("KafkaBrokerSlowWithinObjective", 'max by (cluster, broker) (krm_broker_slow{severity="warning"}) == 1',
          "warning", wait="1m",
          summary=("{{ $labels.cluster }}: broker {{ $labels.broker }} is markedly slower than its peers ("
                   + _cause("warning") + ")"),
          runbook=_RUNBOOK,
          links=(("incident", incident_info(TYPE, "url", by=("broker",))), ("cause", _cause("warning")),
                 ("broker_page", console(BROKER_PAGE))),
          why="Slower than its peers while clients stay within the objective: worth a look, not a page."),
)

RULE = Rule(TYPE, {CPU_STARVED: "warning", SLOW_DISK: "warning", SLOW_REPLICATION: "warning", UNKNOWN: "warning"},
            "driver", "a registered broker that answers, markedly slower than its peers: the kind read from its evidence",
            details=SlowDetails,
            escalations=(Escalation((CPU_STARVED, SLOW_DISK, SLOW_REPLICATION, UNKNOWN), CLIENTS_HURT, "critical",
                                    "the canary waited past the cluster's latency_objective_s on a partition it leads "
                                    "(or got no acknowledgement), or three of its answers to krm, what such a write "
                                    "needs, pass it"),),
            series=SERIES, alerts=ALERTS, routine=(
            "A rolling restart's broker is down or catching up, not slow; a reassignment's copying can slow a broker's "
            "disk within the objective: a warning (its alert waits a minute). It pages only while clients wait past "
            "the latency objective."))
