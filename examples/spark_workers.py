"""Handle a share group's records with a pool of Spark tasks.

    python examples/spark_workers.py --bootstrap-servers localhost:9092 \\
        --group enrich --topic jobs [--parallelism 4]

Needs ``pip install 'kafka-share[spark]'`` and Java 17+. Each Spark task is a
share consumer: it calls ``handle`` for every record it gets and acknowledges
it by outcome: ACCEPT when the handler returns, RELEASE (try again, maybe on
another task) when it raises ``ServiceBusyError``, REJECT (a poison record, never
delivered again) for any other exception. Tasks stop once the queue has been
idle for a few seconds. Share groups spread one partition's records over all
tasks, so parallelism is not limited by the partition count.

Handling is at-least-once: a task that dies leaves its records to be delivered
again to the others, so make the handler's side effects idempotent.
"""

from __future__ import annotations

import argparse
import time
from collections import Counter
from typing import Any

from pyspark.sql import Row, SparkSession

from kafka_share import ConsumerRecord
from kafka_share.spark import process_queue


class ServiceBusyError(Exception):
    """A temporary failure: the record is released and tried again."""


def handle(record: ConsumerRecord[bytes, bytes]) -> str:
    """The per-record work: here a 5 ms call to an imaginary service."""
    time.sleep(0.005)
    text = record.value.decode()
    if text.startswith("bad"):
        raise ValueError(f"cannot handle {text!r}")
    if text.startswith("busy") and record.delivery_count == 1:
        raise ServiceBusyError("the service asked us to come back later")
    return text.upper()


def run(spark: SparkSession, bootstrap: str, group: str, topic: str,
        parallelism: int = 4) -> list[Row]:
    """Run the pool once; return its outcomes (one row per handled record)."""
    outcomes = process_queue(
        spark, handle,
        config={"bootstrap.servers": bootstrap, "group.id": group},
        topics=[topic], parallelism=parallelism, idle_timeout_s=3.0,
        retryable=(ServiceBusyError,),
    )
    # The DataFrame is lazy and each action on it runs the pool again: run it once.
    # (With many records, write it out instead: outcomes.write.parquet(...).)
    return outcomes.collect()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--bootstrap-servers", required=True)
    parser.add_argument("--group", required=True)
    parser.add_argument("--topic", required=True)
    parser.add_argument("--parallelism", type=int, default=4)
    args = parser.parse_args()
    builder: Any = SparkSession.builder.master(f"local[{args.parallelism}]")
    spark = builder.appName("kafka-share-workers").config("spark.ui.enabled", "false").getOrCreate()
    try:
        rows = run(spark, args.bootstrap_servers, args.group, args.topic, args.parallelism)
        for row in rows:
            if row.outcome != "ACCEPT":
                print(f"{row.outcome.lower()} partition={row.partition} offset={row.offset} "
                      f"delivery_count={row.delivery_count} error={row.error}")
        counts = Counter(row.outcome.lower() for row in rows)
        print("summary: " + " ".join(f"{k}={v}" for k, v in sorted(counts.items())), flush=True)
    finally:
        spark.stop()


if __name__ == "__main__":
    main()
