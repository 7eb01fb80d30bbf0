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
