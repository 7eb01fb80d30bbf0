import pytest

from pipelines.detectors.offline import classify_offline
from tests.golden_offline import CASES, WITH_DIR_REPORTS

pytestmark = pytest.mark.unit


@pytest.mark.parametrize("num,leader,replicas,isr,elr,lk_elr,live,offline,cause,must_return,reason", CASES,
                         ids=[f"case{c[0]}" for c in CASES])
def test_offline_golden(num, leader, replicas, isr, elr, lk_elr, live, offline, cause, must_return, reason):
    verdict = classify_offline(leader, replicas, isr, live, elr, lk_elr, offline)
    if cause is None:
        assert verdict is None, reason
    else:
        assert verdict is not None, reason
        assert (verdict.cause, verdict.must_return) == (cause, must_return), reason


@pytest.mark.parametrize("num,leader,replicas,isr,live,offline,failed_dirs,cause,must_return,reason", WITH_DIR_REPORTS,
                         ids=[f"case{c[0]}" for c in WITH_DIR_REPORTS])
def test_offline_with_dir_reports(num, leader, replicas, isr, live, offline, failed_dirs, cause, must_return, reason):
    verdict = classify_offline(leader, replicas, isr, live, None, None, offline, failed_dirs)
    assert verdict is not None, reason
    assert (verdict.cause, verdict.must_return) == (cause, must_return), reason
