"""kafka_share.spark.process_queue (a pool of Spark tasks, each a share consumer)
against the session's real broker."""

from __future__ import annotations

import os
import sys
import time
from collections import Counter
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from pyspark import cloudpickle

from kafka_share import ConsumerRecord, ShareConsumer
from kafka_share.spark import SparkOptionError, process_queue

# The session's SparkSession fixture, `spark`.
pytest_plugins = ["spark_fixtures"]

pytestmark = [
    pytest.mark.integration,
    pytest.mark.slow,
    pytest.mark.filterwarnings("ignore::ResourceWarning"),
]

# The handlers below run in Spark's Python workers, which cannot import this test
# module: ship them by value.
cloudpickle.register_pickle_by_value(sys.modules[__name__])


def upper(record: ConsumerRecord[bytes, bytes]) -> str:
    return record.value.decode().upper()


def poison_or_retry(record: ConsumerRecord[bytes, bytes]) -> int:
    value = record.value
    if value.startswith(b"poison"):
        raise ValueError(f"cannot parse {value!r}")
    if value.startswith(b"retry") and record.delivery_count == 1:
        raise TimeoutError("service busy")
    return len(value)


class Recorder:
    """Writes each handled record to a per-process file; the task handling the
    record ``die`` for the first time kills its own process."""

    def __init__(self, directory: str, sleep_s: float = 0.0) -> None:
        self.directory = directory
        self.sleep_s = sleep_s

    def __call__(self, record: ConsumerRecord[bytes, bytes]) -> None:
        if record.value == b"die" and record.delivery_count == 1:
            os._exit(17)
        time.sleep(self.sleep_s)
        path = os.path.join(self.directory, f"handled-{os.getpid()}.txt")
        with open(path, "a") as f:
            f.write(f"{record.value.decode()} {record.delivery_count}\n")


def handled(directory: Path) -> list[tuple[str, int]]:
    out = []
    for path in directory.glob("handled-*.txt"):
        for line in path.read_text().splitlines():
            value, count = line.split()
            out.append((value, int(count)))
    return out


def config(bootstrap: str, group: str, **extra: object) -> dict[str, object]:
    return {"bootstrap.servers": bootstrap, "group.id": group, **extra}


def nothing_left(bootstrap: str, group: str, topic: str, seconds: float = 3.0) -> bool:
    consumer: ShareConsumer[bytes, bytes] = ShareConsumer(
        bootstrap_servers=bootstrap, group_id=group
    )
    try:
        consumer.subscribe([topic])
        deadline = time.monotonic() + seconds
        while time.monotonic() < deadline:
            if consumer.poll(timeout=0.5):
                return False
        return True
    finally:
        consumer.close(timeout=5)


def test_records_spread_over_tasks_each_accepted_once(
    spark: Any, kafka_bootstrap: str, topic_factory: Callable[..., str],
    share_group: str, kafka_produce: Callable[..., Any],
) -> None:
    from pyspark.sql.functions import spark_partition_id

    topic = topic_factory(partitions=2)
    for p in (0, 1):
        kafka_produce(topic, [f"w{p}-{i}".encode() for i in range(1000)], partition=p)
    # 600 per task (plus at most one poll) < 2000 / 3: all four tasks must work.
    df = process_queue(
        spark, upper, config=config(kafka_bootstrap, share_group), topics=[topic],
        parallelism=4, max_records_per_task=600, idle_timeout_s=3.0,
    )
    rows = df.withColumn("task", spark_partition_id()).collect()
    assert len(rows) == 2000
    assert len({(r.partition, r.offset) for r in rows}) == 2000
    assert {r.outcome for r in rows} == {"ACCEPT"}
    assert {r.delivery_count for r in rows} == {1}
    assert all(r.error is None for r in rows)
    assert {r.result for r in rows} == {f"W{p}-{i}" for p in (0, 1) for i in range(1000)}
    assert len({r.task for r in rows}) == 4
    assert nothing_left(kafka_bootstrap, share_group, topic)


def test_poison_rejected_and_retryable_released_then_accepted(
    spark: Any, kafka_bootstrap: str, topic_factory: Callable[..., str],
    share_group: str, kafka_produce: Callable[..., Any],
) -> None:
    topic = topic_factory(partitions=1)
    values = [f"{kind}-{i}".encode() for i in range(20) for kind in ("ok", "poison", "retry")]
    kafka_produce(topic, values)
    rows = process_queue(
        spark, poison_or_retry, config=config(kafka_bootstrap, share_group), topics=[topic],
        parallelism=2, idle_timeout_s=3.0, retryable=(TimeoutError,),
    ).collect()
    by_offset: dict[int, list[Any]] = {}
    for r in rows:
        by_offset.setdefault(r.offset, []).append(r)
    assert set(by_offset) == set(range(60))
    for offset, got in by_offset.items():
        kind = values[offset].split(b"-")[0]
        outcomes = sorted((r.delivery_count, r.outcome) for r in got)
        if kind == b"ok":
            assert outcomes == [(1, "ACCEPT")]
            assert got[0].result == str(len(values[offset]))
        elif kind == b"poison":
            assert outcomes == [(1, "REJECT")]  # never delivered again
            assert got[0].error.startswith("ValueError: cannot parse")
            assert got[0].result is None
        else:
            assert outcomes == [(1, "RELEASE"), (2, "ACCEPT")]
            released = next(r for r in got if r.outcome == "RELEASE")
            assert released.error == "TimeoutError: service busy"
    assert nothing_left(kafka_bootstrap, share_group, topic)


def test_dying_task_loses_nothing(
    spark: Any, kafka_bootstrap: str, topic_factory: Callable[..., str],
    share_group_factory: Callable[..., str], kafka_produce: Callable[..., Any],
    tmp_path: Path,
) -> None:
    group = share_group_factory({"share.record.lock.duration.ms": "3000"})
    topic = topic_factory(partitions=1)
    values = [f"d{i}" for i in range(300)]
    values[120] = "die"
    kafka_produce(topic, [v.encode() for v in values])
    rows = process_queue(
        spark, Recorder(str(tmp_path), sleep_s=0.002),
        config=config(kafka_bootstrap, group, **{"max.poll.records": 20}), topics=[topic],
        parallelism=2, idle_timeout_s=8.0,
    ).collect()
    seen = handled(tmp_path)
    # Every record was handled; the one whose task died, again by a new delivery.
    assert {v for v, _ in seen} == set(values)
    assert {c for v, c in seen if v == "die"} == {2}
    assert "die" in {values[r.offset] for r in rows if r.outcome == "ACCEPT"}
    assert nothing_left(kafka_bootstrap, group, topic)


def test_slow_handler_keeps_its_locks_with_renew(
    spark: Any, kafka_bootstrap: str, topic_factory: Callable[..., str],
    share_group_factory: Callable[..., str], kafka_produce: Callable[..., Any],
    tmp_path: Path,
) -> None:
    group = share_group_factory({"share.record.lock.duration.ms": "2000"})
    topic = topic_factory(partitions=1)
    kafka_produce(topic, [f"slow{i}".encode() for i in range(4)])
    # Each record takes longer than its lock; the other task keeps polling the
    # same partition, so a lock that were not renewed would hand it the record.
    rows = process_queue(
        spark, Recorder(str(tmp_path), sleep_s=2.5),
        config=config(kafka_bootstrap, group, **{"max.poll.records": 2}), topics=[topic],
        parallelism=2, idle_timeout_s=4.0,
    ).collect()
    assert Counter(handled(tmp_path)) == Counter((f"slow{i}", 1) for i in range(4))
    assert sorted((r.offset, r.outcome, r.delivery_count) for r in rows) == [
        (i, "ACCEPT", 1) for i in range(4)
    ]


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"parallelism": 0}, "parallelism must be a positive int"),
        ({"topics": "t"}, "topics must be a non-empty list"),
        ({"retryable": TimeoutError}, "retryable must be a tuple"),
        ({"config": {"bootstrap.servers": "x:1", "group.id": "g", "max.poll.recordz": 1}},
         "max.poll.recordz"),
        ({"config": {"bootstrap.servers": "x:1", "group.id": "g",
                     "share.acknowledgement.mode": "implicit"}},
         "share.acknowledgement.mode"),
    ],
)
def test_bad_arguments_are_named(spark: Any, kwargs: dict[str, Any], message: str) -> None:
    args: dict[str, Any] = {
        "config": {"bootstrap.servers": "x:1", "group.id": "g"},
        "topics": ["t"], "parallelism": 1, **kwargs,
    }
    with pytest.raises(SparkOptionError, match=message):
        process_queue(spark, upper, **args)
