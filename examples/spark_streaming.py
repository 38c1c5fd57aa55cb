"""Stream a share group into Parquet with Spark Structured Streaming, exactly once.

    python examples/spark_streaming.py --bootstrap-servers localhost:9092 \\
        --group spark-ingest --topic events --output /tmp/events [--available-now]

Needs ``pip install 'kafka-share[spark]'`` and Java 17+. Each micro-batch is read
by Spark tasks on the executors: each task polls the share group, stages the
coordinates of what it got under ``<output>/staging``, accepts the records and
hands them to Spark. A batch that runs again (a failed task, a restart after a
crash) reads exactly the same records back from the topic, so writing each batch
to a folder named after its batch id, replacing what an earlier attempt left
there, gives every record exactly once in the output.

With ``--available-now`` the query drains the queue and stops; without it, it runs
until Ctrl+C with a 5 s trigger.

The group must read from the beginning for records produced before it first
consumed (group config ``share.auto.offset.reset=earliest``).
"""

from __future__ import annotations

import argparse
import os
from typing import Any

from pyspark.sql import DataFrame, SparkSession

from kafka_share.spark import register


def run(
    spark: SparkSession, bootstrap: str, group: str, topic: str, output: str,
    *, available_now: bool = True,
) -> DataFrame:
    """Run the query; return what it wrote."""
    register(spark)
    records = (
        spark.readStream.format("kafka-share")
        .option("kafka.bootstrap.servers", bootstrap)
        .option("kafka.group.id", group)
        .option("subscribe", topic)
        .option("stagingLocation", os.path.join(output, "staging"))
        .option("maxRecordsPerTrigger", "1000")
        .load()
    )
    data = os.path.join(output, "data")

    def write(batch: DataFrame, batch_id: int) -> None:
        # Runs on the driver for each micro-batch; the write runs on the executors.
        # Idempotent: a re-run batch has the same rows and replaces its folder.
        (batch.selectExpr("topic", "partition", "offset", "CAST(value AS STRING) AS value",
                          "deliveryCount", "timestamp")
         .write.mode("overwrite").parquet(os.path.join(data, f"batch={batch_id}")))

    writer = (
        records.writeStream.foreachBatch(write)
        .option("checkpointLocation", os.path.join(output, "checkpoint"))
    )
    writer = writer.trigger(availableNow=True) if available_now else writer.trigger(
        processingTime="5 seconds"
    )
    query = writer.start()
    try:
        query.awaitTermination()
    except KeyboardInterrupt:
        query.stop()  # a batch that did not finish runs again at the next start
    if not os.path.exists(data):
        return spark.createDataFrame([], "topic string, partition int, offset long, "
                                         "value string, deliveryCount int, timestamp timestamp")
    return spark.read.parquet(data).drop("batch")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--bootstrap-servers", required=True)
    parser.add_argument("--group", required=True)
    parser.add_argument("--topic", required=True)
    parser.add_argument("--output", required=True, help="directory for data and checkpoint")
    parser.add_argument("--available-now", action="store_true")
    args = parser.parse_args()
    spark: Any = SparkSession.builder.master("local[2]").appName("kafka-share-ingest")
    session = spark.config("spark.ui.enabled", "false").getOrCreate()
    try:
        out = run(session, args.bootstrap_servers, args.group, args.topic, args.output,
                  available_now=args.available_now)
        redelivered = out.filter("deliveryCount > 1").count()
        print(f"summary: records={out.count()} redelivered={redelivered}", flush=True)
    finally:
        session.stop()


if __name__ == "__main__":
    main()
