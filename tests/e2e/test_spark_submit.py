"""krm submitted as a Spark application, as a Spark shop runs its jobs:
`spark-submit --master local[2] $(krm setup --spark-submit-args) run --config krm.toml`. spark-submit's
master wins over the config's (set here to a master that does not exist), its --jars carry the
pipeline's jars, and the field case of docs/cases/rf1-outage-zk-chroot.md alerts as under `krm run`.
The driver (the krm Python process) stops cleanly on SIGTERM."""

import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from foundation.config import load_config
from krm.scrape import scrape, series
from lab.harness import KRM, create_topic, delete_topic, wait_equal, wait_for, write_config

pytestmark = pytest.mark.e2e


def _offline(url, cluster, topic):
    return {int(s.labels["partition"]) for s in series(scrape(url), "krm_partition_offline", cluster=cluster)
            if s.labels["topic"] == topic}


def _python_driver(pgid: int) -> int | None:
    """The krm Python process spark-submit's JVM started (same process group, a Python executable)."""
    for d in Path("/proc").iterdir():
        if not d.name.isdigit():
            continue
        try:
            if os.getpgid(int(d.name)) != pgid:
                continue
            argv = (d / "cmdline").read_bytes().split(b"\0")
        except (OSError, ProcessLookupError):
            continue
        if "python" in Path(argv[0].decode(errors="replace")).name and any(b"krm_driver.py" in a for a in argv):
            return int(d.name)
    return None


def test_rf1_outage_under_spark_submit(zk_cluster, tmp_path):
    cluster = zk_cluster
    topic, victim = "rf1-spark-submit", 3
    assignment = create_topic(cluster, topic, partitions=6, rf=1)
    expected = {p for p, r in assignment.items() if r == [victim]}
    assert expected
    config_path = write_config(cluster, tmp_path, poll_interval_s=2.0,  # krm's default poll
                               pipeline_extra='spark_master = "spark://127.0.0.1:9"\n')
    url = f"http://127.0.0.1:{load_config(config_path).pipeline.metrics_port}/metrics"
    submit_args = subprocess.run([KRM, "setup", "--spark-submit-args"], capture_output=True, text=True,
                                 check=True).stdout.split()
    assert submit_args[0] == "--jars" and submit_args[2].endswith("krm_driver.py")
    env = {**os.environ, "SPARK_LOCAL_IP": "127.0.0.1", "PYSPARK_PYTHON": sys.executable,
           "PYSPARK_DRIVER_PYTHON": sys.executable}
    log_path = tmp_path / "spark-submit.log"
    proc = subprocess.Popen([str(Path(sys.executable).parent / "spark-submit"), "--master", "local[2]",
                             "--driver-memory", "1g", *submit_args, "run", "--config", str(config_path)],
                            stdout=open(log_path, "w"), stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                            start_new_session=True, env=env)
    driver = None
    try:
        # the config's master (nothing listens on port 9) would never come up: spark-submit's is used
        wait_for(lambda: [s for s in series(scrape(url), "krm_pipeline_up") if s.value == 1], 240,
                 "krm_pipeline_up 1 under spark-submit")
        cluster.kill(victim)
        wait_equal(lambda: _offline(url, cluster.name, topic), expected, 90, "the offline partitions")
        cluster.start(victim)
        wait_equal(lambda: _offline(url, cluster.name, topic), set(), 90, "the offline partitions to clear")
        driver = _python_driver(proc.pid)
        assert driver is not None, "no krm Python driver under spark-submit"
    finally:
        if driver is not None:
            os.kill(driver, signal.SIGTERM)  # the driver stops the queries and Spark; spark-submit then exits
        try:
            rc = proc.wait(timeout=90)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            rc = None
        if cluster.status()["brokers"][str(victim)]["state"] == "dead":
            cluster.start(victim)
        delete_topic(cluster, topic)
    out = log_path.read_text(errors="replace")
    assert "under spark-submit: its master and spark.driver.extraJavaOptions, spark.driver.memory, spark.jars apply" \
        in out, out[-3000:]
    assert rc == 0, out[-4000:]
    assert "Traceback" not in out, out[-4000:]
