"""A poison record stays acquired until the application had its chance, on a
real broker (issue 10, defect 6).

The usual explicit loop, poll -> acknowledge -> commit_sync: the commit after
the poll that returned the good records before the poison record must not
release it, so that after the next poll raises RecordDeserializationError the
application can still REJECT it by coordinates, and it never comes back.
"""

from __future__ import annotations

import time
from typing import Any

import pytest
from share_helpers import poll_for

from kafka_share import AcknowledgeType, RecordDeserializationError

pytestmark = pytest.mark.integration


def test_poison_record_rejected_after_a_commit_is_never_redelivered(
    topic_factory: Any, share_group: str, kafka_produce: Any, consumer_factory: Any
) -> None:
    topic = topic_factory(partitions=1)
    kafka_produce(topic, [b"ok-0", b"POISON", b"ok-2"], partition=0)

    def deserialize(value: bytes) -> str:
        if value == b"POISON":
            raise ValueError("cannot parse")
        return value.decode()

    c = consumer_factory(
        share_group, share_acknowledgement_mode="explicit", value_deserializer=deserialize
    )
    c.subscribe([topic])
    good: list[tuple[int, str, int]] = []
    errors: list[RecordDeserializationError] = []
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline and not (errors and len(good) >= 2):
        try:
            records = c.poll(0.5)
        except RecordDeserializationError as exc:
            errors.append(exc)
            # The application's chance: it has not been released behind its back.
            c.acknowledge_offset(exc.topic, exc.partition, exc.offset, AcknowledgeType.REJECT)
            c.commit_sync(timeout=10.0)
            continue
        for r in records:
            good.append((r.offset, r.value, r.delivery_count))
            c.acknowledge(r)
        c.commit_sync(timeout=10.0)
    assert [(e.offset, e.value) for e in errors] == [(1, b"POISON")]
    assert good == [(0, "ok-0", 1), (2, "ok-2", 1)]
    # REJECTed, so never redelivered (a released one would come back, count 2).
    late: list[RecordDeserializationError] = []
    try:
        assert poll_for(c, 5.0) == []
    except RecordDeserializationError as exc:
        late.append(exc)
    assert late == [], "the poison record was redelivered"
