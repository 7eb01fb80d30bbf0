from pathlib import Path

import pytest

from foundation.config import load_config, parse_config
from foundation.errors import ConfigError

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
    ({**MINIMAL, "pipeline": {"console_url": "krm.example:9308"}}, "console_url must start with http:// or https://"),
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
    assert load_config(f).pipeline.data_dir.path == tmp_path / "d"


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
    import krm.runner
    from foundation.config import parse_config
    from krm.runner import Monitor
    from lab.local_cluster import free_port

    seen = {}

    def fake_session(master, app_name="krm-pipeline", log_dir=None, extra=None, driver_java_options=""):
        seen.update(master=master, extra=extra)
        return object()

    class FakePipeline:
        def __init__(self, config, spark, state, history_since_ms=None, collector_said=None):
            pass

        def start(self):
            return self

        def stop(self):
            pass

    monkeypatch.setattr(krm.runner, "build_session", fake_session)
    monkeypatch.setattr(krm.runner, "Pipeline", FakePipeline)
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
    assert parse_config({**base, "pipeline": {"data_dir": "file:///var/lib/krm"}}).pipeline.data_dir.path == Path("/var/lib/krm")
    s3 = parse_config({**base, "pipeline": {"data_dir": "s3a://bucket/krm/", "storage": {
        "endpoint": "http://127.0.0.1:9000", "path_style_access": True, "region": "eu-west-1"}}}).pipeline
    assert str(s3.data_dir) == "s3a://bucket/krm" and str(s3.data_dir / "tables") == "s3a://bucket/krm/tables"
    assert (s3.data_dir / "tables").delta_uri == "s3://bucket/krm/tables"
    assert (s3.data_dir / "t").options() == {"AWS_S3_ALLOW_UNSAFE_RENAME": "true", "AWS_ENDPOINT_URL": "http://127.0.0.1:9000",
                                             "AWS_ALLOW_HTTP": "true", "AWS_REGION": "eu-west-1",
                                             "AWS_VIRTUAL_HOSTED_STYLE_REQUEST": "false"}
    assert s3.storage.spark_conf(str(s3.data_dir)) == {"spark.hadoop.fs.s3a.endpoint": "http://127.0.0.1:9000",
                                       "spark.hadoop.fs.s3a.connection.ssl.enabled": "false",
                                       "spark.hadoop.fs.s3a.endpoint.region": "eu-west-1",
                                       "spark.hadoop.fs.s3a.path.style.access": "true"}
    assert str(parse_config({**base, "pipeline": {"data_dir": "hdfs://nn:8020/krm"}}).pipeline.data_dir) == "hdfs://nn:8020/krm"
    with pytest.raises(ConfigError, match=r"data_dir 'wasbs://c@a.blob.core.windows.net/k': wasbs:// is not supported "
                                          r"\(use abfss://container@account.dfs.core.windows.net/path"):
        parse_config({**base, "pipeline": {"data_dir": "wasbs://c@a.blob.core.windows.net/k"}})
    with pytest.raises(ConfigError, match=r"an Azure URI names the container and the account's dfs endpoint"):
        parse_config({**base, "pipeline": {"data_dir": "abfss://acct.dfs.core.windows.net/k"}})
    with pytest.raises(ConfigError, match=r"s3:// is not supported \(use s3a://"):
        parse_config({**base, "pipeline": {"data_dir": "s3://bucket/krm"}})
    with pytest.raises(ConfigError, match=r"names no bucket"):
        parse_config({**base, "pipeline": {"data_dir": "s3a:///krm"}})


def test_storage_secrets_and_errors(tmp_path, monkeypatch):
    base = {"clusters": [{"name": "a", "bootstrap_servers": "x:1"}]}

    def storage(t):
        return parse_config({**base, "pipeline": {"data_dir": "s3a://b/k", "storage": t}}).pipeline.storage

    monkeypatch.setenv("KRM_TEST_KEY", "AKIA1")
    monkeypatch.setenv("KRM_TEST_SECRET", "s3cret")
    s = storage({"access_key_id_env": "KRM_TEST_KEY", "secret_access_key_env": "KRM_TEST_SECRET"})
    assert s.delta_options("s3a://b/k")["AWS_SECRET_ACCESS_KEY"] == "s3cret"
    assert s.spark_conf("s3a://b/k")["spark.hadoop.fs.s3a.access.key"] == "AKIA1"
    with pytest.raises(ConfigError, match="give both access_key_id_"):
        storage({"access_key_id_env": "KRM_TEST_KEY"})
    with pytest.raises(ConfigError, match="secrets are not kept in the config|unknown key"):
        storage({"secret_access_key": "plain"})
    with pytest.raises(ConfigError, match="endpoint must be an http"):
        storage({"endpoint": "minio:9000"})
    loose = tmp_path / "secret"
    loose.write_text("x")
    loose.chmod(0o644)
    with pytest.raises(ConfigError, match="chmod"):
        storage({"access_key_id_env": "KRM_TEST_KEY", "secret_access_key_file": str(loose)})


def test_azure_and_gcs_storage(tmp_path, monkeypatch):
    """abfss:// and gs://: the Hadoop settings (hadoop-azure's ConfigurationKeys, the GCS connector's
    fs.gs.*) and delta-rs options for each way of authenticating; keys of another store refused."""
    base = {"clusters": [{"name": "a", "bootstrap_servers": "x:1"}]}
    abfss = "abfss://krm@acct.dfs.core.windows.net/monitoring/"

    def pipeline(data_dir, storage=None):
        return parse_config({**base, "pipeline": {"data_dir": data_dir, **({"storage": storage} if storage else {})}}).pipeline

    host = "acct.dfs.core.windows.net"
    p = pipeline(abfss)
    assert str(p.data_dir / "incidents") == "abfss://krm@acct.dfs.core.windows.net/monitoring/incidents"
    assert (p.data_dir / "t").delta_uri == "abfss://krm@acct.dfs.core.windows.net/monitoring/t"
    assert p.storage.spark_conf(str(p.data_dir)) == {  # managed identity
        f"spark.hadoop.fs.azure.account.auth.type.{host}": "OAuth",
        f"spark.hadoop.fs.azure.account.oauth.provider.type.{host}": "org.apache.hadoop.fs.azurebfs.oauth2.MsiTokenProvider"}
    assert (p.data_dir / "t").options() == {"AZURE_STORAGE_ACCOUNT_NAME": "acct"}
    monkeypatch.setenv("KRM_AZ_KEY", "a2V5")
    p = pipeline(abfss, {"azure_account_key_env": "KRM_AZ_KEY"})
    assert p.storage.spark_conf(str(p.data_dir)) == {f"spark.hadoop.fs.azure.account.key.{host}": "a2V5"}
    assert p.data_dir.options() == {"AZURE_STORAGE_ACCOUNT_NAME": "acct", "AZURE_STORAGE_ACCOUNT_KEY": "a2V5"}
    secret = tmp_path / "sp"
    secret.write_text("s3cret\n")
    secret.chmod(0o600)
    p = pipeline(abfss, {"azure_client_id": "cid", "azure_tenant_id": "tid", "azure_client_secret_file": str(secret)})
    conf = p.storage.spark_conf(str(p.data_dir))
    assert conf[f"spark.hadoop.fs.azure.account.oauth2.client.secret.{host}"] == "s3cret"
    assert conf[f"spark.hadoop.fs.azure.account.oauth2.client.endpoint.{host}"] == "https://login.microsoftonline.com/tid/oauth2/token"
    assert p.data_dir.options() == {"AZURE_STORAGE_ACCOUNT_NAME": "acct", "AZURE_CLIENT_ID": "cid",
                                    "AZURE_TENANT_ID": "tid", "AZURE_CLIENT_SECRET": "s3cret"}
    with pytest.raises(ConfigError, match="a service principal needs azure_client_id, azure_tenant_id"):
        pipeline(abfss, {"azure_client_id": "cid", "azure_client_secret_file": str(secret)})
    with pytest.raises(ConfigError, match="not both"):
        pipeline(abfss, {"azure_account_key_env": "KRM_AZ_KEY", "azure_client_id": "cid", "azure_tenant_id": "t",
                         "azure_client_secret_file": str(secret)})

    p = pipeline("gs://bucket/krm")
    assert p.storage.spark_conf(str(p.data_dir)) == {
        "spark.hadoop.fs.gs.impl": "com.google.cloud.hadoop.fs.gcs.GoogleHadoopFileSystem",
        "spark.hadoop.fs.AbstractFileSystem.gs.impl": "com.google.cloud.hadoop.fs.gcs.GoogleHadoopFS",
        "spark.hadoop.fs.gs.auth.type": "APPLICATION_DEFAULT"}
    assert p.data_dir.options() == {}
    keyfile = tmp_path / "sa.json"
    keyfile.write_text("{}")
    keyfile.chmod(0o600)
    p = pipeline("gs://bucket/krm", {"gcs_service_account_key_file": str(keyfile), "endpoint": "http://127.0.0.1:4443"})
    conf = p.storage.spark_conf(str(p.data_dir))
    assert conf["spark.hadoop.fs.gs.auth.type"] == "SERVICE_ACCOUNT_JSON_KEYFILE"
    assert conf["spark.hadoop.fs.gs.auth.service.account.json.keyfile"] == str(keyfile)
    assert conf["spark.hadoop.fs.gs.storage.root.url"] == "http://127.0.0.1:4443/"
    assert p.data_dir.options() == {"GOOGLE_SERVICE_ACCOUNT": str(keyfile)}

    with pytest.raises(ConfigError, match=r"azure_account_key: not used with a data_dir on gs:// "
                                          r"\(its keys: endpoint, gcs_service_account_key_file\)"):
        pipeline("gs://bucket/krm", {"azure_account_key_env": "KRM_AZ_KEY"})
    with pytest.raises(ConfigError, match=r"region: not used with a data_dir on abfss://"):
        pipeline(abfss, {"region": "eu-west-1"})
    with pytest.raises(ConfigError, match=r"endpoint apply to an object-store data_dir only"):
        pipeline(str(tmp_path / "data"), {"endpoint": "http://127.0.0.1:9000"})
    loose = tmp_path / "loose.json"
    loose.write_text("{}")
    loose.chmod(0o644)
    with pytest.raises(ConfigError, match="gcs_service_account_key_file.*chmod"):
        pipeline("gs://bucket/krm", {"gcs_service_account_key_file": str(loose)})


def test_history_tasks_leave_the_alert_path_a_core_in_local_mode(monkeypatch):
    from pipelines.history_path import history_tasks

    assert history_tasks(0, "local[2,4]") == 1 and history_tasks(0, "local[4]") == 3 and history_tasks(0, "local[1]") == 1
    monkeypatch.setattr("os.cpu_count", lambda: 8)
    assert history_tasks(0, "local[*]") == 7
    assert history_tasks(0, "spark://m:7077") is None and history_tasks(0, "yarn") is None  # executors: not capped
    assert history_tasks(3, "local[2]") == 3  # the setting wins


def test_krm_collect_serves_beside_the_pipeline_not_on_its_port():
    """`krm collect` and `krm pipeline` on one host with one file both started their /metrics on
    [pipeline] metrics_port; the second died (the fault loops' split runs)."""
    from foundation.config import parse_config

    def ports(collector: dict, pipeline: dict) -> tuple[int, int]:
        c = parse_config({"clusters": [{"name": "c", "bootstrap_servers": "h:1"}], "collector": collector,
                          "pipeline": {"data_dir": "/tmp/x", **pipeline}})
        return c.pipeline.metrics_port, c.collector.serve_port(c.pipeline.metrics_port)

    assert ports({}, {}) == (9308, 9309)
    assert ports({}, {"metrics_port": 0}) == (0, 0)  # any free port, each
    assert ports({"metrics_port": 9400}, {}) == (9308, 9400)
    with pytest.raises(ConfigError, match=r"\[collector\] metrics_port"):
        ports({"metrics_port": 70000}, {})
    # the topic shares of one cluster (`krm collect --topic-share I/N`) on one host: one port each
    assert [ports({"topic_share": f"{i}/3"}, {})[1] for i in (1, 2, 3)] == [9309, 9310, 9311]
    with pytest.raises(ConfigError, match=r"\[collector\] topic_share.*1 <= I <= N"):
        ports({"topic_share": "4/3"}, {})


def test_console_url_defaults_to_where_metrics_are_served(tmp_path):
    from foundation.config import parse_config
    from krm.runner import Monitor

    plain = Monitor(parse_config({**MINIMAL, "pipeline": {"metrics_port": 9400}}, source=tmp_path / "k.toml"))
    assert plain.console_url == "http://127.0.0.1:9400"
    wild = Monitor(parse_config({**MINIMAL, "pipeline": {"metrics_host": "0.0.0.0", "metrics_port": 9400}},
                                source=tmp_path / "k.toml"))
    assert wild.console_url.startswith("http://") and "0.0.0.0" not in wild.console_url
    chosen = Monitor(parse_config({**MINIMAL, "pipeline": {"console_url": "https://krm.example/"}},
                                  source=tmp_path / "k.toml"))
    assert chosen.console_url == "https://krm.example"


# ---------------------------------------------------------------- docs/configuration.md

def _reference_rows() -> dict[tuple[str, str], str]:
    """(table, key) -> the default column, from docs/configuration.md."""
    text = (Path(__file__).resolve().parents[2] / "docs" / "configuration.md").read_text()
    section = text.split("# Configuration reference", 1)[1]
    rows = {}
    for line in section.splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if len(cells) < 3 or not cells[0].startswith("`["):
            continue
        keys = [k.strip().strip("`") for k in cells[0].split(" / ")]
        table, _, first = keys[0].partition("] ")
        names = [first] + keys[1:]
        defaults = [d.strip() for d in cells[1].split(" / ")]
        for i, name in enumerate(names):
            rows[(table + "]", name)] = defaults[i] if len(defaults) == len(names) else cells[1]
    return rows


def test_the_reference_lists_every_setting_with_its_default():
    """Every key of the config models has a row in docs/configuration.md, and a numeric default there is the
    model's: the table cannot drift from foundation/config.py."""
    from foundation.config import ClusterConfig, CollectorConfig, ObservationsConfig, PipelineConfig

    rows = _reference_rows()
    tables = {"[[clusters]]": ClusterConfig, "[observations]": ObservationsConfig, "[collector]": CollectorConfig,
              "[pipeline]": PipelineConfig}
    nested = {"security", "zookeeper_security", "jmx_security", "storage", "spark_conf"}  # rows of their own
    missing, wrong = [], []
    for table, model in tables.items():
        for name, field in model.model_fields.items():
            if name in nested:
                continue
            default = rows.get((table, name))
            if default is None:
                missing.append(f"{table} {name}")
                continue
            try:
                shown = float(default.strip("`"))
            except ValueError:
                continue  # a default said in words ("first cluster's", "required")
            if isinstance(field.default, (int, float)) and not isinstance(field.default, bool) \
                    and float(field.default) != shown:
                wrong.append(f"{table} {name}: docs {default}, model {field.default}")
    assert not missing and not wrong, (missing, wrong)


def test_shards_split_the_clusters_evenly_and_exactly_once():
    names = [f"c{k:02d}" for k in range(10)]
    config = parse_config({"clusters": [{"name": n, "bootstrap_servers": f"{n}:9092"} for n in reversed(names)]})
    shares = [[c.name for c in config.only(shard=(i, 3)).clusters] for i in (1, 2, 3)]
    assert sorted(sum(shares, [])) == names and [len(s) for s in shares] == [4, 3, 3]
    assert [c.name for c in config.only(["c05", "c01"]).clusters] == ["c05", "c01"]
    assert [c.name for c in config.only(["c05", "c01", "c02"], shard=(2, 2)).clusters] == ["c02"]
    with pytest.raises(ConfigError, match="shard 3/3 of the 2 cluster"):
        parse_config({"clusters": [{"name": "a", "bootstrap_servers": "a:1"},
                                   {"name": "b", "bootstrap_servers": "b:1"}]}).only(shard=(3, 3))
    with pytest.raises(ConfigError, match="no cluster named 'zz'"):
        config.only(["zz"])


def test_a_bad_shard_is_refused_by_the_cli(capsys):
    from krm.cli import main

    with pytest.raises(SystemExit) as e:
        main(["collect", "--shard", "4/3"])
    assert e.value.code == 2 and "expected I/N with 1 <= I <= N" in capsys.readouterr().err


def test_a_cluster_s_own_pace_and_patience_override_the_collector_s(tmp_path):
    path = tmp_path / "krm.toml"
    path.write_text('[[clusters]]\nname = "near"\nbootstrap_servers = "a:9092"\n'
                    '[[clusters]]\nname = "far"\nbootstrap_servers = "b:9092"\npoll_interval_s = 10.0\n'
                    'request_timeout_ms = 8000\noffsets_timeout_ms = 4000\n'
                    '[collector]\npoll_interval_s = 2.0\nrequest_timeout_ms = 1500\n')
    config = load_config(path)
    near, far = (config.collector.for_cluster(c) for c in config.clusters)
    assert (near.poll_interval_s, near.request_timeout_ms, near.offsets_timeout_ms) == (2.0, 1500, 1000)
    assert (far.poll_interval_s, far.request_timeout_ms, far.offsets_timeout_ms) == (10.0, 8000, 4000)
    assert far.broker_check_s == near.broker_check_s and config.slowest_poll_s == 10.0


def test_a_cluster_s_own_timeout_is_checked_like_the_collector_s(tmp_path):
    path = tmp_path / "krm.toml"
    path.write_text('[[clusters]]\nname = "far"\nbootstrap_servers = "b:9092"\nrequest_timeout_ms = 5\n')
    with pytest.raises(ConfigError) as e:
        load_config(path)
    assert "request_timeout_ms" in str(e.value) and "100" in str(e.value)
