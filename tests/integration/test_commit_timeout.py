"""A commit_sync that runs out of time keeps its acknowledgements (real broker).

Regression: ``commit_sync(timeout=0)`` against a healthy broker never sent the
acknowledgements, returned a per-partition RequestTimedOutError and threw them
away: the records came back with delivery count 2, and a retried
``commit_sync(5)`` returned ``{}`` because nothing was left.
"""

from __future__ import annotations

from typing import Any

import pytest
from share_helpers import poll_for, poll_until

from kafka_share import AcknowledgeType, KafkaTimeoutError

pytestmark = pytest.mark.integration


def test_a_timed_out_commit_raises_and_a_retry_sends_the_same_acknowledgements(
    topic_factory: Any, share_group: str, kafka_produce: Any, consumer_factory: Any
) -> None:
    topic = topic_factory(partitions=1)
    kafka_produce(topic, [f"v{i}".encode() for i in range(20)], partition=0)
    consumer = consumer_factory(share_group, share_acknowledgement_mode="explicit")
    consumer.subscribe([topic])
    records = poll_until(consumer, lambda s: len(s) >= 1, timeout_s=30)
    assert records
    for r in records:
        consumer.acknowledge(r, AcknowledgeType.ACCEPT)

    with pytest.raises(KafkaTimeoutError, match=r"still pending.*safe"):
        consumer.commit_sync(timeout=0)
    # Nothing was lost: the acknowledgements went out after the deadline or go
    # with this retry, and the broker accepted them.
    results = consumer.commit_sync(timeout=10.0)
    assert all(err is None for err in results.values()), results
    consumer.close()

    # Accepted records are never delivered again (not with delivery count 2).
    seen = {r.offset for r in records}
    again = consumer_factory(share_group)
    again.subscribe([topic])
    later = poll_for(again, 5.0)
    assert not seen & {r.offset for r in later}
    assert {r.delivery_count for r in later} <= {1}
