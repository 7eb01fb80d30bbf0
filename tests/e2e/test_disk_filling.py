"""A log directory on a small real filesystem (a tmpfs), filled by a producer, end to end: krm forecasts
the fill before Kafka fails the directory, then names the failure: a broker with another directory lives
on (`krm_log_dir_offline`, its partitions OFFLINE_PARTITION `log_dir_offline`); one whose only directory
it was halts, and its departure is BROKER_DOWN `log_dir_full`. Nothing of it is lost from the incidents table.

Kafka takes a log directory offline on the first I/O error in it, `No space left on device` included
(KIP-112, LogDirFailureChannel); a broker with other directories lives on. The forecast is the directory's
usable bytes over its recent growth (collectors/disk_watch.py), from the broker's own DescribeLogDirs
answer (v4: total and usable bytes of the directory's filesystem).
"""

import threading
import time

import pytest

from foundation.config import load_config
from krm.runner import Monitor
from krm.scrape import scrape, series
from lab.harness import kafka_admin, local_cluster, partition_states, stored_incidents, wait_equal, wait_for, write_config
from lab.local_cluster import KRAFT_KAFKA_VERSION

pytestmark = pytest.mark.e2e

VICTIM = 2
SMALL = 1  # the victim's second log directory, on the small filesystem
SIZE_MB = 64


class Filler:
    """Appends about 1 MB/s (per_s 64 kB writes) to one partition until told to stop (or the broker refuses)."""

    def __init__(self, cluster, topic, partition, per_s=16):
        from kafka import KafkaProducer

        self._producer = KafkaProducer(bootstrap_servers=cluster.bootstrap_servers, acks=1, linger_ms=0,
                                       max_block_ms=2000, request_timeout_ms=3000, retries=0,
                                       delivery_timeout_ms=4000)  # a batch for a halted broker fails, not hangs
        self._stop = threading.Event()
        self.written = 0
        self._per_s = per_s  # 64 kB writes a second
        self._thread = threading.Thread(target=self._run, args=(topic, partition), daemon=True)
        self._thread.start()

    def _run(self, topic, partition):
        value = b"x" * (64 << 10)
        while not self._stop.is_set():
            try:
                self._producer.send(topic, value, partition=partition).get(timeout=3)
                self.written += len(value)
            except Exception:  # noqa: BLE001 - the directory failed: writes fail from then on
                time.sleep(0.2)
            self._stop.wait(1 / self._per_s)

    def stop(self):
        self._stop.set()
        self._thread.join(10)
        try:
            self._producer.close(timeout=5)
        except Exception:  # noqa: BLE001 - a batch for a halted broker never completes: nothing to flush to
            pass


def _dir_series(url, cluster, name, path="/data-2"):
    return {s.labels["log_dir"]: s.value for s in series(scrape(url), name, cluster=cluster)
            if s.labels["broker"] == str(VICTIM) and s.labels["log_dir"].rstrip("/").endswith(path)}


def test_a_filling_disk_is_forecast_before_it_fails_then_named(spark, tmp_path, tmp_path_factory):
    cluster = local_cluster(tmp_path_factory, "kraft", kafka_version=KRAFT_KAFKA_VERSION, log_dirs=2)
    monitor = filler = None
    try:
        cluster.stop(VICTIM)
        cluster.small_log_dir(VICTIM, SMALL, SIZE_MB)
        cluster.start(VICTIM)
        from kafka.admin import NewTopic

        topic = "fill"
        admin = kafka_admin(cluster)
        try:
            admin.create_topics([NewTopic(topic, -1, -1, replica_assignments={p: [VICTIM] for p in range(6)})])
        finally:
            admin.close()
        wait_for(lambda: len(s := partition_states(cluster, topic)) == 6 and all(v[0] >= 0 for v in s.values()), 30,
                 f"{topic} to have leaders")
        on_disk = wait_for(lambda: (d if None not in (d := {p: cluster.log_dir_of(VICTIM, topic, p) for p in range(6)}
                                                          ).values() else None), 30, "the victim's logs on disk")
        doomed = {p for p, d in on_disk.items() if d == SMALL}
        assert doomed, f"Kafka put {on_disk} (partition -> dir): nothing on the small disk, the test would prove nothing"

        config_path = write_config(cluster, tmp_path, collector_extra="log_dir_poll_s = 3.0")
        monitor = Monitor(load_config(config_path), spark=spark).start()
        url = monitor.metrics_url
        total = wait_for(lambda: _dir_series(url, cluster.name, "krm_log_dir_total_bytes") or None, 90,
                         "the small directory's size on /metrics")
        assert list(total.values()) == [SIZE_MB << 20]
        assert _dir_series(url, cluster.name, "krm_log_dir_full_in_seconds") == {}, "an idle disk has no forecast"

        filler = Filler(cluster, topic, min(doomed))
        t_fill = time.monotonic()
        # the first forecast may rest on a rate measured while the writes were starting (a loaded machine
        # writes slower at first): wait for the settled one within the page horizon, before the failure
        first = wait_for(lambda: _dir_series(url, cluster.name, "krm_log_dir_full_in_seconds") or None, 60,
                         "a fill forecast")
        forecast = wait_for(lambda: (f if (f := _dir_series(url, cluster.name, "krm_log_dir_full_in_seconds"))
                                     and max(f.values()) < 1800 else None), 60,
                            "a forecast within the page horizon (KafkaLogDirFullSoon)")
        t_forecast = time.monotonic()
        leaders = {p: v[0] for p, v in partition_states(cluster, topic).items()}
        assert all(leaders[p] == VICTIM for p in doomed), "the forecast came after the failure"
        assert _dir_series(url, cluster.name, "krm_log_dir_offline") == {}
        (eta,) = forecast.values()
        print(f"\nforecast {time.monotonic() - t_fill:.1f}s after the writes began: full in {eta:.0f}s "
              f"(first forecast {max(first.values()):.0f}s; {filler.written >> 20} MB written)")

        # Kafka's own view first: the directory fails when full, its partitions lose their leader
        wait_equal(lambda: {p for p, (leader, _, _) in partition_states(cluster, topic).items() if leader < 0},
                   doomed, 180, "Kafka to take the full directory offline")
        t_failed = time.monotonic()
        print(f"directory failed {t_failed - t_fill:.1f}s after the writes began, "
              f"{t_failed - t_forecast:.1f}s after the forecast")
        filler.stop()
        wait_equal(lambda: list(_dir_series(url, cluster.name, "krm_log_dir_offline").values()), [1.0], 60,
                   "krm_log_dir_offline")
        want = {(p, "log_dir_offline") for p in doomed}
        wait_equal(lambda: {(int(s.labels["partition"]), s.labels["cause"])
                            for s in series(scrape(url), "krm_partition_offline", cluster=cluster.name)
                            if s.labels["topic"] == topic}, want, 60, f"krm_partition_offline {sorted(want)}")

        def settled():
            found = [i for i in stored_incidents("--open", "--config", str(config_path))
                     if i["topic"] == topic and i["type"] == "OFFLINE_PARTITION"]
            return found if {(i["partition"], i["cause"]) for i in found} == want else None
        incidents = wait_for(settled, 30, "the incidents in the Delta table")
        assert all(i["details"]["must_return"] == [VICTIM] for i in incidents)
    finally:
        if filler is not None:
            filler.stop()
        if monitor is not None:
            monitor.stop()
        cluster.down()


def _state(cluster):
    return cluster.status()["brokers"][str(VICTIM)]["state"]


def test_a_broker_whose_only_disk_fills_goes_down_named_for_it(spark, tmp_path, tmp_path_factory):
    """ZooKeeper mode, one log directory per broker: Kafka halts the victim when its only directory fails
    (LogManager.handleLogDirFailure); its departure is named for the disk, not a crash nothing explains."""
    cluster = local_cluster(tmp_path_factory, "zk")
    monitor = filler = None
    try:
        cluster.stop(VICTIM)
        cluster.small_log_dir(VICTIM, 0, SIZE_MB)
        cluster.start(VICTIM)
        from kafka.admin import NewTopic

        topic = "fill1"
        admin = kafka_admin(cluster)
        try:
            admin.create_topics([NewTopic(topic, -1, -1, replica_assignments={p: [VICTIM] for p in range(3)})])
        finally:
            admin.close()
        wait_for(lambda: len(s := partition_states(cluster, topic)) == 3 and all(v[0] >= 0 for v in s.values()), 30,
                 f"{topic} to have leaders")
        config_path = write_config(cluster, tmp_path, collector_extra="log_dir_poll_s = 3.0")
        monitor = Monitor(load_config(config_path), spark=spark).start()
        url = monitor.metrics_url
        wait_for(lambda: _dir_series(url, cluster.name, "krm_log_dir_total_bytes", "/data") or None, 90,
                 "the small directory's size on /metrics")

        filler = Filler(cluster, topic, 0, per_s=32)
        t_fill = time.monotonic()
        wait_for(lambda: _dir_series(url, cluster.name, "krm_log_dir_full_in_seconds", "/data") or None, 60,
                 "a fill forecast")
        assert _state(cluster) == "running", "the forecast came after the failure"
        print(f"\nforecast {time.monotonic() - t_fill:.1f}s after the writes began")

        wait_equal(lambda: _state(cluster), "dead", 180, "Kafka to halt the full broker")
        print(f"broker {VICTIM} halted {time.monotonic() - t_fill:.1f}s after the writes began")
        filler.stop()
        wait_equal(lambda: {s.labels["cause"] for s in series(scrape(url), "krm_broker_down", cluster=cluster.name)
                            if s.labels["broker"] == str(VICTIM)}, {"log_dir_full"}, 60, "krm_broker_down log_dir_full")
        # settled, not first sight: krm_broker_down comes with the refused connections, the directory's series
        # go with the broker's registration (its session's expiry, later on a loaded machine)
        wait_equal(lambda: _dir_series(url, cluster.name, "krm_log_dir_total_bytes", "/data"), {}, 30,
                   "a down broker's last look is its departure's evidence, not a disk on /metrics")

        def settled():
            found = [i for i in stored_incidents("--open", "--config", str(config_path))
                     if i["type"] == "BROKER_DOWN" and i["broker"] == VICTIM]
            return found if [i["cause"] for i in found] == ["log_dir_full"] else None
        (down,) = wait_for(settled, 30, "BROKER_DOWN log_dir_full in the Delta table")
        assert down["details"]["disk_full"] is True
        assert [d["path"].rstrip("/").endswith("/data") for d in down["details"]["log_dirs"]] == [True]
        want = {(p, "single_replica_on_dead_broker") for p in range(3)}
        wait_equal(lambda: {(i["partition"], i["cause"]) for i in stored_incidents("--open", "--config", str(config_path))
                            if i["topic"] == topic and i["type"] == "OFFLINE_PARTITION"}, want, 30,
                   "its partitions offline in the Delta table")
    finally:
        if filler is not None:
            filler.stop()
        if monitor is not None:
            monitor.stop()
        cluster.down()
