"""The log directories' fill forecast (collectors/disk_watch.py), what a poll carries of it and when such a
poll may stay home (collectors/unchanged.py), and the krm_log_dir_* series it becomes (pipelines/disks.py)."""

import pytest
from prometheus_client import CollectorRegistry

from collectors.disk_watch import DiskWatch, full_in, growth_rate
from collectors.log_dirs import KAFKA_STORAGE_ERROR, LogDir
from collectors.unchanged import steady_digest
from pipelines.disks import LogDirState, of_brokers
from pipelines.metrics import KrmCollector
from pipelines.state import ClusterView, PipelineState

pytestmark = pytest.mark.unit

MB = 1 << 20


def test_growth_rate_is_the_least_squares_slope():
    assert growth_rate([(0, 0), (10, 10 * MB), (20, 20 * MB)]) == pytest.approx(MB)
    assert growth_rate([(0, 0), (10, 10 * MB)]) is None  # two samples are one step: no trend
    assert growth_rate([(5, 1), (5, 2), (5, 3)]) is None


def test_full_in_from_the_faster_of_the_long_and_the_recent_trend():
    # flat for ten minutes, then 1 MB/s for 30 s: the last three samplings see it, the long trend would not yet
    flat = [(t, 100 * MB) for t in range(0, 600, 10)]
    filling = [(600 + t, 100 * MB + t * MB) for t in (10, 20, 30)]
    eta = full_in(flat + filling, usable=60 * MB, step_s=10)
    assert eta == pytest.approx(60, rel=0.25)
    assert full_in(flat, usable=60 * MB, step_s=10) is None  # not growing: no forecast
    shrinking = [(t, 100 * MB - t * MB) for t in (0, 10, 20, 30)]  # retention deleting segments
    assert full_in(shrinking, usable=60 * MB, step_s=10) is None
    assert full_in(filling[:2], usable=60 * MB, step_s=10) is None  # too short to say


def sample(watch, t, used, total=96 * MB, broker=2, path="/data"):
    watch.note({broker: ([LogDir(path, 0, total, total - used)], t)}, {1, 2, 3})
    return {d["path"]: d for d in watch.dirs(broker)}[path]


def test_a_filling_directory_gets_a_forecast_within_the_horizon_only():
    watch = DiskWatch(poll_s=10, window_s=600, horizon_s=3600)
    for t in range(0, 60, 10):
        d = sample(watch, t, 10 * MB)
    assert "full_in_s" not in d and d["usable_bytes"] == 86 * MB
    for i, t in enumerate(range(60, 100, 10)):
        d = sample(watch, t, 10 * MB + (i + 1) * 10 * MB)  # 1 MB/s
    assert d["full_in_s"] == pytest.approx(46, rel=0.3)  # 46 MB left at 1 MB/s
    slow = DiskWatch(poll_s=10, window_s=600, horizon_s=3600)
    for t in range(0, 60, 10):
        d = sample(slow, t, 10 * MB + t * 1000, total=1 << 40)  # 1 kB/s on a terabyte: years
    assert "full_in_s" not in d


def test_a_failed_directory_has_no_bytes_and_a_broker_gone_is_forgotten():
    watch = DiskWatch(poll_s=10, window_s=600, horizon_s=3600)
    watch.note({2: ([LogDir("/data", 0, 100, 50), LogDir("/data-2", KAFKA_STORAGE_ERROR)], 0)}, {1, 2})
    assert watch.dirs(2) == [{"path": "/data", "failed": False, "total_bytes": 100, "usable_bytes": 50},
                             {"path": "/data-2", "failed": True}]
    watch.note({}, {1, 2})  # no answer this time: its last word stands while it is live
    assert watch.dirs(2) is not None
    watch.note({}, {1})
    assert watch.dirs(2) is None
    assert watch.due(0) and not watch.due(5) and watch.due(10) and not watch.due(19)  # a sampling each poll_s
    assert not DiskWatch(poll_s=0, window_s=600, horizon_s=3600).due(1e9)


def _filling(watch, until, total=100 * MB):
    """1 MB/s into broker 2's only directory, sampled every 10 s up to `until`."""
    for t in range(0, until + 1, 10):
        watch.note({2: ([LogDir("/data", 0, total, total - t * MB)], t)}, {1, 2}, {1, 2}, t)


@pytest.mark.parametrize("last_sampled, gone_at, full", [
    (90, 95, True),  # 10 MB left at 1 MB/s when sampled: full ~100 s, gone at 95 s (within a sampling)
    (90, 101, True),
    (60, 65, False),  # 40 MB left: full ~100 s, gone at 65 s: something else took it down
    (30, 35, False),
])
def test_a_broker_that_stops_serving_with_its_disks_full_says_so(last_sampled, gone_at, full):
    watch = DiskWatch(poll_s=10, window_s=600, horizon_s=3600)
    _filling(watch, last_sampled)
    watch.note({}, {1, 2}, {1}, gone_at)  # registered, not answering: it halted
    assert (watch.went_full(2) is not None) is full
    if full:
        assert watch.went_full(2)[0]["path"] == "/data"
    watch.note({}, {1}, {1}, gone_at + 9)  # deregistered: the verdict stands, judged once at the first silence
    assert (watch.went_full(2) is not None) is full and watch.dirs(2) is None
    watch.note({}, {1, 2}, {1, 2}, gone_at + 60)  # back and serving: its next departure is judged afresh
    assert watch.went_full(2) is None


def test_a_failed_directory_beside_a_full_one_and_an_idle_disk():
    watch = DiskWatch(poll_s=10, window_s=600, horizon_s=3600)
    watch.note({2: ([LogDir("/a", KAFKA_STORAGE_ERROR), LogDir("/b", 0, 100 * MB, 0)], 0),
                3: ([LogDir("/a", KAFKA_STORAGE_ERROR), LogDir("/b", 0, 100 * MB, 50 * MB)], 0)}, {1, 2, 3}, {1, 2, 3}, 0)
    watch.note({}, {1}, {1}, 5)
    assert watch.went_full(2) is not None, "one failed, the other without a byte left: nothing to serve from"
    assert watch.went_full(3) is None, "half a disk free, no growth known: a crash is not blamed on it"
    assert watch.went_full(1) is None


def poll(dirs):
    brokers = [{"id": 1, "live": True, "log_dirs": dirs}, {"id": 2, "live": True}]
    cluster = {"kind": "cluster", "source": "admin", "v": 4,
               "cluster_state": {"controller_id": 1, "brokers": brokers, "topic_count": 1, "partition_count": 1}}
    topic = {"kind": "topic", "source": "admin", "v": 4,
             "topic_state": {"topic": "t", "partitions": [], "partition_count": 1, "broker_load": [[1, 1, 1, 1, 0]]}}
    return [cluster, topic]


def test_a_directorys_bytes_do_not_make_a_poll_new_but_an_urgent_forecast_or_a_failure_does():
    a = steady_digest(poll([{"path": "/d", "failed": False, "total_bytes": 100, "usable_bytes": 50}]))
    b = steady_digest(poll([{"path": "/d", "failed": False, "total_bytes": 100, "usable_bytes": 49}]))
    assert a is not None and a == b
    assert steady_digest(poll([{"path": "/d", "failed": False, "total_bytes": 100, "usable_bytes": 40,
                                "full_in_s": 30.0}])) is None
    assert steady_digest(poll([{"path": "/d", "failed": True}])) is None
    hours = steady_digest(poll([{"path": "/d", "failed": False, "total_bytes": 100, "usable_bytes": 48,
                                 "full_in_s": 9000.0}]))
    assert hours == a, "a forecast hours out rides on the polls published anyway (a busy root disk at rest)"


def test_the_series_say_what_the_brokers_said():
    brokers = [{"id": 1, "log_dirs": [{"path": "/d", "failed": False, "total_bytes": 100, "usable_bytes": 40,
                                       "full_in_s": 30.0}]},
               {"id": 2, "log_dirs": [{"path": "/d", "failed": True}, {"path": "/e", "failed": False}]},
               {"id": 3}]
    dirs = of_brokers(brokers)
    assert dirs == (LogDirState(1, "/d", False, 100, 40, 30.0), LogDirState(2, "/d", True, None, None, None),
                    LogDirState(2, "/e", False, None, None, None))
    state = PipelineState()
    state.update(clusters={"c1": ClusterView(((1, True), (2, True), (3, True)), 1, None, 1, log_dirs=dirs)})
    reg = CollectorRegistry(auto_describe=False)
    reg.register(KrmCollector(state))
    got = {(s.name, s.labels.get("broker"), s.labels.get("log_dir")): s.value
           for fam in reg.collect() for s in fam.samples if s.name.startswith("krm_log_dir")}
    assert got == {("krm_log_dir_used_bytes", "1", "/d"): 60, ("krm_log_dir_total_bytes", "1", "/d"): 100,
                   ("krm_log_dir_full_in_seconds", "1", "/d"): 30.0, ("krm_log_dir_full_soon", "1", "/d"): 1,
                   ("krm_log_dir_offline", "2", "/d"): 1}


def _urgency(state, full_in_s):
    dirs = (LogDirState(1, "/d", False, 100, 40, full_in_s),)
    state.update(clusters={"c1": ClusterView(((1, True),), 1, None, 1, log_dirs=dirs)})
    reg = CollectorRegistry(auto_describe=False)
    reg.register(KrmCollector(state))
    return [s.labels["severity"] for fam in reg.collect() for s in fam.samples if s.name == "krm_log_dir_full_soon"]


@pytest.mark.parametrize("within, full_in_s, expected", [
    ((1800, 21600), 1799, ["critical"]),
    ((1800, 21600), 1800, ["warning"]),  # the page's horizon is a strict bound, as the rules' `<` was
    ((1800, 21600), 21599, ["warning"]),
    ((1800, 21600), 21600, []),
    ((3600, 7200), 3000, ["critical"]),  # the settings move the verdict: no edit of the rules file
    ((3600, 7200), 5000, ["warning"]),
    ((60, 600), 3000, []),
    ((1800, 21600), None, []),  # no forecast, no verdict
])
def test_the_forecast_is_judged_against_the_pipeline_settings(within, full_in_s, expected):
    assert _urgency(PipelineState(log_dir_within_s=within), full_in_s) == expected


def test_the_horizons_are_pipeline_settings_the_page_the_nearer(tmp_path):
    from foundation.config import load_config
    from foundation.errors import ConfigError

    base = '[[clusters]]\nname = "a"\nbootstrap_servers = "k:9092"\n'
    path = tmp_path / "krm.toml"
    path.write_text(base + "[pipeline]\nlog_dir_page_within_s = 600\nlog_dir_warn_within_s = 3600\n")
    p = load_config(path).pipeline
    assert (p.log_dir_page_within_s, p.log_dir_warn_within_s) == (600, 3600)
    path.write_text(base + "[pipeline]\nlog_dir_page_within_s = 7200\nlog_dir_warn_within_s = 3600\n")
    with pytest.raises(ConfigError, match="log_dir_page_within_s"):
        load_config(path)
