"""collectors/reachability.py: when a silent broker is probed, and what the verdict is."""

import time

import pytest

from collectors import reachability
from collectors.offsets import OffsetsRound
from collectors.reachability import Reachability

pytestmark = pytest.mark.unit

KNOWN = {1: {"host": "127.0.0.1", "port": 1}, 2: {"host": "127.0.0.1", "port": 2}}


def _round(asked, answered, sent_at):
    return OffsetsRound(asked=set(asked), answered=set(answered), sent_at=sent_at)


def test_a_broker_silent_long_enough_is_judged_without_a_probe(monkeypatch):
    """The refusal probe waits up to its timeout for a silently dropped connection; a broker whose
    silence already reached unreachable_after_s is unreachable whatever it would say, so only brokers
    not yet judged are probed (the verdict comes a probe's timeout sooner)."""
    probed = []
    monkeypatch.setattr(reachability, "refusing", lambda addresses: probed.append(set(addresses)) or set())
    r = Reachability(unreachable_after_s=4.0)
    r.note_live({1, 2})
    now = time.monotonic()
    assert r.unreachable(_round({1, 2}, set(), now - 5.0), KNOWN) == {1, 2}  # both silent 5 s: judged
    assert probed == []
    assert r.unreachable(_round({1, 2}, {1}, now), KNOWN) == {2}  # 1 answered; 2 still silent since -5 s
    assert probed == []
    r2 = Reachability(unreachable_after_s=4.0)
    r2.note_live({1, 2})
    assert r2.unreachable(_round({1, 2}, set(), time.monotonic() - 1.0), KNOWN) == set()  # 1 s: not yet
    assert probed == [{1, 2}]


def test_a_refusal_is_judged_at_once_and_a_silence_only_after_unreachable_after_s():
    """Real sockets: a port nothing listens on refuses; a broker live for long is unreachable on its
    first refused poll, while the same broker's silence (no address to probe) counts only from
    unreachable_after_s on."""
    import socket

    with socket.socket() as s:  # a free port, closed again: nothing listens there
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    r = Reachability(unreachable_after_s=4.0)
    r.note_live({1})  # krm's first view: live for long
    assert r.unreachable(_round({1}, set(), time.monotonic()), {1: {"host": "127.0.0.1", "port": port}}) == {1}
    silent = Reachability(unreachable_after_s=4.0)
    silent.note_live({1})
    assert silent.unreachable(_round({1}, set(), time.monotonic() - 3.5), {}) == set()  # silent 3.5 s
    time.sleep(0.6)
    assert silent.unreachable(_round({1}, set(), time.monotonic()), {}) == {1}  # still silent: 4.1 s
    assert silent.unreachable(_round({1}, {1}, time.monotonic()), {}) == set()  # it answered


class _Client:
    """kafka-python's client as Probes uses it: which brokers are connected or refused, and each
    probe's future, completed by the test."""

    def __init__(self, ready, refused=()):
        from kafka.future import Future

        self._future = Future
        self.ready_ = set(ready)
        self.refused = set(refused)
        self.sent: dict[int, list] = {}

    def ready(self, node, metadata_priority=True):
        return node in self.ready_

    def connection_failed(self, node):
        return node in self.refused

    def send(self, node, request, wakeup=True, request_timeout_ms=None):
        f = self._future()
        self.sent.setdefault(node, []).append(f)
        return f

    def poll(self, timeout_ms=None):
        return []


def test_probes_say_since_when_a_broker_has_answered_nothing():
    """A broker that answers each probe is never silent; one that stops answering is silent from the
    first probe it left unanswered, through the client's timeout of that probe and a redial that
    cannot connect, until it answers again; a refused connection is not silence."""
    from kafka.errors import Cancelled, KafkaConnectionError, RequestTimedOutError

    client = _Client(ready={1, 2, 3})
    probes = reachability.Probes(timeout_ms=4000)
    probes.tick(client, {1, 2, 3}, request="brokers-only")
    t_first = time.monotonic()
    assert [len(client.sent[b]) for b in (1, 2, 3)] == [1, 1, 1]
    client.sent[1][0].success("answer")
    client.sent[3][0].failure(KafkaConnectionError("refused"))
    client.ready_.discard(3)
    client.refused.add(3)
    time.sleep(0.06)
    assert probes.tick(client, {1, 2, 3}, request="brokers-only") == {1}, "answered since the last tick"
    assert len(client.sent[1]) == 2, "answered: asked again"
    assert len(client.sent[2]) == 1, "one probe outstanding at a time"
    silent = probes.silent(client, 0.05)
    assert set(silent) == {2} and silent[2] <= t_first, silent

    client.sent[2][0].failure(RequestTimedOutError("no answer in time"))  # the client gives up and closes
    client.ready_.discard(2)  # the redial's SYN dropped
    probes.tick(client, {1, 2, 3}, request="brokers-only")
    client.ready_.add(2)  # connected again, and the next probe's connection closed by the poll's redial
    probes.tick(client, {1, 2, 3}, request="brokers-only")
    client.sent[2][-1].failure(Cancelled("closed by the client"))
    client.ready_.discard(2)
    probes.tick(client, {1, 2, 3}, request="brokers-only")
    assert set(probes.silent(client, 0.05)) == {2} and probes.silent(client, 0.05)[2] <= t_first
    assert probes.silent(client, 10.0) == {}, "only silences at least that old"

    client.ready_.add(2)  # the path is back
    probes.tick(client, {1, 2, 3}, request="brokers-only")
    for b in (1, 2):
        client.sent[b][-1].success("answer")
    assert probes.silent(client, 0.0) == {}, "answered again: no silence left"
    assert probes.tick(client, {1, 2, 3}, request="brokers-only") == set(), "(seen by silent() already)"
    client.sent[2][-1].success("answer")
    assert probes.tick(client, {1, 2, 3}, request="brokers-only") == {2}
    for b in (1, 2):
        client.sent[b][-1].success("answer")

    client.ready_.discard(2)
    probes.tick(client, {1, 2}, request="brokers-only")  # 2 dialling again: silent from now
    client.sent[1][-1].success("answer")
    assert set(probes.silent(client, 0.0)) == {2}
    probes.tick(client, {1}, request="brokers-only")  # 2 no longer live: no longer probed nor silent
    client.sent[1][-1].success("answer")
    assert probes.silent(client, 0.0) == {}


def test_a_broker_probed_on_time_is_silent_since_its_last_answered_probe_went_out(monkeypatch):
    """Kafka counts a broker's session from its last heartbeat: a broker that answered the previous probe
    and not this one is silent since that answered probe went out, never more than one probe interval
    before the probe it left unanswered (a contact older than that: the poll's own requests came in
    between, and are not counted here)."""
    clock = [100.0]
    monkeypatch.setattr(reachability.time, "monotonic", lambda: clock[0])
    client = _Client(ready={1, 2})
    probes = reachability.Probes(timeout_ms=4000, every_s=0.25)
    probes.tick(client, {1, 2}, request="brokers-only")  # both asked at 100.0
    for b in (1, 2):
        client.sent[b][0].success("answer")
    clock[0] = 100.25
    assert probes.tick(client, {1, 2}, request="brokers-only") == {1, 2}  # asked again at 100.25
    clock[0] = 100.5
    client.sent[2][1].success("answer")
    assert probes.tick(client, {1, 2}, request="brokers-only") == {2}  # 1 is silent; 2 asked at 100.5
    clock[0] = 101.0  # the poll ran: no probe for half a second
    client.sent[2][2].success("answer")
    probes.tick(client, {1, 2}, request="brokers-only")  # 2 asked again at 101.0, and leaves it unanswered
    clock[0] = 101.5
    assert probes.silent(client, 0.05) == {1: 100.0, 2: 100.75}, "last contact; at most one interval back"
    from kafka.errors import KafkaConnectionError, KafkaTimeoutError, UnknownError

    clock[0] = 101.7  # 2 answers; then the loop's own check to it times out (no probe goes out meanwhile)
    client.sent[2][3].success("answer")
    probes.tick(client, {2}, request="brokers-only")
    probes.note_unanswered(2, 101.8, UnknownError("an error answer: it is there"))
    probes.note_unanswered(2, 101.8, KafkaConnectionError("refused: judged by the refusal probe"))
    clock[0] = 102.3
    client.sent[2][4].success("answer")  # the probe sent before the checks, answered only now
    assert probes.silent(client, 0.05) == {}
    probes.note_unanswered(2, 101.8, KafkaTimeoutError("broker 2 did not answer within 500 ms"))
    assert probes.silent(client, 0.05) == {2: 101.7}, "from the check; its last contact, the probe at 101.7"
    clock[0] = 102.5
    probes.tick(client, {2}, request="brokers-only")
    client.sent[2][5].success("answer")
    clock[0] = 102.6
    assert probes.silent(client, 0.05) == {}, "a probe sent after the check answered: no silence left"
    clock[0] = 102.7  # the answer to a probe sent before an unanswered check does not end its silence
    probes.tick(client, {2}, request="brokers-only")
    probes.note_unanswered(2, 102.8, KafkaTimeoutError("broker 2 did not answer within 500 ms"))
    client.sent[2][6].success("answer")
    clock[0] = 103.3
    assert probes.silent(client, 0.05) == {2: 102.7}
    off = reachability.Probes(timeout_ms=4000)  # no cadence given: silence from the unanswered probe itself
    off.tick(client, {1}, request="brokers-only")
    client.sent[1][-1].success("answer")
    clock[0] = 103.5
    off.tick(client, {1}, request="brokers-only")
    clock[0] = 103.75
    assert off.silent(client, 0.05) == {1: 103.5}


def test_a_verdict_due_is_offered_to_the_round_until_it_is_out(monkeypatch):
    """judged_at offers the offsets round each silent broker's moment while no verdict has called it
    unreachable (so a moment falling between two rounds ends the next round at once); once called
    unreachable, the round waits for it as for any broker (it may answer again)."""
    monkeypatch.setattr(reachability, "refusing", lambda addresses: set())
    r = Reachability(unreachable_after_s=0.5)
    r.note_live({1, 2})
    now = time.monotonic()
    r.note_silent({2: now - 0.3})
    assert r.unreachable(_round({1, 2}, {1}, now), KNOWN) == set()
    assert set(r.judged_at()) == {2} and abs(r.judged_at()[2] - (now + 0.2)) < 1e-6
    time.sleep(0.25)
    r.note_silent({2: now - 0.3})
    assert r.unreachable(_round({1, 2}, {1}, time.monotonic()), KNOWN) == {2}
    assert r.judged_at() == {}, "called unreachable: no moment left to end a round at"
    assert r.unreachable(_round({1, 2}, {1, 2}, time.monotonic()), KNOWN) == set()  # it answered
    r.note_silent({2: time.monotonic()})
    assert set(r.judged_at()) == {2}, "silent again: a new moment"


def test_a_broker_that_answers_late_is_slow_not_unreachable(monkeypatch):
    """A JVM starved of CPU leaves the offsets round unanswered (its timeout passes) yet answers the answer-time
    prober's requests, seconds late: its silence counts from when it was last heard from, so it is never
    unreachable, and the prober says how late it answers (the median round trip of the last few seconds). A
    paused broker answers nothing: its silence grows from its last contact, and it is unreachable as before."""
    from collectors.answer_times import RoundTrips

    monkeypatch.setattr(reachability, "refusing", lambda addresses: set())
    t0 = time.monotonic() - 10.0
    trips, reach = RoundTrips(), Reachability(unreachable_after_s=4.0)
    reach.note_live({1, 2, 3})
    # 10 s: 1 answers at once, 2 after 1.5 s (one request in flight at a time), 3 is paused
    answers = sorted([(t0 + i * 0.25 + 0.001, 1, t0 + i * 0.25) for i in range(40)]
                     + [(t0 + i * 1.5 + 1.5, 2, t0 + i * 1.5) for i in range(6)])
    for poll in range(1, 6):  # a poll every 2 s: 2 and 3 leave its offsets requests unanswered
        now = t0 + poll * 2.0
        while answers and answers[0][0] <= now:
            done, b, sent = answers.pop(0)
            trips.answered(b, sent, done)
        monkeypatch.setattr(reachability.time, "monotonic", lambda now=now: now)
        verdict = reach.unreachable(_round({1, 2, 3}, {1}, now - 1.0), KNOWN, trips.contact())
        assert 2 not in verdict, f"answers late at {now - t0:.2f} s: not unreachable"
    answer_s = trips.answer_s(t0 + 10.0)
    assert answer_s[2] == pytest.approx(1.5) and answer_s[1] == pytest.approx(0.001)
    blind = Reachability(unreachable_after_s=4.0)  # the poll's own requests alone: as before this prober
    blind.note_live({1, 2, 3})
    for poll in range(1, 6):
        now = t0 + poll * 2.0
        monkeypatch.setattr(reachability.time, "monotonic", lambda now=now: now)
        verdict = blind.unreachable(_round({1, 2, 3}, {1}, now - 1.0), KNOWN)
    assert verdict == {2, 3}, "without its answers, the starved broker's silence is as long as a paused one's"
    assert 3 not in answer_s, "answered nothing"
    assert 3 in reach.declared, "silent since the first poll: unreachable"
    assert trips.answer_s(t0 + 45.0) == {}, "answers older than the window say nothing"


def test_a_short_stall_is_one_late_answer_of_a_few_a_starved_jvm_all_of_them():
    from collectors.answer_times import RoundTrips

    trips = RoundTrips()
    for i, took in enumerate([0.001, 0.001, 0.3, 0.001, 0.001]):  # a 300 ms GC pause delays one answer
        trips.answered(1, 10.0 + i * 0.25, 10.0 + i * 0.25 + took)
    for i in range(4):  # 1.4 s, answer after answer
        trips.answered(2, 10.0 + i * 1.4, 10.0 + (i + 1) * 1.4)
    answer_s = trips.answer_s(16.0)
    assert answer_s[1] == pytest.approx(0.001) and answer_s[2] == pytest.approx(1.4)
    assert trips.contact() == {1: pytest.approx(11.001), 2: pytest.approx(15.6)}, "last heard from"
    trips.forget({1})
    assert set(trips.answer_s(16.0)) == {1}


def test_the_request_waiting_counts_as_long_as_it_has_waited():
    """A starved broker's first late answer, with the next request waiting as long, already makes its answer time
    late; a paused broker's last answers were quick, and its one request waiting is outvoted, until it has waited long
    enough to say the broker stopped answering: then no answer time at all."""
    from collectors.answer_times import RoundTrips

    trips = RoundTrips()
    for b in (1, 2):
        trips.answered(b, 10.0, 10.001)
        trips.sent(b, 10.25)
    trips.answered(1, 10.25, 11.75)  # 1 starved: 1.5 s for that one
    trips.sent(1, 11.75)
    assert trips.answer_s(13.5)[1] == pytest.approx(1.5), "[0.001, 1.5, 1.75 waiting]"
    assert trips.answer_s(10.5)[2] == pytest.approx(0.001), "2 paused: [0.001, 0.25 waiting]: the quick one first"
    assert 2 not in trips.answer_s(13.5), "[0.001, 3.25 waiting]: stopped answering"
    trips.given_up(2, 10.25)
    assert trips.answer_s(13.5)[2] == pytest.approx(0.001)


def test_a_broker_is_late_from_its_request_waiting_or_its_newest_answer():
    """`late`: what hurries the canary's next round (collectors/daemon.py): a request waiting SLOW_MIN_S, or a newest
    answer that took that long; a quicker answer after it ends the spell."""
    from collectors.answer_times import RoundTrips

    trips = RoundTrips()
    for b in (1, 2, 3):
        trips.answered(b, 10.0, 10.001)
        trips.sent(b, 10.25)
    assert trips.late(10.4) == set()
    assert trips.late(10.46) == {1, 2, 3}, "each request has waited 0.21 s"
    trips.answered(1, 10.25, 10.252)
    trips.answered(2, 10.25, 10.55)  # 0.3 s: late, answered
    trips.given_up(3, 10.25)
    assert trips.late(10.6) == {2}
    trips.answered(2, 10.8, 10.802)
    assert trips.late(10.9) == set()


def test_a_hurried_round_runs_at_once_and_the_cadence_goes_on_from_it():
    """The canary's round loop (Collector._fixed_rate): `hurried` set while it waits runs the next round now (at most
    one a HURRIED_GAP_S); a round's own asking before it ended is already measured by that round."""
    import threading
    import time
    from types import SimpleNamespace

    from collectors import daemon

    collector = daemon.Collector.__new__(daemon.Collector)
    collector._stop = threading.Event()
    collector.publisher = SimpleNamespace(publish=lambda records: None)
    collector.rounds = 0
    hurried = threading.Event()
    starts: list[float] = []

    def round_():
        starts.append(time.monotonic())
        if len(starts) == 1:
            hurried.set()  # asked during the first round: that round measures it
        return []

    t = threading.Thread(target=collector._fixed_rate, args=(30.0, round_, "rounds", "test", hurried), daemon=True)
    t.start()
    time.sleep(1.5)  # past HURRIED_GAP_S
    assert len(starts) == 1, "the ask during a round does not start another"
    hurried.set()
    deadline = time.monotonic() + 5
    while len(starts) < 2 and time.monotonic() < deadline:
        time.sleep(0.05)
    collector._stop.set()
    hurried.set()
    t.join(timeout=5)
    assert len(starts) == 2 and starts[1] - starts[0] >= daemon.HURRIED_GAP_S - 0.01
    assert starts[1] - starts[0] < 5, "not the 30 s cadence"


def test_the_steady_answer_time_is_a_high_quantile_of_the_last_seconds():
    """`steady_s`: the STEADY_QUANTILE of the answers of the last STEADY_S and the request in flight, once STEADY_MIN
    answered in that window: a JVM held to a CPU quota answers most probes at once and a tenth or more late (its median
    says nothing), one late answer among quick ones does not make a spell, and too few answers (a broker just seen, or
    paused) say nothing."""
    from collectors.answer_times import STEADY_MIN, STEADY_QUANTILE, STEADY_S, RoundTrips

    trips = RoundTrips()
    t = 100.0
    for i in range(STEADY_MIN - 1):
        trips.answered(1, t + i * 0.25, t + i * 0.25 + 0.002)
    assert trips.steady_s(t + 2.0) == {}
    trips.answered(1, t + 2.0, t + 2.002)
    assert trips.steady_s(t + 2.1)[1] == pytest.approx(0.002)
    # throttled: 32 answers, a quarter of them late by tens of ms
    s = t + 20.0
    for i in range(32):
        took = 0.05 if i % 4 == 0 else 0.002
        trips.answered(1, s, s + took)
        s += 0.25
    assert trips.steady_s(s)[1] == pytest.approx(0.05), "a quarter late: past the quantile's tenth"
    # one late answer in the window of quick ones
    s += STEADY_S
    for i in range(32):
        trips.answered(1, s, s + (0.05 if i == 5 else 0.002))
        s += 0.25
    assert trips.steady_s(s)[1] == pytest.approx(0.002), "one late of 32 is below the quantile"
    assert 1 - 1 / 32 > STEADY_QUANTILE
    assert trips.steady_s(s + STEADY_S + 1) == {}


def test_a_stall_in_the_window_says_no_steady_answer_time():
    """A broker paused a few seconds answers the request that waited over the pause and then its backlog late (a 55 ms
    answer just after a 7.8 s SIGSTOP): neither is its pace, so nothing steady is said while that stall is in the
    window; a starved broker's answers all take seconds, none of them a stall against the others."""
    from collectors.answer_times import RoundTrips

    trips = RoundTrips()
    s = 10.0
    for _ in range(20):
        trips.answered(1, s, s + 0.002)
        s += 0.25
    trips.answered(1, s, s + 7.8)  # waited over the pause
    s += 7.8
    for took in (0.055, 0.03, 0.002, 0.002, 0.002, 0.002, 0.002, 0.002, 0.002):
        trips.answered(1, s, s + took)
        s += 0.25
    assert 1 not in trips.steady_s(s), "the pause's answer is in the window"
    for _ in range(40):
        trips.answered(1, s, s + 0.002)
        s += 0.25
    assert trips.steady_s(s)[1] == pytest.approx(0.002), "the stall left the window"
    for _ in range(30):  # starved: every answer late alike, one at a time
        trips.answered(2, s, s + 0.6)
        s += 0.6
    trips.sent(2, s)
    assert trips.steady_s(s + 1.0)[2] == pytest.approx(0.6), "late alike: no stall"


def test_a_broker_that_stopped_answering_has_no_answer_time():
    """A paused broker's last answers say nothing of now once its request in flight has waited STALLED_MIN_S and
    STALLED_FACTOR times them, even when one of them was late (57 ms before a SIGSTOP once read as a broker answering
    markedly late, so slow, not stopped); a starved broker's wait is as long as its answers and it keeps its time."""
    from collectors.answer_times import STALLED_MIN_S, RoundTrips

    trips = RoundTrips()
    trips.answered(1, 10.0, 10.002)
    trips.answered(1, 10.25, 10.307)  # 57 ms
    trips.sent(1, 10.6)
    assert trips.answer_s(10.9)[1] == pytest.approx(0.057), "a request waiting 0.3 s is outvoted"
    assert 1 not in trips.answer_s(10.6 + STALLED_MIN_S), "waiting 1 s, 17 times its answers: stopped"
    trips.answered(2, 10.0, 13.0)
    trips.answered(2, 13.25, 16.0)
    trips.sent(2, 16.25)
    assert trips.answer_s(20.0)[2] == pytest.approx(3.0), "starved: its request waits as long as its answers take"
