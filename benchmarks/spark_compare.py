"""The kafka-share Spark source next to Spark's own Kafka source, and the worker pool.

    python benchmarks/spark_compare.py [--records N] [--pool-records N]
        [--kafka-package org.apache.spark:spark-sql-kafka-0-10_2.13:VERSION]
        [--bootstrap-servers HOST:PORT] [--output benchmarks/results/spark.json]
        [--group-config KEY=VALUE]...

1. Streaming ingest, one ``local[2]`` SparkSession: the same topic (2 partitions,
   ``--records`` records of 100 bytes) read to the ``noop`` sink with
   ``trigger(availableNow=True)``, once with ``format("kafka-share")`` (a fresh
   share group) and once with ``format("kafka")`` (``spark-sql-kafka-0-10``,
   fetched from Maven Central through ``spark.jars.packages``). Reported: records/s
   over the whole query (start to termination) and over the micro-batches alone
   (the sum of their ``triggerExecution`` times, i.e. without query start-up).
2. Worker pool: ``process_queue`` with a 5 ms handler (I/O-bound work) on a
   one-partition topic, at 1, 2, 4 and 8 tasks, in a ``local[8]`` session (task
   slots, not cores: the handler sleeps). Records/s is measured between the
   first and the last handler call, so group joins and idle tails are left out.

Starts a single-node broker with ``kafka_share.testing.LocalKafkaCluster`` unless
``--bootstrap-servers`` is given. Needs Java 17+ and ``kafka-share[spark]``.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path
from typing import Any

# The kafka_share of this checkout (the script's directory comes first on sys.path).
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from kafka_share.testing import KafkaAdmin
from kafka_share.testing.admin import unique_name

VALUE = b"x" * 100
HANDLER_S = 0.005


def session(master: str, packages: str | None) -> Any:
    from pyspark.sql import SparkSession

    builder: Any = SparkSession.builder.master(master).appName("kafka-share-bench")
    builder = (
        builder.config("spark.ui.enabled", "false")
        .config("spark.sql.shuffle.partitions", "2")
        .config("spark.driver.memory", "1g")
        .config("spark.sql.session.timeZone", "UTC")
        .config("spark.driver.bindAddress", "127.0.0.1")
        .config("spark.driver.host", "127.0.0.1")
        # Records are counted from the query's progress: keep every batch's
        # (Spark keeps the last 100 by default, fewer than a run may have).
        .config("spark.sql.streaming.numRecentProgressUpdates", "1000000")
    )
    if packages:
        builder = builder.config("spark.jars.packages", packages)
    spark = builder.getOrCreate()
    spark.sparkContext.setLogLevel("ERROR")
    return spark


def run_query(reader: Any, tmp: Path, name: str, sink: str = "noop") -> dict[str, Any]:
    started = time.perf_counter()
    writer = reader.load().writeStream.format(sink).option(
        "checkpointLocation", str(tmp / f"ckpt-{name}")
    )
    if sink == "parquet":
        writer = writer.option("path", str(tmp / f"out-{name}"))
    query = writer.trigger(availableNow=True).start()
    query.awaitTermination()
    wall_s = time.perf_counter() - started
    if query.exception() is not None:
        raise RuntimeError(str(query.exception()))
    progress = query.recentProgress
    rows = sum(p["numInputRows"] for p in progress)
    with_rows = [p for p in progress if p["numInputRows"]]
    batch_ms = sum(p["durationMs"].get("triggerExecution", 0) for p in with_rows)
    # Where a micro-batch's time goes (Spark's own phases: latestOffset,
    # queryPlanning, addBatch, walCommit, commitOffsets, ...), mean per batch.
    phases = sorted({key for p in with_rows for key in p["durationMs"]})
    phase_ms = {
        key: round(sum(p["durationMs"].get(key, 0) for p in with_rows) / len(with_rows))
        for key in phases
    } if with_rows else {}
    return {
        "phase_ms_per_batch": phase_ms,
        "records": rows,
        "batches": len(with_rows),
        "wall_s": round(wall_s, 2),
        "records_per_s_wall": round(rows / wall_s),
        "records_per_s_batches": round(rows / (batch_ms / 1000)) if batch_ms else None,
    }


def streaming(args: argparse.Namespace, bootstrap: str, admin: KafkaAdmin,
              tmp: Path) -> dict[str, Any]:
    from kafka_share.spark import register

    spark = session("local[2]", args.kafka_package)
    parts = args.partitions
    out: dict[str, Any] = {"topic_records": parts * (args.records // parts),
                           "warmup_records": parts * (args.warmup_records // parts),
                           "partitions": parts, "record_bytes": args.record_bytes,
                           "sink": args.sink, "group_config": dict(args.group_config),
                           "share_options": dict(args.share_option)}
    try:
        register(spark)
        if args.warmup_records:
            # Discarded: the first queries of a run also pay for the broker's and
            # Spark's JITs and the Python workers' start, whichever source runs first.
            _two_queries(args, spark, bootstrap, admin, tmp, "warmup", args.warmup_records)
        share, kafka = _two_queries(args, spark, bootstrap, admin, tmp, "run", args.records)
        out["kafka-share"], out["spark-kafka"] = share, kafka
        if "error" not in kafka:
            out["ratio_wall"] = round(share["records_per_s_wall"] / kafka["records_per_s_wall"], 2)
            if share["records_per_s_batches"] and kafka["records_per_s_batches"]:
                out["ratio_batches"] = round(
                    share["records_per_s_batches"] / kafka["records_per_s_batches"], 2
                )
    finally:
        spark.stop()
    return out


def _two_queries(args: argparse.Namespace, spark: Any, bootstrap: str, admin: KafkaAdmin,
                 tmp: Path, tag: str, records: int) -> tuple[dict[str, Any], dict[str, Any]]:
    """Both sources, one after the other, over a fresh topic of ``records``."""
    parts = args.partitions
    topic = admin.create_topic(unique_name("spark-bench"), parts)
    value = b"x" * args.record_bytes
    for p in range(parts):
        admin.produce(topic, [value] * (records // parts), partition=p)
    group = unique_name("spark-bench")
    admin.set_group_config(group, {"share.auto.offset.reset": "earliest", **args.group_config})
    share_reader = (
        spark.readStream.format("kafka-share")
        .option("kafka.bootstrap.servers", bootstrap)
        .option("kafka.group.id", group)
        .option("subscribe", topic)
        .option("stagingLocation", str(tmp / f"staging-{tag}"))
    )
    for key, value in args.share_option.items():
        share_reader = share_reader.option(key, value)
    share = run_query(share_reader, tmp, f"share-{tag}", args.sink)
    print(f"kafka-share ({tag})", share, file=sys.stderr)
    kafka_reader = (
        spark.readStream.format("kafka")
        .option("kafka.bootstrap.servers", bootstrap)
        .option("subscribe", topic)
        .option("startingOffsets", "earliest")
    )
    kafka: dict[str, Any]
    try:
        kafka = run_query(kafka_reader, tmp, f"kafka-{tag}", args.sink)
    except Exception as exc:  # e.g. the package did not resolve, or does not fit
        kafka = {"error": str(exc).splitlines()[0][:300]}
    print(f"spark-kafka ({tag})", kafka, file=sys.stderr)
    return share, kafka


def _handler(record: Any) -> str:
    time.sleep(HANDLER_S)
    return repr(time.time())


def pool(args: argparse.Namespace, bootstrap: str, admin: KafkaAdmin) -> dict[str, Any]:
    from kafka_share.spark import process_queue

    topic = admin.create_topic(unique_name("spark-pool-bench"), 1)
    admin.produce(topic, [VALUE] * args.pool_records)
    spark = session("local[8]", None)
    out: dict[str, Any] = {"handler_ms": HANDLER_S * 1000, "partitions": 1,
                           "records": args.pool_records, "runs": {}}
    try:
        for tasks in (1, 2, 4, 8):
            group = unique_name("spark-pool-bench")
            admin.set_group_config(group, {"share.auto.offset.reset": "earliest"})
            started = time.perf_counter()
            rows = process_queue(
                spark, _handler, config={"bootstrap.servers": bootstrap, "group.id": group},
                topics=[topic], parallelism=tasks, idle_timeout_s=2.0,
            ).collect()
            wall_s = time.perf_counter() - started
            done = sorted(float(r.result) for r in rows if r.outcome == "ACCEPT")
            span = done[-1] - done[0] if len(done) > 1 else float("nan")
            run = {
                "accepted": len(done),
                "wall_s": round(wall_s, 2),
                "records_per_s": round((len(done) - 1) / span) if span > 0 else None,
            }
            out["runs"][str(tasks)] = run
            print(f"pool tasks={tasks}", run, file=sys.stderr)
        base = out["runs"]["1"]["records_per_s"]
        out["speedup"] = {
            k: round(v["records_per_s"] / base, 2) if base and v["records_per_s"] else None
            for k, v in out["runs"].items()
        }
    finally:
        spark.stop()
    return out


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--records", type=int, default=200_000)
    parser.add_argument("--warmup-records", type=int, default=20_000,
                        help="records of the discarded first run of both sources (0: none)")
    parser.add_argument("--partitions", type=int, default=8)
    parser.add_argument("--record-bytes", type=int, default=100)
    parser.add_argument("--sink", choices=["noop", "parquet"], default="noop")
    parser.add_argument("--skip-pool", action="store_true")
    parser.add_argument("--pool-records", type=int, default=2000)
    parser.add_argument("--kafka-package",
                        default="org.apache.spark:spark-sql-kafka-0-10_2.13:4.2.0")
    parser.add_argument("--bootstrap-servers")
    parser.add_argument("--output", default="benchmarks/results/spark.json")
    parser.add_argument("--tmp", default="/tmp/kafka-share-spark-bench")
    parser.add_argument("--group-config", action="append", default=[], metavar="KEY=VALUE",
                        help="a group config of the streaming query's share group, e.g. "
                        "share.partition.max.record.locks=4000")
    parser.add_argument("--share-option", action="append", default=[], metavar="KEY=VALUE",
                        help="an option of the kafka-share source, e.g. "
                        "kafka.max.poll.records=20000")
    args = parser.parse_args()
    try:
        args.group_config = dict(item.split("=", 1) for item in args.group_config)
        args.share_option = dict(item.split("=", 1) for item in args.share_option)
    except ValueError:
        parser.error("--group-config and --share-option take KEY=VALUE")
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")  # loopback only, like the tests
    # Spark's Python workers must import the kafka_share being measured.
    root = str(Path(__file__).resolve().parents[1])
    os.environ["PYTHONPATH"] = os.pathsep.join(
        p for p in (root, os.environ.get("PYTHONPATH", "")) if p
    )
    tmp = Path(args.tmp) / unique_name("run")
    tmp.mkdir(parents=True)

    def measure(bootstrap: str) -> dict[str, Any]:
        admin = KafkaAdmin(bootstrap)
        try:
            return {
                "streaming": streaming(args, bootstrap, admin, tmp),
                "pool": None if args.skip_pool else pool(args, bootstrap, admin),
            }
        finally:
            admin.close()

    if args.bootstrap_servers:
        results = measure(args.bootstrap_servers)
    else:
        from kafka_share.testing import LocalKafkaCluster
        from kafka_share.testing.config import BENCHMARK_JVM_OPTIONS

        with LocalKafkaCluster(jvm_options=BENCHMARK_JVM_OPTIONS) as cluster:
            results = measure(cluster.bootstrap_servers)
    results["machine"] = {"cpus": os.cpu_count()}
    Path(args.output).parent.mkdir(parents=True, exist_ok=True)
    Path(args.output).write_text(json.dumps(results, indent=2) + "\n")
    print(json.dumps(results, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
