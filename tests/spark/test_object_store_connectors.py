"""The pinned connectors for abfss:// and gs:// load in krm's Spark session and speak to the store.

No Azure or Google endpoint is reachable from the test machine, and the emulators do not cover both
sides (Azurite has no ADLS Gen2 `dfs` endpoint; fake-gcs-server refuses delta-rs's uploads), so this
checks what a missing or mismatched jar would break: with the settings krm derives from
`[pipeline.storage]`, Hadoop resolves the scheme to the connector's file system and a first request
fails on the network (unknown host, connection refused), not on a missing class. s3a:// is covered
end to end by tests/e2e/test_object_store.py.
"""

from __future__ import annotations

import socket

import pytest

from foundation.config import parse_config

pytestmark = pytest.mark.spark


def _closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _first_request(spark, uri: str, settings: dict[str, str]) -> tuple[str, str]:
    """(file system class, the error of `exists(uri)`) under a copy of the session's Hadoop conf."""
    jvm = spark._jvm
    conf = jvm.org.apache.hadoop.conf.Configuration(spark._jsc.hadoopConfiguration())
    for key, value in settings.items():
        conf.set(key.removeprefix("spark.hadoop."), value)
    scheme = uri.split("://", 1)[0]
    conf.set(f"fs.{scheme}.impl.disable.cache", "true")
    path = jvm.org.apache.hadoop.fs.Path(uri)
    fs = path.getFileSystem(conf)
    try:
        fs.exists(path)
    except Exception as e:  # noqa: BLE001 - Py4J wraps the Java exception; its text is what we check
        return fs.getClass().getName(), str(e)
    finally:
        fs.close()
    return fs.getClass().getName(), ""


def _spark_settings(tmp_path, data_dir: str, storage: dict) -> dict[str, str]:
    cfg = parse_config({"clusters": [{"name": "a", "bootstrap_servers": "x:1"}],
                        "pipeline": {"data_dir": data_dir, "storage": storage}}, source=tmp_path / "krm.toml")
    return cfg.pipeline.storage.spark_conf(str(cfg.pipeline.data_dir))


def test_abfss_resolves_to_hadoop_azure(spark, tmp_path, monkeypatch):
    monkeypatch.setenv("KRM_TEST_AZ_KEY", "a2V5LW5vdC11c2Vk")
    uri = "abfss://krm@krmtestaccount.dfs.core.invalid/monitoring"
    settings = _spark_settings(tmp_path, uri, {"azure_account_key_env": "KRM_TEST_AZ_KEY"})
    settings["fs.azure.io.retry.max.retries"] = "0"
    cls, error = _first_request(spark, uri, settings)
    assert cls == "org.apache.hadoop.fs.azurebfs.SecureAzureBlobFileSystem"
    assert "UnknownHostException: krmtestaccount.dfs.core.invalid" in error, error[:2000]
    assert "ClassNotFound" not in error and "NoClassDefFound" not in error


def test_gs_resolves_to_the_gcs_connector(spark, tmp_path):
    keyfile = tmp_path / "sa.json"  # never read: the connector is pointed at a closed port first
    keyfile.write_text("{}")
    keyfile.chmod(0o600)
    port = _closed_port()
    uri = "gs://krm-test-bucket/monitoring"
    settings = _spark_settings(tmp_path, uri, {"endpoint": f"http://127.0.0.1:{port}"})
    assert settings["spark.hadoop.fs.gs.auth.type"] == "APPLICATION_DEFAULT"
    settings |= {"spark.hadoop.fs.gs.auth.type": "UNAUTHENTICATED", "fs.gs.http.max.retry": "0"}
    cls, error = _first_request(spark, uri, settings)
    assert cls == "com.google.cloud.hadoop.fs.gcs.GoogleHadoopFileSystem"
    assert "ConnectException" in error and "Connection refused" in error, error[:2000]
    assert "ClassNotFound" not in error and "NoClassDefFound" not in error
