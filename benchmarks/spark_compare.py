"""The kafka-share Spark source next to Spark's own Kafka source, and the worker pool.

    python benchmarks/spark_compare.py [--matrix | --records N --record-bytes B --sink S]
        [--steady [--rates R1,R2,...] [--step-s S]] [--skip-backlog] [--skip-pool]
        [--partitions P] [--share-option KEY=VALUE]... [--group-config KEY=VALUE]...
        [--kafka-package org.apache.spark:spark-sql-kafka-0-10_2.13:VERSION]
        [--bootstrap-servers HOST:PORT] [--output benchmarks/results/spark.json]

1. Backlog, one ``local[2]`` SparkSession: the same topic (``--partitions``, 8 by
   default) read with ``trigger(availableNow=True)``, once with
   ``format("kafka-share")`` (a fresh share group) and once with ``format("kafka")``
   (``spark-sql-kafka-0-10``, fetched from Maven Central through
   ``spark.jars.packages``). ``--matrix`` runs 1,000,000 x 100 B and 200,000 x 1 KiB,
   each into the ``noop`` and the ``parquet`` sink. Reported: records/s over the whole
   query (start to termination) and over the micro-batches alone (the sum of their
   ``triggerExecution`` times, i.e. without query start-up).
2. Steady state (``--steady``): each source with ``processingTime="1 second"``
   under a producer whose rate is raised step by step (``--rates``, ``--step-s``
   seconds each, after an unmeasured warm-up step) until the query falls behind
   (more than two trigger intervals' worth of records not read when the producer
   stops, or records still not read four seconds later); the highest rate it
   kept up with, and the produce-to-sink latency (p50, p99) at each step.
3. Worker pool: ``process_queue`` with a 5 ms handler (I/O-bound work) on a
   one-partition topic, at 1, 2, 4 and 8 tasks, without and with ``concurrency=4``,
   in a ``local[8]`` session (task slots, not cores: the handler sleeps). Records/s
   is measured in the steady state (every task has started, none has finished),
   against the ideal of tasks x concurrency / 5 ms.

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


#: The backlog cells of --matrix: (records, record bytes, sink).
MATRIX = [(1_000_000, 100, "noop"), (1_000_000, 100, "parquet"),
          (200_000, 1024, "noop"), (200_000, 1024, "parquet")]


def streaming(args: argparse.Namespace, bootstrap: str, admin: KafkaAdmin,
              tmp: Path) -> dict[str, Any]:
    """Both sources over the same backlog with ``availableNow``: one cell, or the
    four of ``--matrix``."""
    from kafka_share.spark import register

    spark = session("local[2]", args.kafka_package)
    cells = MATRIX if args.matrix else [(args.records, args.record_bytes, args.sink)]
    out: dict[str, Any] = {"partitions": args.partitions,
                           "warmup_records": args.warmup_records,
                           "group_config": dict(args.group_config),
                           "share_options": dict(args.share_option), "cells": []}
    try:
        register(spark)
        if args.warmup_records:
            # Discarded: the first queries of a run also pay for the broker's and
            # Spark's JITs and the Python workers' start, whichever source runs first.
            _two_queries(args, spark, bootstrap, admin, tmp, "warmup",
                         (args.warmup_records, args.record_bytes, "noop"))
        for i, cell in enumerate(cells):
            share, kafka = _two_queries(args, spark, bootstrap, admin, tmp, f"run{i}", cell)
            result: dict[str, Any] = {"records": cell[0], "record_bytes": cell[1],
                                      "sink": cell[2], "kafka-share": share,
                                      "spark-kafka": kafka}
            if "error" not in kafka:
                result["ratio_wall"] = round(
                    share["records_per_s_wall"] / kafka["records_per_s_wall"], 2)
                if share["records_per_s_batches"] and kafka["records_per_s_batches"]:
                    result["ratio_batches"] = round(
                        share["records_per_s_batches"] / kafka["records_per_s_batches"], 2)
            out["cells"].append(result)
    finally:
        spark.stop()
    return out


def _two_queries(args: argparse.Namespace, spark: Any, bootstrap: str, admin: KafkaAdmin,
                 tmp: Path, tag: str, cell: tuple[int, int, str], *,
                 only_share: bool = False) -> tuple[dict[str, Any], dict[str, Any]]:
    """Both sources, one after the other, over a fresh topic of the cell's
    (records, record bytes), into its sink."""
    records, size, sink = cell
    parts = args.partitions
    topic = admin.create_topic(unique_name("spark-bench"), parts)
    value = b"x" * size
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
    share = run_query(share_reader, tmp, f"share-{tag}", sink)
    print(f"kafka-share ({tag})", share, file=sys.stderr)
    if only_share:
        return share, {}
    kafka_reader = (
        spark.readStream.format("kafka")
        .option("kafka.bootstrap.servers", bootstrap)
        .option("subscribe", topic)
        .option("startingOffsets", "earliest")
    )
    kafka: dict[str, Any]
    try:
        kafka = run_query(kafka_reader, tmp, f"kafka-{tag}", sink)
    except Exception as exc:  # e.g. the package did not resolve, or does not fit
        kafka = {"error": str(exc).splitlines()[0][:300]}
    print(f"spark-kafka ({tag})", kafka, file=sys.stderr)
    return share, kafka


class _Paced:
    """A producer thread writing ``rate`` records/s of ``size`` bytes round-robin over
    the topic's partitions, each stamped with its create time."""

    def __init__(self, bootstrap: str, topic: str, size: int) -> None:
        from confluent_kafka import Producer

        self._producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 5,
                                   "queue.buffering.max.messages": 2_000_000})
        self.topic = topic
        self.value = b"x" * size
        self.produced = 0

    def run(self, rate: int, seconds: float) -> float:
        """Produce for ``seconds`` at ``rate``; returns the rate reached (the
        producer shares the CPU with everything else: it may fall short)."""
        tick_s = 0.01
        started = time.perf_counter()
        base = self.produced
        while (now := time.perf_counter() - started) < seconds:
            due = base + rate * now
            while self.produced < due:
                try:
                    self._producer.produce(self.topic, self.value)
                except BufferError:
                    self._producer.poll(0.05)
                    continue
                self.produced += 1
            self._producer.poll(0)
            time.sleep(tick_s)
        self._producer.flush(30)
        return (self.produced - base) / (time.perf_counter() - started)


#: How long after a step's producer stops the backlog is looked at.
_SETTLE_S = 4.0


class _LatencySink:
    """A ``foreachBatch`` function: rows per batch and produce-to-sink latency
    quantiles (latency = the batch's end minus the record's create time)."""

    def __init__(self) -> None:
        self.rows = 0
        self.p50: list[tuple[int, float]] = []
        self.p99: list[float] = []

    def __call__(self, df: Any, batch_id: int) -> None:
        from pyspark.sql import functions as f

        agg = df.select(f.unix_millis("timestamp").alias("ts")).agg(
            f.count("ts").alias("n"), f.percentile_approx("ts", [0.5, 0.01], 1000).alias("q"),
        ).collect()[0]
        now_ms = time.time() * 1000
        if agg.n:
            self.rows += agg.n
            self.p50.append((agg.n, now_ms - agg.q[0]))
            self.p99.append(now_ms - agg.q[1])


def steady(args: argparse.Namespace, bootstrap: str, admin: KafkaAdmin,
           tmp: Path) -> dict[str, Any]:
    """Each source under a producer at rates raised step by step, with a
    ``processingTime="1 second"`` trigger: the highest rate it keeps up with."""
    from kafka_share.spark import register

    spark = session("local[2]", args.kafka_package)
    out: dict[str, Any] = {"partitions": args.partitions, "record_bytes": args.record_bytes,
                           "step_s": args.step_s, "trigger": "1 second", "sources": {}}
    try:
        register(spark)
        for name in args.steady_sources:
            out["sources"][name] = _steady_source(args, spark, bootstrap, admin, tmp, name)
            print(f"steady {name}", out["sources"][name], file=sys.stderr)
        best = {k: v.get("highest_sustained_rate") for k, v in out["sources"].items()}
        if best.get("kafka-share") and best.get("spark-kafka"):
            out["ratio_sustained_rate"] = round(best["kafka-share"] / best["spark-kafka"], 2)
    finally:
        spark.stop()
    return out


def _steady_source(args: argparse.Namespace, spark: Any, bootstrap: str, admin: KafkaAdmin,
                   tmp: Path, name: str) -> dict[str, Any]:
    topic = admin.create_topic(unique_name("spark-steady"), args.partitions)
    if name == "kafka-share":
        group = unique_name("spark-steady")
        admin.set_group_config(group, {"share.auto.offset.reset": "earliest", **args.group_config})
        reader = (
            spark.readStream.format("kafka-share")
            .option("kafka.bootstrap.servers", bootstrap)
            .option("kafka.group.id", group).option("subscribe", topic)
            .option("stagingLocation", str(tmp / f"staging-steady-{topic}"))
        )
        for key, value in args.share_option.items():
            reader = reader.option(key, value)
    else:
        reader = (
            spark.readStream.format("kafka").option("kafka.bootstrap.servers", bootstrap)
            .option("subscribe", topic).option("startingOffsets", "earliest")
        )
    sink = _LatencySink()
    query = (
        reader.load().writeStream.foreachBatch(sink)
        .option("checkpointLocation", str(tmp / f"ckpt-steady-{topic}"))
        .trigger(processingTime="1 second").start()
    )
    producer = _Paced(bootstrap, topic, args.record_bytes)
    steps: list[dict[str, Any]] = []
    try:
        time.sleep(5.0)  # the query has started
        # Not measured: the first records of a query pay for its readers' start
        # (kafka-share: the executors' consumers join the group).
        producer.run(min(args.rates), args.step_s)
        time.sleep(_SETTLE_S)
        for rate in args.rates:
            rows_before, p50_before, p99_before = sink.rows, len(sink.p50), len(sink.p99)
            progress_before = len(query.recentProgress)
            cpu_before = _cpu_by_role()
            produced_per_s = producer.run(rate, args.step_s)
            cpu_after = _cpu_by_role()
            read_in_step = sink.rows - rows_before
            behind = producer.produced - sink.rows
            time.sleep(_SETTLE_S)
            behind_after = producer.produced - sink.rows
            p50s = sink.p50[p50_before:]
            step = {
                "rate": rate,
                "produced_per_s": round(produced_per_s),
                "cpu_us_per_record_read": _cpu_per_record(cpu_before, cpu_after, read_in_step),
                **_batch_phases(query.recentProgress[progress_before:]),
                "consumed_per_s": round((sink.rows - rows_before) / (args.step_s + _SETTLE_S)),
                "behind_at_end": behind,
                "behind_settled": behind_after,
                "latency_p50_ms": round(_weighted_median(p50s)) if p50s else None,
                "latency_p99_ms": round(max(sink.p99[p99_before:])) if sink.p99[p99_before:]
                else None,
                # Kept up: when the producer stopped, at most two trigger
                # intervals' worth of records were not read yet, and a few
                # seconds later all of them were.
                "kept_up": behind <= 2 * rate and behind_after <= rate // 10,
            }
            steps.append(step)
            print(f"steady {name}", step, file=sys.stderr)
            if not step["kept_up"]:
                break
    finally:
        query.stop()
    sustained = [s["rate"] for s in steps if s["kept_up"]]
    return {"steps": steps, "highest_sustained_rate": max(sustained) if sustained else None}


def _cpu_by_role() -> dict[str, float]:
    """CPU seconds used so far by the processes of this machine that take part,
    by role (a process that ended is not counted: Spark's Python workers and
    the broker live for the whole run)."""
    tick = os.sysconf("SC_CLK_TCK")
    me = os.getpid()
    out = dict.fromkeys(("broker", "spark-jvm", "python-workers", "benchmark"), 0.0)
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            cmd = (entry / "cmdline").read_bytes()
            fields = (entry / "stat").read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        if int(entry.name) == me:
            role = "benchmark"  # the producer, and the driver's foreachBatch calls
        elif b"kafka.Kafka" in cmd:
            role = "broker"
        elif b"org.apache.spark.deploy.SparkSubmit" in cmd:
            role = "spark-jvm"
        elif b"pyspark" in cmd and b"python" in cmd:
            role = "python-workers"
        else:
            continue
        out[role] += (int(fields[11]) + int(fields[12])) / tick  # utime + stime
    return out


def _cpu_per_record(before: dict[str, float], after: dict[str, float],
                    records: int) -> dict[str, float]:
    """Microseconds of CPU per record read, by role."""
    if records <= 0:
        return {}
    return {role: round((after[role] - before[role]) * 1e6 / records, 2) for role in after}


def _batch_phases(progress: list[Any]) -> dict[str, Any]:
    """Where the step's micro-batches spent their time (Spark's phases, mean ms
    per batch with rows) and how big they were."""
    with_rows = [p for p in progress if p["numInputRows"]]
    if not with_rows:
        return {}
    phases = sorted({key for p in with_rows for key in p["durationMs"]})
    return {
        "batches": len(with_rows),
        "rows_per_batch": round(sum(p["numInputRows"] for p in with_rows) / len(with_rows)),
        "phase_ms_per_batch": {
            key: round(sum(p["durationMs"].get(key, 0) for p in with_rows) / len(with_rows))
            for key in phases
        },
    }


def _weighted_median(pairs: list[tuple[int, float]]) -> float:
    total = sum(n for n, _ in pairs)
    seen = 0
    for n, value in sorted(pairs, key=lambda p: p[1]):
        seen += n
        if seen * 2 >= total:
            return value
    return pairs[-1][1]


def executors(args: argparse.Namespace, bootstrap: str, admin: KafkaAdmin,
              tmp: Path) -> dict[str, Any]:
    """The kafka-share source on a standalone cluster (a master and two one-core
    workers, processes of their own) with one executor, then with two: on a
    2-core machine this shows the reading spread over executors, not speed."""
    sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests" / "integration"))
    from spark_cluster import (  # type: ignore[import-not-found]
        StandaloneCluster,
        cluster_session,
    )

    from kafka_share.spark import register

    cluster = StandaloneCluster(tmp / "cluster").start()
    out: dict[str, Any] = {"records": args.cluster_records, "partitions": args.partitions,
                           "runs": {}}
    try:
        for count in (1, 2):
            spark = cluster_session(
                cluster.url, f"kafka-share-exec{count}", spark_cores_max=str(count),
                spark_sql_streaming_numRecentProgressUpdates="1000000",
            )
            try:
                register(spark)
                share, _ = _two_queries(
                    args, spark, bootstrap, admin, tmp, f"exec{count}",
                    (args.cluster_records, 100, "noop"), only_share=True,
                )
            finally:
                spark.stop()
            out["runs"][str(count)] = share
            print(f"executors={count}", share, file=sys.stderr)
    finally:
        cluster.stop()
    return out


def _handler(record: Any) -> str:
    time.sleep(HANDLER_S)
    return repr(time.time())


def pool(args: argparse.Namespace, bootstrap: str, admin: KafkaAdmin) -> dict[str, Any]:
    """process_queue with a 5 ms sleeping handler on one partition, at 1, 2, 4 and 8
    tasks, without and with concurrency 4. Records/s is measured in the steady
    state: from the moment every task has handled its first record to the moment
    the first task handled its last, so group joins and tails are left out. The
    ideal is tasks x concurrency / 5 ms."""
    from pyspark.sql.functions import spark_partition_id

    from kafka_share.spark import process_queue

    spark = session("local[8]", None)
    out: dict[str, Any] = {"handler_ms": HANDLER_S * 1000, "partitions": 1, "runs": {}}
    try:
        for concurrency in (1, 4):
            for tasks in (1, 2, 4, 8):
                ideal = tasks * concurrency / HANDLER_S
                # About 15 s of work at the ideal rate, at most --pool-records.
                records = int(min(args.pool_records, ideal * 15))
                topic = admin.create_topic(unique_name("spark-pool-bench"), 1)
                admin.produce(topic, [VALUE] * records)
                group = unique_name("spark-pool-bench")
                admin.set_group_config(group, {"share.auto.offset.reset": "earliest"})
                started = time.perf_counter()
                rows = process_queue(
                    spark, _handler, config={"bootstrap.servers": bootstrap, "group.id": group},
                    topics=[topic], parallelism=tasks, concurrency=concurrency,
                    idle_timeout_s=2.0,
                ).withColumn("task", spark_partition_id()).collect()
                wall_s = time.perf_counter() - started
                run = _pool_run(rows, records, ideal)
                run["wall_s"] = round(wall_s, 2)
                out["runs"][f"{tasks}x{concurrency}"] = run
                print(f"pool tasks={tasks} concurrency={concurrency}", run, file=sys.stderr)
    finally:
        spark.stop()
    return out


def _pool_run(rows: list[Any], records: int, ideal: float) -> dict[str, Any]:
    by_task: dict[int, list[float]] = {}
    for r in rows:
        if r.outcome == "ACCEPT":
            by_task.setdefault(r.task, []).append(float(r.result))
    lo = max(min(times) for times in by_task.values())
    hi = min(max(times) for times in by_task.values())
    inside = sum(1 for times in by_task.values() for t in times if lo <= t <= hi)
    rate = inside / (hi - lo) if hi > lo else None
    return {
        "records": records,
        "accepted": sum(len(t) for t in by_task.values()),
        "tasks_with_records": len(by_task),
        "steady_window_s": round(hi - lo, 2),
        "records_per_s": round(rate) if rate else None,
        "ideal_per_s": round(ideal),
        "of_ideal": round(rate / ideal, 2) if rate else None,
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--records", type=int, default=200_000)
    parser.add_argument("--warmup-records", type=int, default=20_000,
                        help="records of the discarded first run of both sources (0: none)")
    parser.add_argument("--partitions", type=int, default=8)
    parser.add_argument("--record-bytes", type=int, default=100)
    parser.add_argument("--sink", choices=["noop", "parquet"], default="noop")
    parser.add_argument("--skip-pool", action="store_true")
    parser.add_argument("--matrix", action="store_true",
                        help="the four backlog cells: 1,000,000 x 100 B and 200,000 x 1 KiB, "
                        "into the noop and the parquet sink")
    parser.add_argument("--skip-backlog", action="store_true")
    parser.add_argument("--steady", action="store_true",
                        help="also the steady-state comparison (processingTime, paced producer)")
    parser.add_argument("--rates", type=lambda t: [int(x) for x in t.split(",")],
                        default=[5000, 10_000, 20_000, 40_000, 60_000, 80_000, 120_000],
                        help="the steady-state producer rates, records/s, comma-separated")
    parser.add_argument("--step-s", type=float, default=12.0)
    parser.add_argument("--steady-sources", type=lambda t: t.split(","),
                        default=["kafka-share", "spark-kafka"],
                        help="the sources --steady runs (comma-separated)")
    parser.add_argument("--executors", action="store_true",
                        help="also one executor against two on a standalone cluster")
    parser.add_argument("--cluster-records", type=int, default=400_000)
    parser.add_argument("--pool-records", type=int, default=20_000)
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
                "streaming": None if args.skip_backlog else streaming(args, bootstrap, admin, tmp),
                "steady": steady(args, bootstrap, admin, tmp) if args.steady else None,
                "executors": executors(args, bootstrap, admin, tmp) if args.executors else None,
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
