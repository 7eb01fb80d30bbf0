"""/healthz, /readyz and krm_pipeline_up: what an orchestrator and Prometheus see of the pipeline."""

import json
import logging

import pytest

from pipelines.metrics import KrmCollector, with_probes
from pipelines.state import PipelineState

pytestmark = pytest.mark.unit


def _get(app, path):
    seen = {}
    body = b"".join(app({"PATH_INFO": path}, lambda status, headers: seen.setdefault("status", status)))
    return seen["status"], body.decode()


def _up(state, now):
    from prometheus_client import CollectorRegistry

    reg = CollectorRegistry(auto_describe=False)
    reg.register(KrmCollector(state, clock=lambda: now))
    return reg.get_sample_value("krm_pipeline_up")


def test_ready_only_while_batches_flow():
    state = PipelineState(ready_window_s=30)
    app = with_probes(lambda env, start: [b"metrics"], state.readiness)
    assert _get(app, "/healthz") == ("200 OK", "ok\n")
    assert _get(app, "/readyz") == ("503 Service Unavailable", "not ready: no micro-batch processed yet\n")
    assert _up(state, 1000.0) == 0

    state.update(last_batch_at=1000.0)
    assert state.readiness(now=1010.0) == (True, "last micro-batch 10.0s ago")
    assert _up(state, 1010.0) == 1
    assert state.readiness(now=1045.0) == (False, "last micro-batch 45s ago (more than 30s)")
    assert _up(state, 1045.0) == 0

    state.update(pipeline_error="Spark master spark://m:7077 gave no executors")
    assert state.readiness(now=1010.0) == (False, "Spark master spark://m:7077 gave no executors")


def test_metrics_path_is_delegated():
    calls = []

    def metrics(env, start):
        calls.append(env["PATH_INFO"])
        start("200 OK", [])
        return [b"m"]

    app = with_probes(metrics, lambda: (True, "x"))
    assert _get(app, "/metrics") == ("200 OK", "m") and calls == ["/metrics"]


def test_probes_need_no_credentials_but_metrics_do():
    import bcrypt

    from foundation.web_config import BasicAuth

    users = {"p": bcrypt.hashpw(b"pw", bcrypt.gensalt(rounds=4))}
    app = BasicAuth(with_probes(lambda env, start: (start("200 OK", []), [b"m"])[1], lambda: (True, "ok")), users)
    assert _get(app, "/healthz")[0] == "200 OK"
    assert _get(app, "/readyz")[0] == "200 OK"
    assert _get(app, "/metrics")[0] == "401 Unauthorized"


def test_json_log_lines():
    from krm.cli import JsonFormatter

    rec = logging.LogRecord("krm.x", logging.WARNING, __file__, 1, "cluster %s: %s", ("c1", "down"), None)
    out = json.loads(JsonFormatter().format(rec))
    assert (out["level"], out["logger"], out["message"]) == ("WARNING", "krm.x", "cluster c1: down")
    assert out["ts"].endswith("+00:00") and "exception" not in out
    try:
        raise ValueError("bad")
    except ValueError:
        import sys

        rec = logging.LogRecord("krm.x", logging.ERROR, __file__, 1, "boom", (), sys.exc_info())
    out = json.loads(JsonFormatter().format(rec))
    assert out["exception"] == "ValueError: bad" and "Traceback" in out["traceback"]


def test_no_executors_said_once_then_cleared(caplog):
    from pipelines.job import ExecutorWatch

    t = [0.0]
    state = PipelineState()
    watch = ExecutorWatch(None, "spark://m:7077", state, clock=lambda: t[0])
    caplog.set_level(logging.WARNING, logger="pipelines.job")
    for t[0] in (0.0, 30.0, 59.0):
        watch.check(executors=0)
    assert state.snapshot.pipeline_error is None
    for t[0] in (60.0, 90.0):
        watch.check(executors=0)
    assert state.snapshot.pipeline_error.startswith("Spark master spark://m:7077 has given the pipeline no executors for 60s")
    assert len([r for r in caplog.records if r.levelname == "ERROR"]) == 1
    watch.check(executors=1)
    assert state.snapshot.pipeline_error is None
    assert ExecutorWatch(None, "local[2]", state).check() is None  # local mode: nothing to wait for


def test_session_failure_in_one_line(tmp_path):
    from pipelines.session import explain_session_failure

    (tmp_path / "spark.log").write_text(
        "2026-11-23T18:12:55,180 ERROR StandaloneSchedulerBackend: Application has been killed. "
        "Reason: All masters are unresponsive! Giving up.\n")
    error = RuntimeError("Cannot call methods on a stopped SparkContext.\nat ...")
    msg = explain_session_failure("spark://10.0.0.9:7077", tmp_path, error)
    assert msg == ("Spark session on spark://10.0.0.9:7077 could not start: All masters are unresponsive! Giving up. "
                   "Is the master running and reachable from this host (and this host from its workers)? "
                   f"Spark's log: {tmp_path / 'spark.log'}")
    assert "\n" not in msg
