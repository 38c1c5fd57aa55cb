"""Share responses read into plain outcomes, per partition, in the response's order.

Pure: no state is touched here. The manager's handlers take the outcomes and
act on them (complete acknowledgements, refresh metadata, record what was
acquired), so a handler reads as the list of what it does, not as the walk
through the response's nesting.
"""

from __future__ import annotations

import uuid
from collections.abc import Mapping
from typing import Any

import attrs

from kafka_share._reprs import attrs_repr
from kafka_share.models import TopicIdPartition
from kafka_share.protocol.messages import ShareAcknowledgeResponse, ShareFetchResponse
from kafka_share.share.acknowledgements import Acknowledgements

__all__ = ["AckAnswer", "FetchAnswer", "PartitionFetch", "read_acknowledge", "read_fetch"]


@attrs_repr
@attrs.frozen(repr=False)
class PartitionFetch:
    """One partition of a ShareFetch response."""

    partition: TopicIdPartition
    #: the acknowledgements this fetch carried for it (None: it carried none)
    acks: Acknowledgements | None
    ack_error_code: int
    ack_error_message: str | None
    error_code: int
    error_message: str | None
    #: the raw records (only meaningful without an error)
    records: Any
    #: (first_offset, last_offset, delivery_count) ranges acquired
    acquired: list[tuple[int, int, int]]


@attrs_repr
@attrs.frozen(repr=False)
class FetchAnswer:
    """A ShareFetch response without a top-level error, read."""

    partitions: list[PartitionFetch]
    #: acknowledgements the fetch carried that the response did not answer
    unanswered: list[TopicIdPartition]


@attrs_repr
@attrs.frozen(repr=False)
class AckAnswer:
    """A ShareAcknowledge response without a top-level error, read."""

    #: (partition, error code, error message) for each partition answered
    answered: list[tuple[TopicIdPartition, int, str | None]]
    #: partitions acknowledged that the response did not answer
    unanswered: list[TopicIdPartition]


def read_fetch(
    response: ShareFetchResponse,
    acks: Mapping[TopicIdPartition, Acknowledgements],
    topic_names: Mapping[uuid.UUID, str],
    known_names: Mapping[uuid.UUID, str],
) -> FetchAnswer:
    """The partitions of ``response`` (a topic named in neither ``topic_names``,
    the names known when the request went out, nor ``known_names``, the
    cluster's now, is skipped), and the acks it left unanswered."""
    partitions: list[PartitionFetch] = []
    answered: set[TopicIdPartition] = set()
    for topic in response.responses:
        name = topic_names.get(topic.topic_id) or known_names.get(topic.topic_id)
        if name is None:
            continue
        for p in topic.partitions:
            tip = TopicIdPartition(topic.topic_id, name, p.partition_index)
            a = acks.get(tip)
            if a is not None:
                answered.add(tip)
            partitions.append(PartitionFetch(
                tip, a, p.acknowledge_error_code, p.acknowledge_error_message,
                p.error_code, p.error_message, p.records,
                [(r.first_offset, r.last_offset, r.delivery_count) for r in p.acquired_records],
            ))
    return FetchAnswer(partitions, [tip for tip in acks if tip not in answered])


def read_acknowledge(
    response: ShareAcknowledgeResponse,
    acks: Mapping[TopicIdPartition, Acknowledgements],
) -> AckAnswer:
    """Each acknowledged partition's answer in ``response``, and those it left
    unanswered (an answer for a partition not acknowledged is ignored)."""
    by_key = {(tip.topic_id, tip.partition): tip for tip in acks}
    answered: list[tuple[TopicIdPartition, int, str | None]] = []
    seen: set[TopicIdPartition] = set()
    for topic in response.responses:
        for p in topic.partitions:
            tip = by_key.get((topic.topic_id, p.partition_index))
            if tip is None:
                continue
            seen.add(tip)
            answered.append((tip, p.error_code, p.error_message))
    return AckAnswer(answered, [tip for tip in acks if tip not in seen])
