"""A streaming query that dies is restarted from its checkpoint by the pipeline's watchdog."""

import pytest

from foundation.config import parse_config
from pipelines.job import Pipeline

pytestmark = pytest.mark.spark


def test_failed_query_is_restarted_from_checkpoint(spark, tmp_path):
    config = parse_config({"clusters": [{"name": "c", "bootstrap_servers": "127.0.0.1:1"}],
                           "pipeline": {"data_dir": str(tmp_path)}})
    pipeline = Pipeline(config, spark)
    calls = []

    def start_rate_query():
        calls.append(1)

        def fail_once(df, batch_id):
            if len(calls) == 1:
                raise ValueError("transient failure")

        return (spark.readStream.format("rate").option("rowsPerSecond", 5).load().writeStream
                .queryName("krm-test-restart").foreachBatch(fail_once)
                .option("checkpointLocation", str(tmp_path / "cp")).start())

    pipeline._starters = {"krm-test-restart": start_rate_query}
    q = start_rate_query()
    pipeline.queries = [q]
    try:
        from pyspark.errors import StreamingQueryException

        with pytest.raises(StreamingQueryException, match="transient failure"):
            q.awaitTermination(60)
        assert pipeline.restart_failed() == 1
        assert pipeline.state.snapshot.query_restarts == {"krm-test-restart": 1}  # krm_pipeline_query_restarts_total
        again = pipeline.queries[0]
        assert again.isActive and again is not q
        again.processAllAvailable()
        assert again.exception() is None and len(calls) == 2
        assert pipeline.restart_failed() == 0
    finally:
        pipeline.stop()
