"""The floors of [tool.importlinter] (pyproject.toml) hold, and an import that runs up a floor or closes a
circle fails them."""

import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
LINT = Path(sys.executable).parent / "lint-imports"
PACKAGES = ("lab", "krm", "collectors", "pipelines", "schemas", "foundation")

pytestmark = pytest.mark.unit


def _lint(tree: Path) -> subprocess.CompletedProcess:
    return subprocess.run([str(LINT)], cwd=tree, capture_output=True, text=True, timeout=120,
                          env={"PYTHONPATH": str(tree), "PATH": "/usr/bin:/bin"})


@pytest.fixture
def tree(tmp_path):
    for p in PACKAGES:
        shutil.copytree(ROOT / p, tmp_path / p, ignore=shutil.ignore_patterns("__pycache__", "*.pyc"))
    shutil.copy(ROOT / "pyproject.toml", tmp_path)
    return tmp_path


def test_the_floors_hold(tree):
    out = _lint(tree)
    assert out.returncode == 0, out.stdout + out.stderr


FLOORS = "the floors BROKEN"
CIRCLES = "no circles between the modules of a floor BROKEN"


@pytest.mark.parametrize("module, line, broken", [
    ("collectors/uplink.py", "import krm.cli\n", FLOORS),
    # the product never imports the lab: not the CLI, not a function-local import
    ("krm/uplink.py", "from lab.local_cluster import LocalCluster\n", FLOORS),
    ("krm/cli.py", "\ndef f():\n    import lab.commands\n", FLOORS),
    ("pipelines/uplink.py", "from lab.simulate import model\n", FLOORS),
    ("pipelines/uplink.py", "from collectors import admin\n", FLOORS),
    ("schemas/uplink.py", "def f():\n    from krm.runner import Monitor\n    return Monitor\n", FLOORS),
    ("foundation/uplink.py", "from schemas.observation import Observation\n", FLOORS),
    ("foundation/uplink.py", "def f():\n    import pipelines.metrics\n", FLOORS),
    # a function-local import closing a circle counts as much as one at the top
    ("foundation/errors.py", "\ndef f():\n    import foundation.paths\n", CIRCLES),
])
def test_an_import_up_a_floor_or_round_a_circle_fails(tree, module, line, broken):
    with open(tree / module, "a") as f:
        f.write(line)
    out = _lint(tree)
    assert out.returncode != 0 and broken in out.stdout, out.stdout + out.stderr
