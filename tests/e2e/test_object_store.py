"""The pipeline with its data_dir on a remote store, started by the test: an S3-compatible object
store (moto's standalone server stands in for S3 / MinIO) and a real HDFS (a NameNode and a DataNode,
tests/hdfs_server.py). `krm run` writes checkpoints and Delta tables through Hadoop's S3A connector or
HDFS client, the incident store through delta-rs; `krm incidents` and `krm maintain` read the same
URI. The field case of docs/cases/rf1-outage-zk-chroot.md opens an incident, `krm run` is stopped and
started again from the checkpoints on the store, and the incident it resumes is resolved under the
same id when the broker returns."""

import json
import os
import signal
import subprocess
import sys

import pytest

from foundation.config import load_config
from krm.scrape import scrape, series
from lab.local_cluster import free_port
from lab.harness import KRM, create_topic, delete_topic, wait_equal, wait_for, write_config

pytestmark = pytest.mark.e2e

BUCKET = "krm-e2e"


@pytest.fixture(scope="module")
def hdfs(tmp_path_factory):
    from tests.hdfs_server import LocalHdfs

    server = LocalHdfs(tmp_path_factory.mktemp("hdfs")).start()
    try:
        yield server
    finally:
        server.stop()


@pytest.fixture(params=["s3", "hdfs"])
def store(request, tmp_path, monkeypatch):
    """(data_dir URI, [pipeline.storage] lines) of a fresh folder on the store."""
    if request.param == "hdfs":
        yield f"{request.getfixturevalue('hdfs').url}/krm/{tmp_path.name}", ""
        return
    endpoint = request.getfixturevalue("s3_endpoint")
    monkeypatch.setenv("KRM_TEST_S3_KEY", "krm")
    monkeypatch.setenv("KRM_TEST_S3_SECRET", "krm-secret")
    yield f"s3a://{BUCKET}/{tmp_path.name}", (
        f'\n[pipeline.storage]\nendpoint = "{endpoint}"\nregion = "us-east-1"\npath_style_access = true\n'
        'access_key_id_env = "KRM_TEST_S3_KEY"\nsecret_access_key_env = "KRM_TEST_S3_SECRET"\n')


@pytest.fixture(scope="module")
def s3_endpoint(tmp_path_factory):
    """http://127.0.0.1:<port> of a moto S3 server with the bucket created; stopped afterwards."""
    import boto3

    port = free_port()
    log = open(tmp_path_factory.mktemp("moto") / "moto.log", "w")
    proc = subprocess.Popen([os.path.join(os.path.dirname(sys.executable), "moto_server"), "-H", "127.0.0.1",
                             "-p", str(port)], stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
    url = f"http://127.0.0.1:{port}"
    try:
        s3 = boto3.client("s3", endpoint_url=url, region_name="us-east-1", aws_access_key_id="krm",
                          aws_secret_access_key="krm-secret")
        wait_for(lambda: s3.create_bucket(Bucket=BUCKET), 30, "the S3 server")
        yield url
    finally:
        os.killpg(proc.pid, signal.SIGTERM)
        proc.wait(timeout=30)


def _offline(url, cluster, topic):
    return {int(s.labels["partition"]) for s in series(scrape(url), "krm_partition_offline", cluster=cluster)
            if s.labels["topic"] == topic}


def _krm(args, env):
    out = subprocess.run([KRM, *args], capture_output=True, text=True, timeout=180, env=env)
    assert out.returncode == 0, out.stderr[-3000:]
    return out.stdout


def test_rf1_outage_with_the_data_dir_on_a_remote_store(zk_cluster, store, tmp_path):
    cluster = zk_cluster
    data_dir, storage = store
    scheme = data_dir.split("://", 1)[0]
    topic, victim = f"rf1-on-{scheme}", 2
    assignment = create_topic(cluster, topic, partitions=6, rf=1)
    expected = {p for p, r in assignment.items() if r == [victim]}
    assert expected
    config_path = write_config(cluster, tmp_path, poll_interval_s=2.0, pipeline_extra=storage,
                               history_trigger_s=10.0)  # krm's default poll: no timing is checked
    text = config_path.read_text()
    local_dir = next(line for line in text.splitlines() if line.startswith("data_dir"))
    config_path.write_text(text.replace(local_dir, f'data_dir = "{data_dir}"'))
    env = {**os.environ, "SPARK_LOCAL_IP": "127.0.0.1"}
    for k in ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY"):  # only the config's credentials may work
        env.pop(k, None)
    url = f"http://127.0.0.1:{load_config(config_path).pipeline.metrics_port}/metrics"

    def start(name):
        return subprocess.Popen([KRM, "run", "--config", str(config_path)], stdout=open(tmp_path / name, "w"),
                                stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, start_new_session=True, env=env)

    def stop(proc, name):
        proc.send_signal(signal.SIGTERM)
        try:
            rc = proc.wait(timeout=90)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            rc = None
        out = (tmp_path / name).read_text(errors="replace")
        assert rc == 0 and "Traceback" not in out, out[-4000:]

    def incidents():
        return [i for i in json.loads(_krm(["incidents", "--json", "--type", "OFFLINE_PARTITION", "--config",
                                            str(config_path)], env)) if i["topic"] == topic]

    run = start("run-1.log")
    try:
        wait_for(lambda: [s for s in series(scrape(url), "krm_pipeline_up") if s.value == 1], 240,
                 f"krm_pipeline_up 1 with the tables on {scheme}://")
        cluster.kill(victim)
        wait_equal(lambda: _offline(url, cluster.name, topic), expected, 90, "the offline partitions")
        opened = wait_for(lambda: {i["partition"]: i for i in incidents() if i["status"] == "open"}
                          if {i["partition"] for i in incidents() if i["status"] == "open"} == expected else None,
                          60, "the incidents in the incidents table on the store (read by `krm incidents`)")
        assert {i["cause"] for i in opened.values()} == {"single_replica_on_dead_broker"}
    finally:
        stop(run, "run-1.log")
    # the second start resumes from the checkpoints and the incidents on the store
    run = start("run-2.log")
    try:
        wait_for(lambda: [s for s in series(scrape(url), "krm_pipeline_up") if s.value == 1], 240,
                 "krm_pipeline_up 1 after the restart")
        cluster.start(victim)
        wait_equal(lambda: _offline(url, cluster.name, topic), set(), 90, "the offline partitions to clear")
        resolved = wait_for(lambda: {i["partition"]: i for i in incidents() if i["status"] == "resolved"}
                            if {i["partition"] for i in incidents() if i["status"] == "resolved"} == expected
                            else None, 60, "the incidents resolved on the store")
        assert {p: i["incident_id"] for p, i in resolved.items()} == {p: i["incident_id"] for p, i in opened.items()}
        assert len(incidents()) == len(expected)  # resumed, not opened again
        log = (tmp_path / "run-2.log").read_text(errors="replace")
        assert "resuming with" in log
        tables = load_config(config_path).pipeline.data_dir / "tables"
        wait_for(lambda: all((tables / t).is_table() for t in ("observations", "partition_state", "replica_lag")),
                 120, "the history tables on the store")
    finally:
        stop(run, "run-2.log")
        if cluster.status()["brokers"][str(victim)]["state"] == "dead":
            cluster.start(victim)
        delete_topic(cluster, topic)
    # the history tables are on the store too; maintenance (with the pipeline stopped) reads them there
    out = _krm(["maintain", "--config", str(config_path)], env)
    assert "observations" in out and "partition_state" in out and "ERROR" not in out, out
    assert not (tmp_path / f"{scheme}:").exists()  # nothing was written to a local folder named after the URI
