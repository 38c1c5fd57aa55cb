"""Transactional data: read_committed share groups skip aborted records and markers."""

from __future__ import annotations

import uuid
from typing import Any

import pytest
from share_helpers import poll_for, poll_until

from kafka_share import TopicIdPartition

pytestmark = pytest.mark.integration


def _produce_transactions(bootstrap: str, topic: str) -> None:
    """Offsets 0-2: aborted, 3: abort marker, 4-5: committed, 6: commit marker."""
    from confluent_kafka import Producer

    producer = Producer({
        "bootstrap.servers": bootstrap,
        "transactional.id": f"tx-{uuid.uuid4().hex[:8]}",
        "enable.idempotence": True,
    })
    producer.init_transactions(30)
    producer.begin_transaction()
    for i in range(3):
        producer.produce(topic, value=f"aborted-{i}".encode(), partition=0)
    producer.flush(30)
    producer.abort_transaction(30)
    producer.begin_transaction()
    for i in range(2):
        producer.produce(topic, value=f"committed-{i}".encode(), partition=0)
    producer.commit_transaction(30)


def test_read_committed_skips_aborted_data_and_gap_acks_markers(
    kafka_bootstrap: str, topic_factory: Any, share_group_factory: Any, kafka_produce: Any,
    consumer_factory: Any,
) -> None:
    topic = topic_factory(partitions=1)
    group = share_group_factory({"share.isolation.level": "read_committed"})
    _produce_transactions(kafka_bootstrap, topic)
    acked: set[int] = set()

    def on_commit(offsets: dict[TopicIdPartition, set[int]], error: Any) -> None:
        assert error is None, error
        for s in offsets.values():
            acked.update(s)

    c = consumer_factory(group)
    c.set_acknowledgement_commit_callback(on_commit)
    c.subscribe([topic])
    got = poll_until(c, lambda s: len(s) >= 2, timeout_s=30)
    assert [(r.offset, r.value) for r in got] == [(4, b"committed-0"), (5, b"committed-1")]
    c.commit_sync(timeout=10.0)
    # Aborted records and both markers were acknowledged as GAPs, so the
    # share-partition start offset moves past them and new data flows.
    assert {3, 6} <= acked, acked
    kafka_produce(topic, [b"after"], partition=0)
    later = poll_until(c, lambda s: len(s) >= 1, timeout_s=15)
    assert [(r.offset, r.value) for r in later] == [(7, b"after")]
    c.commit_sync(timeout=10.0)
    c.close()
    again = consumer_factory(group)
    again.subscribe([topic])
    assert poll_for(again, 5.0) == []


def test_read_uncommitted_delivers_aborted_data_but_never_markers(
    kafka_bootstrap: str, topic_factory: Any, share_group: str, consumer_factory: Any,
) -> None:
    topic = topic_factory(partitions=1)
    _produce_transactions(kafka_bootstrap, topic)
    c = consumer_factory(share_group)
    c.subscribe([topic])
    got = poll_until(c, lambda s: len(s) >= 5, timeout_s=30)
    assert [r.offset for r in got] == [0, 1, 2, 4, 5]
