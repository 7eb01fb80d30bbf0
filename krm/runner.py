"""The monitor as one process: collector threads, the Spark pipeline and the /metrics server.

`krm run`, `krm demo` and the end-to-end tests all go through `Monitor`; `krm collect` and
`krm pipeline` use the two halves alone.
"""

from __future__ import annotations

import logging
import os
import signal
import threading
import time
from typing import TYPE_CHECKING, Callable

from collectors.daemon import Collector
from collectors.publisher import ensure_topic
from collectors.stats import CollectorMetrics
from foundation.cadence import ready_window_s
from foundation.config import Config
from foundation.fate import WARNING, FateMetrics, sharing_fate
from foundation.web_config import load_web_config
from krm.console import Console
from krm.snapshot import from_cluster
from pipelines.job import Pipeline
from pipelines.tables import Tables
from pipelines.metrics import serve
from pipelines.state import PipelineState
from pipelines.session import build_session, objectstore_jars

if TYPE_CHECKING:
    from wsgiref.simple_server import WSGIServer

    from pyspark.sql import SparkSession

log = logging.getLogger(__name__)


class Monitor:
    """Construct opens nothing; start() brings up the pieces asked for, stop() tears them down."""

    def __init__(self, config: Config, collect: bool = True, pipeline: bool = True,
                 spark: SparkSession | None = None) -> None:
        self.config = config
        self.with_collector = collect
        self.with_pipeline = pipeline
        self._spark = spark
        self._own_spark = spark is None
        self.collector: Collector | None = None
        self.pipeline: Pipeline | None = None
        self._server: WSGIServer | None = None
        self._collector_started_ms: int | None = None  # when this process's collector started polling

    @property
    def metrics_url(self) -> str:
        p = self.config.pipeline
        scheme = "http"
        if p.web_config_file is not None:
            scheme = "https" if load_web_config(p.web_config_file).tls else "http"
        port = p.metrics_port if self.with_pipeline else self.config.collector.serve_port(p.metrics_port)
        return f"{scheme}://{p.metrics_host}:{port}/metrics"

    @property
    def console_url(self) -> str:
        """`[pipeline] console_url`, else the address /metrics is served at (a wildcard host named by
        this machine's name, which a link must carry)."""
        if self.config.pipeline.console_url:
            return self.config.pipeline.console_url
        url = self.metrics_url.removesuffix("/metrics")
        host = self.config.pipeline.metrics_host
        if host in ("", "0.0.0.0", "::", "[::]"):
            import socket

            url = url.replace(f"//{host}:", f"//{socket.getfqdn()}:", 1)
        return url

    def start(self) -> Monitor:
        os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
        shared = sharing_fate(self.config)
        for name in shared:
            log.warning(WARNING, self.config.observations.topic, name)
        fate = FateMetrics(shared)
        state = (PipelineState(ready_window_s=self.ready_window_s, console_url=self.console_url,
                               stale_after_s=self.stale_after_s) if self.with_pipeline else None)
        try:
            if self.with_collector:
                self._collector_started_ms = int(time.time() * 1000)
                self.collector = Collector(self.config)
                if state is not None:  # steady, unchanged polls reach /metrics without a batch
                    self.collector.vouch = state.vouch
                self.collector.start()
                if not self.with_pipeline:  # `krm collect`: its own health on the configured port

                    p = self.config.pipeline
                    port = self.config.collector.serve_port(p.metrics_port)  # not the pipeline's: both may share a host
                    self._server = serve(None, p.metrics_host, port, (CollectorMetrics(self.collector), fate),
                                         p.web_config_file, readiness=self._collector_readiness)
            if state is not None:
                p = self.config.pipeline
                extra = ((CollectorMetrics(self.collector),) if self.collector is not None else ()) + (fate,)

                self._server = serve(state, p.metrics_host, p.metrics_port, extra, p.web_config_file,
                                     pages=Console(state, Tables(p.data_dir), look=lambda name: from_cluster(self.config, name),
                                                   keyframe_s=self.config.collector.history_keyframe_s))
                if self._spark is None:
                    # a Spark master can take a minute to accept (or refuse) the application: say so meanwhile
                    state.update(pipeline_error=f"starting the Spark session on {p.spark_master}")
                    self._spark = build_session(p.spark_master, log_dir=Tables(p.data_dir).logs,
                                                extra=self.spark_settings(), driver_java_options=self._krb5_option())
                    state.update(pipeline_error=None)
                if self.collector is None:
                    self._ensure_observations_topic()
                # the collector's first polls (each partition's first state) were published while Spark
                # started: a new history reads them (ingest.read_observations)
                self.pipeline = Pipeline(self.config, self._spark, state, history_since_ms=self._collector_started_ms,
                                         collector_said=self.collector.said if self.collector is not None else None
                                         ).start()
        except BaseException:
            self.stop()
            raise
        return self

    def spark_settings(self) -> dict[str, str]:
        """What the config adds to krm's Spark defaults: the object store's Hadoop settings for an
        s3a://, abfss:// or gs:// data_dir, then `[pipeline.spark_conf]` (which wins)."""
        p = self.config.pipeline
        out: dict[str, str] = {}
        if p.data_dir.uri.startswith(("s3a://", "abfss://", "gs://")):
            objectstore_jars(required=True)  # `make jars` / `krm setup` fetch them; say so before Spark starts
            out |= p.storage.spark_conf(p.data_dir.uri)
        if self._krb5_option():  # the executors' JVMs find the KDCs as the driver's does
            out["spark.executor.extraJavaOptions"] = self._krb5_option()
        return out | dict(p.spark_conf)

    def _krb5_option(self) -> str:
        """Kafka's Java client (Spark's Kafka source) over GSSAPI: the JVM reads the realm's KDCs from
        java.security.krb5.conf (it ignores KRB5_CONFIG); the observations login's krb5_config, if any."""
        sec = self.config.observations.security
        path = sec.krb5_config if sec.sasl_mechanism == "GSSAPI" else None
        return f"-Djava.security.krb5.conf={path}" if path else ""

    def _ensure_observations_topic(self) -> None:
        """`krm pipeline` started before any collector: create the topic (as the collector would), so
        the Kafka source does not fail on a missing topic and then skip the first records at `latest`."""
        try:
            ensure_topic(self.config.observations)
        except Exception as e:  # noqa: BLE001 - the collector creates it later; the queries retry meanwhile
            log.warning("observations topic %s not created by the pipeline (%s: %s); waiting for the collector",
                        self.config.observations.topic, type(e).__name__, e)

    @property
    def stale_after_s(self) -> dict[str, float]:
        """cluster -> how old its view may be before the console and krm_cluster_view_stale call it
        stale (foundation/cadence.py)."""
        return {c.name: self.config.cadence(c).stale_after_s for c in self.config.clusters}

    @property
    def ready_window_s(self) -> float:
        """/readyz and krm_pipeline_up want a batch (or a poll) at least this recent: five polls, >= 30 s, and
        two of the published polls of a cluster at rest (`[collector] unchanged_publish_s`)."""
        return ready_window_s(self.config.slowest_poll_s, self.config.collector.unchanged_publish_s)

    def _collector_readiness(self) -> tuple[bool, str]:
        """`krm collect`: ready while every cluster was polled within the window."""
        now, collector = time.time(), self.collector
        if collector is None:
            return False, "the collector has not started"
        stale = [c.name for c in self.config.clusters
                 if now - collector.last_poll_at.get(c.name, 0.0) > self.ready_window_s]
        return (not stale, f"not polled within {self.ready_window_s:.0f}s: {', '.join(stale)}" if stale
                else "every cluster polled")

    def stop(self) -> None:
        """Every step bounded, so a service manager's stop timeout is never reached; the collector is
        told first so its rounds wind down while the queries stop."""
        t0 = time.monotonic()
        took: list[str] = []

        def step(name: str, fn: Callable[[], object]) -> None:
            s = time.monotonic()
            fn()
            took.append(f"{name} {time.monotonic() - s:.1f}s")

        if self.collector is not None:
            self.collector.request_stop()
        if self.pipeline is not None:
            step("queries", self.pipeline.stop)
            self.pipeline = None
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()
            self._server = None
        if self.collector is not None:
            step("collector", self.collector.stop)
            self.collector = None
        if self._own_spark and self._spark is not None:
            step("spark", self._stop_spark)
            self._spark = None
        if took:
            log.info("stopped in %.1fs (%s)", time.monotonic() - t0, ", ".join(took))

    def _stop_spark(self) -> None:
        if self._spark is None:
            return
        try:
            self._spark.stop()
        except Exception as e:  # noqa: BLE001 - the JVM may have received the same SIGINT/SIGTERM
            log.warning("Spark did not stop cleanly (%s)", type(e).__name__)

    def run_forever(self) -> None:
        """Block until SIGINT/SIGTERM (failed queries are restarted by the pipeline's watchdog);
        always stops cleanly."""
        done = threading.Event()
        for sig in (signal.SIGINT, signal.SIGTERM):
            signal.signal(sig, lambda *_: done.set())
        try:
            done.wait()
        finally:
            log.info("stopping")
            self.stop()
