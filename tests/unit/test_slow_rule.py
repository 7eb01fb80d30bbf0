"""BROKER_SLOW (pipelines/detectors/slow.py) as a numbered table: each case's brokers, what the rule finds
(broker, cause, severity), and why. The CPU-cap cases follow what benchmarks/BENCHMARKS.md ("Slow brokers")
measured on a real cluster."""

from dataclasses import replace

import pytest

from pipelines.detectors.slow import CPU_STARVED, SLOW_DISK, SLOW_REPLICATION, UNKNOWN, Evidence, judge

pytestmark = pytest.mark.unit

TIMEOUT = "URLError: <urlopen error timed out>"


def g(queue, local, remote=1.0, idle=0.9, flush=None):
    out = {"produce_queue_p50_ms": queue, "produce_local_p50_ms": local, "produce_remote_p50_ms": remote,
           "request_handler_idle": idle}
    return out | ({"log_flush_p99_ms": flush} if flush is not None else {})


HEALTHY = Evidence(0.02, None, g(1, 2), scrape_ms=40.0)
# measured (impact oracle, KRaft): broker 1 just out of a 2 % cap, broker 2's disk slowed; each scrape 5.5 s older
# than the probes' answers
CASE_37 = {1: Evidence(0.0055, None, g(0, 1, remote=4), scrape_ms=1253.8, answer_ms=1.1, client_waiting_s=2.0001,
                       scrape_age_ms=5500.0),
           2: Evidence(None, None, g(0, 1, remote=3), scrape_ms=42.0, answer_ms=2.0, scrape_age_ms=5500.0),
           3: Evidence(0.0063, None, g(0, 1, remote=3), scrape_ms=26.8, answer_ms=1.1, scrape_age_ms=5500.0),
           4: Evidence(0.0072, None, g(0, 1, remote=4), scrape_ms=71.5, answer_ms=1.7, scrape_age_ms=5500.0)}
CASES = [
    (1, {1: HEALTHY, 2: HEALTHY, 3: HEALTHY}, [], "every broker alike: nothing is slow"),
    (2, {1: HEALTHY, 2: Evidence(1.5), 3: HEALTHY}, [(2, UNKNOWN, "warning")],
     "its canary writes 75x its peers' but within the 2 s objective; no JMX: the kind unknown"),
    (3, {1: Evidence(0.2, None, g(10, 30, remote=1300)), 2: Evidence(2.5, TIMEOUT), 3: Evidence(0.2, None, g(8, 25, 1100))},
     [(2, CPU_STARVED, "critical")],
     "the 2 % cap: its JVM answers no scrape, its clients wait past the objective; the leaders waiting on it as a "
     "follower (RemoteTime) are not blamed"),
    (4, {1: HEALTHY, 2: Evidence(None, TIMEOUT), 3: HEALTHY}, [],
     "paused or dead: no write acknowledged, no scrape answered: BROKER_DOWN's, not a slow broker"),
    (5, {1: HEALTHY, 2: Evidence(None, None, g(400, 5, idle=0.1)), 3: HEALTHY}, [(2, CPU_STARVED, "warning")],
     "no canary: its own queue time 80x its peers', its handlers busy"),
    (6, {1: HEALTHY, 2: Evidence(None, None, g(2, 600), scrape_ms=42.0), 3: HEALTHY}, [(2, SLOW_DISK, "warning")],
     "its own LocalTime dominates while requests do not queue, its JVM at its peers' pace: the disk"),
    (7, {1: HEALTHY, 2: Evidence(1.0, None, g(2, 3, remote=900), scrape_ms=40.0), 3: HEALTHY}, [(2, SLOW_REPLICATION, "warning")],
     "its writes are slow for clients but its own part is fast: it waits on its followers"),
    (8, {1: HEALTHY, 2: Evidence(0.15), 3: HEALTHY}, [], "7x its peers but under the 0.2 s floor: not slow"),
    (9, {1: Evidence(None), 2: Evidence(1.5), 3: Evidence(None)}, [], "no peer to compare with: nothing said"),
    (10, {1: HEALTHY, 2: Evidence(0.5, TIMEOUT), 3: HEALTHY}, [(2, CPU_STARVED, "warning")],
     "the 5 % cap: clients within the objective, its JVM too slow to answer its own metrics in time: a warning"),
    (12, {1: HEALTHY, 2: Evidence(0.6, None, g(20, 250), scrape_ms=900.0), 3: HEALTHY}, [(2, CPU_STARVED, "warning")],
     "a starved JVM is slow in every phase, LocalTime too: its exporter answering 20x later than its peers' says CPU"),
    (13, {1: HEALTHY, 2: Evidence(0.6, None, g(2, 400), scrape_ms=45.0), 3: HEALTHY}, [(2, SLOW_DISK, "warning")],
     "LocalTime dominates and its JVM answers its metrics as fast as its peers: the disk"),
    (14, {1: HEALTHY, 2: Evidence(0.02, None, g(1, 2), scrape_ms=1034.0), 3: HEALTHY}, [(2, CPU_STARVED, "warning")],
     "a real 5 % cap: the canary's one small write still quick, its request histograms slow to move, its exporter "
     "answering 26x later than its peers': the JVM is starved now"),
    (15, {1: Evidence(None, None, g(1, 8, 467), scrape_ms=68.0, answer_ms=0.2),
          2: Evidence(None, TIMEOUT, answer_ms=1504.0, client_failed=True),
          3: Evidence(None, None, g(0, 4, 1795), scrape_ms=29.0, answer_ms=0.2)},
     [(2, CPU_STARVED, "critical")],
     "the measured 2 % cap: no write acknowledged, no scrape answered, but it answers krm's probes 1.5 s late: alive "
     "and starved, not paused; the canary's write to its partition failing is clients hurt"),
    (16, {1: Evidence(0.01, answer_ms=0.3), 2: Evidence(None, TIMEOUT, client_failed=True), 3: Evidence(0.01, answer_ms=0.4)},
     [], "paused: it answers neither the canary, its exporter nor krm's probes: BROKER_DOWN's"),
    (17, {1: Evidence(answer_ms=0.3), 2: Evidence(answer_ms=450.0), 3: Evidence(answer_ms=0.5)},
     [(2, CPU_STARVED, "warning")], "only the probes: 450 ms to the smallest question, its peers under a ms"),
    (18, {1: Evidence(answer_ms=0.3), 2: Evidence(answer_ms=600.0), 3: Evidence(answer_ms=0.5)},
     [(2, CPU_STARVED, "warning")], "three of its answers stay within the objective: slow, clients not yet hurt"),
    (20, {1: Evidence(answer_ms=0.3), 2: Evidence(answer_ms=800.0), 3: Evidence(answer_ms=0.5)},
     [(2, CPU_STARVED, "critical")], "an acks=all write to a partition it leads needs three of its 0.8 s answers "
     "(measured: a 2 % cap's first poll)"),
    (19, {1: Evidence(answer_ms=150.0), 2: Evidence(answer_ms=180.0), 3: Evidence(answer_ms=120.0)},
     [], "a loaded host: every broker late alike, and under the floor"),
    (21, {1: Evidence(answer_ms=2.0, answer_past_ms=2.0), 2: Evidence(answer_ms=45.0, answer_past_ms=2.5),
          3: Evidence(answer_ms=3.0, answer_past_ms=3.0)},
     [(2, CPU_STARVED, "warning")], "the measured 10 % cap: 45 ms against its peers' 2-3 ms and its own usual "
     "2.5 ms, under the 0.2 s floor: a milder spell, a warning (clients within the objective)"),
    (22, {1: Evidence(answer_ms=2.0, answer_past_ms=2.0), 2: Evidence(answer_ms=45.0, answer_past_ms=40.0),
          3: Evidence(answer_ms=3.0, answer_past_ms=3.0)},
     [], "as slow as it always was (older hardware, a far rack): its own past says this is its usual"),
    (23, {1: Evidence(answer_ms=2.0), 2: Evidence(answer_ms=45.0), 3: Evidence(answer_ms=3.0)},
     [], "its own past not known yet (krm just started): a milder spell is not said"),
    (24, {1: Evidence(answer_ms=2.0, answer_past_ms=2.0), 2: Evidence(answer_ms=15.0, answer_past_ms=2.0),
          3: Evidence(answer_ms=3.0, answer_past_ms=3.0)},
     [], "15 ms: under the milder floor (a loaded host's jitter)"),
    (25, {1: Evidence(answer_ms=12.0, answer_past_ms=2.0), 2: Evidence(answer_ms=45.0, answer_past_ms=2.0),
          3: Evidence(answer_ms=15.0, answer_past_ms=3.0)},
     [], "the whole host loaded: 45 ms is 3.5x its peers' median, not five times"),
    (26, {1: Evidence(0.04, None, g(0, 2, remote=30) | {"produce_local_p99_ms": 8.0}, scrape_ms=30.0, answer_ms=1.0),
          2: Evidence(1.2, None, g(0, 3, remote=900) | {"produce_local_p99_ms": 1010.0}, scrape_ms=28.0,
                      answer_ms=1.2),
          3: Evidence(0.05, None, g(0, 2, remote=25) | {"produce_local_p99_ms": 6.0}, scrape_ms=33.0, answer_ms=0.9)},
     [(2, SLOW_DISK, "warning")], "a 1 s disk: the canary's writes to its partition slow, its appends' p99 at the "
     "delay, its median not moved yet, and its "
     "followers' fetches waiting behind its appends (RemoteTime): the disk, not a slow replication, while its JVM "
     "answers at its peers' pace"),
    (27, {1: Evidence(None, None, g(0, 2, remote=30) | {"produce_local_p99_ms": 8.0}, scrape_ms=30.0, answer_ms=1.0),
          2: Evidence(None, None, g(0, 3, remote=900) | {"produce_local_p99_ms": 9.0}, scrape_ms=28.0, answer_ms=1.2),
          3: Evidence(None, None, g(0, 2, remote=25) | {"produce_local_p99_ms": 6.0}, scrape_ms=33.0, answer_ms=0.9)},
     [], "RemoteTime alone is not its own slowness (the leader waits on a slow follower elsewhere)"),
    (28, {1: Evidence(0.02, None, g(0, 2, remote=4) | {"produce_local_p99_ms": 1076.0}, scrape_ms=28.0, answer_ms=1.3),
          2: Evidence(0.02, None, g(0, 1, remote=4) | {"produce_local_p99_ms": 1996.0}, scrape_ms=30.0, answer_ms=1.3),
          3: Evidence(0.02, None, g(0, 2, remote=5) | {"produce_local_p99_ms": 654.0}, scrape_ms=34.0, answer_ms=850.0),
          4: Evidence(0.02, None, g(0, 1, remote=4) | {"produce_local_p99_ms": 70.0}, scrape_ms=31.0, answer_ms=1.2)},
     [(3, SLOW_DISK, "critical")], "measured (impact oracle, a 1 s disk, clients hurt): its answers to krm late (its handlers "
     "held by the disk), its JVM's exporter at its peers' pace, its appends' p99 far above its peers' medians though "
     "their own p99s still hold earlier spells' tails; RemoteTime 5 ms against its peers' 4 is no slow replication"),
    (29, {1: Evidence(1.464, None, g(0, 3, remote=5) | {"produce_local_p99_ms": 1009.9}, scrape_ms=128.4, answer_ms=1.8),
          2: Evidence(1.4637, None, g(0, 2, remote=5) | {"produce_local_p99_ms": 23.9}, scrape_ms=80.0, answer_ms=601.9),
          3: Evidence(1.4636, None, g(0, 2, remote=6) | {"produce_local_p99_ms": 44.8}, scrape_ms=50.3, answer_ms=1.7),
          4: Evidence(1.4636, None, g(0, 2, remote=5) | {"produce_local_p99_ms": 19.2}, scrape_ms=96.6, answer_ms=1.7)},
     [(2, CPU_STARVED, "warning")], "measured (impact oracle, the 2 % cap's first round): its answers to krm 0.6 s late, "
     "its JMX scrape taken before the cap, every phase at its peers': nothing points at its disk (a LocalTime of 2 ms "
     "against a queue of 0 once read as slow_disk), so late to the smallest question reads as short of CPU"),
    (30, {1: Evidence(None, None, g(0, 3, remote=6) | {"produce_local_p99_ms": 2008.0}, scrape_ms=272.0, answer_ms=4018.4),
          2: Evidence(None, None, g(0, 3, remote=5) | {"produce_local_p99_ms": 37.4}, scrape_ms=73.7, answer_ms=1.9),
          3: Evidence(None, None, g(0, 2, remote=5) | {"produce_local_p99_ms": 31.8}, scrape_ms=289.5, answer_ms=1.7),
          4: Evidence(None, None, g(0, 3, remote=6) | {"produce_local_p99_ms": 53.8}, scrape_ms=61.0, answer_ms=2.2)},
     [(1, SLOW_DISK, "critical"), (3, UNKNOWN, "warning")], "measured (impact oracle, a 1 s disk on broker 1): broker "
     "1's scrape, 272 ms, is no starved JVM's (those take 0.9 s or time out), and its appends' p99 of 2 s against its "
     "peers' 3 ms says the disk. Broker 3's JMX scrape took 290 ms on the loaded host while it answered krm like its "
     "peers: a warning at most (its alert waits a minute), never critical: the stalls its leadership sees blame the "
     "follower holding them back (hurting), not it. A 10 % cap's scrapes take 0.4-0.6 s while some of its answers "
     "come in 2 ms: the scrape alone must still say slow, or its warning flaps"),
    (31, {1: Evidence(0.02, answer_ms=1.8), 2: Evidence(0.02, answer_ms=420.0, client_waiting_s=2.05),
          3: Evidence(0.02, answer_ms=1.7)},
     [(2, CPU_STARVED, "critical")], "the 2 % cap answering krm in 0.42 s (three answers 1.3 s, within the objective): "
     "the canary's write to its partition, unanswered, has already waited past the objective: clients are hurt now, "
     "before the round ends"),
    (32, {1: Evidence(0.02, answer_ms=1.8), 2: Evidence(None, answer_ms=1.6, client_waiting_s=2.5),
          3: Evidence(0.02, answer_ms=1.7)},
     [], "killed or paused: its last answers quick, the canary's write to it waiting: a wait is never itself a slow "
     "broker (BROKER_DOWN's)"),
    (33, {1: Evidence(0.44, None, g(0, 2), scrape_ms=85.6, answer_ms=2.4),
          2: Evidence(0.44, TIMEOUT, answer_ms=2.1, client_waiting_s=2.0008),
          3: Evidence(0.44, None, g(0, 1), scrape_ms=74.8, answer_ms=2.4)},
     [], "measured (impact oracle, a SIGSTOP with JMX and the canary): its exporter timed out, its last canary write "
     "acknowledged before the pause and one waiting since, its answer time its last quick answers': nothing says it "
     "is alive now, so it is not starved (BROKER_DOWN's once silent long enough)"),
    (34, {1: Evidence(3.0118, None, g(0, 1, remote=13), scrape_ms=120.4, answer_ms=36.3, answer_past_ms=2.0),
          2: Evidence(None, None, g(0, 1, remote=9.7), scrape_ms=100.5, answer_ms=1.1, answer_past_ms=2.0,
                      client_waiting_s=2.017),
          3: Evidence(3.0119, None, g(0, 1, remote=13), scrape_ms=177.4, answer_ms=39.4, answer_past_ms=2.0),
          4: Evidence(None, None, g(0, 0, remote=0), scrape_ms=138.2, answer_ms=3.6, answer_past_ms=2.0)},
     [(1, CPU_STARVED, "warning"), (3, CPU_STARVED, "warning")],
     "measured (impact oracle, a gray failure of broker 2, with the canary): the leaders whose canary writes wait 3 s "
     "on broker 2 as a follower answer krm in 36-39 ms, a milder spell: a warning at most, never the page (their "
     "writes wait on the broker cut off, whose own pages name it)"),
    (35, {1: Evidence(3.0327, None, g(0, 2, remote=3), scrape_ms=76.8, answer_ms=33.1),
          2: Evidence(3.0325, None, g(0, 2, remote=3), scrape_ms=112.2, answer_ms=33.1),
          3: Evidence(3.0325, None, g(0, 2, remote=3), scrape_ms=364.4, answer_ms=33.1),
          4: Evidence(None, None, g(0, 3, remote=3), scrape_ms=104.9, answer_ms=3.4, client_waiting_s=2.1648)},
     [(3, UNKNOWN, "warning")],
     "measured (impact oracle, a gray failure of broker 4, with the canary): every leader's canary write waits 3 s on "
     "broker 4 as a follower; broker 3's JMX scrape took 364 ms on the loaded host. A wait its peers share is not "
     "its own: a warning at most (it paged, and its hold silenced the pause that followed)"),
    (36, {1: Evidence(0.0762, None, g(0, 2, remote=2), scrape_ms=63.3, answer_ms=38.0),
          2: Evidence(0.0741, None, g(0, 2, remote=2), scrape_ms=111.1, answer_ms=38.0),
          3: Evidence(0.0577, None, g(0, 2, remote=2), scrape_ms=168.5, answer_ms=37.9),
          4: Evidence(2.6714, None, g(0, 2, remote=3), scrape_ms=139.4, answer_ms=1.2)},
     [(4, UNKNOWN, "warning")],
     "measured (impact oracle, a gray failure: broker 4 cut off from its followers, with the canary's writes timed "
     "each): its canary write waited 2.7 s for followers that cannot fetch, while it answers krm in 1.2 ms and its "
     "own part of a Produce is its peers': the write waits elsewhere, a warning at most (the cut link's pages name it)"),
    (37, CASE_37,
     [],
     "measured (impact oracle, KRaft: broker 1 capped at 2 % until the step before, then broker 2's disk slowed): "
     "broker 1's first scrape after its cap took 1.25 s and stayed its latest for ten seconds, while its probes "
     "answered in 1.1 ms and a canary write through it was acknowledged in 5.5 ms. With a write waiting on broker 2 "
     "it paged critical, cpu_starved, for a broker no longer slow: probes answered since the scrape say its pace now"),
    (38, {b: replace(e, scrape_age_ms=800.0) for b, e in CASE_37.items()},
     [(1, CPU_STARVED, "critical")],
     "case 37 with the scrape taken 0.8 s before the probes' answers: too few answers since to say otherwise, the "
     "scrape's pace is the JVM's"),
    (39, {1: Evidence(0.02, None, g(1, 2), scrape_ms=40.0, answer_ms=1.0, scrape_age_ms=6000.0),
          2: Evidence(0.6, None, g(20, 250), scrape_ms=900.0, answer_ms=60.0, scrape_age_ms=6000.0),
          3: Evidence(0.02, None, g(1, 2), scrape_ms=40.0, answer_ms=1.2, scrape_age_ms=6000.0)},
     [(2, CPU_STARVED, "warning")],
     "case 12 with an old scrape: probes still answered markedly late (60 ms against 1 ms) keep its pace"),
    (40, {1: Evidence(0.035, TIMEOUT),
          2: Evidence(0.0482, None, g(0, 2, remote=13), scrape_ms=86.6, answer_ms=2.2),
          3: Evidence(None, None, g(0, 1, remote=19), scrape_ms=62.0, answer_ms=2.2),
          4: Evidence(None, None, g(0, 2, remote=25), scrape_ms=45.7, answer_ms=2.5)},
     [], "KRaft, a SIGSTOP: the canary's write acknowledged in 35 ms just before it, then its exporter timing out and "
         "no answer to krm's probes since (collectors/answer_times.py): it paged critical, cpu_starved, a stopped "
         "broker called slow. A quick acknowledgement says nothing of whether it answers now"),
    (41, {1: Evidence(0.0244, None, g(0, 2, remote=3), scrape_ms=68.8, answer_ms=10.3),
          2: Evidence(0.0672, None, g(0, 2, remote=3), scrape_ms=45.3, answer_ms=10.3),
          3: Evidence(0.0606, None, g(0, 2, remote=3), scrape_ms=157.4, answer_ms=10.3),
          4: Evidence(None, None, g(0, 2, remote=3), scrape_ms=239.9)},
     [], "measured (impact oracle, KRaft, broker 4's network cut): its last scrape took 240 ms against its peers' 69 "
         "ms, and it answers krm's probes nothing since while its peers answer them: cut off, not slow. It paged "
         "KafkaBrokerSlow, unknown, for a gray failure whose own pages name it"),
    (42, {1: Evidence(None, None, g(0, 1, remote=15), scrape_ms=1110.1, client_waiting_s=2.0001, scrape_age_ms=1500.0),
          2: Evidence(0.0061, None, g(0, 1, remote=14), scrape_ms=49.2, answer_ms=1.4, scrape_age_ms=1500.0),
          3: Evidence(None, None, g(0, 1, remote=12), scrape_ms=54.0, answer_ms=1.4, scrape_age_ms=1500.0),
          4: Evidence(None, None, g(0, 1, remote=16), scrape_ms=59.1, answer_ms=1.4, scrape_age_ms=1500.0)},
     [], "measured (impact oracle, KRaft, broker 1 paused twice, two seconds apart): the scrape just after the first "
         "pause took 1.1 s, its JVM serving the backlog, and it was still the latest when the second pause began. "
         "With no answer to krm's probes since, it paged KafkaBrokerSlow, cpu_starved, for a stopped broker, and its "
         "hold kept the next step's partition pages (a broker killed) unnamed"),
    (43, {1: Evidence(None, None, g(0, 1, remote=15), scrape_ms=1110.1, client_waiting_s=2.0001),
          2: Evidence(0.0061, None, g(0, 1, remote=14), scrape_ms=49.2),
          3: Evidence(None, None, g(0, 1, remote=12), scrape_ms=54.0)},
     [(1, CPU_STARVED, "critical")],
     "case 42 from a collector without the prober (no broker's answer time known): the scrape is all there is"),
    (11, {1: Evidence(0.3, None, g(150, 120)), 2: Evidence(0.35, None, g(160, 110)), 3: Evidence(0.28, None, g(140, 130))},
     [], "a busy cluster, every broker alike: slow together is load, not a slow broker"),
]


@pytest.mark.parametrize("num, evidence, expected, reason", CASES, ids=[str(c[0]) for c in CASES])
def test_slow_broker_cases(num, evidence, expected, reason):
    got = [(f.broker, f.cause, f.severity) for f in judge(evidence, objective_s=2.0)]
    assert got == expected, f"case {num}: {reason}"


def test_details_say_the_evidence():
    (f,) = judge(CASES[2][1], objective_s=2.0)
    assert f.details["client_latency_s"] == 2.5 and f.details["peers_client_latency_s"] == 0.2
    assert f.details["jmx_error"] == TIMEOUT and f.details["latency_objective_s"] == 2.0


def test_a_starved_leader_s_remote_time_is_not_slow_replication():
    """A starved leader serves its followers' fetches late, so its RemoteTime grows too (a real 5 % cap: queue 80,
    local 209, remote 399 ms): its own part, markedly slower than its peers', says the broker is the cause."""
    starved = Evidence(0.03, None, g(80, 209, remote=700), scrape_ms=900.0)
    (f,) = judge({1: HEALTHY, 2: starved, 3: HEALTHY}, objective_s=2.0)
    assert (f.broker, f.cause) == (2, "cpu_starved")
    # without its exporter's pace the phases cannot tell a starved JVM from a slow disk: krm says it does not know
    (f,) = judge({1: HEALTHY, 2: Evidence(0.03, None, g(80, 209, remote=700)), 3: HEALTHY}, objective_s=2.0)
    assert (f.broker, f.cause) == (2, "unknown")


def test_the_partitions_own_pages_naming_it_say_clients_are_hurt():
    """No canary, answers within the objective: an open critical partition page naming the broker (its HW stall,
    say) is the partitions' own word that clients are hurt. Asked once, and only where a broker is slow."""
    evidence = {1: Evidence(answer_ms=0.3), 2: Evidence(answer_ms=600.0), 3: Evidence(answer_ms=0.5)}
    asked = []

    def hurting():
        asked.append(1)
        return {2}
    assert [(f.broker, f.severity) for f in judge(evidence, 2.0, hurting)] == [(2, "critical")]
    assert asked == [1]
    assert [(f.broker, f.severity) for f in judge(evidence, 2.0, lambda: {3})] == [(2, "warning")]
    assert judge({b: Evidence(answer_ms=0.4) for b in (1, 2, 3)}, 2.0, lambda: 1 / 0) == []


def test_a_brokers_usual_answer_time_moves_slowly():
    """schemas/latency.py `moved`: the first answer starts it, an older one leaves it, a spell of seconds-late answers
    over half a minute barely moves it, an hour of them takes it most of the way (geometric), and quicker answers
    bring it down within minutes."""
    from schemas.latency import moved

    usual = moved(None, 2.0, 100.0)
    assert usual == (2.0, 100.0)
    assert moved(usual, 500.0, 99.0) == usual
    for at in range(102, 132, 2):
        usual = moved(usual, 20.0, float(at))
    assert 2.0 < usual[0] < 2.2
    for at in range(132, 3_800, 2):
        usual = moved(usual, 20.0, float(at))
    assert 14.0 < usual[0] < 20.0, "an hour: most of the way (tau is half an hour)"
    for at in range(3_800, 4_400, 2):  # ten minutes at its old pace again
        usual = moved(usual, 2.0, float(at))
    assert 2.0 < usual[0] < 2.2, "quicker answers are its usual within minutes: a usual taken while slow is not kept"
    assert moved(None, 0.0, 1.0)[0] > 0, "never the logarithm of 0"
