"""pipelines/slow_view.py: a cluster's round gathers the live brokers' evidence, and a broker is slow only when
two rounds in a row say so."""

import pytest

from pipelines.detectors.canary import CanarySample
from pipelines.jmx_view import JmxSample
from pipelines.incidents import Incident
from pipelines.slow_view import SlowView, came_back

pytestmark = pytest.mark.unit


def _jmx(at, slow_ms=1000.0):
    return {("c", b): JmxSample("c", b, 1, at, None, {}, slow_ms if b == 2 else 30.0) for b in (1, 2, 3)}


def test_two_rounds_in_a_row_and_only_live_brokers():
    view = SlowView({"c": 2.0})
    canary = {("c", 0): CanarySample("c", 1, 0, True, 20.0, None, 1_000, leader=1)}
    polls, found = view.judge(["c"], {"c": [1, 2, 3]}, _jmx(1_000), canary)
    assert [p.scope for p in polls] == ["slow"] and found == []  # first sight: a suspect only
    polls, found = view.judge(["c"], {"c": [1, 2, 3]}, _jmx(2_000), canary)
    assert [(f.broker, f.cause, f.severity) for f in found] == [(2, "cpu_starved", "warning")]
    assert polls[0].poll_id == 2 and polls[0].observed_at_ms == 2_000
    _, found = view.judge(["c"], {"c": [1, 3]}, _jmx(3_000), canary)  # broker 2 deregistered: BROKER_DOWN's
    assert found == []
    _, found = view.judge(["c"], {"c": [1, 2, 3]}, _jmx(4_000, slow_ms=35.0), canary)
    assert found == []


def test_a_broker_back_from_a_stop_warms_up_unjudged():
    """A rolling restart's broker answers late while its JVM compiles and its logs load: not a slow broker."""
    view = SlowView({"c": 2.0})
    back = {("c", 2): 500}
    for at in (1_000, 2_000, 30_000):
        _, found = view.judge(["c"], {"c": [1, 2, 3]}, _jmx(at), {}, back)
        assert found == [], at
    _, found = view.judge(["c"], {"c": [1, 2, 3]}, _jmx(61_000), {}, back)
    assert [f.broker for f in found] == [2]  # still slow a minute after it came back


def _down(broker, *causes):
    return Incident(incident_id=f"d{broker}", cluster="c", scope="cluster", type="BROKER_DOWN", severity="warning",
                    topic=None, partition=None, broker=broker, cause=causes[-1],
                    details={"root_cause": causes[0], "cause_history": list(causes)}, opened_at_ms=100,
                    last_seen_at_ms=400, resolved_at_ms=500, status="resolved")


def test_only_a_broker_that_left_the_cluster_warms_up():
    """A starved broker answers too late for a while (BROKER_DOWN `unreachable` alone) and stays registered: no
    restart, so a slow spell right after it is judged at once; a stopped or fenced one warms up."""
    assert came_back([_down(1, "unreachable"), _down(2, "unreachable", "not_registered"), _down(3, "stopped")]) == {
        ("c", 2): 500, ("c", 3): 500}


def test_the_polls_answer_times_and_the_canary_s_failures_are_evidence():
    """A broker at 2 % of a core: its exporter times out, the canary's write to its partition fails, and only the
    collector's probes say it is alive: the polls' answer times, judged two in a row, make it slow and critical.
    Answers older than FRESH_MS say nothing."""
    view = SlowView({"c": 2.0})
    timed_out = {("c", b): JmxSample("c", b, 1, 1_000, "URLError: timed out" if b == 2 else None, {}, 30.0)
                 for b in (1, 2, 3)}
    canary = {("c", 1): CanarySample("c", 2, 1, False, None, None, 1_000, leader=2),
              ("c", 0): CanarySample("c", 1, 0, True, 20.0, None, 1_000, leader=1)}
    for at in (2_000, 4_000):
        _, found = view.judge(["c"], {"c": [1, 2, 3]}, timed_out, canary, answers={"c": (at, {1: 0.3, 2: 1500.0, 3: 0.4})})
    assert [(f.broker, f.cause, f.severity) for f in found] == [(2, "cpu_starved", "critical")]
    assert found[0].details["answer_ms"] == 1500.0 and found[0].details["client_failed"] is True
    view = SlowView({"c": 2.0})
    for at in (40_000, 42_000):  # the answers are from a poll 39 s before: nothing known of them now
        _, found = view.judge(["c"], {"c": [1, 2, 3]}, {}, {("c", 0): CanarySample("c", 1, 0, True, 20.0, None, at)},
                              answers={"c": (1_000, {1: 0.3, 2: 1500.0, 3: 0.4})})
    assert found == []


def test_a_milder_spell_against_its_own_past():
    """The 10 % cap: a broker answering krm in 45 ms against its peers' 2-3 ms is a warning two rounds in a row once
    its own past is known, and one that always answered that late (never faster in its past) is never said."""
    view = SlowView({"c": 2.0})
    usual = {1: 2.0, 2: 2.5, 3: 3.0}
    for at in range(1_000, 60_000, 2_000):  # a minute of its usual answers
        _, found = view.judge(["c"], {"c": [1, 2, 3]}, {}, {}, answers={"c": (at, usual)})
        assert found == []
    said = []
    for at in range(60_000, 70_000, 2_000):
        _, found = view.judge(["c"], {"c": [1, 2, 3]}, {}, {}, answers={"c": (at, usual | {2: 45.0})})
        said.append([(f.broker, f.cause, f.severity) for f in found])
    assert said[0] == [] and said[1:] == [[(2, "cpu_starved", "warning")]] * 4
    assert 2.4 < found[0].details["answer_past_ms"] < 3.0  # a spell of seconds barely moves its own past

    view = SlowView({"c": 2.0})
    for at in range(1_000, 120_000, 2_000):
        _, found = view.judge(["c"], {"c": [1, 2, 3]}, {}, {}, answers={"c": (at, usual | {2: 45.0})})
        assert found == [], at


def test_a_milder_spell_from_the_steady_answers_is_said_by_one_poll():
    """A collector that publishes the steady answer time (a high quantile over the last few seconds, many answers) says a
    milder spell in one poll: held canary and JMX rounds (collectors/routine_hold.py) leave it nothing to wait for.
    The short median alone, quick at that poll, does not hide it; the steady time at its usual says nothing."""
    view = SlowView({"c": 2.0})
    usual = {1: 2.0, 2: 2.5, 3: 3.0}
    for at in range(1_000, 60_000, 2_000):
        _, found = view.judge(["c"], {"c": [1, 2, 3]}, {}, {}, answers={"c": (at, usual)}, steady={"c": usual})
        assert found == []
    _, found = view.judge(["c"], {"c": [1, 2, 3]}, {}, {}, answers={"c": (60_000, usual)},
                          steady={"c": usual | {2: 45.0}})
    assert [(f.broker, f.cause, f.severity) for f in found] == [(2, "cpu_starved", "warning")]
    assert found[0].details["answer_steady_ms"] == 45.0 and found[0].details["peers_answer_steady_ms"] == 2.5
    _, found = view.judge(["c"], {"c": [1, 2, 3]}, {}, {}, answers={"c": (62_000, usual | {2: 45.0})},
                          steady={"c": usual})
    assert found == [], "the steady time, not one quick or late pair of answers, says a milder spell"


def test_a_canary_write_waiting_past_the_objective_says_clients_are_hurt():
    """The round's early record: a write to the slow broker's partition unanswered past the objective, while its peers'
    writes went through, makes its BROKER_SLOW critical at once; the same wait on a broker nothing else shows slow (a
    dead leader) says nothing."""
    view = SlowView({"c": 2.0})
    answers = {"c": (1_000, {1: 1.5, 2: 420.0, 3: 1.8})}
    done = {("c", p): CanarySample("c", b, p, True, 20.0, None, 900, leader=b) for p, b in ((0, 1), (2, 3))}
    waiting = {("c", 1): CanarySample("c", 2, 1, False, None, None, 1_000, leader=2, waiting_ms=2050.0)}
    _, found = view.judge(["c"], {"c": [1, 2, 3]}, {}, done, answers=answers)
    assert [(f.broker, f.severity) for f in found] == [(2, "warning")]  # three 0.42 s answers: within the objective
    _, found = view.judge(["c"], {"c": [1, 2, 3]}, {}, done, answers=answers, waiting=waiting)
    assert [(f.broker, f.severity) for f in found] == [(2, "critical")]
    assert found[0].details["client_waiting_s"] == 2.05

    dead = {("c", 2): CanarySample("c", 3, 2, False, None, None, 1_000, leader=3, waiting_ms=2500.0)}
    _, found = SlowView({"c": 2.0}).judge(["c"], {"c": [1, 2, 3]}, {}, done,
                                          answers={"c": (1_000, {1: 1.5, 2: 1.6, 3: 1.8})}, waiting=dead)
    assert found == []


def test_a_write_held_by_a_slow_follower_is_the_follower_s():
    """An acks=all write waits on every ISR member: one led by a healthy broker (here a little late itself, just
    after its own spell) and held by a starved follower is counted against the follower, waiting or done; only the
    follower turns critical. A leader answering as late as its followers keeps its writes."""
    from pipelines.slow_view import waited_on

    answers = {1: 420.0, 2: 1.6, 3: 1.8, 4: 35.0}
    held = CanarySample("c", 4, 3, False, None, None, 1_000, leader=4, isr=(1, 2, 4), waiting_ms=2100.0)
    assert waited_on(held, answers).leader == 1
    assert waited_on(held, {**answers, 4: 400.0}).leader == 4, "the leader as late: its own"
    assert waited_on(held, {2: 1.6}).leader == 4, "nothing known of the leader: its own"
    assert waited_on(CanarySample("c", 4, 3, True, 30.0, None, 1_000, leader=4), answers).leader == 4, "no ISR known"

    view = SlowView({"c": 2.0})
    at = 1_000
    answers_at = {"c": (at, answers)}
    past = {"c": (at - 600_000, {1: 2.0, 2: 1.6, 3: 1.8, 4: 2.0})}
    view.judge(["c"], {"c": [1, 2, 3, 4]}, {}, {}, answers=past)  # each broker's usual
    for _ in range(2):  # broker 4's milder spell is said from its second round
        _, found = view.judge(["c"], {"c": [1, 2, 3, 4]}, {}, {}, answers=answers_at, waiting={("c", 3): held})
    assert [(f.broker, f.severity) for f in found] == [(1, "critical"), (4, "warning")], found

