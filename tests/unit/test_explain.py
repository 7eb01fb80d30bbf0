"""krm assign explain (krm/explain.py): the docs/cases/partition-expansion.md expansion effect recognised and explained."""

import datetime as dt

from krm.assignment import assign, expansion_inputs
from krm.explain import explain, expansion_suffixes


def _expanded(created, brokers_now, total, rf):
    ordered, start, k = expansion_inputs(brokers_now, created[0], len(created))
    return {**created, **assign(ordered, total - len(created), rf, start_index=start, start_partition=k)}


def test_expansion_case_t5_expansion_is_found_and_blamed():
    t5 = _expanded(assign([0, 1, 4, 2, 3], 3, 1, start_index=2), [0, 1, 2, 3, 4], 5, 1)
    e = explain("t5", t5, [0, 1, 2, 3, 4], next_n=3)
    assert not e.balanced
    assert [(s.first, s.last, s.origin) for s in e.segments] == [(0, 2, "creation"), (3, 4, "expansion")]
    assert any("this expansion made the topic uneven" in f and "none on [0, 1]" in f for f in e.findings)
    assert [f for f in e.findings if f.startswith("broker 0 ")] == [
        "broker 0 holds none of its replicas: the expansion of partitions 3-4 skipped it"]
    assert e.next_partitions == {5: [4], 6: [0], 7: [1]}


def test_expansion_case_t2_expansion_found_but_even():
    t2 = _expanded(assign([0, 1, 4, 2, 3], 10, 3, start_index=2, replica_shift=4), [0, 1, 2, 3, 4], 13, 3)
    e = explain("t2", t2, [0, 1, 2, 3, 4])
    assert e.balanced and [(s.first, s.origin) for s in e.segments] == [(0, "creation"), (10, "expansion")]


def test_one_placement_over_the_sorted_list_is_not_called_an_expansion():
    a = assign([0, 1, 2, 3, 4], 12, 2, start_index=3)
    assert expansion_suffixes(a, [[0, 1, 2, 3, 4]]) == []
    assert [s.origin for s in explain("x", a, [0, 1, 2, 3, 4]).segments] == ["creation"]


def test_history_names_growth_the_rule_does_not_reproduce():
    a = {0: [0], 1: [1], 2: [2], 3: [0], 4: [0]}  # partitions 3-4 placed by hand
    t0 = dt.datetime(2026, 11, 1, tzinfo=dt.timezone.utc)
    history = [{"observed_at": t0, "partition_count": 3}, {"observed_at": t0 + dt.timedelta(hours=1), "partition_count": 5}]
    e = explain("x", a, [0, 1, 2], history=history, first_seen=t0)
    assert [(s.first, s.last, s.origin) for s in e.segments] == [(0, 2, "creation"), (3, 4, "expansion")]
    assert "not Kafka's rule" in e.segments[1].evidence
    assert e.history == [{"at": t0 + dt.timedelta(hours=1), "from": 3, "to": 5}]


def test_broker_that_joined_later_is_named():
    a = assign([0, 1, 2], 6, 2, start_index=0)
    t0 = dt.datetime(2026, 11, 1, tzinfo=dt.timezone.utc)
    e = explain("x", a, [0, 1, 2, 3], broker_joins={3: t0 + dt.timedelta(days=1)},
                history=[{"observed_at": t0, "partition_count": 6}], first_seen=t0)
    assert not e.balanced
    assert any(f.startswith("broker 3 joined at 2026-11-02") and "broker expansion" in f for f in e.findings)


def test_kraft_projection_says_it_is_not_exact():
    e = explain("x", assign([0, 1, 2], 3, 1, start_index=0), [0, 1, 2], mode="kraft", next_n=1)
    assert "StripedReplicaPlacer" in e.next_note
