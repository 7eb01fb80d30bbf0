"""Routine maintenance pages nobody, on a 4-broker cluster in ZooKeeper mode (3.9.1) and in KRaft
(3 controllers), with a real Prometheus evaluating the shipped rules:

- a rolling restart driven by `krm check shutdown --wait` / `krm check ready --wait`, an acks=all
  producer writing throughout — in KRaft a rolling *upgrade* 3.9.1 -> 4.4.0, brokers then
  controllers, each restarted on the new release: no critical alert fires, no write fails, and krm
  records each stop as BROKER_DOWN `stopped`; then one broker SIGKILLed: the partition it led is
  PARTITION_UNAVAILABLE until the controller acts, the broker a crash (`not_registered`, a warning:
  KafkaBrokerDeregistered) from the kill to its return, and KafkaBrokerDown never fires;
- a throttled `kafka-reassign-partitions` moving replicas onto other brokers: krm's under-replicated
  set equals `kafka-topics --describe --under-replicated-partitions` at every sample,
  `krm_partition_reassigning` follows Kafka's list, and neither REPLICA_LAG for the adding replicas
  nor UNCLEAN_LEADER_ELECTION when the move completes.

Every wait reads a settled state (Kafka's own view first, then krm's), never a first sight.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import threading
import time
from pathlib import Path

import pytest
import requests

from foundation.config import load_config
from krm.runner import Monitor
from krm.scrape import scrape, series
from lab.harness import KRM, kafka_admin, kafka_tool, local_cluster, stored_incidents, wait_for, write_config
from lab.local_cluster import KRAFT_KAFKA_VERSION, ZK_KAFKA_VERSION, free_port
from tests.browser import LiveWatch
from tests.e2e.conftest import RULES

pytestmark = pytest.mark.e2e

TOPIC_CMD = "org.apache.kafka.tools.TopicCommand"
REASSIGN_CMD = "org.apache.kafka.tools.reassign.ReassignPartitionsCommand"


class Stack:
    """A 4-broker cluster, krm watching it (observations on another cluster, as in production) and a
    Prometheus scraping krm every second and evaluating krm-alerts.yml every second."""

    def __init__(self, cluster, config_path: Path, monitor: Monitor, prom_url: str) -> None:
        self.cluster, self.config_path, self.monitor, self.prom_url = cluster, config_path, monitor, prom_url
        self.url = monitor.metrics_url

    def krm(self, *args: str, timeout: float = 200) -> subprocess.CompletedProcess:
        return subprocess.run([KRM, *args, "--config", str(self.config_path)], capture_output=True, text=True,
                              timeout=timeout)

    def critical_fired(self, since: float) -> list[dict]:
        """Critical alerts about this cluster (or krm itself) that fired at any moment since `since`."""
        window = max(1, int(time.time() - since) + 1)
        q = f'max_over_time(ALERTS{{alertstate="firing",severity="critical"}}[{window}s])'
        result = requests.get(f"{self.prom_url}/api/v1/query", params={"query": q}, timeout=10).json()["data"]["result"]
        return [r["metric"] for r in result if r["metric"].get("cluster") in (None, self.cluster.name)]

    def critical_at(self, at: float) -> list[dict]:
        """Critical alerts pending or firing at `at`."""
        result = requests.get(f"{self.prom_url}/api/v1/query", timeout=10,
                              params={"query": 'ALERTS{severity="critical"}', "time": at}).json()["data"]["result"]
        return [r["metric"] for r in result if r["metric"].get("cluster") in (None, self.cluster.name)]

    def firing(self, alertname: str) -> list[dict]:
        alerts = requests.get(f"{self.prom_url}/api/v1/alerts", timeout=5).json()["data"]["alerts"]
        return [a["labels"] for a in alerts if a["labels"]["alertname"] == alertname and a["state"] == "firing"
                and a["labels"].get("cluster") == self.cluster.name]


# (mode, Kafka at the start, Kafka the rolling restart moves to (None: the same), KRaft controllers)
CLUSTERS = [("zk", ZK_KAFKA_VERSION, None, 1), ("kraft", ZK_KAFKA_VERSION, KRAFT_KAFKA_VERSION, 3)]


@pytest.fixture(scope="module", params=CLUSTERS,
                ids=lambda p: f"{p[0]}-{p[1]}" + (f"-to-{p[2]}" if p[2] else ""))
def stack(request, tmp_path_factory, kraft_cluster, spark):
    mode, version, upgrade_to, controllers = request.param
    tmp = tmp_path_factory.mktemp(f"maintenance-{mode}")
    cluster = local_cluster(tmp_path_factory, mode, brokers=4, kafka_version=version, controllers=controllers)
    cluster.upgrade_to = upgrade_to
    procs = []
    monitor = None
    try:
        config_path = write_config(cluster, tmp, observations_on=kraft_cluster)
        config = load_config(config_path)
        monitor = Monitor(config, spark=spark).start()
        prometheus = shutil.which("prometheus")
        assert prometheus, "`make test` installs Debian's prometheus"
        port = free_port()
        (tmp / "prom.yml").write_text(
            "global:\n  scrape_interval: 1s\n  evaluation_interval: 1s\n"
            f"rule_files:\n  - {RULES}\n"
            "scrape_configs:\n  - job_name: krm\n    static_configs:\n"
            f"        - targets: ['{config.pipeline.metrics_host}:{config.pipeline.metrics_port}']\n")
        procs.append(subprocess.Popen([prometheus, f"--config.file={tmp / 'prom.yml'}",
                                       f"--storage.tsdb.path={tmp / 'prom-data'}", f"--web.listen-address=127.0.0.1:{port}"],
                                      stdout=open(tmp / "prom.log", "w"), stderr=subprocess.STDOUT,
                                      stdin=subprocess.DEVNULL))
        s = Stack(cluster, config_path, monitor, f"http://127.0.0.1:{port}")
        wait_for(lambda: series(scrape(s.url), "krm_broker_up", cluster=cluster.name, broker="4"), 120,
                 "krm sees every broker")
        wait_for(lambda: requests.get(f"{s.prom_url}/api/v1/query", params={"query": "krm_broker_up"},
                                      timeout=5).json()["data"]["result"], 60, "Prometheus scraping krm")
        yield s
    finally:
        for p in procs:
            p.terminate()
            p.wait(timeout=30)
        if monitor is not None:
            monitor.stop()
        cluster.down()


def _describe(cluster, topic: str, *flags: str) -> dict[int, dict]:
    """kafka-topics --describe (Kafka's own TopicCommand), partition -> its fields."""
    out = kafka_tool(TOPIC_CMD, "--bootstrap-server", cluster.bootstrap_servers, "--describe", "--topic", topic, *flags)
    parts = {}
    for line in out.splitlines():
        fields = dict(f.split(": ", 1) for f in line.strip().split("\t") if ": " in f)
        if "Partition" in fields:
            parts[int(fields["Partition"])] = fields
    return parts


class Producer:
    """acks=all writes to every partition of a topic, counting acknowledged and failed ones."""

    def __init__(self, cluster, topic: str) -> None:
        from kafka import KafkaProducer

        self.ok = self.failed = 0
        self.errors: list[str] = []
        self._stop = threading.Event()
        self._producer = KafkaProducer(bootstrap_servers=cluster.bootstrap_servers, acks="all", retries=20,
                                       retry_backoff_ms=250, request_timeout_ms=30_000, linger_ms=5)
        self._thread = threading.Thread(target=self._run, args=(topic,), daemon=True)
        self._thread.start()

    def _ok(self, _meta) -> None:
        self.ok += 1

    def _failed(self, e) -> None:
        self.failed += 1
        self.errors.append(repr(e))

    def _run(self, topic: str) -> None:
        n = 0
        while not self._stop.is_set():
            self._producer.send(topic, f"m{n}".encode()).add_callback(self._ok).add_errback(self._failed)
            n += 1
            time.sleep(0.01)

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(timeout=30)
        self._producer.flush(timeout=60)
        self._producer.close(timeout=30)


def _quorum_whole(stack) -> bool:
    m = scrape(stack.url)
    voters = series(m, "krm_kraft_quorum_voters", cluster=stack.cluster.name)
    caught_up = series(m, "krm_kraft_quorum_voters_caught_up", cluster=stack.cluster.name)
    return bool(voters and caught_up) and voters[0].value == caught_up[0].value == len(stack.cluster.controller_ids)


def _head_state(watch: LiveWatch, broker: int, collapse: bool = True) -> list[str]:
    """The state a broker's head said at each read ("up", "down: stopped", ...), consecutive repeats as one
    unless not `collapse`."""
    out: list[str] = []
    for _, _, text in watch.heads(broker):
        lines = text.split("\n")
        state = lines[1].split(" · ")[0] if len(lines) > 1 else text
        if not collapse or not out or out[-1] != state:
            out.append(state)
    return out


def test_rolling_restart_pages_nobody_and_a_crash_still_pages(stack):
    cluster = stack.cluster
    topic = "maint-roll"
    kafka_tool(TOPIC_CMD, "--bootstrap-server", cluster.bootstrap_servers, "--create", "--topic", topic,
               "--partitions", "8", "--replication-factor", "3", "--config", "min.insync.replicas=2")
    wait_for(lambda: len(_describe(cluster, topic)) == 8, 60, "the topic's partitions")
    producer = Producer(cluster, topic)
    started = time.time()
    # the cluster's grid left open in a browser for the whole restart, never reloaded (tests/browser.py)
    watch = LiveWatch(f"{stack.monitor.console_url}/clusters/{cluster.name}").__enter__()
    try:
        wait_for(lambda: producer.ok > 100, 60, "the producer writing")
        for broker in sorted(cluster.broker_ids):
            gate = stack.krm("check", "shutdown", "--broker", str(broker), "--wait", "180")
            assert gate.returncode == 0, f"check shutdown {broker}: {gate.stdout}{gate.stderr}"
            cluster.stop(broker)  # SIGTERM: Kafka's controlled shutdown
            cluster.start(broker, kafka_version=cluster.upgrade_to)
            ready = stack.krm("check", "ready", "--broker", str(broker), "--wait", "180")
            assert ready.returncode == 0, f"check ready {broker}: {ready.stdout}{ready.stderr}"
        for controller in cluster.controller_ids if cluster.upgrade_to else ():  # KRaft: the quorum, one voter at a time
            wait_for(lambda: _quorum_whole(stack), 120, "every voter caught up")
            cluster.stop(controller)
            cluster.start(controller, kafka_version=cluster.upgrade_to)
        if cluster.upgrade_to:
            wait_for(lambda: _quorum_whole(stack), 120, "every voter caught up")
            versions = {n["kafka_version"] for n in [*cluster.status()["brokers"].values(),
                                                     *cluster.status()["controllers"].values()]}
            assert versions == {cluster.upgrade_to}
        # Kafka's own view settled: nothing under-replicated; krm's too
        wait_for(lambda: not _describe(cluster, topic, "--under-replicated-partitions"), 120, "ISR whole (kafka-topics)")
        wait_for(lambda: not series(scrape(stack.url), "krm_broker_down", cluster=cluster.name), 60,
                 "no broker down in krm")
        time.sleep(3)  # Prometheus scraped and evaluated the settled state
        wait_for(lambda: all(_head_state(watch, b, collapse=False)[-3:] == ["up"] * 3 for b in cluster.broker_ids), 60,
                 "the open grid showing every broker up again")
        watch.stop()
        assert not watch.reloaded() and not watch.errors, watch.errors[:3]
    finally:
        watch.close()
        producer.stop()
    print(f"\n[{cluster.mode}] rolling {'upgrade' if cluster.upgrade_to else 'restart'}: {producer.ok} acks=all writes, "
          f"{producer.failed} failed, {time.time() - started:.0f}s")
    assert producer.failed == 0, producer.errors[:5]
    assert producer.ok > 500
    assert stack.critical_fired(started) == [], "a clean rolling restart paged"
    # what the on-call watching the grid saw: each broker leave "up" once, for its own restart, and come back
    for b in cluster.broker_ids:
        states = _head_state(watch, b)
        away = [s for s in states if s != "up"]
        assert away and states[-1] == "up", (b, states)
        assert all(s.startswith(("down: stopped", "unreachable", "not registered")) for s in away), (b, set(away))
        assert "critical" not in {cls for _, cls, _ in watch.heads(b)}, "a planned stop drawn critical"
    print(f"[{cluster.mode}] the open grid: " + ", ".join(
        f"broker {b} {sorted(set(_head_state(watch, b)) - {'up'})}" for b in sorted(cluster.broker_ids)))
    downs = [i for i in stored_incidents("--config", str(stack.config_path), "--type", "BROKER_DOWN")
             if i["cluster"] == cluster.name]
    causes = {i["broker"]: (i["cause"], i["severity"], i["details"].get("controlled_shutdown")) for i in downs}
    assert set(causes) == set(cluster.broker_ids), causes
    assert set(causes.values()) == {("stopped", "warning", True)}, causes
    # nor a partition called leaderless: each stopped broker's leaderships were moved before its port closed,
    # whatever krm's view still showed when it found the port closed (collectors/zookeeper.py, reread_led_by)
    unavailable_in_restart = [(i["topic"], i["partition"], i["cause"], i["opened_at"]) for i in stored_incidents(
        "--config", str(stack.config_path), "--type", "PARTITION_UNAVAILABLE") if i["cluster"] == cluster.name]
    assert unavailable_in_restart == [], unavailable_in_restart

    # The same cluster, one broker SIGKILLed: its clients' harm is paged on their partition, the crash
    # recorded as one, and nothing pages once the controller has moved its load.
    victim = int(_describe(cluster, topic)[0]["Leader"])

    def victims_incident() -> dict:
        """The victim's newest BROKER_DOWN incident (a departure within flap_window_s of its stop above
        continues that incident: its cause_history goes on)."""
        found = [i for i in stored_incidents("--config", str(stack.config_path), "--type", "BROKER_DOWN")
                 if i["cluster"] == cluster.name and i["broker"] == victim]
        return max(found, key=lambda i: _epoch_s(i["last_seen_at"]))

    stop = victims_incident()
    killed = time.time()
    cluster.kill(victim)
    try:
        # settled: the crash judged (for its first seconds a departure may read `unknown` while the view
        # catches up: collectors/departures.py), so wait for the `not_registered` one, not the first sight
        fired = wait_for(lambda: [a for a in stack.firing("KafkaBrokerDeregistered") if a["cause"] == "not_registered"],
                         90, "KafkaBrokerDeregistered firing, cause not_registered")
        print(f"\n[{cluster.mode}] SIGKILL -> KafkaBrokerDeregistered firing {time.time() - killed:.1f}s")
        assert [a["broker"] for a in fired] == [str(victim)]
        assert {a["broker"] for a in stack.firing("KafkaBrokerDeregistered")} == {str(victim)}
        # the controller has moved its load (it deregistered it): Kafka's view, then krm's incident of the
        # partition it led, opened after the kill and resolved by the election
        wait_for(lambda: _describe(cluster, topic)[0]["Leader"] not in (str(victim), "none", "-1"), 60, "a new leader")

        def unavailable() -> list[dict]:
            """Partition 0's incidents seen after the kill: opened after it, or reopened after it (an incident of
            the same partition resolved within flap_window_s goes on with its first opened_at)."""
            return [i for i in stored_incidents("--config", str(stack.config_path), "--type", "PARTITION_UNAVAILABLE")
                    if i["cluster"] == cluster.name and i["topic"] == topic and i["partition"] == 0
                    and _epoch_s(i["last_seen_at"]) > killed]
        led = wait_for(lambda: [i for i in unavailable() if i["status"] == "resolved"], 60,
                       "the partition it led: PARTITION_UNAVAILABLE opened and resolved")
        assert {(i["cause"], i["severity"]) for i in led} == {("leader_unreachable", "critical")}, led
        assert "KafkaBrokerDown" not in {a["alertname"] for a in stack.critical_fired(killed)}
    finally:
        cluster.start(victim)
        assert stack.krm("check", "ready", "--broker", str(victim), "--wait", "180").returncode == 0
    # ... and reads as one to the end: the controller moving its load at session expiry, then its
    # restart, never turn it into a planned stop (collectors/departures.py)
    crash = wait_for(lambda: (lambda i: i if i["status"] == "resolved" and _epoch_s(i["last_seen_at"]) > killed
                              else None)(victims_incident()), 120, "the crash's BROKER_DOWN resolved")
    history = crash["details"]["cause_history"]
    since_kill = history[len(stop["details"]["cause_history"]):] if crash["incident_id"] == stop["incident_id"] \
        else history
    print(f"\n[{cluster.mode}] SIGKILLed broker's incident: causes {history} ({since_kill} since the kill), "
          f"departure {crash['details'].get('departure')}")
    assert "not_registered" in since_kill and "stopped" not in since_kill, crash
    assert (crash["details"]["controlled_shutdown"], crash["details"]["departure"]) == (False, "crash"), crash
    assert crash["severity"] == "warning", crash


def _epoch_s(iso: str) -> float:
    from datetime import datetime

    return datetime.fromisoformat(iso.replace("Z", "+00:00")).timestamp()


def test_reassignment_as_kafka_sees_it(stack, tmp_path):
    from kafka import KafkaProducer
    from kafka.admin import NewTopic

    cluster = stack.cluster
    topic = "maint-move"
    admin = kafka_admin(cluster)
    try:
        admin.create_topics([NewTopic(topic, -1, -1, replica_assignments={p: [1, 2] if p % 2 else [2, 1]
                                                                          for p in range(6)})])
    finally:
        admin.close()
    wait_for(lambda: len(_describe(cluster, topic)) == 6, 60, "the topic's partitions")
    producer = KafkaProducer(bootstrap_servers=cluster.bootstrap_servers, acks="all", linger_ms=20, batch_size=1 << 20)
    for n in range(72_000):
        producer.send(topic, b"x" * 200, partition=n % 6)
    producer.flush(timeout=120)
    producer.close()
    plan = tmp_path / "move.json"
    plan.write_text(json.dumps({"version": 1, "partitions": [
        {"topic": topic, "partition": p, "replicas": [3, 4] if p % 2 else [4, 3]} for p in range(6)]}))
    started = time.time()
    kafka_tool(REASSIGN_CMD, "--bootstrap-server", cluster.bootstrap_servers, "--reassignment-json-file", str(plan),
               "--execute", "--throttle", "400000")
    samples, moving_seen = [], 0
    deadline = time.monotonic() + 300
    while time.monotonic() < deadline:
        sampled = time.monotonic()
        kafka_moving = {p for p, f in _describe(cluster, topic).items() if "Adding Replicas" in f or
                        "Removing Replicas" in f}
        kafka_urp = set(_describe(cluster, topic, "--under-replicated-partitions"))
        metrics = scrape(stack.url)
        krm_urp = {int(s.labels["partition"]) for s in series(metrics, "krm_partition_under_replicated",
                                                              cluster=cluster.name, topic=topic)}
        krm_moving = {int(s.labels["partition"]) for s in series(metrics, "krm_partition_reassigning",
                                                                 cluster=cluster.name, topic=topic)}
        samples.append((kafka_urp, krm_urp))
        if kafka_moving == krm_moving == set(range(6)):
            moving_seen += 1
        if not kafka_moving:
            break
        time.sleep(time.monotonic() - sampled)  # two JVMs a sample: rest as long, leave the cluster its cores
    else:
        pytest.fail("the reassignment did not finish within 300 s")
    kafka_tool(REASSIGN_CMD, "--bootstrap-server", cluster.bootstrap_servers, "--reassignment-json-file", str(plan),
               "--verify")  # removes the throttles
    print(f"\n[{cluster.mode}] reassignment: {len(samples)} samples, {moving_seen} with all 6 moving in both views, "
          f"{time.time() - started:.0f}s")
    # Kafka's tool reads the brokers' metadata and the controller's list of moves in two requests, as
    # krm does, so at a move's end either can flag a partition for one look (CI saw both: Kafka {0,2,4}
    # for one sample in ZooKeeper mode, krm {0,4} in KRaft mode before the collector kept the last move);
    # and the two views are read a poll apart. So: no flag of krm's that Kafka's tool did not also show
    # within one sample, and every flag Kafka's tool held for two samples running is krm's too.
    for i, (_, krm_flags) in enumerate(samples):
        near = set().union(*(k for k, _ in samples[max(0, i - 1):i + 2]))
        assert krm_flags <= near, (i, samples)
    for i in range(len(samples) - 1):
        held = samples[i][0] & samples[i + 1][0]
        assert held <= set().union(*(m for _, m in samples[i:i + 3])), (i, samples)
    assert moving_seen >= 1, "krm_partition_reassigning never matched Kafka's list of moving partitions"
    # settled: Kafka lists none moving; krm's series follow and stay gone
    wait_for(lambda: not series(scrape(stack.url), "krm_partition_reassigning", cluster=cluster.name, topic=topic),
             30, "krm_partition_reassigning cleared")
    assert {p: f["Replicas"] for p, f in _describe(cluster, topic).items()} == {
        p: "3,4" if p % 2 else "4,3" for p in range(6)}
    time.sleep(5)  # a few more polls after the leader moves
    incidents = [i for i in stored_incidents("--config", str(stack.config_path)) if i["topic"] == topic]
    assert not [i for i in incidents if i["type"] == "UNCLEAN_LEADER_ELECTION"], "a reassignment is no unclean election"
    assert not [i for i in incidents if i["type"] == "REPLICA_LAG" and i["broker"] in (3, 4)], "adding replicas lag"
    assert {i["type"] for i in incidents if i["type"] == "PARTITION_REASSIGNING"} == {"PARTITION_REASSIGNING"}
    assert stack.critical_fired(started) == [], "a reassignment paged"


def _key(alert: dict) -> tuple:
    return tuple(alert.get(k) for k in ("alertname", "topic", "partition", "broker"))


def test_whole_cluster_stopped_and_started_pages_nothing_once_back(stack):
    """An operator stops every broker (SIGTERM, one after the other) and starts them again. While the
    cluster is down clients fail and krm pages. Once krm sees it back (every broker up, none down,
    no partition offline), no critical alert may begin (pending or firing) that was not already
    under way: the start-up of a cluster is not an incident of its own."""
    cluster = stack.cluster
    topic = "maint-whole"
    kafka_tool(TOPIC_CMD, "--bootstrap-server", cluster.bootstrap_servers, "--create", "--topic", topic,
               "--partitions", "8", "--replication-factor", "3", "--config", "min.insync.replicas=2")
    wait_for(lambda: len(_describe(cluster, topic)) == 8, 60, "the topic's partitions")
    for broker in sorted(cluster.broker_ids):
        cluster.stop(broker)
    for broker in sorted(cluster.broker_ids):
        cluster.start(broker, wait=False)
    cluster.wait_for_brokers(sorted(cluster.broker_ids), 120)

    def krm_sees_it_back() -> bool:
        m = scrape(stack.url)
        up = series(m, "krm_broker_up", cluster=cluster.name)
        return (len(up) == len(cluster.broker_ids) and all(s.value == 1 for s in up)
                and not series(m, "krm_broker_down", cluster=cluster.name)
                and not series(m, "krm_partition_offline", cluster=cluster.name))
    wait_for(krm_sees_it_back, 180, "krm to see every broker up and every partition led", interval_s=0.5)
    time.sleep(2)  # Prometheus scraped that (1 s) and evaluated its rules (1 s)
    back = time.time()
    before = {_key(a) for a in stack.critical_at(back)}
    wait_for(lambda: not _describe(cluster, topic, "--unavailable-partitions")
             and not _describe(cluster, topic, "--under-replicated-partitions"), 180, "the topic whole again (kafka-topics)")
    wait_for(lambda: not series(scrape(stack.url), "krm_broker_down", cluster=cluster.name), 90, "no broker down in krm")
    time.sleep(8)  # polls, batches and rule evaluations after the settled state
    after = {_key(a) for a in stack.critical_fired(back)}
    print(f"\n[{cluster.mode}] whole cluster restart: critical firing when back {sorted(before, key=str)}, "
          f"new after {sorted(after - before, key=str)}")
    assert after - before == set(), "a cluster starting up paged"


def test_docs_queries_answer_over_what_the_pipeline_wrote(stack):
    """docs/queries.md: every question runs with `krm sql` over the tables this module's rolling
    restart and reassignment left (a table the pipeline never had a reason to write, such as an
    empty quarantine, gives the clear error naming it); two answers are checked against what happened."""
    import re

    from foundation.paths import REPO_ROOT

    queries = re.findall(r"```sql\n(.*?)```", (REPO_ROOT / "docs" / "queries.md").read_text(), re.S)
    assert len(queries) >= 10
    answers = []
    for q in queries:
        out = stack.krm("sql", q, "--json", timeout=120)
        if out.returncode != 0:
            m = re.search(r"no Delta table at (\S+) ", out.stderr)
            assert m and not Path(m.group(1)).exists(), f"{q}\n{out.stderr}"
            answers.append(None)
            continue
        answers.append(json.loads(out.stdout))
    # every broker went down (the rolling restart, the crash, the whole-cluster stop; an incident that
    # reopens within flap_window_s keeps its id and takes the latest cause)
    by_cause = {(r["broker"], r["cause"]) for r in answers[4] if r["cluster"] == stack.cluster.name}
    assert {b for b, _ in by_cause} == set(stack.cluster.broker_ids), by_cause
    # (`unknown`: KRaft's last broker of the whole-cluster stop, whose departure no poll could finish
    # judging: every poll failed from then on, and nothing else says who is registered)
    assert {c for _, c in by_cause} <= {"stopped", "not_registered", "unreachable", "unknown"}, by_cause
    moved = {r["partition"] for r in answers[6] if r["topic"] == "maint-move"}
    assert moved == set(range(6)), answers[6]
    bad = stack.krm("sql", "select * from incidents where", timeout=60)
    assert bad.returncode == 2 and "SQL error" in bad.stderr and "Traceback" not in bad.stderr


def test_the_dashboard_queries_answer_in_prometheus_over_what_happened(stack):
    """dashboards/grafana/krm-overview.json against this module's real Prometheus, which scraped krm through
    the rolling restart, the crash, the reassignment and the whole-cluster stop: every query is valid
    PromQL, and the per-broker picture (state over time, out-of-sync heat map, leaders and replicas per
    broker) holds a series per broker, each broker's state timeline showing its absence."""
    from foundation.paths import REPO_ROOT

    dash = json.loads((REPO_ROOT / "dashboards" / "grafana" / "krm-overview.json").read_text())
    cluster = stack.cluster
    end = time.time()

    def query_range(expr: str) -> list[dict]:
        expr = expr.replace("$cluster", cluster.name).replace("$__rate_interval", "1m")
        got = requests.get(f"{stack.prom_url}/api/v1/query_range", timeout=30,
                           params={"query": expr, "start": end - 1800, "end": end, "step": 1}).json()
        assert got["status"] == "success", (expr, got)
        return got["data"]["result"]

    picture = {}
    for panel in dash["panels"]:
        for target in panel.get("targets", []):
            result = query_range(target["expr"])
            if panel["title"].startswith(("Broker state", "Out-of-sync partitions per broker", "Leaders per broker",
                                          "Replicas per broker", "Offline partitions waiting")):
                picture[panel["title"]] = result
    assert len(picture) == 7, sorted(picture)  # the five over time, and the two bar gauges of now
    for title, result in picture.items():
        brokers = {r["metric"].get("broker") for r in result if r["metric"].get("cluster") == cluster.name}
        assert brokers >= {str(b) for b in cluster.broker_ids}, (title, brokers)
    state = next(r for t, r in picture.items() if t.startswith("Broker state"))
    for r in state:
        if r["metric"].get("cluster") == cluster.name:
            values = {v for _, v in r["values"]}
            assert values == {"0", "1"}, (r["metric"], values)  # each broker was away once and is back
