"""The kafka-share Structured Streaming source against the session's real broker."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from kafka_share import AcknowledgeType, ShareConsumer

# The session's SparkSession fixture, `spark`.
pytest_plugins = ["spark_fixtures"]

pytestmark = [
    pytest.mark.integration,
    pytest.mark.slow,
    # Spark's py4j callback server closes its sockets lazily.
    pytest.mark.filterwarnings("ignore::ResourceWarning"),
]

RUN_TIMEOUT_S = 120


def reader(spark: Any, bootstrap: str, group: str, topic: str, **options: object) -> Any:
    r = (
        spark.readStream.format("kafka-share")
        .option("kafka.bootstrap.servers", bootstrap)
        .option("kafka.group.id", group)
        .option("subscribe", topic)
    )
    for name, value in options.items():
        r = r.option(name, str(value))
    return r.load()


class Sink:
    """A foreachBatch function that keeps every batch's rows (driver side)."""

    def __init__(self, fail_on: int | None = None, columns: tuple[str, ...] = ()) -> None:
        self.columns = ("partition", "offset", "value", "deliveryCount", *columns)
        self.batches: list[tuple[int, list[Any]]] = []
        self.fail_on = fail_on
        self.failed_rows: list[Any] = []
        self.lock = threading.Lock()

    def __call__(self, df: Any, batch_id: int) -> None:
        rows = df.select(*self.columns).collect()
        if self.fail_on is not None and batch_id == self.fail_on and rows:
            self.failed_rows = rows
            raise RuntimeError(f"sink failure injected in batch {batch_id}")
        with self.lock:
            self.batches.append((batch_id, rows))

    def rows(self) -> list[Any]:
        with self.lock:
            return [r for _, rows in self.batches for r in rows]


def received_by_fresh_consumer(bootstrap: str, group: str, topic: str, seconds: float) -> list[Any]:
    consumer: ShareConsumer[bytes, bytes] = ShareConsumer(
        bootstrap_servers=bootstrap, group_id=group
    )
    try:
        consumer.subscribe([topic])
        seen: list[Any] = []
        deadline = time.monotonic() + seconds
        while time.monotonic() < deadline:
            seen.extend(consumer.poll(timeout=0.5))
        return seen
    finally:
        consumer.close(timeout=5)


def test_available_now_drains_acknowledges_and_terminates(
    spark: Any, kafka_bootstrap: str, topic_factory: Callable[..., str],
    share_group: str, kafka_produce: Callable[..., Any], tmp_path: Path,
) -> None:
    topic = topic_factory(partitions=2)
    for p in (0, 1):
        kafka_produce(topic, [f"v{p}-{i}".encode() for i in range(2500)], partition=p)
    sink = Sink()
    # An idle timeout beyond the test's: the query must end because the group is
    # done with every record, not because it waited long enough.
    query = (
        reader(spark, kafka_bootstrap, share_group, topic,
               availableNowIdleTimeoutMs=10 * RUN_TIMEOUT_S * 1000)
        .writeStream.foreachBatch(sink)
        .option("checkpointLocation", str(tmp_path / "ckpt"))
        .trigger(availableNow=True)
        .start()
    )
    assert query.awaitTermination(RUN_TIMEOUT_S), "availableNow did not terminate"
    assert query.exception() is None
    rows = sink.rows()
    assert len(rows) == 5000
    assert len({(r.partition, r.offset) for r in rows}) == 5000
    assert {r.deliveryCount for r in rows} == {1}
    assert {r.value for r in rows} == {f"v{p}-{i}".encode() for p in (0, 1) for i in range(2500)}
    # Every batch, the last one included, was acknowledged before the query ended.
    assert received_by_fresh_consumer(kafka_bootstrap, share_group, topic, 4.0) == []


def _holding_member(
    bootstrap: str, group: str, topic: str
) -> tuple[ShareConsumer[bytes, bytes], list[Any]]:
    """Another member of ``group`` holding (acquired, unacknowledged) the records
    of its first non-empty poll, at most 100."""
    holder: ShareConsumer[bytes, bytes] = ShareConsumer(
        bootstrap_servers=bootstrap, group_id=group,
        share_acknowledgement_mode="explicit", max_poll_records=100,
        share_acquire_mode="record_limit",
    )
    holder.subscribe([topic])
    held: list[Any] = []
    deadline = time.monotonic() + RUN_TIMEOUT_S
    while not held and time.monotonic() < deadline:
        held = list(holder.poll(timeout=1.0))
    if not held:
        holder.close(timeout=5)
        raise AssertionError("the holder got no records")
    return holder, held


def test_available_now_waits_for_records_another_member_holds(
    spark: Any, kafka_bootstrap: str, topic_factory: Callable[..., str],
    share_group: str, kafka_produce: Callable[..., Any], tmp_path: Path,
) -> None:
    # Records that are in the topic when the query starts but locked by another
    # member of the group come back to the queue later (released, or when their
    # lock expires): availableNow must not take the empty polls in between for
    # the end of the queue.
    topic = topic_factory(partitions=1)
    kafka_produce(topic, [f"h{i}".encode() for i in range(600)])
    holder, held = _holding_member(kafka_bootstrap, share_group, topic)
    deadline = time.monotonic() + RUN_TIMEOUT_S
    try:
        sink = Sink()
        query = (
            reader(spark, kafka_bootstrap, share_group, topic, pollTimeoutMs=200,
                   availableNowIdleTimeoutMs=10 * RUN_TIMEOUT_S * 1000)
            .writeStream.foreachBatch(sink)
            .option("checkpointLocation", str(tmp_path / "ckpt"))
            .trigger(availableNow=True)
            .start()
        )
        # Give the held records back once the query has read all the others and
        # then polled an empty queue for a while (or has ended).
        others = 600 - len(held)
        seen_all_at: float | None = None
        while query.isActive and time.monotonic() < deadline:
            if seen_all_at is None and len(sink.rows()) >= others:
                seen_all_at = time.monotonic()
            if seen_all_at is not None and time.monotonic() - seen_all_at > 3.0:
                break
            time.sleep(0.1)
        for record in held:
            holder.acknowledge(record, AcknowledgeType.RELEASE)
        holder.commit_sync(timeout=10.0)
    finally:
        holder.close(timeout=5)
    assert query.awaitTermination(RUN_TIMEOUT_S), "availableNow did not terminate"
    assert query.exception() is None
    rows = sink.rows()
    assert {r.value for r in rows} == {f"h{i}".encode() for i in range(600)}
    assert len(rows) == 600
    held_offsets = {r.offset for r in held}
    assert {r.deliveryCount for r in rows if r.offset in held_offsets} == {2}
    assert received_by_fresh_consumer(kafka_bootstrap, share_group, topic, 3.0) == []


def test_available_now_stops_waiting_after_the_idle_timeout(
    spark: Any, kafka_bootstrap: str, topic_factory: Callable[..., str],
    share_group_factory: Callable[..., str], kafka_produce: Callable[..., Any], tmp_path: Path,
) -> None:
    # Another member keeps records from the start locked for longer than the
    # query waits: the query ends anyway (no hang), and those records stay in
    # the group.
    group = share_group_factory({"share.record.lock.duration.ms": "60000"})
    topic = topic_factory(partitions=1)
    kafka_produce(topic, [f"w{i}".encode() for i in range(300)])
    holder, held = _holding_member(kafka_bootstrap, group, topic)
    try:
        sink = Sink()
        query = (
            reader(spark, kafka_bootstrap, group, topic, pollTimeoutMs=200,
                   availableNowIdleTimeoutMs=3000)
            .writeStream.foreachBatch(sink)
            .option("checkpointLocation", str(tmp_path / "ckpt"))
            .trigger(availableNow=True)
            .start()
        )
        assert query.awaitTermination(RUN_TIMEOUT_S), "availableNow did not terminate"
        assert query.exception() is None
        held_offsets = {r.offset for r in held}
        rows = sink.rows()
        assert len(rows) == 300 - len(held)
        assert not {r.offset for r in rows} & held_offsets
    finally:
        holder.close(timeout=5)  # releases the held records
    again = received_by_fresh_consumer(kafka_bootstrap, group, topic, 5.0)
    assert {r.offset for r in again} == held_offsets


def test_failed_batch_is_redelivered_after_restart(
    spark: Any, kafka_bootstrap: str, topic_factory: Callable[..., str],
    share_group: str, kafka_produce: Callable[..., Any], tmp_path: Path,
) -> None:
    topic = topic_factory(partitions=1)
    kafka_produce(topic, [f"r{i}".encode() for i in range(300)])
    ckpt = str(tmp_path / "ckpt")
    first = Sink(fail_on=1)
    query = (
        reader(spark, kafka_bootstrap, share_group, topic, maxRecordsPerTrigger=100)
        .writeStream.foreachBatch(first)
        .option("checkpointLocation", ckpt)
        .trigger(availableNow=True)
        .start()
    )
    with pytest.raises(Exception, match="sink failure injected"):
        query.awaitTermination(RUN_TIMEOUT_S)
    assert first.failed_rows, "the failing batch never ran"
    failed = {(r.partition, r.offset) for r in first.failed_rows}

    second = Sink()
    query = (
        reader(spark, kafka_bootstrap, share_group, topic, maxRecordsPerTrigger=100)
        .writeStream.foreachBatch(second)
        .option("checkpointLocation", ckpt)
        .trigger(availableNow=True)
        .start()
    )
    assert query.awaitTermination(RUN_TIMEOUT_S)
    assert query.exception() is None
    written = first.rows() + second.rows()
    # Every record is written; the ones of the failed batch come back as new
    # records of the restarted query, with a delivery count of 2.
    assert {r.value for r in written} == {f"r{i}".encode() for i in range(300)}
    again = [r for r in second.rows() if (r.partition, r.offset) in failed]
    assert {(r.partition, r.offset) for r in again} == failed
    assert {r.deliveryCount for r in again} == {2}
    assert len(written) == 300  # the first run's successful batches were not redelivered
    assert received_by_fresh_consumer(kafka_bootstrap, share_group, topic, 3.0) == []


def test_stop_releases_held_records_at_once(
    spark: Any, kafka_bootstrap: str, topic_factory: Callable[..., str],
    share_group_factory: Callable[..., str], kafka_produce: Callable[..., Any], tmp_path: Path,
) -> None:
    lock_ms = 30_000
    group = share_group_factory({"share.record.lock.duration.ms": str(lock_ms)})
    topic = topic_factory(partitions=1)
    kafka_produce(topic, [f"s{i}".encode() for i in range(50)], headers=[("h", b"1")])
    sink = Sink(columns=("headers", "topic", "timestamp"))
    # A long trigger interval: batch 0 runs at once and its records stay held
    # (they would be acknowledged by the next trigger) when the query stops.
    query = (
        reader(spark, kafka_bootstrap, group, topic, includeHeaders="true")
        .writeStream.foreachBatch(sink)
        .option("checkpointLocation", str(tmp_path / "ckpt"))
        .trigger(processingTime="1 hour")
        .start()
    )
    deadline = time.monotonic() + RUN_TIMEOUT_S
    while len(sink.rows()) < 50 and time.monotonic() < deadline:
        time.sleep(0.2)
    assert len(sink.rows()) == 50
    first = sink.rows()[0]
    assert [(h.key, h.value) for h in first.headers] == [("h", b"1")]
    assert first.topic == topic and first.timestamp is not None
    stopped_at = time.monotonic()
    query.stop()
    consumer: ShareConsumer[bytes, bytes] = ShareConsumer(
        bootstrap_servers=kafka_bootstrap, group_id=group
    )
    try:
        consumer.subscribe([topic])
        got: list[Any] = []
        while len(got) < 50 and time.monotonic() - stopped_at < lock_ms / 1000:
            got.extend(consumer.poll(timeout=0.5))
        elapsed = time.monotonic() - stopped_at
    finally:
        consumer.close(timeout=5)
    assert len(got) == 50
    assert {r.delivery_count for r in got} == {2}
    assert elapsed < lock_ms / 1000 / 2, f"released after {elapsed:.1f}s, not at once"


def test_max_records_per_trigger_and_quiet_period(
    spark: Any, kafka_bootstrap: str, topic_factory: Callable[..., str],
    share_group: str, kafka_produce: Callable[..., Any], tmp_path: Path,
) -> None:
    topic = topic_factory(partitions=2)
    for p in (0, 1):
        kafka_produce(topic, [f"m{p}-{i}".encode() for i in range(100)], partition=p)
    sink = Sink()
    query = (
        reader(spark, kafka_bootstrap, share_group, topic, maxRecordsPerTrigger=40)
        .writeStream.foreachBatch(sink)
        .option("checkpointLocation", str(tmp_path / "ckpt"))
        .trigger(processingTime="500 milliseconds")
        .start()
    )
    try:
        deadline = time.monotonic() + RUN_TIMEOUT_S
        while len(sink.rows()) < 200 and time.monotonic() < deadline:
            time.sleep(0.2)
        time.sleep(3.0)  # a quiet period: triggers keep firing with no new records
    finally:
        query.stop()
    sizes = [len(rows) for _, rows in sink.batches if rows]
    assert sum(sizes) == 200
    assert max(sizes) <= 40 and len(sizes) >= 5
    assert len({(r.partition, r.offset) for r in sink.rows()}) == 200
    # The last batch was acknowledged during the quiet period, not left locked
    # (stopping would have released it, and a fresh consumer would get it).
    assert received_by_fresh_consumer(kafka_bootstrap, share_group, topic, 4.0) == []


def test_trigger_once_is_refused(
    spark: Any, kafka_bootstrap: str, topic_factory: Callable[..., str],
    share_group: str, tmp_path: Path,
) -> None:
    topic = topic_factory(partitions=1)
    query = (
        reader(spark, kafka_bootstrap, share_group, topic)
        .writeStream.foreachBatch(Sink())
        .option("checkpointLocation", str(tmp_path / "ckpt"))
        .trigger(once=True)
        .start()
    )
    with pytest.raises(Exception, match=r"trigger\(once=True\)"):
        query.awaitTermination(RUN_TIMEOUT_S)


@pytest.mark.parametrize(
    ("option", "value", "message"),
    [
        ("startingOffsets", "earliest", "startingoffsets.*share.auto.offset.reset"),
        ("maxRecordsPerTrigger", "0", "maxRecordsPerTrigger must be at least 1"),
        ("kafka.max.poll.recordz", "5", "max.poll.recordz"),
        ("numPartitons", "2", "did you mean numPartitions"),
    ],
)
def test_bad_option_is_named(
    spark: Any, kafka_bootstrap: str, option: str, value: str, message: str
) -> None:
    with pytest.raises(Exception, match=message):
        reader(spark, kafka_bootstrap, "g", "t", **{option: value})
