"""krm as an installed product: the wheel in a fresh venv, outside the checkout, finds its conf files
in the package, fetches its pinned jars with `krm setup` into KRM_HOME, and runs Spark with Delta
from there. Also: jvm/jars.lock is what `make jars` fetched (the lock is regenerated with the poms)."""

import json
import os
import subprocess
import sys
import sysconfig
from pathlib import Path

import pytest

from foundation.paths import REPO_ROOT

pytestmark = pytest.mark.integration


def test_jar_lock_matches_the_fetched_jars():
    lock = json.loads((REPO_ROOT / "jvm" / "jars.lock").read_text())
    jars = REPO_ROOT / ".cache" / "jars"
    for group, entries in lock.items():
        assert sorted(Path(e["path"]).name for e in entries) == sorted(p.name for p in (jars / group).glob("*.jar")), \
            f"jvm/jars.lock is stale for {group}: run `.venv/bin/python jvm/lock_jars.py`"


def test_installed_wheel_runs_outside_the_checkout(tmp_path):
    dist, venv, home = tmp_path / "dist", tmp_path / "venv", tmp_path / "home"
    subprocess.run([sys.executable, "-m", "pip", "wheel", "-q", "--no-deps", "--no-build-isolation", str(REPO_ROOT),
                    "-w", str(dist)], check=True, cwd=tmp_path, timeout=300)
    (wheel,) = dist.glob("*.whl")
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True, timeout=120)
    subprocess.run([venv / "bin" / "pip", "install", "-q", "--no-deps", "--no-index", str(wheel)], check=True, timeout=300)
    # the dependencies (pyspark, delta-spark, ...) from the test venv, without its editable krm
    site = Path(sysconfig.get_paths(vars={"base": str(venv), "platbase": str(venv)})["purelib"])
    (site / "deps.pth").write_text(sysconfig.get_paths()["purelib"] + "\n")
    env = {k: v for k, v in os.environ.items() if k not in ("KRM_JARS_DIR", "KRM_HOME", "PYTHONPATH")}
    env |= {"KRM_HOME": str(home), "SPARK_LOCAL_IP": "127.0.0.1"}

    def run(*cmd, **kw):
        out = subprocess.run([str(c) for c in cmd], capture_output=True, text=True, cwd=tmp_path, env=env, timeout=300, **kw)
        assert out.returncode == 0, out.stdout + out.stderr
        return out.stdout

    assert run(venv / "bin" / "krm", "--version").startswith("krm ")
    # the lab's commands reach the installed CLI through the `krm.commands` entry point, not an import
    usage = run(venv / "bin" / "krm", "--help")
    assert all(f"    {c} " in usage for c in ("local-cluster", "simulate", "demo", "run", "check")), usage
    where = json.loads(run(venv / "bin" / "python", "-c",
                           "import json, foundation.paths as p; print(json.dumps([str(p.PACKAGE_DIR), p.IN_CHECKOUT, "
                           "str(p.CONF_DIR), str(p.jars_dir())]))"))
    assert where[0].startswith(str(venv)) and where[1] is False
    assert Path(where[2], "spark-log4j2.properties").is_file() and where[3] == str(home / "jars")

    no_jars = subprocess.run([venv / "bin" / "python", "-c", "from foundation.paths import jar_group; jar_group('spark')"],
                             capture_output=True, text=True, cwd=tmp_path, env=env, timeout=60)
    assert no_jars.returncode != 0 and "run `krm setup`" in no_jars.stderr

    # Maven Central's layout, served from the checkout's Maven cache (no network in the test)
    log = run(venv / "bin" / "krm", "setup", "--repository", f"file://{REPO_ROOT / '.cache' / 'm2'}")
    assert f"spark: 6 jars in {home / 'jars' / 'spark'} (6 fetched)" in log, log
    again = run(venv / "bin" / "krm", "setup", "--repository", f"file://{REPO_ROOT / '.cache' / 'm2'}")
    assert "(0 fetched)" in again

    out = run(venv / "bin" / "python", "-c", (
        "from pipelines.session import build_session\n"
        f"s = build_session('local[1]', log_dir='{tmp_path / 'logs'}')\n"
        f"s.range(7).write.format('delta').save('{tmp_path / 'table'}')\n"
        f"print('rows', s.read.format('delta').load('{tmp_path / 'table'}').count())\n"
        "df = s.readStream.format('kafka').option('kafka.bootstrap.servers', '127.0.0.1:1')"
        ".option('subscribe', 't').load()\n"  # resolving the source needs Spark's Kafka jars
        "print('kafka source', ','.join(df.columns))\n"
        "s.stop()\n"))
    assert "rows 7" in out and "kafka source key,value,topic,partition,offset" in out, out
