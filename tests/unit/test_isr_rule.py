import pytest

from tests.oracles.cluster import broker_down_severity as broker_severity
from tests.oracles.cluster import down_brokers
from tests.oracles.cluster import controller_missing
from pipelines.detectors.isr import classify_isr
from tests.golden_isr import CASES, REASSIGNING

pytestmark = pytest.mark.unit


@pytest.mark.parametrize("num,replicas,isr,min_isr,types,eff,cli,reason", CASES, ids=[f"case{c[0]}" for c in CASES])
def test_isr_golden(num, replicas, isr, min_isr, types, eff, cli, reason):
    v = classify_isr(replicas, isr, min_isr)
    assert (v.types, v.effective_min_isr) == (types, eff), reason
    assert v.cli_view == cli, reason


def test_out_of_sync_in_assignment_order():
    assert classify_isr([3, 1, 2], [1], 2).out_of_sync == (3, 2)


@pytest.mark.parametrize("brokers,down", [
    ([{"id": 1, "live": True}, {"id": 2, "live": False}], [(2, "not_registered")]),
    ([{"id": 1, "live": True}], []),
    ([], []),
    ([{"id": 1, "live": True, "reachable": False}, {"id": 2, "live": True, "reachable": None}], [(1, "unreachable")]),
    ([{"id": 3, "live": False, "reachable": None}], [(3, "not_registered")]),
    ([{"id": 3, "live": False, "controlled_shutdown": True}], [(3, "stopped")]),
    ([{"id": 3, "live": False, "controlled_shutdown": False}], [(3, "not_registered")]),
    ([{"id": 3, "live": True, "reachable": False, "controlled_shutdown": True}], [(3, "stopped")]),
    ([{"id": 3, "live": True, "reachable": False, "controlled_shutdown": False}], [(3, "unreachable")]),
    ([{"id": 3, "live": False, "departure": "unknown"}], [(3, "unknown")]),
    ([{"id": 3, "live": False, "departure": "crash", "controlled_shutdown": False}], [(3, "not_registered")]),
    ([{"id": 3, "live": True, "reachable": False, "departure": "unknown"}], [(3, "unreachable")]),
    # its disks were full when it went (collectors/disk_watch.py): that names it, registered or not, however it went
    ([{"id": 3, "live": False, "departure": "crash", "disk_full": True}], [(3, "log_dir_full")]),
    ([{"id": 3, "live": True, "reachable": False, "departure": "unknown", "disk_full": True}], [(3, "log_dir_full")]),
    ([{"id": 3, "live": False, "departure": "controlled", "disk_full": True}], [(3, "log_dir_full")]),
    ([{"id": 3, "live": True, "reachable": True, "disk_full": True}], []),  # serving: not down
])
def test_down_brokers(brokers, down):
    assert down_brokers(brokers) == down


@pytest.mark.parametrize("cid,missing", [(None, True), (-1, True), (0, False), (3, False)])
def test_controller_missing(cid, missing):
    assert controller_missing(cid) is missing


@pytest.mark.parametrize("case", REASSIGNING, ids=[f"reassigning-{c[0]}" for c in REASSIGNING])
def test_isr_during_reassignment(case):
    _n, replicas, isr, min_isr, adding, removing, types, reason = case
    assert classify_isr(replicas, isr, min_isr, adding, removing).types == types, reason


@pytest.mark.parametrize("cause,down_for,expected", [
    ("stopped", 60_000, "warning"), ("stopped", 601_000, "critical"), ("stopped", None, "warning"),
    ("not_registered", 1_000, "warning"), ("not_registered", 601_000, "critical"), ("not_registered", None, "warning"),
    ("unreachable", 10_000_000, "warning"), ("log_dir_full", 1_000, "warning"), ("log_dir_full", 601_000, "critical")])
def test_broker_down_severity(cause, down_for, expected):
    assert broker_severity(cause, down_for, 600_000) == expected
