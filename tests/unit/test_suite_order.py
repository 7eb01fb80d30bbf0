"""The suite's run order (tests/conftest.py): tiers in order, and the tests of each pooled cluster
together at the end, so that a pooled cluster runs only while its own tests do."""

from pathlib import Path
from types import SimpleNamespace

import pytest

from tests.conftest import pooled_clusters, run_order

pytestmark = pytest.mark.unit


def item(path: str, fixtures: tuple[str, ...] = (), params: dict | None = None) -> SimpleNamespace:
    return SimpleNamespace(path=Path("/repo") / path, fixturenames=list(fixtures), nodeid=path,
                           **({"callspec": SimpleNamespace(params=params)} if params is not None else {}))


def test_a_pooled_cluster_is_found_by_fixture_or_by_parameter():
    assert pooled_clusters(item("tests/e2e/test_a.py", ("zk_cluster", "kraft4_cluster"))) == ["kraft4"]
    assert pooled_clusters(item("tests/e2e/test_a.py", ("request",), {"mode": "kraft4_secure"})) == ["kraft4_secure"]
    assert pooled_clusters(item("tests/e2e/test_a.py", ("zk_cluster", "kraft_cluster"), {"mode": "zk"})) == []


def test_tiers_first_then_each_pooled_cluster_s_tests_together():
    items = [
        item("tests/integration/test_i.py", ("kraft4_secure_cluster",)),
        item("tests/e2e/test_b.py", ("request",), {"mode": "kraft4"}),
        item("tests/e2e/test_b.py", ("request",), {"mode": "zk"}),
        item("tests/integration/test_j.py", ("zk_cluster",)),
        item("tests/e2e/test_c.py", ("kraft4_secure_cluster",)),
        item("tests/spark/test_s.py", ("spark",)),
        item("tests/unit/test_u.py"),
        item("tests/e2e/test_d.py", ("kraft4_cluster",)),
    ]
    ordered = [(i.nodeid, pooled_clusters(i)) for i in sorted(items, key=run_order)]
    assert ordered == [
        ("tests/unit/test_u.py", []),
        ("tests/spark/test_s.py", []),
        ("tests/e2e/test_b.py", []),
        ("tests/integration/test_j.py", []),
        ("tests/e2e/test_b.py", ["kraft4"]),
        ("tests/e2e/test_d.py", ["kraft4"]),
        ("tests/e2e/test_c.py", ["kraft4_secure"]),
        ("tests/integration/test_i.py", ["kraft4_secure"]),
    ]
