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

import importlib.util
from typing import TYPE_CHECKING, Any

# pyarrow is looked for, not imported: Spark imports this package in each Python
# process it starts for the source (planning, the source runner), most of which
# never touch Arrow data; importing pyarrow, numpy and the worker pool there cost
# about 0.2 s per process before the query's first trigger.
if importlib.util.find_spec("pyspark") is None or importlib.util.find_spec("pyarrow") is None:
    raise ImportError(  # pragma: no cover - depends on the environment
        "kafka_share.spark needs pyspark>=4.2 and pyarrow: pip install 'kafka-share[spark]'"
    )

from pyspark.sql import SparkSession

from kafka_share.spark._options import SparkOptionError
from kafka_share.spark.source import ShareGroupDataSource, source_schema

if TYPE_CHECKING:
    from kafka_share.spark.pool import OUTCOME_SCHEMA, process_queue

__all__ = [
    "OUTCOME_SCHEMA",
    "ShareGroupDataSource",
    "SparkOptionError",
    "process_queue",
    "register",
    "source_schema",
]


#: Option names whose values Spark must hide in plans and the UI
#: (``spark.sql.redaction.options.regex`` is matched against option names; Spark's
#: own ``spark.redaction.regex`` catches values such as a JAAS line with a
#: password, but not a PEM key or a key store password option's name).
SECRET_OPTIONS_REGEX = (
    r"kafka\.(.*password|.*secret|.*jaas|.*token|ssl\.key\.pem|ssl\.keystore\.key$|ssl\.keydata)"
)


def register(spark: SparkSession) -> None:
    """Register the ``kafka-share`` streaming source with ``spark``, and have Spark
    hide the values of its secret options (passwords, JAAS configurations, PEM
    keys, tokens) in plans and the UI.

    Calling it again is harmless.
    """
    spark.dataSource.register(ShareGroupDataSource)
    key = "spark.sql.redaction.options.regex"
    current = spark.conf.get(key, "(?i)url") or "(?i)url"
    if SECRET_OPTIONS_REGEX not in current:
        spark.conf.set(key, f"(?i)(?:{current.removeprefix('(?i)')})|{SECRET_OPTIONS_REGEX}")


def __getattr__(name: str) -> Any:
    # The worker pool (pyarrow, the threaded worker) on first use.
    if name in ("OUTCOME_SCHEMA", "process_queue"):
        from kafka_share.spark import pool  # noqa: PLC0415

        return getattr(pool, name)
    raise AttributeError(f"module 'kafka_share.spark' has no attribute {name!r}")
