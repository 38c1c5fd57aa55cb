"""A Spark driver for the standalone-cluster tests (run as a process of its own).

    python spark_driver.py SPEC.json

The spec names the master, the broker, the group and topic, the query's paths and
what to do; the driver prints one line ``RESULT <json>`` at the end. Scenarios:

* ``"read"``: an ``availableNow`` query into Spark's parquet file sink; the result
  holds the output's (partition, offset, deliveryCount) rows, the group's members
  seen while the query ran, and the source's progress.
* ``"kill"``: the same with ``maxRecordsPerTrigger``, and once the query has
  committed ``kill_after_batches`` batches, ``kill -9`` of one executor JVM (its
  Python workers and their consumers die with it) while the next batch runs.
"""

from __future__ import annotations

import json
import os
import signal
import sys
import threading
import time
from pathlib import Path
from typing import Any


def _executor_pids() -> list[int]:
    """The executor JVMs on this machine (their command line names the class)."""
    pids = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            cmd = (entry / "cmdline").read_text(errors="replace").replace("\0", " ")
        except OSError:
            continue
        if "CoarseGrainedExecutorBackend" in cmd and "--app-id" in cmd:
            pids.append(int(entry.name))
    return pids


def main() -> None:
    spec: dict[str, Any] = json.loads(Path(sys.argv[1]).read_text())
    from spark_cluster import cluster_session

    from kafka_share.admin import Admin
    from kafka_share.spark import register

    spark = cluster_session(
        spec["master"], "kafka-share-cluster-test",
        spark_task_maxFailures="4", spark_sql_shuffle_partitions="2",
    )
    register(spark)
    reader = (
        spark.readStream.format("kafka-share")
        .option("kafka.bootstrap.servers", spec["bootstrap"])
        .option("kafka.group.id", spec["group"])
        .option("subscribe", spec["topic"])
        .option("stagingLocation", spec["staging"])
    )
    for key, value in spec.get("options", {}).items():
        reader = reader.option(key, str(value))
    query = (
        reader.load().select("partition", "offset", "deliveryCount", "value")
        .writeStream.format("parquet")
        .option("path", spec["output"])
        .option("checkpointLocation", spec["checkpoint"])
        .trigger(availableNow=True)
        .start()
    )
    members: set[str] = set()
    killed: list[int] = []
    stop = threading.Event()

    def watch() -> None:
        with Admin(bootstrap_servers=spec["bootstrap"]) as admin:
            while not stop.is_set():
                try:
                    group = admin.describe_share_groups([spec["group"]], timeout=5)[spec["group"]]
                    members.update(m.member_id for m in group.members)
                except Exception:
                    pass
                progress = query.lastProgress
                if (spec.get("kill_after_batches") is not None and not killed and progress
                        and progress["batchId"] >= spec["kill_after_batches"]):
                    pids = _executor_pids()
                    if pids:
                        os.kill(pids[0], signal.SIGKILL)
                        killed.append(pids[0])
                time.sleep(0.2)

    watcher = threading.Thread(target=watch, daemon=True)
    watcher.start()
    query.awaitTermination(spec.get("timeout_s", 180))
    stop.set()
    watcher.join(timeout=10)
    error = query.exception()
    latest = [json.loads(p["sources"][0]["latestOffset"] or "{}") for p in query.recentProgress
              if p["sources"]]
    rows = spark.read.parquet(spec["output"]).collect() if error is None else []
    result = {
        "error": None if error is None else str(error)[:2000],
        "rows": [[r.partition, r.offset, r.deliveryCount] for r in rows],
        "values": sorted({r.value.decode() for r in rows}),
        "members": sorted(members),
        "killed": killed,
        "progress": latest[-1] if latest else {},
    }
    print("RESULT " + json.dumps(result), flush=True)
    spark.stop()


if __name__ == "__main__":
    main()
