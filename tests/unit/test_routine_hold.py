"""Routine canary and JMX rounds wait to go out together (collectors/routine_hold.py): at rest one alert
micro-batch for them, not one a round; anything that is news goes at once and takes the held ones with it."""

import pytest

from collectors.routine_hold import JmxRoutine, RoutineHold, answers_prompt, canary_routine

pytestmark = pytest.mark.unit


def canary(*partitions, waiting=None):
    return {"kind": "canary", "cluster": "c", "canary_state": {"topic": "krm.canary", "partitions": list(partitions),
                                                               "waiting": waiting}}


def write(p, produce_ms=3.0, **kw):
    return {"partition": p, "broker": p + 1, "produced": True, "produce_ms": produce_ms, "consumed": True,
            "e2e_ms": produce_ms + 2} | kw


def jmx(broker, scrape_ms=40.0, error=None, **gauges):
    base = {"under_replicated_partitions": 0.0, "active_controller_count": 0.0, "produce_queue_p50_ms": 0.0,
            "produce_local_p50_ms": 1.0, "produce_local_p99_ms": 4.0, "isr_shrinks_total": 3.0}
    return {"kind": "broker_metrics", "cluster": "c", "broker_metrics_state": {
        "broker": broker, "error": error, "scrape_ms": scrape_ms,
        "gauges": [{"name": k, "value": v} for k, v in (base | gauges).items()]}}


def test_a_canary_round_is_routine_only_when_every_write_came_back_quickly():
    assert canary_routine(canary(write(0), write(1)))
    assert not canary_routine(canary(write(0), write(1, produce_ms=250.0)))  # SLOW_MIN_S: a detector compares it
    assert not canary_routine(canary(write(0), write(1, produced=False, error="KafkaTimeoutError")))
    assert not canary_routine(canary(write(0), write(1, consumed=False)))
    assert not canary_routine(canary(write(0, waiting_ms=2100.0), waiting=True))  # the early record


def test_a_jmx_round_is_routine_only_when_no_broker_says_anything():
    routine = JmxRoutine()
    assert routine([jmx(1), jmx(2), jmx(3, active_controller_count=1.0)])
    assert not routine([jmx(1), jmx(2, isr_shrinks_total=4.0), jmx(3)])  # an ISR shrank since the last round
    assert routine([jmx(1), jmx(2, isr_shrinks_total=4.0), jmx(3)])  # ... and not since
    assert not routine([jmx(1, under_replicated_partitions=2.0), jmx(2, isr_shrinks_total=4.0), jmx(3)])
    assert not routine([jmx(1, scrape_ms=600.0), jmx(2, isr_shrinks_total=4.0)])
    assert not routine([jmx(1, error="timed out"), jmx(2, isr_shrinks_total=4.0)])
    assert not routine([jmx(1, produce_local_p99_ms=1006.0), jmx(2, isr_shrinks_total=4.0)])
    assert not routine([jmx(1, active_controller_count=1.0), jmx(2, active_controller_count=1.0,
                                                                 isr_shrinks_total=4.0)])  # a split brain


def test_probes_answered_20_ms_late_make_every_round_news():
    assert answers_prompt({1: 0.001, 2: 0.019}) and answers_prompt({})
    assert not answers_prompt({1: 0.001, 2: 0.045})


def _r(name: str, cluster: str = "a") -> dict:
    return {"cluster": cluster, "n": name}


def _hold(hold_s: float, now: list[float] | None = None) -> tuple[RoutineHold, list[list[str]]]:
    sent: list[list[str]] = []
    clock = now or [0.0]
    hold = RoutineHold(lambda records: sent.append([r["n"] for r in records]) or len(records), hold_s,
                       clock=lambda: clock[0])
    return hold, sent


def test_routine_rounds_go_out_together_and_news_takes_them_along():
    now = [0.0]
    hold, sent = _hold(10.0, now)
    assert hold.offer([_r("canary@0")], routine=True) == 0
    now[0] = 5.0
    hold.offer([_r("canary@5")], routine=True)
    now[0] = 10.0
    assert hold.offer([_r("canary@10"), _r("jmx@10")], routine=True) == 4  # the oldest waited hold_s
    assert sent == [["canary@0", "canary@5", "canary@10", "jmx@10"]]
    now[0] = 15.0
    hold.offer([_r("canary@15")], routine=True)
    now[0] = 16.0
    hold.offer([_r("early@16", "b")], routine=False)  # news (of b): at once, after what was held, in order
    assert sent[-1] == ["canary@15", "early@16"]
    hold.offer([_r("canary@20")], routine=True)
    assert hold.flush() == 1 and sent[-1] == ["canary@20"]
    assert hold.flush() == 0


def test_no_hold_publishes_every_round_at_once():
    hold, sent = _hold(0.0)
    hold.offer([_r("a")], routine=True)
    hold.offer([_r("b")], routine=True)
    assert sent == [["a"], ["b"]]


def test_after_news_of_a_cluster_nothing_of_it_waits_for_the_hold():
    """A record that is not routine (a slow scrape, say) is news of its cluster: for hold_s after it that cluster's
    routine rounds go at once (BROKER_SLOW's second look at the rounds' cadence; the first quiet round after a spell
    ends it), while another cluster's still wait."""
    now = [0.0]
    hold, sent = _hold(10.0, now)
    assert hold.offer([{"cluster": "a", "n": "a@0"}], routine=True) == 0
    hold.offer([{"cluster": "a", "n": "a-slow@1"}], routine=False)
    assert sent == [["a@0", "a-slow@1"]]
    now[0] = 5.0
    assert hold.offer([{"cluster": "a", "n": "a@5"}], routine=True) == 1, "within hold_s of its news"
    assert hold.offer([{"cluster": "b", "n": "b@5"}], routine=True) == 0, "another cluster's news is not b's"
    now[0] = 11.5
    assert hold.offer([{"cluster": "a", "n": "a@11.5"}], routine=True) == 0, "hold_s after the news: held again"
    assert sent[-1] == ["a@5"]


def test_a_canary_round_at_rest_keeps_clear_of_the_poll():
    """Collector._clear_of_poll: a round waits while its cluster's poll runs or is due within POLL_GUARD_S (its writes
    caught mid-replication by the poll's offsets would read as a follower lagging), never more than twice the guard."""
    import threading
    import time

    from collectors import daemon

    collector = daemon.Collector.__new__(daemon.Collector)
    collector._stop = threading.Event()
    collector.poll_started_at, collector.last_poll_at, collector.next_poll_due = {}, {}, {}
    t0 = time.monotonic()
    collector._clear_of_poll("c")
    assert time.monotonic() - t0 < 0.1, "nothing known of the poll: no wait"

    collector.next_poll_due["c"] = time.monotonic() + 0.1
    collector.poll_started_at["c"], collector.last_poll_at["c"] = time.time() - 5, time.time() - 4.9

    def the_poll():  # due in 0.1 s, 0.05 s long: well within the wait's cap, on a loaded machine too
        time.sleep(0.1)
        collector.poll_started_at["c"] = time.time()
        collector.next_poll_due["c"] = time.monotonic() + 2.0
        time.sleep(0.05)
        collector.last_poll_at["c"] = time.time()

    t0 = time.monotonic()
    threading.Thread(target=the_poll, daemon=True).start()
    collector._clear_of_poll("c")
    assert collector.last_poll_at["c"] > collector.poll_started_at["c"], "returned once the due poll had run and ended"
    assert time.monotonic() - t0 >= 0.14

    collector.poll_started_at["c"], collector.last_poll_at["c"] = time.time(), time.time() - 1  # a poll that hangs
    t0 = time.monotonic()
    collector._clear_of_poll("c")
    assert 2 * daemon.POLL_GUARD_S - 0.01 <= time.monotonic() - t0 < 2.0, "a poll that hangs holds no round long"
