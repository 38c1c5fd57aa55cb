"""Share groups from PySpark (extra ``kafka-share[spark]``: pyspark 4.2+, pyarrow).

Two ways in:

* :func:`register` adds the Structured Streaming source
  ``spark.readStream.format("kafka-share")``: a share group's records as
  micro-batches read by the executors, each poll staged (coordinates only)
  before it is accepted, so that a re-run batch reads exactly the same records
  back from the topics (exactly-once with an idempotent sink).
* :func:`process_queue` runs a pool of Spark tasks, each a share consumer that
  calls your handler per record and acknowledges by outcome (ACCEPT, RELEASE
  for retryable errors, REJECT for poison records).

See the Spark guide (``docs/spark.md``) for guarantees and operational rules.
"""

from __future__ import annotations

try:
    import pyarrow  # noqa: F401
    import pyspark  # noqa: F401
except ImportError as exc:  # pragma: no cover - depends on the environment
    raise ImportError(
        "kafka_share.spark needs pyspark>=4.2 and pyarrow: pip install 'kafka-share[spark]'"
    ) from exc

from pyspark.sql import SparkSession

from kafka_share.spark._options import SparkOptionError
from kafka_share.spark.pool import OUTCOME_SCHEMA, process_queue
from kafka_share.spark.source import ShareGroupDataSource, source_schema

__all__ = [
    "OUTCOME_SCHEMA",
    "ShareGroupDataSource",
    "SparkOptionError",
    "process_queue",
    "register",
    "source_schema",
]


def register(spark: SparkSession) -> None:
    """Register the ``kafka-share`` streaming source with ``spark``.

    Calling it again is harmless.
    """
    spark.dataSource.register(ShareGroupDataSource)
