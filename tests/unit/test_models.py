"""ConsumerRecords as a Python user expects a batch to behave."""

from __future__ import annotations

import uuid

import pytest

from kafka_share.models import ConsumerRecord, ConsumerRecords, TimestampType, TopicIdPartition

TID = uuid.UUID(int=1)
A, B = TopicIdPartition(TID, "t", 0), TopicIdPartition(TID, "t", 1)


def _records(tip: TopicIdPartition, offsets: range) -> list[ConsumerRecord[bytes, bytes]]:
    create = TimestampType.CREATE_TIME
    return [ConsumerRecord(tip.topic, tip.partition, o, 0, create, b"k", b"v", (), None, 1)
            for o in offsets]


def test_records_can_be_indexed_and_sliced_in_iteration_order() -> None:
    batch: ConsumerRecords[bytes, bytes] = ConsumerRecords(
        {A: _records(A, range(3)), B: _records(B, range(10, 12))})
    everything = list(batch)
    assert len(batch) == 5
    assert [batch[i] for i in range(5)] == everything
    assert batch[-1] is everything[-1] and batch[-5] is everything[0]
    assert batch[1:4] == everything[1:4] and batch[::-1] == everything[::-1]
    assert (batch[3].partition, batch[3].offset) == (1, 10)
    with pytest.raises(IndexError, match="index 5 out of range"):
        batch[5]
    with pytest.raises(IndexError):
        batch[-6]
    with pytest.raises(TypeError, match="integers or slices"):
        batch["0"]  # type: ignore[call-overload]
    assert ConsumerRecords()[:] == []
