from pathlib import Path

import pytest

from krm.config import load_config, parse_config
from krm.errors import ConfigError

pytestmark = pytest.mark.unit

MINIMAL = {"clusters": [{"name": "prod-1", "bootstrap_servers": "k1:9092"}]}


def test_defaults_and_observations_fallback():
    c = parse_config(MINIMAL)
    assert c.observations.bootstrap_servers == "k1:9092"
    assert c.collector.poll_interval_s == 2.0
    assert c.pipeline.metrics_port == 9308


@pytest.mark.parametrize("raw,message", [
    ({}, "at least one [[clusters]]"),
    ({"clusters": [{"name": "a"}]}, "missing required key 'bootstrap_servers'"),
    ({**MINIMAL, "collector": {"poll_interval_s": 0}}, "[collector] poll_interval_s must be >= 0.05"),
    ({**MINIMAL, "collector": {"poll_interval_s": "fast"}}, "poll_interval_s must be a number"),
    ({**MINIMAL, "pipeline": {"metrics_port": 70000}}, "metrics_port must be <= 65535"),
    ({**MINIMAL, "pipeline": {"starting_offsets": "now"}}, "starting_offsets must be 'latest' or 'earliest'"),
    ({**MINIMAL, "colector": {}}, "unknown key(s) ['colector']"),
    ({"clusters": [{"name": "a b", "bootstrap_servers": "x"}]}, "may hold only letters"),
    ({"clusters": [{"name": "a", "bootstrap_servers": "x"}, {"name": "a", "bootstrap_servers": "y"}]}, "unique"),
    ({**MINIMAL, "pipeline": {"spark_conf": {"executor.memory": "2g"}}}, "'executor.memory' is not a Spark setting"),
    ({**MINIMAL, "pipeline": {"spark_conf": {"spark.jars": ["a.jar"]}}}, "spark.jars must be a string, number or boolean"),
    ({**MINIMAL, "pipeline": {"spark_conf": "local"}}, "[pipeline.spark_conf] must be a table"),
])
def test_bad_config_names_the_key(raw, message):
    with pytest.raises(ConfigError) as e:
        parse_config(raw)
    assert message in str(e.value)


def test_file_errors_name_the_file(tmp_path):
    bad = tmp_path / "krm.toml"
    bad.write_text("[[clusters]\n")
    with pytest.raises(ConfigError, match="krm.toml: not valid TOML"):
        load_config(bad)
    with pytest.raises(ConfigError, match="does not exist"):
        load_config(tmp_path / "missing.toml")


def test_relative_data_dir_is_relative_to_the_file(tmp_path):
    f = tmp_path / "krm.toml"
    f.write_text('[[clusters]]\nname = "a"\nbootstrap_servers = "x:1"\n[pipeline]\ndata_dir = "d"\n')
    assert load_config(f).pipeline.data_dir == tmp_path / "d"


def test_spark_conf_takes_quoted_and_nested_keys(tmp_path):
    f = tmp_path / "krm.toml"
    f.write_text('[[clusters]]\nname = "a"\nbootstrap_servers = "h:1"\n[pipeline]\nspark_master = "spark://m:7077"\n'
                 '[pipeline.spark_conf]\n"spark.cores.max" = 1\nspark.executor.memory = "1g"\n'
                 'spark.dynamicAllocation.enabled = false\n')
    p = load_config(f).pipeline
    assert p.spark_master == "spark://m:7077"
    assert dict(p.spark_conf) == {"spark.cores.max": "1", "spark.executor.memory": "1g",
                                  "spark.dynamicAllocation.enabled": "false"}


def test_spark_conf_reaches_the_session_over_krms_defaults(monkeypatch, tmp_path):
    """`krm pipeline` builds its SparkSession with [pipeline.spark_conf] on top of krm's defaults."""
    import pipelines.job
    import pipelines.session
    from krm.config import parse_config
    from krm.local_cluster import free_port
    from krm.runner import Monitor

    seen = {}

    def fake_session(master, app_name="krm-pipeline", log_dir=None, extra=None):
        seen.update(master=master, extra=extra)
        return object()

    class FakePipeline:
        def __init__(self, config, spark, state):
            pass

        def start(self):
            return self

        def stop(self):
            pass

    monkeypatch.setattr(pipelines.session, "build_session", fake_session)
    monkeypatch.setattr(pipelines.job, "Pipeline", FakePipeline)
    raw = {**MINIMAL, "pipeline": {"data_dir": str(tmp_path), "metrics_port": free_port(), "spark_master": "spark://m:7077",
                                   "spark_conf": {"spark.cores.max": 1, "spark.driver.host": "10.0.0.5"}}}
    monitor = Monitor(parse_config(raw), collect=False).start()
    try:
        assert seen == {"master": "spark://m:7077", "extra": {"spark.cores.max": "1", "spark.driver.host": "10.0.0.5"}}
    finally:
        monitor._spark = None
        monitor.stop()


def test_data_dir_uris(tmp_path):
    base = {"clusters": [{"name": "c", "bootstrap_servers": "b:9092"}]}
    assert parse_config({**base, "pipeline": {"data_dir": "file:///var/lib/krm"}}).pipeline.data_dir == Path("/var/lib/krm")
    with pytest.raises(ConfigError, match=r"data_dir 's3a://bucket/krm': s3a:// storage is not supported yet"):
        parse_config({**base, "pipeline": {"data_dir": "s3a://bucket/krm"}})
