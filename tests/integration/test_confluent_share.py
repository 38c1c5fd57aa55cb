"""confluent-kafka's own ShareConsumer against the harness broker.

This proves, end to end and independently of kafka-share's protocol code, that
the broker runs share groups (share.version >= 1) and that the group-config
helper's ``share.auto.offset.reset=earliest`` takes effect.
"""

from __future__ import annotations

import time
from collections.abc import Callable

import pytest

pytestmark = pytest.mark.integration


def _consume(bootstrap: str, group_id: str, topic: str, count: int) -> list[bytes]:
    from confluent_kafka import ShareConsumer

    consumer = ShareConsumer({"bootstrap.servers": bootstrap, "group.id": group_id})
    values: list[bytes] = []
    try:
        consumer.subscribe([topic])
        deadline = time.monotonic() + 45
        while len(values) < count and time.monotonic() < deadline:
            for message in consumer.poll(1.0):
                assert message.error() is None, message.error()
                values.append(message.value())
    finally:
        consumer.close()
    return values


def test_share_consumer_reads_records_produced_before_it_joined(
    kafka_bootstrap: str,
    topic_factory: Callable[..., str],
    share_group: str,
    kafka_produce: Callable[..., object],
) -> None:
    topic = topic_factory(partitions=3)
    sent = [f"value-{i}".encode() for i in range(30)]
    kafka_produce(topic, sent)

    received = _consume(kafka_bootstrap, share_group, topic, len(sent))

    # Records produced before the group existed are only seen with
    # share.auto.offset.reset=earliest (the broker default is latest).
    assert sorted(received) == sorted(sent)


def test_without_earliest_the_group_starts_at_the_end(
    kafka_bootstrap: str,
    topic_factory: Callable[..., str],
    share_group_factory: Callable[..., str],
    kafka_produce: Callable[..., object],
) -> None:
    # The negative control for the test above: same flow, reset=latest.
    topic = topic_factory(partitions=1)
    group = share_group_factory({"share.auto.offset.reset": "latest"})
    kafka_produce(topic, [b"old-1", b"old-2"])

    from confluent_kafka import ShareConsumer

    consumer = ShareConsumer({"bootstrap.servers": kafka_bootstrap, "group.id": group})
    received: list[bytes] = []
    try:
        consumer.subscribe([topic])
        # Poll until the share-partition is initialised (an empty poll round
        # after joining), then produce new records.
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline:
            received.extend(m.value() for m in consumer.poll(0.5) if m.error() is None)
        kafka_produce(topic, [b"new-1"])
        deadline = time.monotonic() + 30
        while b"new-1" not in received and time.monotonic() < deadline:
            received.extend(m.value() for m in consumer.poll(1.0) if m.error() is None)
    finally:
        consumer.close()
    assert received == [b"new-1"]
