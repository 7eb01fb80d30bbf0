"""The pipeline on a Spark standalone cluster instead of local[*]: a master and one worker started
with pyspark's own `spark-class`, the application capped at one core (`spark.cores.max`, set through
`[pipeline.spark_conf]`). The field case of docs/cases/rf1-outage-zk-chroot.md alerts and clears as
in local mode, and the worker's executor is shown to have run the micro-batches' tasks."""

import json
import os
import signal
import subprocess
import sys
import time
import urllib.error
import urllib.request
from pathlib import Path

import pytest

from foundation.config import load_config
from krm.scrape import scrape, series
from lab.local_cluster import free_port
from lab.harness import KRM, create_topic, delete_topic, wait_equal, wait_for, write_config

pytestmark = pytest.mark.e2e


def _spark_home() -> Path:
    import pyspark

    return Path(pyspark.__file__).parent


def _master_state(ui_port):
    with urllib.request.urlopen(f"http://127.0.0.1:{ui_port}/json/", timeout=5) as r:
        return json.load(r)


@pytest.fixture
def standalone(tmp_path):
    """(master URL, master web UI port, the worker's work dir); both JVMs stopped afterwards."""
    home = _spark_home()
    env = {**os.environ, "SPARK_HOME": str(home), "SPARK_LOCAL_IP": "127.0.0.1", "PYSPARK_PYTHON": sys.executable,
           "SPARK_LOG_DIR": str(tmp_path / "spark-logs")}
    port, ui = free_port(), free_port()
    work = tmp_path / "worker-work"
    spark_class = str(home / "bin" / "spark-class")
    procs = [subprocess.Popen([spark_class, "org.apache.spark.deploy.master.Master", "--host", "127.0.0.1",
                               "--port", str(port), "--webui-port", str(ui)], env=env,
                              stdout=open(tmp_path / "master.log", "w"), stderr=subprocess.STDOUT, start_new_session=True)]
    try:
        wait_for(lambda: _master_state(ui), 60, "the Spark master")
        procs.append(subprocess.Popen([spark_class, "org.apache.spark.deploy.worker.Worker", "--host", "127.0.0.1",
                                       "--cores", "2", "--memory", "2g", "--work-dir", str(work),
                                       "--webui-port", str(free_port()), f"spark://127.0.0.1:{port}"], env=env,
                                      stdout=open(tmp_path / "worker.log", "w"), stderr=subprocess.STDOUT,
                                      start_new_session=True))
        wait_for(lambda: [w for w in _master_state(ui)["workers"] if w["state"] == "ALIVE"], 60, "a live worker")
        yield f"spark://127.0.0.1:{port}", ui, work
    finally:
        for p in procs:
            os.killpg(p.pid, signal.SIGTERM)
        for p in procs:
            try:
                p.wait(timeout=30)
            except subprocess.TimeoutExpired:
                os.killpg(p.pid, signal.SIGKILL)


def _offline(url, cluster, topic):
    return {int(s.labels["partition"]) for s in series(scrape(url), "krm_partition_offline", cluster=cluster)
            if s.labels["topic"] == topic}


def test_rf1_outage_on_a_spark_standalone_cluster(zk_cluster, standalone, tmp_path):
    master, ui, work = standalone
    cluster = zk_cluster
    topic = "rf1-spark-cluster"
    victim = 1
    assignment = create_topic(cluster, topic, partitions=6, rf=1)
    expected = {p for p, r in assignment.items() if r == [victim]}
    assert expected
    config_path = write_config(cluster, tmp_path, poll_interval_s=2.0, pipeline_extra=(  # krm's default poll
        f'spark_master = "{master}"\n\n[pipeline.spark_conf]\n"spark.cores.max" = "1"\n'
        f'"spark.executor.memory" = "1g"\n'))
    url = f"http://127.0.0.1:{load_config(config_path).pipeline.metrics_port}/metrics"
    log = open(tmp_path / "krm-run.log", "w")
    run = subprocess.Popen([KRM, "run", "--config", str(config_path)], stdout=log, stderr=subprocess.STDOUT,
                           stdin=subprocess.DEVNULL, start_new_session=True,
                           env={**os.environ, "SPARK_LOCAL_IP": "127.0.0.1"})
    try:
        wait_for(lambda: [s for s in series(scrape(url), "krm_pipeline_up") if s.value == 1], 240,
                 "krm_pipeline_up 1 (micro-batches on the cluster)")
        (app,) = _master_state(ui)["activeapps"]
        assert app["cores"] == 1, app  # spark.cores.max from [pipeline.spark_conf] reached the master

        cluster.kill(victim)
        wait_equal(lambda: _offline(url, cluster.name, topic), expected, 90, "the offline partitions")
        cluster.start(victim)
        wait_equal(lambda: _offline(url, cluster.name, topic), set(), 90, "the offline partitions to clear")

        # the executor of the worker ran the tasks (the driver only plans in standalone mode)
        logs = list(work.glob(f"{app['id']}/*/stderr"))
        assert logs, f"no executor log under {work}"
        finished = sum(p.read_text(errors="replace").count("Finished task") for p in logs)
        assert finished > 0, "the executor ran no task"
        print(f"\nexecutor tasks finished on the standalone worker: {finished}")
    finally:
        run.send_signal(signal.SIGTERM)
        try:
            rc = run.wait(timeout=90)
        except subprocess.TimeoutExpired:
            run.send_signal(signal.SIGUSR1)  # the stacks of the threads that held the shutdown up, into the log
            time.sleep(2)
            os.killpg(run.pid, signal.SIGKILL)
            rc = None
        if cluster.status()["brokers"][str(victim)]["state"] == "dead":
            cluster.start(victim)
        delete_topic(cluster, topic)
    out = (tmp_path / "krm-run.log").read_text(errors="replace")
    assert rc == 0, out[-6000:]
    assert "Traceback" not in out, out[-3000:]
    assert " INFO great_expectations" not in out  # its logs at WARNING unless asked
    print(next(line for line in out.splitlines() if "krm.runner: stopped in" in line))


def test_an_unreachable_master_ends_in_one_line(zk_cluster, tmp_path):
    """Nothing listens at the master's address: /readyz says what it waits for meanwhile, then
    `krm pipeline` exits 2 naming the address and the refusal in one line, no Py4J traceback (after
    krm's 15 s of patience, not Spark's minute of registration retries)."""
    config_path = write_config(zk_cluster, tmp_path, pipeline_extra=f'spark_master = "spark://127.0.0.1:{free_port()}"\n')
    base = f"http://127.0.0.1:{load_config(config_path).pipeline.metrics_port}"
    run = subprocess.Popen([KRM, "pipeline", "--config", str(config_path)], stdout=subprocess.PIPE,
                           stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, text=True, start_new_session=True,
                           env={**os.environ, "SPARK_LOCAL_IP": "127.0.0.1"})
    try:
        def not_ready():
            try:
                urllib.request.urlopen(f"{base}/readyz", timeout=5)
            except urllib.error.HTTPError as e:
                return e.code == 503 and e.read().decode()
            return None
        said = wait_for(not_ready, 60, "/readyz while the session starts")
        assert "starting the Spark session on spark://127.0.0.1:" in said
        out, _ = run.communicate(timeout=240)
    finally:
        if run.poll() is None:
            os.killpg(run.pid, signal.SIGKILL)
    errors = [line for line in out.splitlines() if line.startswith("krm: error:")]
    assert run.returncode == 2, out[-3000:]
    assert len(errors) == 1 and "could not start: no master accepts connections at 127.0.0.1:" in errors[0], out[-3000:]
    assert "Connection refused" in errors[0], errors
    assert "Traceback" not in out and "Py4JJavaError" not in out, out[-3000:]
