"""kafka_share.spark.process_queue (a pool of Spark tasks, each a share consumer)
against the session's real broker."""

from __future__ import annotations

import os
import sys
import threading
import time
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
        Path(self.directory, f"started-{record.value.decode()}").touch()
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
    values = [f"slow{i}" for i in range(4)]
    kafka_produce(topic, [v.encode() for v in values])
    # Each record takes longer than its lock. Once the tasks hold records, a third
    # member polls the group: it would be handed any record whose lock ran out.
    stolen: list[tuple[str, bool]] = []

    def thief() -> None:
        deadline = time.monotonic() + 60
        while not list(tmp_path.glob("started-*")) and time.monotonic() < deadline:
            time.sleep(0.05)
        consumer: ShareConsumer[bytes, bytes] = ShareConsumer(
            bootstrap_servers=kafka_bootstrap, group_id=group
        )
        try:
            consumer.subscribe([topic])
            until = time.monotonic() + 8
            while time.monotonic() < until:
                for r in consumer.poll(timeout=0.2):
                    started = (tmp_path / f"started-{r.value.decode()}").exists()
                    stolen.append((r.value.decode(), started))
        finally:
            consumer.close(timeout=5)

    stealer = threading.Thread(target=thief)
    stealer.start()
    try:
        rows = process_queue(
            spark, Recorder(str(tmp_path), sleep_s=3.0),
            config=config(kafka_bootstrap, group, **{"max.poll.records": 2}), topics=[topic],
            parallelism=2, idle_timeout_s=4.0,
        ).collect()
    finally:
        stealer.join()
    by_pool = handled(tmp_path)
    # The third member may take records no task had asked for yet, never one a
    # task holds: every record is handled once, by the pool or by the thief.
    assert all(count == 1 for _, count in by_pool)
    assert not {v for v, _ in by_pool} & {v for v, _ in stolen}
    assert sorted([v for v, _ in by_pool] + [v for v, _ in stolen]) == values
    assert not any(started for _, started in stolen)
    assert sorted(r.offset for r in rows) == sorted(values.index(v) for v, _ in by_pool)
    assert {(r.outcome, r.delivery_count) for r in rows} == {("ACCEPT", 1)}


class Overlap:
    """Sleeps, and records how many handlers of its task ran at once."""

    def __init__(self, directory: str, sleep_s: float) -> None:
        self.directory = directory
        self.sleep_s = sleep_s
        self.__setstate__(self.__getstate__())

    def __getstate__(self) -> dict[str, Any]:
        return {"directory": self.directory, "sleep_s": self.sleep_s}

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__dict__.update(state)
        self.lock = threading.Lock()
        self.running = self.most = 0

    def __call__(self, record: ConsumerRecord[bytes, bytes]) -> str:
        with self.lock:
            self.running += 1
            self.most = max(self.most, self.running)
            most = self.most
        time.sleep(self.sleep_s)
        with self.lock:
            self.running -= 1
        Path(self.directory, f"most-{os.getpid()}").write_text(str(most))
        if record.value.startswith(b"retry") and record.delivery_count == 1:
            raise TimeoutError("busy")
        return record.value.decode()


def test_concurrent_handlers_in_a_task_keep_the_outcome_semantics(
    spark: Any, kafka_bootstrap: str, topic_factory: Callable[..., str],
    share_group: str, kafka_produce: Callable[..., Any], tmp_path: Path,
) -> None:
    topic = topic_factory(partitions=1)
    values = [f"c{i}" for i in range(300)] + ["retry1", "retry2"]
    kafka_produce(topic, [v.encode() for v in values])
    rows = process_queue(
        spark, Overlap(str(tmp_path), 0.02), config=config(kafka_bootstrap, share_group),
        topics=[topic], parallelism=1, concurrency=4, idle_timeout_s=3.0,
        retryable=(TimeoutError,),
    ).collect()
    accepted = sorted(r.result for r in rows if r.outcome == "ACCEPT")
    assert accepted == sorted(values)
    released = sorted((r.offset, r.delivery_count) for r in rows if r.outcome == "RELEASE")
    assert released == [(300, 1), (301, 1)]
    assert max(int(p.read_text()) for p in tmp_path.glob("most-*")) == 4
    assert nothing_left(kafka_bootstrap, share_group, topic)


def test_long_running_pool_runs_until_cancelled_and_loses_nothing(
    spark: Any, kafka_bootstrap: str, topic_factory: Callable[..., str],
    share_group_factory: Callable[..., str], kafka_produce: Callable[..., Any], tmp_path: Path,
) -> None:
    lock_ms = 5000
    group = share_group_factory({"share.record.lock.duration.ms": str(lock_ms)})
    topic = topic_factory(partitions=1)
    kafka_produce(topic, [f"l{i}".encode() for i in range(20)])
    errors: list[BaseException] = []

    def run() -> None:
        spark.sparkContext.setJobGroup("long-running-pool", "test", interruptOnCancel=True)
        try:
            process_queue(
                spark, Recorder(str(tmp_path), sleep_s=0.5),
                config=config(kafka_bootstrap, group, **{"max.poll.records": 10}),
                topics=[topic], parallelism=1, idle_timeout_s=None,
            ).collect()
        except BaseException as exc:  # the cancellation
            errors.append(exc)

    job = threading.Thread(target=run)
    job.start()
    deadline = time.monotonic() + 60
    while len(handled(tmp_path)) < 3 and time.monotonic() < deadline:
        time.sleep(0.1)
    # Long past any idle timeout, the pool is still there, waiting for records.
    time.sleep(1.0)
    assert job.is_alive()
    cancelled_at = time.monotonic()
    spark.sparkContext.cancelJobGroup("long-running-pool")
    job.join(timeout=60)
    assert not job.is_alive() and errors, "the job did not end when cancelled"
    # Spark kills the task's Python worker (spark.python.task.killTimeout, 2 s).
    pids = [int(p.name[len("handled-"):-len(".txt")]) for p in tmp_path.glob("handled-*.txt")]
    while any(Path(f"/proc/{p}").exists() for p in pids) and time.monotonic() - cancelled_at < 20:
        time.sleep(0.2)
    assert not any(Path(f"/proc/{p}").exists() for p in pids), "the worker outlived the job"
    done = {v for v, _ in handled(tmp_path)}
    consumer: ShareConsumer[bytes, bytes] = ShareConsumer(
        bootstrap_servers=kafka_bootstrap, group_id=group
    )
    try:
        consumer.subscribe([topic])
        rest: list[Any] = []
        wanted = {f"l{i}" for i in range(20)} - done
        while not wanted <= {r.value.decode() for r in rest} and (
            time.monotonic() - cancelled_at < 30
        ):
            rest.extend(consumer.poll(timeout=0.5))
    finally:
        consumer.close(timeout=5)
    # Spark kills a cancelled task's Python worker (SIGKILL): the records it
    # held but had not finished come back once their locks run out. Outcomes go
    # out as handlers finish, so at most the last one's acknowledgement may have
    # been lost with the task.
    back = {r.value.decode() for r in rest}
    assert {f"l{i}" for i in range(20)} - done <= back
    assert len(back & done) <= 1, back & done
    assert {r.delivery_count for r in rest if r.value.decode() in {f"l{i}" for i in range(10)}
            } <= {2}


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"parallelism": 0}, "parallelism must be a positive int"),
        ({"concurrency": 0}, "concurrency must be a positive int"),
        ({"idle_timeout_s": 0}, "idle_timeout_s must be positive or None"),
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
