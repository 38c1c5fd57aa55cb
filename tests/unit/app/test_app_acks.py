"""Acknowledgements on their way out: merging a poll's acks, and explicit mode's
message about records left unacknowledged."""

from __future__ import annotations

import uuid

from kafka_share._app.acks import _merge_acks, _unacknowledged_message
from kafka_share._handoff.events import NodeAcknowledgements
from kafka_share.models import AcknowledgeType, TopicIdPartition
from kafka_share.share.acknowledgements import Acknowledgements

ACCEPT = int(AcknowledgeType.ACCEPT)
REJECT = int(AcknowledgeType.REJECT)
TIP = TopicIdPartition(uuid.UUID(int=1), "t", 0)
OTHER = TopicIdPartition(uuid.UUID(int=2), "u", 0)


def _acks(node_id: int, types: dict[int, int]) -> NodeAcknowledgements:
    return NodeAcknowledgements(node_id, Acknowledgements.from_types(dict(types)))


def test_the_unacknowledged_message_counts_records_per_partition() -> None:
    tid = uuid.UUID(int=7)
    one = _unacknowledged_message({TopicIdPartition(tid, "orders", 3): 1})
    assert "1 record of the last poll is not (orders-3: 1)" in one
    many = _unacknowledged_message({TopicIdPartition(tid, "t", p): p + 1 for p in range(12)})
    assert "78 records of the last poll are not (t-0: 1, t-1: 2," in many
    assert "and 2 more partitions" in many and "before the next poll" in many


def test_acks_for_the_same_node_merge_and_new_partitions_join() -> None:
    first = {TIP: _acks(1, {0: ACCEPT})}
    merged, elsewhere = _merge_acks(
        first, {TIP: _acks(1, {1: REJECT}), OTHER: _acks(2, {5: ACCEPT})}
    )
    assert elsewhere == {}
    assert merged[TIP].acknowledgements.offsets() == {0, 1}
    assert merged[OTHER].node_id == 2


def test_acks_for_another_node_of_a_partition_go_apart() -> None:
    # A leader move: records of the same partition delivered by the new leader.
    first = {TIP: _acks(1, {0: ACCEPT})}
    moved = _acks(2, {7: ACCEPT})
    merged, elsewhere = _merge_acks(first, {TIP: moved})
    assert merged[TIP].acknowledgements.offsets() == {0}
    assert elsewhere == {TIP: moved}


def test_nothing_to_merge_returns_the_first_as_it_is() -> None:
    first = {TIP: _acks(1, {0: ACCEPT})}
    merged, elsewhere = _merge_acks(first, {})
    assert merged is first and elsewhere == {}
