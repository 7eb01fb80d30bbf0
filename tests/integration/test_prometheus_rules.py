"""The shipped alert rules, checked and unit-tested by Prometheus' own promtool."""

import shutil
import subprocess
from pathlib import Path

import pytest

pytestmark = pytest.mark.integration

HERE = Path(__file__).parent
RULES = HERE.parents[1] / "dashboards" / "prometheus" / "krm-alerts.yml"


def _promtool():
    tool = shutil.which("promtool")
    assert tool, "promtool is missing: `make test` installs Debian's prometheus package"
    return tool


def test_rules_are_valid():
    out = subprocess.run([_promtool(), "check", "rules", str(RULES)], capture_output=True, text=True)
    assert out.returncode == 0, out.stdout + out.stderr


def test_rules_fire_as_specified():
    out = subprocess.run([_promtool(), "test", "rules", "promtool_tests.yml"], capture_output=True, text=True, cwd=HERE)
    assert out.returncode == 0, out.stdout + out.stderr
