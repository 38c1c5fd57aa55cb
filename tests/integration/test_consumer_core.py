"""ShareConsumer against a real Kafka broker: the core queue semantics."""

from __future__ import annotations

import logging
import threading
import time
from collections import Counter
from typing import Any

import pytest
from share_helpers import poll_for, poll_until

from kafka_share import (
    AcknowledgeType,
    ConsumerRecord,
    IllegalStateError,
    InvalidRecordStateError,
    KafkaError,
    TopicIdPartition,
)
from kafka_share.testing import ProduceRecord

pytestmark = pytest.mark.integration


def _keys(records: list[ConsumerRecord[Any, Any]]) -> list[tuple[int, int]]:
    return [(r.partition, r.offset) for r in records]


def test_implicit_mode_delivers_each_record_once_then_nothing_after_commit(
    topic_factory: Any, share_group: str, kafka_produce: Any, consumer_factory: Any
) -> None:
    topic = topic_factory(partitions=3)
    for p in range(3):
        kafka_produce(topic, [f"p{p}-{i}".encode() for i in range(3334 - (p > 0))], partition=p)
    total = 10_000

    consumer = consumer_factory(share_group)
    consumer.subscribe([topic])
    seen = poll_until(consumer, lambda s: len(s) >= total, timeout_s=60)

    counts = Counter(_keys(seen))
    assert len(counts) == total, f"got {len(counts)} distinct records of {total}"
    assert max(counts.values()) == 1, "a record was delivered twice"
    assert {r.delivery_count for r in seen} == {1}
    assert {r.partition for r in seen} == {0, 1, 2}
    assert all(r.value == f"p{r.partition}-{r.offset}".encode() for r in seen)
    results = consumer.commit_sync(timeout=10.0)
    assert results, "the last batch had acknowledgements to commit"
    assert all(err is None for err in results.values()), results
    consumer.close()

    again = consumer_factory(share_group)
    again.subscribe([topic])
    assert poll_for(again, 6.0) == []


def test_three_consumers_share_one_partition(
    topic_factory: Any, share_group: str, kafka_produce: Any, consumer_factory: Any
) -> None:
    topic = topic_factory(partitions=1)
    total = 6000
    # record_limit: each fetch acquires at most 50 records. In batch_optimized mode
    # the broker hands out whole producer batches (thousands of records here), so
    # two members can drain the partition before the third gets a turn.
    consumers = [
        consumer_factory(share_group, max_poll_records=50, share_acquire_mode="record_limit")
        for _ in range(3)
    ]
    received: dict[int, list[tuple[int, int]]] = {i: [] for i in range(3)}
    stop = threading.Event()
    errors: list[BaseException] = []

    def work(i: int) -> None:
        c = consumers[i]
        try:
            c.subscribe([topic])
            while not stop.is_set():
                batch = c.poll(0.2)
                received[i].extend(_keys(list(batch)))
                if batch:
                    time.sleep(0.005)  # a little "processing" so the others get a turn
            c.commit_sync(timeout=10.0)
        except BaseException as exc:
            errors.append(exc)

    threads = [threading.Thread(target=work, args=(i,)) for i in range(3)]
    for t in threads:
        t.start()
    time.sleep(6.0)  # all three members join before any data exists
    kafka_produce(topic, [b"x" * 50 for _ in range(total)], partition=0)
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline and sum(len(v) for v in received.values()) < total:
        time.sleep(0.2)
    stop.set()
    for t in threads:
        t.join(30)
    assert not errors, errors
    everything = [k for v in received.values() for k in v]
    assert len(everything) == total, f"received {len(everything)} of {total}"
    assert len(set(everything)) == total, "duplicates with everything accepted"
    assert all(received[i] for i in range(3)), {i: len(v) for i, v in received.items()}


def test_release_redelivers_reject_never_and_delivery_limit_archives(
    topic_factory: Any, share_group_factory: Any, kafka_produce: Any, consumer_factory: Any
) -> None:
    topic = topic_factory(partitions=1)
    group = share_group_factory({"share.delivery.count.limit": "2"})
    kafka_produce(topic, [b"release-me", b"reject-me", b"accept-me"], partition=0)
    c = consumer_factory(group, share_acknowledgement_mode="explicit")
    c.subscribe([topic])

    first = poll_until(c, lambda s: len(s) >= 3, timeout_s=30)
    by_value = {r.value: r for r in first}
    assert set(by_value) == {b"release-me", b"reject-me", b"accept-me"}
    assert all(r.delivery_count == 1 for r in first)
    c.acknowledge(by_value[b"release-me"], AcknowledgeType.RELEASE)
    c.acknowledge(by_value[b"reject-me"], AcknowledgeType.REJECT)
    c.acknowledge(by_value[b"accept-me"], AcknowledgeType.ACCEPT)

    second = poll_until(c, lambda s: len(s) >= 1, timeout_s=15)
    assert [(r.value, r.delivery_count) for r in second] == [(b"release-me", 2)]
    # Second release: the delivery limit (2) is reached, so the broker archives it.
    c.acknowledge(second[0], AcknowledgeType.RELEASE)
    results = c.commit_sync(timeout=10.0)
    assert list(results.values()) == [None]

    later: list[ConsumerRecord[Any, Any]] = []
    deadline = time.monotonic() + 6
    while time.monotonic() < deadline:
        batch = list(c.poll(0.5))
        for r in batch:
            c.acknowledge(r, AcknowledgeType.ACCEPT)
        later.extend(batch)
    assert later == [], [(r.value, r.delivery_count) for r in later]


def test_lock_expiry_redelivers_to_another_consumer_and_late_ack_fails(
    topic_factory: Any, share_group_factory: Any, kafka_produce: Any, consumer_factory: Any
) -> None:
    topic = topic_factory(partitions=1)
    group = share_group_factory({"share.record.lock.duration.ms": "2000"})
    kafka_produce(topic, [b"slow"], partition=0)

    slow = consumer_factory(group, share_acknowledgement_mode="explicit")
    slow.subscribe([topic])
    got = poll_until(slow, lambda s: len(s) >= 1, timeout_s=30)
    assert [(r.value, r.delivery_count) for r in got] == [(b"slow", 1)]
    assert slow.acquisition_lock_timeout_ms == 2000

    other = consumer_factory(group)
    other.subscribe([topic])
    redelivered = poll_until(other, lambda s: len(s) >= 1, timeout_s=30)
    assert [(r.value, r.offset) for r in redelivered] == [(b"slow", got[0].offset)]
    assert redelivered[0].delivery_count == 2

    slow.acknowledge(got[0], AcknowledgeType.ACCEPT)
    results = slow.commit_sync(timeout=10.0)
    assert len(results) == 1
    (error,) = results.values()
    assert isinstance(error, InvalidRecordStateError), results


def test_close_releases_unacknowledged_records_at_once(
    topic_factory: Any, share_group_factory: Any, kafka_produce: Any, consumer_factory: Any
) -> None:
    topic = topic_factory(partitions=1)
    # A long lock: if close() did not release, the other consumer would wait 60 s.
    group = share_group_factory({"share.record.lock.duration.ms": "60000"})
    kafka_produce(topic, [f"r{i}".encode() for i in range(10)], partition=0)

    first = consumer_factory(group, share_acknowledgement_mode="explicit")
    first.subscribe([topic])
    held = poll_until(first, lambda s: len(s) >= 10, timeout_s=30)
    assert len(held) == 10

    second = consumer_factory(group)
    second.subscribe([topic])
    time.sleep(3.0)  # joined, nothing to get while the records are locked
    started = time.monotonic()
    first.close(timeout=10.0)
    got = poll_until(second, lambda s: len(s) >= 10, timeout_s=25)
    elapsed = time.monotonic() - started
    assert sorted(r.offset for r in got) == sorted(r.offset for r in held)
    assert elapsed < 25, "records came back only after the lock expired"
    assert all(r.delivery_count == 2 for r in got)


def test_commit_sync_results_and_callback_on_application_thread(
    topic_factory: Any,
    share_group: str,
    kafka_produce: Any,
    consumer_factory: Any,
    caplog: pytest.LogCaptureFixture,
) -> None:
    topic = topic_factory(partitions=2)
    kafka_produce(topic, [b"a", b"b"], partition=0)
    kafka_produce(topic, [b"c"], partition=1)
    calls: list[tuple[dict[TopicIdPartition, set[int]], KafkaError | None, str]] = []

    def callback(offsets: dict[TopicIdPartition, set[int]], error: KafkaError | None) -> None:
        calls.append((offsets, error, threading.current_thread().name))
        raise RuntimeError("callback bug must not escape poll")

    c = consumer_factory(share_group, share_acknowledgement_mode="explicit")
    c.set_acknowledgement_commit_callback(callback)
    c.subscribe([topic])
    caplog.set_level(logging.ERROR, logger="kafka_share")
    # Explicit mode: each batch is acknowledged before the next poll, which sends
    # those acks (or, for a caught-up consumer, holds them back briefly from its
    # fetches); the last batch's acks, and any held back, go with commit_sync.
    batches: list[list[ConsumerRecord[Any, Any]]] = []

    def ack_all(batch: list[ConsumerRecord[Any, Any]]) -> None:
        for r in batch:
            c.acknowledge(r)
        if batch:
            batches.append(batch)

    records = poll_until(c, lambda s: len(s) >= 3, timeout_s=30, on_batch=ack_all)
    last_partitions = {(r.topic, r.partition) for r in batches[-1]}
    results = c.commit_sync(timeout=10.0)

    assert last_partitions <= {(tip.topic, tip.partition) for tip in results}
    assert results and all(err is None for err in results.values())
    main = threading.current_thread().name
    assert calls, "the callback ran before commit_sync returned"
    committed = {
        (tip.partition, o) for offsets, _, _ in calls for tip, s in offsets.items() for o in s
    }
    assert committed == {(r.partition, r.offset) for r in records}
    assert all(err is None and thread == main for _, err, thread in calls)
    c.poll(0.5)  # the callback's exception is logged, never raised
    assert "Exception thrown by acknowledgement commit callback" in caplog.text
    assert c.commit_sync(timeout=5.0) == {}


def test_explicit_mode_misuse_raises_illegal_state(
    topic_factory: Any, share_group: str, kafka_produce: Any, consumer_factory: Any
) -> None:
    topic = topic_factory(partitions=1)
    kafka_produce(topic, [b"one", b"two"], partition=0)
    c = consumer_factory(share_group, share_acknowledgement_mode="explicit")
    c.subscribe([topic])
    first = poll_until(c, lambda s: len(s) >= 2, timeout_s=30)
    c.acknowledge(first[0])
    # The message says how many records are left, and from where.
    with pytest.raises(IllegalStateError,
                       match=rf"must be acknowledged.*1 record of the last poll is not "
                             rf"\({topic}-0: 1\)"):
        c.poll(0.1)
    c.acknowledge(first[1], AcknowledgeType.RELEASE)
    again = poll_until(c, lambda s: len(s) >= 1, timeout_s=15)
    assert [r.value for r in again] == [b"two"]
    with pytest.raises(IllegalStateError, match="cannot be acknowledged"):
        c.acknowledge(first[0])  # from an older poll
    with pytest.raises(IllegalStateError, match="cannot be acknowledged"):
        c.acknowledge(first[1])  # same offset, older delivery
    c.acknowledge(again[0])

    implicit = consumer_factory(share_group)
    with pytest.raises(IllegalStateError, match="Implicit acknowledgement"):
        implicit.acknowledge(again[0])


def test_poll_before_subscribe_raises(share_group: str, consumer_factory: Any) -> None:
    c = consumer_factory(share_group)
    with pytest.raises(IllegalStateError, match="not subscribed"):
        c.poll(0)
    c.subscribe(["some-topic"])
    c.unsubscribe()
    with pytest.raises(IllegalStateError, match="not subscribed"):
        c.poll(0)


@pytest.mark.parametrize("codec", ["gzip", "snappy", "lz4", "zstd"])
def test_compressed_topics_deliver_exact_payloads(
    codec: str, topic_factory: Any, share_group: str, kafka_produce: Any, consumer_factory: Any
) -> None:
    topic = topic_factory(partitions=1)
    sent = [
        ProduceRecord(
            value=(f"value-{i}-" * (i % 7 + 1)).encode(),
            key=None if i % 5 == 0 else f"key-{i}".encode(),
            headers=[("h", f"{i}".encode()), ("empty", None)] if i % 3 == 0 else None,
            timestamp_ms=1_700_000_000_000 + i,
        )
        for i in range(500)
    ]
    produced = kafka_produce(topic, sent, compression=codec)
    c = consumer_factory(share_group)
    c.subscribe([topic])
    got = sorted(poll_until(c, lambda s: len(s) >= len(sent), timeout_s=30), key=lambda r: r.offset)
    assert [r.offset for r in got] == [p.offset for p in produced]
    for record, original in zip(got, sent, strict=True):
        assert record.value == original.value
        assert record.key == original.key
        assert list(record.headers) == list(original.headers or [])
        assert record.timestamp == original.timestamp_ms
        assert int(record.timestamp_type) == 0  # CREATE_TIME
        assert record.delivery_count == 1
