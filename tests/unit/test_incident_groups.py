"""Incidents that share one cause read as one (pipelines/incident_groups.py), on the console's pages."""

from types import SimpleNamespace

import pytest

from krm.console import Console
from pipelines.incident_groups import LEAD_MS, _link_key, group, keys
from pipelines.incidents import Incident
from pipelines.state import ClusterView, PipelineState

pytestmark = pytest.mark.unit

T = 1_700_000_000_000


def inc(iid, type_, severity="warning", topic=None, partition=None, broker=None, cause=None, details=None,
        opened=T, resolved=None, cluster="prod"):
    return Incident(iid, cluster, "s", type_, severity, topic, partition, broker, cause, details or {}, opened,
                    resolved or opened, resolved, "resolved" if resolved else "open")


def down(iid="bd", broker=2, opened=T, resolved=None, cluster="prod"):
    return inc(iid, "BROKER_DOWN", broker=broker, cause="not_registered", opened=opened, resolved=resolved,
               cluster=cluster)


def test_a_broker_down_heads_the_partitions_it_affects():
    members = [inc("u1", "UNDER_REPLICATED", topic="t", partition=0, details={"out_of_sync": [2]}, opened=T + 5000),
               inc("m1", "AT_MIN_ISR", topic="t", partition=1, details={"out_of_sync": [2]}, opened=T + 6000),
               inc("o1", "OFFLINE_PARTITION", "critical", "rf1", 0, cause="single_replica_on_dead_broker",
                   details={"must_return": [2]}, opened=T + 4000),
               inc("p1", "PARTITION_UNAVAILABLE", "critical", "t", 2, cause="leader_unreachable",
                   details={"unreachable_brokers": [2]}, opened=T - 3000)]  # before the controller's verdict
    other = [inc("u9", "UNDER_REPLICATED", topic="t", partition=9, details={"out_of_sync": [3]}, opened=T + 5000),
             inc("u8", "UNDER_REPLICATED", topic="t", partition=8, details={"out_of_sync": [2]}, opened=T + 5000,
                 cluster="other"),
             inc("u7", "UNDER_REPLICATED", topic="t", partition=7, details={"out_of_sync": [2]},
                 opened=T - LEAD_MS - 1)]  # long before: not this departure's
    groups = group([down(), *members, *other])
    (g,) = [g for g in groups if g.key is not None]
    assert g.key == f"broker:prod:2@{T}" and g.title == "broker 2 down (not_registered)"
    assert [m.incident_id for m in g.members] == ["bd", "p1", "o1", "u1", "m1"]
    assert g.severity == "critical" and g.status == "open"
    assert g.partitions == ["rf1-0", "t-0", "t-1", "t-2"]
    assert sorted(keys([down(), *members, *other]).items()) == sorted(
        [(m, g.key) for m in ("bd", "p1", "o1", "u1", "m1")] + [("u9", None), ("u8", None), ("u7", None)])


def test_a_broker_down_with_nothing_named_and_a_resolved_departure_stay_alone():
    gone = down("bd0", opened=T - 3_600_000, resolved=T - 3_000_000)
    late = inc("u1", "UNDER_REPLICATED", topic="t", partition=0, details={"out_of_sync": [2]}, opened=T)
    groups = group([gone, down("bd1", broker=3), late])
    assert [g.key for g in groups] == [None, None, None]


def test_stalls_of_one_cut_link_group_while_they_overlap():
    link = {"side": "follower", "broker": 3, "peers": [1, 2], "summary": "broker 3 fetches nothing from brokers 1, 2"}
    stalls = [inc(f"s{n}", "HW_STALL", "critical", "t", n, cause="isr_follower_not_caught_up",
                  details={"holding_back": [3], "replication_link": link}, opened=T + n * 1000, resolved=T + 30_000)
              for n in range(4)]
    again = inc("s9", "HW_STALL", "critical", "t", 9, details={"holding_back": [3], "replication_link": link},
                opened=T + 3_600_000)  # an hour later: another cut
    plain = inc("s8", "HW_STALL", "critical", "t", 8, details={"holding_back": [1]}, opened=T)
    groups = group([*stalls, again, plain])
    grouped = [g for g in groups if g.key is not None]
    assert [(g.title, [m.incident_id for m in g.members]) for g in grouped] == [
        ("broker 3 fetches nothing from brokers 1, 2", ["s0", "s1", "s2", "s3"])]
    assert grouped[0].status == "resolved" and grouped[0].resolved_at_ms == T + 30_000
    assert sum(len(g.members) for g in groups) == 6  # every incident in exactly one group


def test_a_failed_directorys_offline_partitions_group():
    offline = [inc(f"o{n}", "OFFLINE_PARTITION", "critical", "t", n, cause="log_dir_offline",
                   details={"must_return": [1]}, opened=T + n) for n in range(3)]
    (g,) = group(offline)
    assert g.key == f"disk:prod:1@{T}" and g.title == "failed log directory on broker 1"
    assert g.counts() == [("OFFLINE_PARTITION log_dir_offline", 3)]


def _get(console, path, query=""):
    got = {}
    body = console({"PATH_INFO": path, "QUERY_STRING": query}, lambda status, headers: got.update(status=status))
    return got["status"], b"".join(body).decode()


class _Missing:
    def is_table(self):
        return False


def test_the_console_shows_a_group_as_one_row_its_members_a_click_away():
    incidents = (down(), *[inc(f"u{n}", "UNDER_REPLICATED", topic="t", partition=n, details={"out_of_sync": [2]},
                               opened=T + 5000) for n in range(14)],
                 inc("x", "LEADER_SKEW", cluster="prod", broker=1, opened=T))
    state = PipelineState()
    state.update(clusters={"prod": ClusterView(((1, True), (2, False), (3, True)), 1, None, T)},
                 open_incidents=incidents)
    console = Console(state, SimpleNamespace(incidents="/nonexistent", partition_state=_Missing(),
                                             replica_lag=_Missing(), broker_state=_Missing()))
    status, body = _get(console, "/incidents")
    assert status == "200 OK"
    assert body.count('<tr class="group">') == 1 and "broker 2 down (not_registered)</b> · 14 partition(s)" in body
    assert "14 UNDER_REPLICATED" in body
    assert all(f'href="/incidents/u{n}"' in body for n in range(14)), "each member one click away"
    assert 'href="/incidents/x"' in body and "16 incident(s) in 2 row(s)" in body
    status, body = _get(console, "/brokers/prod/2")
    assert status == "200 OK" and body.count('<tr class="group">') == 1
    status, body = _get(console, "/topics/prod/t")
    assert status == "200 OK" and body.count('<tr class="group">') == 1


def test_krm_incidents_reads_a_group_as_one_row_and_json_keeps_one_object_each(tmp_path, capsys):
    import json

    from krm.cli import main
    from pipelines.incident_store import IncidentStore
    from pipelines.tables import Tables

    config = tmp_path / "krm.toml"
    config.write_text('[[clusters]]\nname = "prod"\nbootstrap_servers = "k:9092"\n'
                      f'[pipeline]\ndata_dir = "{tmp_path / "data"}"\n')
    members = [inc(f"u{n}", "UNDER_REPLICATED", topic="t", partition=n, details={"out_of_sync": [2]}, opened=T + 5000)
               for n in range(8)]
    IncidentStore(Tables(tmp_path / "data").incidents).upsert([down(), *members, inc("x", "LEADER_SKEW", broker=1)])
    assert main(["incidents", "--config", str(config)]) == 0
    out = capsys.readouterr().out
    assert "broker 2 down (not_registered): 8 partition(s) t-0, t-1, t-2, t-3, t-4, t-5 +2" in out
    assert "8 UNDER_REPLICATED" in out and "(10 incidents in 2 rows; --ungrouped for one row each)" in out
    assert main(["incidents", "--config", str(config), "--ungrouped"]) == 0
    assert capsys.readouterr().out.count("UNDER_REPLICATED") == 8
    assert main(["incidents", "--config", str(config), "--json"]) == 0
    listed = json.loads(capsys.readouterr().out)
    assert len(listed) == 10
    assert {i["incident_id"]: i["group"] for i in listed} == {
        **{f"u{n}": f"broker:prod:2@{T}" for n in range(8)}, "bd": f"broker:prod:2@{T}", "x": None}


def test_a_slow_broker_heads_the_partitions_it_holds_up():
    """BROKER_SLOW groups the pages of the partitions waiting on it (the 2 % cap's seven pages read as one)."""
    from pipelines.incidents import Incident

    def inc(id_, type_, broker=None, topic=None, partition=None, cause=None, details=None, at=1_000):
        return Incident(id_, "c", "s", type_, "critical", topic, partition, broker, cause, details or {}, at, at, None,
                        "open")

    slow = inc("slow", "BROKER_SLOW", broker=2, cause="cpu_starved")
    stall = inc("stall", "HW_STALL", topic="t", partition=0, cause="isr_follower_behind", details={"holding_back": [2]})
    gone = inc("gone", "PARTITION_UNAVAILABLE", topic="t", partition=1, cause="leader_unreachable",
               details={"unreachable_brokers": [2]})
    other = inc("other", "HW_STALL", topic="t", partition=2, cause="isr_follower_behind", details={"holding_back": [3]})
    (head, alone) = group([slow, stall, gone, other])
    assert head.title == "broker 2 slow (cpu_starved)" and [m.incident_id for m in head.members] == ["slow", "stall", "gone"]
    assert [m.incident_id for m in alone.members] == ["other"]


def test_a_slow_broker_heads_the_pages_it_explains_as_its_holds_do():
    """BROKER_SLOW heads the partition pages krm_partition_slowed_by holds for it: a stall on a partition it leads
    or replicates (clients wait on it though the follower named is another), a stall krm annotated as a cut link
    held back by it (a late follower reads as a cut), a stall that reopened from an earlier spell but stalled again
    in this one; not a stall that began before it was slow, nor a page of a type it does not explain."""
    def inc(id_, type_, broker=None, topic=None, partition=None, cause=None, details=None, at=100_000, reopens=0):
        return Incident(id_, "c", "s", type_, "critical", topic, partition, broker, cause, details or {}, at, at, None,
                        "open", reopen_count=reopens)

    slow = inc("slow", "BROKER_SLOW", broker=2, cause="cpu_starved")
    led = inc("led", "HW_STALL", topic="t", partition=0, cause="isr_follower_behind",
              details={"leader": 2, "isr": [2, 3], "replicas": [2, 3, 1], "holding_back": [3]}, at=101_000)
    cut = inc("cut", "HW_STALL", topic="t", partition=1, cause="isr_follower_behind",
              details={"leader": 1, "replicas": [1, 2], "holding_back": [2],
                       "replication_link": {"side": "follower", "broker": 2, "summary": "broker 2 cut from its leaders"}},
              at=102_000)
    again = inc("again", "HW_STALL", topic="t", partition=2, cause="isr_follower_behind",
                details={"leader": 3, "replicas": [3, 2], "hw_stalled_since_ms": 100_500}, at=10_000, reopens=1)
    before = inc("before", "HW_STALL", topic="t", partition=3, cause="isr_follower_behind",
                 details={"leader": 2, "replicas": [2, 1], "hw_stalled_since_ms": 10_000}, at=10_000, reopens=1)
    lagging = inc("lagging", "UNDER_REPLICATED", topic="t", partition=4, cause="follower_lagging",
                  details={"leader": 2, "replicas": [2, 1]}, at=101_000)
    groups = {g.head.incident_id: [m.incident_id for m in g.members] for g in group([slow, led, cut, again, before, lagging])}
    assert _link_key(cut) is not None, "annotated as a cut link"
    assert groups["slow"] == ["slow", "again", "led", "cut"], groups
    assert groups["before"] == ["before"] and groups["lagging"] == ["lagging"], groups
