"""dashboards/grafana/krm-overview.json: well-formed for Grafana's dashboard model, and every query
uses only metrics krm actually exports (taken from the real collectors, not from a list)."""

import json
import re
from types import SimpleNamespace

import pytest
from prometheus_client import CollectorRegistry

from collectors.spool import Spool
from collectors.stats import CollectorMetrics
from foundation.paths import REPO_ROOT
from pipelines.incidents import Incident
from pipelines.jmx_view import JmxSample
from pipelines.detectors.canary import CanarySample
from pipelines.disks import LogDirState
from pipelines.metrics import KrmCollector
from pipelines.state import ClusterView, PipelineState, QualityStats

pytestmark = pytest.mark.unit

DASHBOARD = REPO_ROOT / "dashboards" / "grafana" / "krm-overview.json"
TYPES = ["OFFLINE_PARTITION", "UNDER_REPLICATED", "UNDER_MIN_ISR", "AT_MIN_ISR", "HW_STALL", "REPLICA_LAG", "BROKER_DOWN",
         "BROKER_SLOW", "ISR_FLAPPING",
         "PARTITION_REASSIGNING"]


def exported_names():
    incidents = tuple(Incident(f"i{n}", "c1", "topic:t", t, "critical", "t", n, 2, "x",
                               {"hw_stalled_since_ms": 1, "lag_messages": 5, "leader": 1, "holding_back": [3]},
                               1, 2, None, "open")
                      for n, t in enumerate(TYPES))
    state = PipelineState()
    quorum = {"leader_id": 1000, "leader_epoch": 2, "high_watermark": 10, "observers": 1,
              "voters": [{"id": 1000, "log_end_offset": 10, "last_fetch_ms": 5, "last_caught_up_ms": 5},
                         {"id": 1001, "log_end_offset": 9, "last_fetch_ms": 4, "last_caught_up_ms": 4}]}
    dirs = (LogDirState(1, "/data", False, 1000, 400, 60.0), LogDirState(1, "/data-2", True, None, None, None))
    state.update(clusters={"c1": ClusterView(((1, True),), 1, None, 1, quorum=quorum, log_dirs=dirs)},
                 open_incidents=incidents,
                 broker_load={"c1": {1: (1, 1, 1, 0)}},
                 jmx={("c1", 1): JmxSample("c1", 1, 1, 1, None, {"under_replicated_partitions": 0.0})},
                 quality=QualityStats(runs=1, failing=(("expect_x", "col"),), unexpected_total=((("expect_x", "col"), 1),)),
                 canary={("c1", 0): CanarySample("c1", 1, 0, True, 40.0, 45.0, 1)})
    collector = SimpleNamespace(publisher=SimpleNamespace(spool=Spool(10), sent=0, dropped=0, invalid=0), polls=0,
                                quick_publishes=0, unchanged=SimpleNamespace(kept_home=0), last_poll_s={"c1": 0.1},
                                zookeeper_connected=lambda: {"c1": True},
                                migration_phases=lambda: {"c1": (4, 3)},
                                canaries=[SimpleNamespace(cluster=SimpleNamespace(name="c1"), rounds={"ok": 1})])
    reg = CollectorRegistry(auto_describe=False)
    reg.register(KrmCollector(state))
    reg.register(CollectorMetrics(collector))
    return {s.name for fam in reg.collect() for s in fam.samples}


def test_every_query_uses_an_exported_metric():
    exported = exported_names()
    dash = json.loads(DASHBOARD.read_text())
    exprs = [t["expr"] for p in dash["panels"] for t in p.get("targets", [])]
    used = {m for e in exprs for m in re.findall(r"\bkrm_[a-z0-9_]+", e)}
    assert used and used <= exported, f"not exported: {sorted(used - exported)}"


def test_every_alert_rule_uses_an_exported_metric():
    exported = exported_names() | {"up"}
    rules = (REPO_ROOT / "dashboards" / "prometheus" / "krm-alerts.yml").read_text()
    exprs = re.findall(r"^\s*expr: (.*)$", rules, flags=re.M)
    used = {m for e in exprs for m in re.findall(r"\bkrm_[a-z0-9_]+", e)}
    assert used and used <= exported, f"not exported: {sorted(used - exported)}"


def test_dashboard_model():
    dash = json.loads(DASHBOARD.read_text())
    assert dash["uid"] and dash["title"] and isinstance(dash["schemaVersion"], int)
    ids = [p["id"] for p in dash["panels"]]
    assert len(ids) == len(set(ids))
    variables = {v["name"] for v in dash["templating"]["list"]}
    for p in dash["panels"]:
        g = p["gridPos"]
        assert 0 <= g["x"] and g["x"] + g["w"] <= 24 and g["h"] > 0, p["title"]
        if p["type"] == "row":
            continue
        assert p["datasource"]["uid"] == "${datasource}" and p["targets"], p["title"]
        for t in p["targets"]:
            assert t["refId"] and t["expr"], p["title"]
            assert set(re.findall(r"\$(\w+)", t["expr"])) <= variables, p["title"]
