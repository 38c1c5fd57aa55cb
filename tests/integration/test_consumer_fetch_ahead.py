"""Fetching ahead of a response of more than ``AHEAD_MAX_HELD`` records when its
broker serves the consumer another partition, against a real broker.

The broker's record-lock limit (``group.share.partition.max.record.locks``,
2000) is per share-partition: while one partition's large response is being
delivered, a fetch ahead can still acquire another partition's records. The
test checks that the consumer takes that decision on a two-partition topic
produced in large batches, and that every record still arrives exactly once, on
its first delivery (no lock ran out, nothing came back).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
from share_helpers import poll_until

from kafka_share import ConsumerRecord
from kafka_share.share.fetch_ahead import AHEAD_MAX_HELD, FetchAheadPolicy

pytestmark = pytest.mark.integration

PER_PARTITION = 5_000


class RecordingPolicy(FetchAheadPolicy):
    """The consumer's policy, recording each (acquired, decision) of the lock rule."""

    def __init__(self, max_poll_records: int) -> None:
        super().__init__(max_poll_records)
        self.decisions: list[tuple[int, bool]] = []

    def may_fetch_ahead(self, acquired: int, company: Callable[[], bool] = lambda: False) -> bool:
        decision = super().may_fetch_ahead(acquired, company)
        self.decisions.append((acquired, decision))
        return decision


@pytest.mark.parametrize("mode", ["implicit", "explicit"])
def test_a_large_response_is_fetched_ahead_of_when_the_broker_serves_another_partition(
    mode: str, topic_factory: Any, share_group: str, kafka_produce: Any,
    consumer_factory: Any,
) -> None:
    topic = topic_factory(partitions=2)
    for partition in (0, 1):
        # One call each: producer batches of thousands of records.
        kafka_produce(topic, [b"%d-%d" % (partition, i) for i in range(PER_PARTITION)],
                      partition=partition)
    consumer = consumer_factory(share_group, share_acknowledgement_mode=mode)
    policy = RecordingPolicy(consumer._core._config.max_poll_records)
    consumer._core._rounds._ahead = policy
    consumer.subscribe([topic])

    def ack(batch: list[ConsumerRecord[Any, Any]]) -> None:
        if mode == "explicit":
            for r in batch:
                consumer.acknowledge(r)

    seen = poll_until(consumer, lambda s: len(s) >= 2 * PER_PARTITION, timeout_s=60,
                      on_batch=ack)
    values = [r.value for r in seen]
    assert len(set(values)) == 2 * PER_PARTITION, f"got {len(set(values))} distinct records"
    assert len(values) == 2 * PER_PARTITION, "a record was delivered twice"
    assert {r.delivery_count for r in seen} == {1}
    large = [(acquired, ok) for acquired, ok in policy.decisions if acquired > AHEAD_MAX_HELD]
    assert large, f"no response above {AHEAD_MAX_HELD} records: {policy.decisions}"
    assert any(ok for _, ok in large), f"never fetched ahead of a large response: {large}"
    assert all(err is None for err in consumer.commit_sync(timeout=10.0).values())
