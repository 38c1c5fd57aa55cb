"""The kafka-share Structured Streaming source against the session's real broker."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from kafka_share import AcknowledgeType, ShareConsumer
from kafka_share.spark._duplicates import RETAINED_BATCHES
from kafka_share.spark._staging import StagingStore

# The session's SparkSession fixture, `spark`.
pytest_plugins = ["spark_fixtures", "hdfs_fixtures"]

pytestmark = [
    pytest.mark.integration,
    pytest.mark.slow,
    # Spark's py4j callback server closes its sockets lazily.
    pytest.mark.filterwarnings("ignore::ResourceWarning"),
]

RUN_TIMEOUT_S = 120


def reader(spark: Any, bootstrap: str, group: str, topic: str,
           staging: Path | str | None = None,
           **options: object) -> Any:
    r = (
        spark.readStream.format("kafka-share")
        .option("kafka.bootstrap.servers", bootstrap)
        .option("kafka.group.id", group)
        .option("subscribe", topic)
    )
    if staging is not None:
        r = r.option("stagingLocation", str(staging))
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
        self.failed_batch = -1
        self.lock = threading.Lock()

    def __call__(self, df: Any, batch_id: int) -> None:
        rows = df.select(*self.columns).collect()
        # fail_on counts batches with rows (a slot may end before records that
        # just became available reach it, leaving its batch empty).
        if rows and self.fail_on is not None and self.fail_on == len(
            [b for b, r in self.batches if r]
        ):
            self.failed_rows = rows
            self.failed_batch = batch_id
            raise RuntimeError(f"sink failure injected in batch {batch_id}")
        with self.lock:
            self.batches.append((batch_id, rows))

    def of_batch(self, batch_id: int) -> list[Any]:
        with self.lock:
            return [r for b, rows in self.batches if b == batch_id for r in rows]

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
        reader(spark, kafka_bootstrap, share_group, topic, tmp_path / "staging",
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
            reader(spark, kafka_bootstrap, share_group, topic, tmp_path / "staging",
                   pollTimeoutMs=200,
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
            reader(spark, kafka_bootstrap, group, topic, tmp_path / "staging", pollTimeoutMs=200,
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
    # A loaded machine may need more than a few seconds for a new member to join.
    again = received_by_fresh_consumer(kafka_bootstrap, group, topic, 20.0)
    assert {r.offset for r in again} == held_offsets


def _staged_batches(staging: Path | str) -> list[str]:
    """The batches still staged under every run of the staging location."""
    runs = StagingStore(str(staging)).storage.list_names("")
    return sorted(f"{run}/b{b}" for run in runs
                  for b in StagingStore(f"{str(staging).rstrip('/')}/{run}").batches())


@pytest.mark.parametrize("storage", ["posix", "webhdfs"])
def test_a_failed_batch_is_re_run_with_exactly_its_rows(
    spark: Any, kafka_bootstrap: str, topic_factory: Callable[..., str],
    share_group: str, kafka_produce: Callable[..., Any], tmp_path: Path, storage: str,
    request: pytest.FixtureRequest,
) -> None:
    topic = topic_factory(partitions=2)
    for p in (0, 1):
        kafka_produce(topic, [f"r{p}-{i}".encode() for i in range(150)], partition=p)
    ckpt = str(tmp_path / "ckpt")
    # webhdfs: staged on a real HDFS, as a cluster whose checkpoints live there would.
    staging: Path | str = (tmp_path / "staging" if storage == "posix"
                           else request.getfixturevalue("hdfs_location"))
    options = {"maxRecordsPerTrigger": 100, "kafka.max.poll.records": 50}
    first = Sink(fail_on=1)
    query = (
        reader(spark, kafka_bootstrap, share_group, topic, staging, **options)
        .writeStream.foreachBatch(first)
        .option("checkpointLocation", ckpt)
        .trigger(availableNow=True)
        .start()
    )
    with pytest.raises(Exception, match="sink failure injected"):
        query.awaitTermination(RUN_TIMEOUT_S)
    assert first.failed_rows, "the failing batch never ran"

    second = Sink()
    query = (
        reader(spark, kafka_bootstrap, share_group, topic, staging, **options)
        .writeStream.foreachBatch(second)
        .option("checkpointLocation", ckpt)
        .trigger(availableNow=True)
        .start()
    )
    assert query.awaitTermination(RUN_TIMEOUT_S)
    assert query.exception() is None
    # The re-run batch has exactly the rows of its first attempt, delivery
    # counts included, read back from the log.
    assert sorted(second.of_batch(first.failed_batch)) == sorted(first.failed_rows)
    written = first.rows() + second.rows()
    assert len(written) == 300
    assert {r.value for r in written} == {
        f"r{p}-{i}".encode() for p in (0, 1) for i in range(150)
    }
    assert {r.deliveryCount for r in written} == {1}
    # Committed batches' chunks stay for the slots' lookup of records handed out
    # again (spark._duplicates), the last RETAINED_BATCHES of them; older ones go
    # (tests/unit/spark/test_spark_reader.py).
    staged = _staged_batches(staging)
    assert 0 < len(staged) <= RETAINED_BATCHES, staged
    assert received_by_fresh_consumer(kafka_bootstrap, share_group, topic, 3.0) == []


def test_records_deleted_before_a_replay_fail_it_or_are_skipped(
    spark: Any, kafka_bootstrap: str, topic_factory: Callable[..., str],
    share_group: str, kafka_produce: Callable[..., Any], tmp_path: Path,
) -> None:
    from kafka_share import TopicPartition
    from kafka_share.admin import Admin

    topic = topic_factory(partitions=1)
    for b in range(3):  # three producer batches: offsets 0-99, 100-199, 200-299
        kafka_produce(topic, [f"d{b}-{i}".encode() for i in range(100)])
    ckpt, staging = str(tmp_path / "ckpt"), tmp_path / "staging"
    options: dict[str, object] = {"maxRecordsPerTrigger": 100, "kafka.max.poll.records": 100}

    def run(sink: Sink, **extra: object) -> Any:
        return (
            reader(spark, kafka_bootstrap, share_group, topic, staging, **options, **extra)
            .writeStream.foreachBatch(sink)
            .option("checkpointLocation", ckpt)
            .trigger(availableNow=True)
            .start()
        )

    first = Sink(fail_on=0)
    with pytest.raises(Exception, match="sink failure injected"):
        run(first).awaitTermination(RUN_TIMEOUT_S)
    assert first.failed_rows
    deleted_to = max(r.offset for r in first.failed_rows) + 1
    with Admin(bootstrap_servers=kafka_bootstrap) as admin:
        admin.delete_records({TopicPartition(topic, 0): deleted_to}, timeout=30)

    with pytest.raises(Exception, match=rf"no longer in the log of {topic}-0 \(offsets 0-"):
        run(Sink()).awaitTermination(RUN_TIMEOUT_S)

    last = Sink()
    query = run(last, failOnDataLoss="false")
    assert query.awaitTermination(RUN_TIMEOUT_S)
    assert query.exception() is None
    assert last.of_batch(first.failed_batch) == []  # gone, skipped with a warning
    assert sorted(r.offset for r in last.rows()) == list(range(deleted_to, 300))


def test_records_are_accepted_as_they_are_read(
    spark: Any, kafka_bootstrap: str, topic_factory: Callable[..., str],
    share_group: str, kafka_produce: Callable[..., Any], tmp_path: Path,
) -> None:
    topic = topic_factory(partitions=1)
    kafka_produce(topic, [f"s{i}".encode() for i in range(50)], headers=[("h", b"1")])
    sink = Sink(columns=("headers", "topic", "timestamp"))
    # A long trigger interval: Spark commits batch 0 only at the next trigger,
    # but its records were staged and accepted while the batch ran.
    query = (
        reader(spark, kafka_bootstrap, share_group, topic, tmp_path / "staging",
               includeHeaders="true")
        .writeStream.foreachBatch(sink)
        .option("checkpointLocation", str(tmp_path / "ckpt"))
        .trigger(processingTime="1 hour")
        .start()
    )
    try:
        deadline = time.monotonic() + RUN_TIMEOUT_S
        while len(sink.rows()) < 50 and time.monotonic() < deadline:
            time.sleep(0.2)
        assert len(sink.rows()) == 50
        first = sink.rows()[0]
        assert [(h.key, h.value) for h in first.headers] == [("h", b"1")]
        assert first.topic == topic and first.timestamp is not None
        assert received_by_fresh_consumer(kafka_bootstrap, share_group, topic, 3.0) == []
        # Staged until Spark commits the batch.
        assert len(_staged_batches(tmp_path / "staging")) == 1
    finally:
        query.stop()


def test_max_records_per_trigger_and_quiet_period(
    spark: Any, kafka_bootstrap: str, topic_factory: Callable[..., str],
    share_group: str, kafka_produce: Callable[..., Any], tmp_path: Path,
) -> None:
    topic = topic_factory(partitions=2)
    for p in (0, 1):
        kafka_produce(topic, [f"m{p}-{i}".encode() for i in range(100)], partition=p)
    sink = Sink()
    query = (
        reader(spark, kafka_bootstrap, share_group, topic, tmp_path / "staging",
               maxRecordsPerTrigger=40, **{"kafka.max.poll.records": 20})
        .writeStream.foreachBatch(sink)
        .option("checkpointLocation", str(tmp_path / "ckpt"))
        .trigger(processingTime="500 milliseconds")
        .start()
    )
    try:
        deadline = time.monotonic() + RUN_TIMEOUT_S
        while len(sink.rows()) < 200 and time.monotonic() < deadline:
            time.sleep(0.2)
        batches_when_done = len(sink.batches)
        time.sleep(3.0)  # a quiet period: triggers keep firing with no new records
        quiet_batches = len(sink.batches) - batches_when_done
    finally:
        query.stop()
    sizes = [len(rows) for _, rows in sink.batches]
    assert sum(sizes) == 200
    # A slot stops once it has its budget: at most one poll past it.
    assert max(sizes) < 40 + 20 and len(sizes) >= 4
    assert len({(r.partition, r.offset) for r in sink.rows()}) == 200
    assert quiet_batches == 0, "an idle query ran empty batches"
    assert received_by_fresh_consumer(kafka_bootstrap, share_group, topic, 3.0) == []


def test_trigger_once_reads_one_batch(
    spark: Any, kafka_bootstrap: str, topic_factory: Callable[..., str],
    share_group: str, kafka_produce: Callable[..., Any], tmp_path: Path,
) -> None:
    topic = topic_factory(partitions=1)
    kafka_produce(topic, [f"o{i}".encode() for i in range(30)])
    sink = Sink()
    query = (
        reader(spark, kafka_bootstrap, share_group, topic, tmp_path / "staging")
        .writeStream.foreachBatch(sink)
        .option("checkpointLocation", str(tmp_path / "ckpt"))
        .trigger(once=True)
        .start()
    )
    assert query.awaitTermination(RUN_TIMEOUT_S)
    assert query.exception() is None
    assert sorted(r.value for r in sink.rows()) == sorted(f"o{i}".encode() for i in range(30))
    assert received_by_fresh_consumer(kafka_bootstrap, share_group, topic, 3.0) == []


@pytest.mark.parametrize(
    ("option", "value", "message"),
    [
        ("startingOffsets", "earliest", "startingoffsets.*share.auto.offset.reset"),
        ("maxRecordsPerTrigger", "0", "maxRecordsPerTrigger must be at least 1"),
        ("kafka.max.poll.recordz", "5", "max.poll.recordz"),
        ("numPartitons", "2", "did you mean numPartitions"),
        ("stagingLocation", "", "option stagingLocation is required"),
        ("stagingLocation", "s3://bucket/x", "object stores are not supported for staging"),
        ("stagingLocation", "hdfs://nn:8020/x", "name the same HDFS through its REST interface"),
    ],
)
def test_bad_option_is_named(
    spark: Any, kafka_bootstrap: str, option: str, value: str, message: str, tmp_path: Path
) -> None:
    with pytest.raises(Exception, match=message):
        df = reader(spark, kafka_bootstrap, "g", "t", tmp_path, **{option: value})
        # Options the planner cannot check are refused when the query starts.
        query = df.writeStream.format("noop").option(
            "checkpointLocation", str(tmp_path / "ckpt")).start()
        try:
            query.awaitTermination(RUN_TIMEOUT_S)
        finally:
            query.stop()


def test_secret_options_are_hidden_in_plans(spark: Any, tmp_path: Path) -> None:
    import contextlib
    import io

    from kafka_share.testing.secure import generate_pki

    pki = generate_pki(tmp_path / "pki")
    key_pem = pki.client_key.read_text()
    df = reader(
        spark, "127.0.0.1:1", "g", "t", tmp_path / "staging",
        **{"kafka.security.protocol": "SASL_SSL", "kafka.sasl.mechanism": "PLAIN",
           "kafka.sasl.jaas.config": "org.apache.kafka.common.security.plain.PlainLoginModule "
           'required username="u" password="hunter2";',
           "kafka.ssl.keystore.type": "PEM", "kafka.ssl.keystore.key": key_pem,
           "kafka.ssl.keystore.certificate.chain": pki.client_cert.read_text()},
    )
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        df.explain(True)
    plan = out.getvalue()
    assert "kafka.ssl.keystore.key=*********(redacted)" in plan
    assert "PRIVATE KEY" not in plan and "hunter2" not in plan
