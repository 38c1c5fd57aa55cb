"""Test helpers: reads and shortcuts the tests need and the package does not."""

from __future__ import annotations

import operator
from typing import Any

from kafka_share._app.in_flight import InFlightBatch
from kafka_share.models import ConsumerRecord, TopicIdPartition

_FIRST = operator.attrgetter("first")


def has_records(in_flight: InFlightBatch) -> bool:
    return any(p.spans for p in in_flight._partitions.values())


def has_pending_acks(in_flight: InFlightBatch) -> bool:
    return any(
        p.acks or any(s.type is not None or s.unacknowledged() < s.size for s in p.spans)
        for p in in_flight._partitions.values()
    )


def is_empty(in_flight: InFlightBatch) -> bool:
    return not any(
        p.spans or p.acks or p.renewing or p.ready for p in in_flight._partitions.values()
    )


def take_acknowledged(
    in_flight: InFlightBatch,
) -> dict[TopicIdPartition, tuple[int, dict[int, int]]]:
    """:meth:`InFlightBatch.take_acknowledgements` with the ranges spelled out per offset."""
    out: dict[TopicIdPartition, tuple[int, dict[int, int]]] = {}
    for tip, (node_id, acks, ranges) in in_flight.take_acknowledgements().items():
        for first, last, t in ranges:
            acks.update(dict.fromkeys(range(first, last + 1), t))
        out[tip] = (node_id, acks)
    return out


def current_records(
    in_flight: InFlightBatch,
) -> dict[TopicIdPartition, list[ConsumerRecord[Any, Any]]]:
    """The records of the batch not yet taken with their acknowledgement."""
    return {
        tip: [r for s in sorted(p.spans, key=_FIRST) for r in s.records]
        for tip, p in in_flight._partitions.items()
        if any(s.records for s in p.spans)
    }


def node_of(in_flight: InFlightBatch, tip: TopicIdPartition) -> int | None:
    p = in_flight._partitions.get(tip)
    return p.node_id if p is not None else None
