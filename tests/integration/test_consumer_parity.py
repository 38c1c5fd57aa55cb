"""ShareConsumer parity with Java's share consumer (Kafka 4.2+ features) on a real broker."""

from __future__ import annotations

import threading
import time
from typing import Any

import pytest
from share_helpers import poll_for, poll_until

from kafka_share import (
    AcknowledgeType,
    ConsumerRecord,
    KafkaError,
    RecordDeserializationError,
    TopicIdPartition,
    TopicPartition,
    WakeupError,
)

pytestmark = pytest.mark.integration


def _ack_all(consumer: Any, ack_type: AcknowledgeType = AcknowledgeType.ACCEPT) -> Any:
    def ack(batch: list[ConsumerRecord[Any, Any]]) -> None:
        for r in batch:
            consumer.acknowledge(r, ack_type)

    return ack


def test_renew_extends_the_lock_and_returns_the_records(
    topic_factory: Any, share_group_factory: Any, kafka_produce: Any, consumer_factory: Any
) -> None:
    topic = topic_factory(partitions=1)
    group = share_group_factory({"share.record.lock.duration.ms": "3000"})
    kafka_produce(topic, [f"r{i}".encode() for i in range(10)], partition=0)
    c = consumer_factory(group, share_acknowledgement_mode="explicit")
    callback_offsets: list[int] = []
    c.set_acknowledgement_commit_callback(
        lambda offsets, error: callback_offsets.extend(o for s in offsets.values() for o in s)
    )
    c.subscribe([topic])
    first = poll_until(c, lambda s: len(s) >= 10, timeout_s=30)
    assert c.acquisition_lock_timeout_ms == 3000
    accepted, renewed = first[:5], first[5:]
    for r in accepted:
        c.acknowledge(r, AcknowledgeType.ACCEPT)
    # Renew the other five several times, well past the 3 s lock: they stay ours.
    other = consumer_factory(group)
    other.subscribe([topic])
    deadline = time.monotonic() + 7
    held = renewed
    while time.monotonic() < deadline:
        for r in held:
            c.acknowledge(r, AcknowledgeType.RENEW)
        back = poll_until(c, lambda s: len(s) >= 5, timeout_s=5)
        assert sorted(r.offset for r in back) == sorted(r.offset for r in renewed)
        assert all(r.delivery_count == 1 for r in back)
        held = back
        assert list(other.poll(0.5)) == [], "another consumer got a renewed record"
    for r in held:
        c.acknowledge(r, AcknowledgeType.ACCEPT)
    results = c.commit_sync(timeout=10.0)
    assert all(err is None for err in results.values())
    assert set(callback_offsets) >= {r.offset for r in first}
    assert poll_for(other, 3.0) == []


def test_no_new_records_while_renewals_are_outstanding(
    topic_factory: Any, share_group: str, kafka_produce: Any, consumer_factory: Any
) -> None:
    topic = topic_factory(partitions=1)
    kafka_produce(topic, [b"a", b"b"], partition=0)
    c = consumer_factory(share_group, share_acknowledgement_mode="explicit", max_poll_records=2)
    c.subscribe([topic])
    first = poll_until(c, lambda s: len(s) >= 2, timeout_s=30)
    kafka_produce(topic, [b"c", b"d"], partition=0)
    for r in first:
        c.acknowledge(r, AcknowledgeType.RENEW)
    back = poll_until(c, lambda s: len(s) >= 2, timeout_s=10)
    assert sorted(r.value for r in back) == [b"a", b"b"], "renewed records come back first"
    for r in back:
        c.acknowledge(r, AcknowledgeType.ACCEPT)
    rest = poll_until(c, lambda s: len(s) >= 2, timeout_s=15, on_batch=_ack_all(c))
    assert sorted(r.value for r in rest) == [b"c", b"d"]


def test_record_limit_mode_never_exceeds_max_poll_records(
    topic_factory: Any, share_group: str, kafka_produce: Any, consumer_factory: Any
) -> None:
    topic = topic_factory(partitions=1)
    kafka_produce(topic, [f"r{i}".encode() for i in range(20)], partition=0)
    c = consumer_factory(share_group, share_acquire_mode="record_limit", max_poll_records=5)
    c.subscribe([topic])
    sizes: list[int] = []
    seen = poll_until(c, lambda s: len(s) >= 20, timeout_s=30,
                      on_batch=lambda b: sizes.append(len(b)) if b else None)
    assert len({r.offset for r in seen}) == 20
    assert sizes and max(sizes) <= 5, sizes


def test_poison_record_is_released_then_rejected_by_coordinates(
    topic_factory: Any, share_group: str, kafka_produce: Any, consumer_factory: Any
) -> None:
    topic = topic_factory(partitions=1)
    kafka_produce(topic, [b"ok-0", b"ok-1", b"POISON", b"ok-3"], partition=0)

    def deserialize(value: bytes) -> str:
        if value == b"POISON":
            raise ValueError("cannot parse")
        return value.decode()

    c = consumer_factory(
        share_group, share_acknowledgement_mode="explicit", value_deserializer=deserialize
    )
    c.subscribe([topic])
    good = poll_until(c, lambda s: len(s) >= 2, timeout_s=30, on_batch=_ack_all(c))
    assert [r.value for r in good] == ["ok-0", "ok-1"]
    with pytest.raises(RecordDeserializationError) as info:
        for _ in range(20):
            for r in c.poll(0.5):
                c.acknowledge(r)
    err = info.value
    assert (err.topic, err.partition, err.offset, err.value) == (topic, 0, 2, b"POISON")
    assert "released" in str(err)
    c.acknowledge_offset(topic, 0, 2, AcknowledgeType.REJECT)
    rest = poll_until(c, lambda s: len(s) >= 1, timeout_s=15, on_batch=_ack_all(c))
    assert [r.value for r in rest] == ["ok-3"]
    c.commit_sync(timeout=10.0)
    assert poll_for(c, 4.0) == [], "a rejected poison record came back"


def test_poison_record_is_redelivered_when_only_released(
    topic_factory: Any, share_group: str, kafka_produce: Any, consumer_factory: Any
) -> None:
    topic = topic_factory(partitions=1)
    kafka_produce(topic, [b"POISON"], partition=0)

    def deserialize(value: bytes) -> bytes:
        raise ValueError("always fails")

    c = consumer_factory(share_group, value_deserializer=deserialize)
    c.subscribe([topic])
    failures = 0
    deadline = time.monotonic() + 30
    while failures < 2 and time.monotonic() < deadline:
        try:
            c.poll(0.5)
        except RecordDeserializationError as exc:
            assert exc.offset == 0
            failures += 1
    assert failures == 2, "the released record was redelivered"


def test_wakeup_interrupts_a_blocked_poll_and_commit_continues(
    topic_factory: Any, share_group: str, consumer_factory: Any
) -> None:
    topic = topic_factory(partitions=1)
    c = consumer_factory(share_group)
    c.subscribe([topic])
    threading.Timer(1.0, c.wakeup).start()
    started = time.monotonic()
    with pytest.raises(WakeupError):
        c.poll(20.0)
    assert time.monotonic() - started < 5
    c.wakeup()
    with pytest.raises(WakeupError):
        c.poll(0)
    assert list(c.poll(0.2)) == []


def test_resubscribe_to_another_topic(
    topic_factory: Any, share_group: str, kafka_produce: Any, consumer_factory: Any
) -> None:
    first, second = topic_factory(partitions=1), topic_factory(partitions=2)
    kafka_produce(first, [b"first"], partition=0)
    kafka_produce(second, [b"second"], partition=0)
    outcomes: list[tuple[dict[TopicIdPartition, set[int]], KafkaError | None]] = []
    c = consumer_factory(share_group)
    c.set_acknowledgement_commit_callback(lambda o, e: outcomes.append((o, e)))
    assert c.assignment() == frozenset()
    c.subscribe([first])
    got = poll_until(c, lambda s: len(s) >= 1, timeout_s=30)
    assert [r.value for r in got] == [b"first"]
    # The only member: the assignor gave it every partition of the topic.
    assert c.assignment() == {TopicPartition(first, 0)}
    c.subscribe([second])
    assert c.subscription() == frozenset({second})
    got2 = poll_until(c, lambda s: len(s) >= 1, timeout_s=30)
    assert [(r.topic, r.value) for r in got2] == [(second, b"second")]
    assert c.assignment() == {TopicPartition(second, 0), TopicPartition(second, 1)}
    c.commit_sync(timeout=10.0)
    topics_acked = {tip.topic for o, e in outcomes for tip in o if e is None}
    assert topics_acked == {first, second}, outcomes
    c.unsubscribe()
    assert c.assignment() == frozenset()


def test_deleted_and_recreated_topic_is_consumed_under_its_new_id(
    topic_factory: Any, share_group: str, kafka_produce: Any, kafka_admin: Any,
    consumer_factory: Any,
) -> None:
    topic = topic_factory(partitions=1)
    kafka_produce(topic, [b"old"], partition=0)
    c = consumer_factory(share_group)
    c.subscribe([topic])
    old = poll_until(c, lambda s: len(s) >= 1, timeout_s=30)
    assert [r.value for r in old] == [b"old"]
    c.commit_sync(timeout=10.0)
    kafka_admin.delete_topic(topic)
    time.sleep(2.0)
    kafka_admin.create_topic(topic, 1)
    kafka_produce(topic, [b"new"], partition=0)
    new = poll_until(c, lambda s: len(s) >= 1, timeout_s=60)
    assert [r.value for r in new] == [b"new"]
