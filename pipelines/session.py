"""The SparkSession: Delta and the Kafka source on the classpath, logs to a file, small local defaults."""

from __future__ import annotations

import logging
import os
import socket
import sys
import time
from pathlib import Path
from typing import Any

from foundation.errors import KrmError, SetupError
from foundation.paths import CONF_DIR, jar_group

log = logging.getLogger(__name__)


class SparkUnavailable(KrmError):
    """The Spark session could not be created (master unreachable, application refused)."""


# The driver at rest runs much code a few times a batch (planning, Delta's commits) and little code
# many times: compiling only what has run several times the JVM's default counts spends a fresh
# driver's first minutes running krm instead of compiling Spark (benchmarks/BENCHMARKS.md, "The driver's JIT").
DRIVER_JIT_OPTS = "-XX:CompileThresholdScaling=4"

# What a running driver JVM can no longer take: spark-submit's own options set them
SUBMIT_OWNS = frozenset({"spark.jars", "spark.driver.memory", "spark.driver.extraJavaOptions"})


def under_spark_submit() -> bool:
    """PySpark's launcher (spark-submit) hands the Python driver its JVM's gateway port."""
    return "PYSPARK_GATEWAY_PORT" in os.environ


def pipeline_jars() -> list[Path]:
    """Spark's Kafka source, Delta, and the object-store connectors where fetched."""
    return jar_group("spark") + objectstore_jars()


def objectstore_jars(required: bool = False) -> list[Path]:
    """The S3A connector's jars (an s3a:// data_dir); a local data_dir does without them."""
    try:
        return jar_group("objectstore")
    except SetupError:
        if required:
            raise
        return []


MASTER_PATIENCE_S = 15.0  # a standalone master restarting (or its host booting) accepts within this


def master_addresses(master: str) -> list[tuple[str, int]]:
    """The (host, port) of each master of a `spark://h1:7077,h2:7077` URL (port 7077 when unnamed)."""
    out = []
    for part in master.removeprefix("spark://").split(","):
        host, sep, port = part.strip().rpartition(":")
        if not sep or not port.isdigit():
            host, port = part.strip(), "7077"
        out.append((host.strip("[]"), int(port)))
    return out


def await_master(master: str, patience_s: float = MASTER_PATIENCE_S) -> None:
    """Return once a standalone master accepts a TCP connection; else SparkUnavailable after
    `patience_s`. Without it, Spark's client retries its registration 3 times 20 s (StandaloneAppClient's
    REGISTRATION_TIMEOUT_SECONDS and REGISTRATION_RETRIES) before saying "All masters are unresponsive":
    a minute for an address nothing listens on. A master that accepts but never answers still takes
    Spark's minute."""
    addresses = master_addresses(master)
    deadline = time.monotonic() + patience_s
    while True:
        errors = []
        for host, port in addresses:
            try:
                with socket.create_connection((host, port), timeout=2):
                    return
            except OSError as e:
                errors.append(f"{host}:{port} ({e.strerror or e})")
        if time.monotonic() >= deadline:
            raise SparkUnavailable(
                f"Spark session on {master} could not start: no master accepts connections at {', '.join(errors)} "
                f"(tried for {patience_s:.0f} s). Is the master running and reachable from this host?")
        time.sleep(1.0)


_OPTIMIZER = "org.apache.spark.sql.catalyst.optimizer."
# The alert query's session (alert_session). Spark plans every micro-batch afresh, and the alert plan
# is one large projection: on a small batch, planning it costs more than running it. These optimizer
# rules only tidy expressions (fold constants, simplify conditionals and null checks, drop aliases),
# which changed the alert batch's run time at 50k partitions by no more than run-to-run noise and
# cost the largest share of each batch's optimization (JFR); they are semantics-preserving, so
# leaving them out changes no result.
# Measured in benchmarks/BENCHMARKS.md ("A pipeline's start, and the alert micro-batch's fixed cost").
ALERT_PLAN_CONF = {
    "spark.sql.optimizer.excludedRules": ",".join([
        *(_OPTIMIZER + r for r in (
            "SimplifyConditionals", "RemoveRedundantAliases", "ConstantFolding", "BooleanSimplification",
            "NullPropagation", "SimplifyExtractValueOps", "PushFoldableIntoBranches", "ReorderAssociativeOperator",
            "SimplifyBinaryComparison", "NullDownPropagation", "ReplaceNullWithFalseInPredicate")),
        "org.apache.spark.sql.delta.optimizer.RangePartitionIdRewrite"]),
}


def alert_session(spark: Any) -> Any:
    """A session of the same SparkContext for the alert query, with ALERT_PLAN_CONF: its SQL settings
    are its own, so the history writes and Delta's own queries keep Spark's full optimizer."""
    session = spark.newSession()
    for key, value in ALERT_PLAN_CONF.items():
        session.conf.set(key, value)
    return session


def build_session(master: str = "local[2,4]", app_name: str = "krm-pipeline", log_dir: Path | None = None,
                  extra: dict[str, str] | None = None, driver_java_options: str = "") -> Any:
    from pyspark.sql import SparkSession

    log_dir = Path(log_dir or Path.cwd() / "krm-logs")
    log_dir.mkdir(parents=True, exist_ok=True)
    os.environ.setdefault("PYSPARK_PYTHON", os.path.realpath(sys.executable))
    java_opts = (f"-Dlog4j2.configurationFile=file:{CONF_DIR / 'spark-log4j2.properties'} -Dkrm.log.dir={log_dir} "
                 f"{DRIVER_JIT_OPTS}")
    if driver_java_options:  # e.g. -Djava.security.krb5.conf for GSSAPI (krm/runner.py)
        java_opts += f" {driver_java_options}"
    conf = {
        "spark.jars": ",".join(str(j) for j in pipeline_jars()),
        "spark.sql.extensions": "io.delta.sql.DeltaSparkSessionExtension",
        "spark.sql.catalog.spark_catalog": "org.apache.spark.sql.delta.catalog.DeltaCatalog",
        "spark.sql.shuffle.partitions": "2",
        "spark.default.parallelism": "2",
        "spark.ui.enabled": "false",
        "spark.ui.showConsoleProgress": "false",
        # PySpark's DataFrame-context for error messages: with it on, every pyspark.sql function call
        # asks the JVM for the active session, sets and clears a call-site origin (py4j round trips
        # each) and walks the Python stack; the alert plan's Columns are thousands of such calls.
        "spark.python.sql.dataFrameDebugging.enabled": "false",
        # Spark's status store keeps finished jobs, stages and SQL executions for the UI even with the UI
        # off (AppStatusListener, SQLAppStatusListener, always on the listener bus); the pipeline runs
        # several per micro-batch, for months, and the defaults (1000 each, 100 progress updates) keep
        # a growing share of the driver's heap until reached. krm reads none of it.
        "spark.ui.retainedJobs": "50",
        "spark.ui.retainedStages": "50",
        "spark.sql.ui.retainedExecutions": "20",
        "spark.sql.streaming.numRecentProgressUpdates": "10",
        "spark.sql.streaming.ui.retainedQueries": "10",
        "spark.sql.session.timeZone": "UTC",
        "spark.driver.memory": "2g",
        "spark.driver.extraJavaOptions": java_opts,
        "spark.sql.streaming.stopGracefullyOnShutdown": "true",
        "spark.sql.streaming.stopTimeout": "30s",  # a stuck batch (cluster) must not hold a shutdown forever
        # A query with no new records asks its source again after this long (MicroBatchExecution; Spark's
        # default 10 ms). The alert query waits so most of the time (a healthy, unchanged poll is not
        # published: collectors/unchanged.py), and each ask is a ListOffsets round trip of the Kafka
        # source's admin client: at 10 ms that idle loop was most of a quiet driver's CPU. It adds at most
        # this much to the first sight of a record (benchmarks/BENCHMARKS.md, "Polls that stay home").
        "spark.sql.streaming.pollingDelay": "100ms",
        "spark.databricks.delta.snapshotPartitions": "2",
        "spark.sql.adaptive.enabled": "false",  # tiny micro-batches: planning overhead, no benefit
        # The generated classes of one alert batch, the history batch and Delta's own queries outnumber
        # Spark's default cache of 100 compiled classes: at 100 each batch compiled much of its code anew
        # with Janino (benchmarks/BENCHMARKS.md).
        "spark.sql.codegen.cache.maxEntries": "1000",
        # Each micro-batch persists its batch. Caching a plan clones the session when either of these
        # would need turning off for it (CacheManager.getOrCloneSessionWithConfigsOff), and Spark 4.0.0
        # never frees a cloned session (SPARK-54753: a session leaked per batch).
        # krm has no bucketed tables and runs without AQE: set as the cache wants them, no clone is made.
        "spark.sql.sources.bucketing.autoBucketedScan.enabled": "false",
        "spark.sql.optimizer.canChangeCachedPlanOutputPartitioning": "true",
        "spark.scheduler.mode": "FAIR",  # history writes must not queue ahead of alert batches
        "spark.scheduler.allocation.file": str(CONF_DIR / "fairscheduler.xml"),  # alerts first to a free slot
        # The Kafka source's options carry the observations cluster's password and TLS key
        # (foundation/security.py): hidden from plans, logs and the UI like Spark's own secrets.
        "spark.sql.redaction.options.regex": "(?i)url|password|jaas|keystore\\.key|truststore\\.certificates|token",
        "spark.redaction.regex": "(?i)secret|password|token|access[.]?key|jaas",
    }
    conf |= extra or {}
    builder = SparkSession.builder.appName(app_name)
    if under_spark_submit():
        # spark-submit started the driver JVM: its --master, --jars and driver settings hold
        left = sorted(k for k in conf if k in SUBMIT_OWNS)
        log.info("under spark-submit: its master and %s apply, not krm's", ", ".join(left))
        conf = {k: v for k, v in conf.items() if k not in SUBMIT_OWNS}
    else:
        if master.startswith("spark://"):
            await_master(master)
        builder = builder.master(master)
    for k, v in conf.items():
        builder = builder.config(k, v)
    try:
        spark = builder.getOrCreate()
    except Exception as e:  # a Py4J error whose cause is in Spark's own log: say it in one line
        raise SparkUnavailable(explain_session_failure(master, log_dir, e)) from None
    spark.sparkContext.setLogLevel("WARN")
    return spark


def explain_session_failure(master: str, log_dir: Path, error: BaseException) -> str:
    """One line: the reason Spark's scheduler logged (e.g. "All masters are unresponsive! Giving up.")
    or the error's first line, and where the full log is."""
    reason = None
    log_file = log_dir / "spark.log"
    try:
        for line in log_file.read_text(errors="replace").splitlines():
            if "Application has been killed. Reason:" in line:
                reason = line.split("Reason:", 1)[1].strip()
    except OSError:
        pass
    first = str(error).strip().splitlines()[0] if str(error).strip() else type(error).__name__
    hint = (" Is the master running and reachable from this host (and this host from its workers)?"
            if master.startswith("spark://") else "")
    said = reason or first
    said = said if said.endswith((".", "!", "?")) else said + "."
    return f"Spark session on {master} could not start: {said}{hint} Spark's log: {log_file}"

