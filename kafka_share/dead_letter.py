"""Dead-lettered records (KIP-1191): where a record in a share group's DLQ topic came from.

From Kafka 4.4 (with the cluster feature ``share.version=2``) a share group
whose ``errors.deadletterqueue.topic.name`` is set has the broker write every
record it gives up on to that topic: records a consumer REJECTed, and records
that reached the group's delivery limit (``share.delivery.count.limit``). Each
dead-letter record carries its provenance in headers that the broker writes as
UTF-8 text (``ShareGroupDLQStateManager``'s ``headers``): the source topic, the
partition and offset in decimal, the group, the delivery count in decimal
(when known) and the reason (when known). The key and value are the source
record's only when the group copies records
(``errors.deadletterqueue.copy.record.enable=true``); otherwise both are null.
The source record's own headers are never copied.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Generic, Protocol, TypeVar

import attrs

from kafka_share._error_base import CorruptMessageError
from kafka_share._reprs import attrs_repr

__all__ = [
    "DELIVERY_COUNT_EXCEEDED_MESSAGE",
    "DLQ_HEADER_PREFIX",
    "HEADER_DELIVERY_COUNT",
    "HEADER_GROUP",
    "HEADER_MESSAGE",
    "HEADER_OFFSET",
    "HEADER_PARTITION",
    "HEADER_TOPIC",
    "REJECTED_MESSAGE",
    "DeadLetter",
]

K = TypeVar("K")
V = TypeVar("V")
K_co = TypeVar("K_co", covariant=True)
V_co = TypeVar("V_co", covariant=True)

#: What every header of the broker's provenance starts with.
DLQ_HEADER_PREFIX = "__dlq.errors."
#: The source topic's name (its id, as a UUID string, if the broker could not name it).
HEADER_TOPIC = "__dlq.errors.topic"
#: The source partition, in decimal.
HEADER_PARTITION = "__dlq.errors.partition"
#: The source offset, in decimal.
HEADER_OFFSET = "__dlq.errors.offset"
#: The share group that gave up on the record.
HEADER_GROUP = "__dlq.errors.group"
#: How many times the record was delivered, in decimal (a Java short); may be absent.
HEADER_DELIVERY_COUNT = "__dlq.errors.delivery.count"
#: Why the record was dead-lettered; may be absent.
HEADER_MESSAGE = "__dlq.errors.message"

#: The broker's reason for a record a consumer REJECTed (``ShareGroupDLQManager.CLIENT_REJECT``).
REJECTED_MESSAGE = "Offset rejected by client."
#: The broker's reason for a record at the delivery limit
#: (``ShareGroupDLQManager.DELIVERY_COUNT_EXCEEDED``).
DELIVERY_COUNT_EXCEEDED_MESSAGE = "Offset delivery count exceeded the threshold."

# Java's Integer.toString / Long.toString / Short.toString: ASCII digits (with a
# minus for a negative number, which is then out of range). Python's int() would
# also take "+1", " 1", "1_0" and other scripts' digits.
_DECIMAL = re.compile(r"-?[0-9]+")
# The broker writes a partition, an offset and a delivery count, never negative.
_INT16 = (0, 2**15 - 1)
_INT32 = (0, 2**31 - 1)
_INT64 = (0, 2**63 - 1)


class _Record(Protocol[K_co, V_co]):
    """What :meth:`DeadLetter.from_record` reads of a record."""

    @property
    def headers(self) -> Sequence[tuple[str, bytes | None]]: ...

    @property
    def key(self) -> K_co: ...

    @property
    def value(self) -> V_co: ...


@attrs_repr
@attrs.frozen(repr=False)
class DeadLetter(Generic[K, V]):
    """A dead-lettered record's provenance, read from the headers the broker wrote.

    ``topic``, ``partition`` and ``offset`` locate the source record; ``group``
    is the share group that gave up on it. ``delivery_count`` is how many times
    it had been delivered and ``message`` the broker's reason
    (:data:`REJECTED_MESSAGE` or :data:`DELIVERY_COUNT_EXCEEDED_MESSAGE`); the
    broker leaves either out when it does not know it, and they are then
    ``None``. ``key`` and ``value`` are the dead-letter record's, which are the
    source record's when the group copies records
    (``errors.deadletterqueue.copy.record.enable``) and ``None`` otherwise.
    """

    topic: str
    partition: int
    offset: int
    group: str
    delivery_count: int | None
    message: str | None
    key: K | None = None
    value: V | None = None

    @property
    def rejected(self) -> bool:
        """Whether a consumer REJECTed the record."""
        return self.message == REJECTED_MESSAGE

    @property
    def delivery_limit_exceeded(self) -> bool:
        """Whether the record reached the delivery limit (``share.delivery.count.limit``)."""
        return self.message == DELIVERY_COUNT_EXCEEDED_MESSAGE

    @classmethod
    def from_record(cls, record: _Record[K, V]) -> DeadLetter[K, V] | None:
        """The provenance of ``record``, or ``None`` when it is not a dead letter.

        A record is a dead letter when it has any ``__dlq.errors.*`` header.
        Where a header appears more than once the last one counts, as Java's
        ``Headers.lastHeader``.

        Raises:
            CorruptMessageError: the record has ``__dlq.errors.*`` headers but
                one the broker always writes (topic, partition, offset, group)
                is missing, or a header is not what the broker writes (not
                UTF-8, not a decimal number, out of range); the message names
                the header and the record's place.
        """
        found: dict[str, bytes | None] = {}
        for name, raw in record.headers:
            if name.startswith(DLQ_HEADER_PREFIX):
                found[name] = raw
        if not found:
            return None
        reader = _HeaderReader(found, record)
        return cls(
            topic=reader.text(HEADER_TOPIC),
            partition=reader.number(HEADER_PARTITION, _INT32),
            offset=reader.number(HEADER_OFFSET, _INT64),
            group=reader.text(HEADER_GROUP),
            delivery_count=reader.optional_number(HEADER_DELIVERY_COUNT, _INT16),
            message=reader.optional_text(HEADER_MESSAGE),
            key=record.key,
            value=record.value,
        )


class _HeaderReader:
    """Reads the provenance headers of one record, naming it in every error."""

    def __init__(self, headers: dict[str, bytes | None], record: object) -> None:
        self._headers = headers
        self._record = record

    def _where(self) -> str:
        topic = getattr(self._record, "topic", None)
        partition = getattr(self._record, "partition", None)
        offset = getattr(self._record, "offset", None)
        if topic is None or partition is None or offset is None:
            return "a dead-letter record"
        return f"dead-letter record {topic}-{partition}@{offset}"

    def _fail(self, name: str, problem: str) -> CorruptMessageError:
        return CorruptMessageError(f"{self._where()}: header {name!r} {problem}")

    def optional_text(self, name: str) -> str | None:
        if name not in self._headers:
            return None
        raw = self._headers[name]
        if raw is None:
            raise self._fail(name, "has a null value")
        try:
            return bytes(raw).decode("utf-8")
        except UnicodeDecodeError as exc:
            problem = f"is not UTF-8 text ({exc.reason} at byte {exc.start})"
            raise self._fail(name, problem) from None

    def text(self, name: str) -> str:
        value = self.optional_text(name)
        if value is None:
            present = ", ".join(sorted(self._headers))
            raise self._fail(name, f"is missing (the broker always writes it; found {present})")
        return value

    def optional_number(self, name: str, bounds: tuple[int, int]) -> int | None:
        text = self.optional_text(name)
        if text is None:
            return None
        if _DECIMAL.fullmatch(text) is None:
            raise self._fail(name, f"is not a decimal number: {text[:40]!r}")
        value = int(text)
        if not bounds[0] <= value <= bounds[1]:
            raise self._fail(name, f"is out of range [{bounds[0]}, {bounds[1]}]: {value}")
        return value

    def number(self, name: str, bounds: tuple[int, int]) -> int:
        self.text(name)  # missing: the same message as a text header
        value = self.optional_number(name, bounds)
        assert value is not None
        return value
