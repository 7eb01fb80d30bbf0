"""The CLI's contracts that need no cluster: `assign simulate --json`, errors, --help."""

import json

import pytest

from krm.cli import main

pytestmark = pytest.mark.unit


def test_assign_simulate_json_contract(capsys):
    rc = main(["assign", "simulate", "--brokers", "0,1,4,2,3", "--partitions", "3", "--replication-factor", "2",
               "--start-index", "0", "--json"])
    assert rc == 0
    assert json.loads(capsys.readouterr().out) == {"0": [0, 1], "1": [1, 4], "2": [4, 2]}


def test_assign_simulate_rejects_what_kafka_rejects(capsys):
    rc = main(["assign", "simulate", "--brokers", "0,1", "--partitions", "2", "--replication-factor", "3"])
    assert rc == 2
    assert "larger than available brokers: 2" in capsys.readouterr().err


def test_bad_racks_argument_is_a_usage_error(capsys):
    with pytest.raises(SystemExit) as e:
        main(["assign", "simulate", "--brokers", "0,1", "--partitions", "1", "--replication-factor", "1",
              "--racks", "zero:a"])
    assert e.value.code == 2
    assert "BROKER:RACK" in capsys.readouterr().err


def test_incidents_without_config_says_what_to_do(capsys, monkeypatch, tmp_path):
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("KRM_CONFIG", raising=False)
    assert main(["incidents"]) == 2
    assert "pass --config FILE" in capsys.readouterr().err


@pytest.mark.parametrize("cmd", [[], ["local-cluster"], ["assign", "simulate"], ["incidents"], ["run"], ["demo"]])
def test_every_command_has_help(cmd, capsys):
    with pytest.raises(SystemExit) as e:
        main([*cmd, "--help"])
    assert e.value.code == 0
    assert "usage:" in capsys.readouterr().out


def test_local_cluster_ids_never_contain_a_dash():
    """kafka-storage format reads an id starting with '-' as an option (a benchmark failed that way)."""
    from lab.local_cluster import new_cluster_id

    ids = [new_cluster_id() for _ in range(2000)]
    assert all("-" not in i and len(i) == 22 for i in ids) and len(set(ids)) == 2000


def test_collect_cluster_must_name_a_configured_cluster(tmp_path, capsys):
    cfg = tmp_path / "krm.toml"
    cfg.write_text('[[clusters]]\nname = "eu"\nbootstrap_servers = "127.0.0.1:1"\n'
                   '[[clusters]]\nname = "us"\nbootstrap_servers = "127.0.0.1:2"\n'
                   '[observations]\nbootstrap_servers = "127.0.0.1:1"\n'
                   f'[pipeline]\ndata_dir = "{tmp_path / "data"}"\n')
    assert main(["collect", "--config", str(cfg), "--cluster", "asia"]) == 2
    assert "no cluster named 'asia'" in capsys.readouterr().err


@pytest.mark.parametrize("argv", [["check", "ready", "--help"], ["check", "shutdown", "--help"]])
def test_rolling_restart_gates_take_wait(argv, capsys):
    with pytest.raises(SystemExit) as e:
        main(argv)
    assert e.value.code == 0 and "--wait SECONDS" in capsys.readouterr().out
