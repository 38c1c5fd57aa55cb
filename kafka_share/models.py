"""Public value types: records, partitions and acknowledgement types.

These are plain immutable values. They carry no reference to the consumer
that produced them, so they can be pickled, stored and compared freely.
"""

from __future__ import annotations

import enum
import uuid
from collections.abc import Iterator, Mapping, Sequence
from itertools import chain
from typing import Any, Generic, NamedTuple, TypeVar, overload

import attrs

from kafka_share._reprs import attrs_repr

__all__ = [
    "AcknowledgeType",
    "ConsumerRecord",
    "ConsumerRecords",
    "TimestampType",
    "TopicIdPartition",
    "TopicPartition",
]

K = TypeVar("K")
V = TypeVar("V")


class AcknowledgeType(enum.IntEnum):
    """How a record delivered to a share consumer is acknowledged.

    The integer values are the bytes Kafka puts on the wire. The wire also has a
    GAP type (0) for acquired offsets without a record; it is internal and
    never part of this public enum.
    """

    #: Processed successfully; the record is never delivered again.
    ACCEPT = 1
    #: Not processed; the record becomes available for another delivery.
    RELEASE = 2
    #: Unprocessable; the record is archived and never delivered again.
    REJECT = 3
    #: Still processing; extend the acquisition lock (Kafka 4.2+, KIP-1222).
    RENEW = 4

    def __str__(self) -> str:
        return self.name.lower()


class TimestampType(enum.IntEnum):
    """Meaning of :attr:`ConsumerRecord.timestamp`."""

    NO_TIMESTAMP_TYPE = -1
    CREATE_TIME = 0
    LOG_APPEND_TIME = 1


@attrs_repr
@attrs.frozen(order=True, repr=False)
class TopicPartition:
    """A partition of a topic, by name."""

    topic: str
    partition: int

    def __str__(self) -> str:
        return f"{self.topic}-{self.partition}"


@attrs_repr
@attrs.frozen(order=True, repr=False, cache_hash=True)
class TopicIdPartition:
    """A partition of a topic, with the topic's id.

    Share groups track state per topic id, so a topic deleted and recreated
    under the same name is a different ``TopicIdPartition``.
    """

    # Its hash is cached: the consumer looks partitions up in dicts some 45
    # times per fetch, and hashing anew calls uuid.UUID.__hash__ in Python.

    topic_id: uuid.UUID
    topic: str
    partition: int

    @property
    def topic_partition(self) -> TopicPartition:
        return TopicPartition(self.topic, self.partition)

    def __str__(self) -> str:
        return f"{self.topic}-{self.partition}:{self.topic_id}"


class ConsumerRecord(NamedTuple, Generic[K, V]):
    """One record delivered to a share consumer (an immutable named tuple).

    ``delivery_count`` is 1 on the first delivery and grows each time the
    record is delivered again (after a RELEASE, a lock expiry or a session
    loss). ``leader_epoch`` is ``None`` when the batch carried no epoch.
    ``headers`` is a tuple of ``(key, value)`` pairs in the order they were
    produced. A named tuple, like kafka-python's record, because building one
    is several times cheaper than a frozen class and every record pays it.
    """

    topic: str
    partition: int
    offset: int
    timestamp: int
    timestamp_type: TimestampType
    key: K
    value: V
    headers: Sequence[tuple[str, bytes | None]]
    leader_epoch: int | None
    delivery_count: int
    serialized_key_size: int = -1
    serialized_value_size: int = -1

    @property
    def topic_partition(self) -> TopicPartition:
        return TopicPartition(self.topic, self.partition)


class ConsumerRecords(Generic[K, V]):
    """The records returned by one ``poll``: sized, iterable, grouped by partition."""

    __slots__ = ("_by_partition", "_count")

    def __init__(
        self, by_partition: Mapping[TopicIdPartition, Sequence[ConsumerRecord[K, V]]] | None = None
    ) -> None:
        self._by_partition: dict[TopicIdPartition, Sequence[ConsumerRecord[K, V]]] = dict(
            by_partition or {}
        )
        self._count = sum(len(r) for r in self._by_partition.values())

    def __len__(self) -> int:
        return self._count

    def __bool__(self) -> bool:
        return self._count > 0

    def __iter__(self) -> Iterator[ConsumerRecord[K, V]]:
        # A C-level chain: a generator's resume per record cost ~20 ns more.
        return chain.from_iterable(self._by_partition.values())

    @overload
    def __getitem__(self, index: int) -> ConsumerRecord[K, V]: ...

    @overload
    def __getitem__(self, index: slice) -> list[ConsumerRecord[K, V]]: ...

    def __getitem__(
        self, index: int | slice
    ) -> ConsumerRecord[K, V] | list[ConsumerRecord[K, V]]:
        """``records[i]`` and ``records[i:j]`` (a list), in iteration order:
        partition by partition, offset order within one."""
        if isinstance(index, slice):
            return list(self)[index]
        if isinstance(index, bool) or not isinstance(index, int):
            raise TypeError(
                f"ConsumerRecords indices must be integers or slices, not {type(index).__name__}"
            )
        i = index + self._count if index < 0 else index
        if not 0 <= i < self._count:
            raise IndexError(f"ConsumerRecords index {index} out of range ({self._count} records)")
        for records in self._by_partition.values():
            if i < len(records):
                return records[i]
            i -= len(records)
        raise AssertionError("unreachable: the count covers every partition")

    def partitions(self) -> frozenset[TopicIdPartition]:
        """The partitions that have records in this batch."""
        return frozenset(p for p, r in self._by_partition.items() if r)

    def records(self, partition: TopicIdPartition | TopicPartition) -> list[ConsumerRecord[K, V]]:
        """The records of one partition, in offset order (empty if none)."""
        if isinstance(partition, TopicIdPartition):
            return list(self._by_partition.get(partition, ()))
        out: list[ConsumerRecord[K, V]] = []
        for tip, records in self._by_partition.items():
            if tip.topic == partition.topic and tip.partition == partition.partition:
                out.extend(records)
        return out

    def count(self) -> int:
        return self._count

    def is_empty(self) -> bool:
        return self._count == 0

    def __repr__(self) -> str:
        return f"ConsumerRecords(count={self._count}, partitions={len(self._by_partition)})"

    def __eq__(self, other: Any) -> bool:
        if not isinstance(other, ConsumerRecords):
            return NotImplemented
        return self._by_partition == other._by_partition

    __hash__ = None  # type: ignore[assignment]
