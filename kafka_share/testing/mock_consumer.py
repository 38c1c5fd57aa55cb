"""Mock share consumers for unit tests: no broker, no network, no threads.

:class:`MockShareConsumer` has :class:`~kafka_share.ShareConsumer`'s API and
:class:`MockAsyncShareConsumer` has :class:`~kafka_share.aio.AsyncShareConsumer`'s
(the same methods and properties, with the same signatures), so code written for
the real consumer can be unit-tested against them::

    from kafka_share import AcknowledgeType
    from kafka_share.testing import MockShareConsumer

    consumer = MockShareConsumer(share_acknowledgement_mode="explicit")
    consumer.add_record("orders", value=b"ok")
    consumer.add_record("orders", value=b"bad")
    consumer.subscribe(["orders"])
    for record in consumer.poll(0):
        consumer.acknowledge(record, AcknowledgeType.ACCEPT if record.value == b"ok"
                             else AcknowledgeType.REJECT)
    consumer.commit_sync()
    assert consumer.committed() == {("orders", 0, 0): AcknowledgeType.ACCEPT,
                                    ("orders", 0, 1): AcknowledgeType.REJECT}

The test adds records (:meth:`MockShareConsumer.add_record`); the mock plays the
broker: a poll delivers available records of subscribed topics, RELEASEd ones
come back with ``delivery_count + 1`` (until ``delivery_count_limit``, after
which they are archived, as Kafka's ``group.share.delivery.count.limit``),
ACCEPTed and REJECTed ones never again. The consumer side follows the real
consumer's rules, with its errors and messages: explicit mode (a poll while
records of the last one are unacknowledged raises ``IllegalStateError``), the
acknowledgement types, RENEW (the renewed records come back from the next poll),
per-partition ``commit_sync`` results, the acknowledgement commit callback (run
when the real one runs it; exceptions it raises are logged), ``wakeup``, the
guard against calls from the callback, ``close`` (idempotent; calls after it
raise). The in-flight batch is the real consumer's own
(:class:`~kafka_share._app.in_flight.InFlightBatch`), so acknowledgements are
accepted and refused exactly as they are there.

What differs: the mock never waits. A poll with nothing to deliver returns an
empty batch at once, whatever its timeout, and the broker's answers arrive at
once (acknowledgements sent by a poll are reported to the callback by that
poll; those of ``commit_async`` at the next call, as in the real consumer).
Records are delivered in topic, partition and offset order. Locks never expire.
It is not thread-safe (like Java's ``MockShareConsumer``), except :meth:`wakeup`.

Failures are injected by the test: :meth:`MockShareConsumer.schedule_poll_exception`
(the next poll raises it), :meth:`MockShareConsumer.set_commit_error` (the
acknowledgements of matching partitions fail with it; their records are delivered
again, as after a lock expiry), :meth:`MockShareConsumer.schedule_commit_exception`
(the next ``commit_sync`` raises it, its acknowledgements still sent) and
:meth:`MockShareConsumer.schedule_poll_task` (a function run at the start of a
poll, e.g. to add records or call ``wakeup`` while the code under test polls).
A deserializer configured on the mock applies to the records' keys and values
at delivery, as in the real consumer: one that raises makes the poll raise
``RecordDeserializationError``, the record then acknowledged by coordinates
with ``acknowledge_offset`` or released.
"""

from __future__ import annotations

import enum
import itertools
import logging
import re
import time
import uuid
from collections.abc import AsyncIterator, Callable, Collection, Iterable, Mapping, Sequence
from typing import Any, Generic, TypeVar

from kafka_share._app.acks import _unacknowledged_message
from kafka_share._app.checks import (
    CLOSED,
    NOT_SUBSCRIBED,
    TELEMETRY_OFF,
    WOKEN_UP,
    _check_ack_type,
    _check_max_records,
    _check_subscription,
    _check_topic_name,
    _now_ms,
    _poll_timeout_ms,
    _timeout_ms,
    in_callback_message,
)
from kafka_share._app.core import AcknowledgementCommitCallback
from kafka_share._app.in_flight import InFlightBatch
from kafka_share.config import AcknowledgementMode, ShareConsumerConfig, parse_config
from kafka_share.errors import (
    IllegalStateError,
    KafkaError,
    RecordDeserializationError,
    WakeupError,
)
from kafka_share.metrics import ShareConsumerMetrics
from kafka_share.models import (
    AcknowledgeType,
    ConsumerRecord,
    ConsumerRecords,
    TimestampType,
    TopicIdPartition,
    TopicPartition,
)
from kafka_share.share.membership import generate_member_id
from kafka_share.share.topic_pattern import TopicListing, match_topics

__all__ = [
    "DEFAULT_DELIVERY_COUNT_LIMIT",
    "DEFAULT_LOCK_DURATION_MS",
    "MockAsyncShareConsumer",
    "MockShareConsumer",
]

K = TypeVar("K")
V = TypeVar("V")

log = logging.getLogger("kafka_share.testing.mock_consumer")

#: Kafka's default ``group.share.delivery.count.limit``
DEFAULT_DELIVERY_COUNT_LIMIT = 5
#: Kafka's default ``group.share.record.lock.duration.ms`` (what
#: ``acquisition_lock_timeout_ms`` reports once records were delivered)
DEFAULT_LOCK_DURATION_MS = 30_000
#: Settings the real consumer requires, given to the mock unless the test does
_MOCK_DEFAULTS = {"bootstrap_servers": "mock:9092", "group_id": "mock-group"}
#: the one mock broker's node id (acknowledgements go back to the delivering node)
_NODE = 0
_TOPIC_IDS = uuid.UUID("6b61666b-612d-7368-6172-652d6d6f636b")  # names the mock's topic ids
_client_numbers = itertools.count(1)


class _State(enum.Enum):
    """A record's state in the mock broker's share-partition."""

    AVAILABLE = "available"
    ACQUIRED = "acquired"
    ACKNOWLEDGED = "acknowledged"
    ARCHIVED = "archived"


class _Entry:
    """One record held by the mock broker: as added, and how often delivered."""

    __slots__ = ("deliveries", "record", "state")

    def __init__(self, record: ConsumerRecord[Any, Any]) -> None:
        #: as added; its ``delivery_count`` is the first delivery's
        self.record = record
        self.deliveries = 0
        self.state = _State.AVAILABLE

    def delivery_count(self) -> int:
        """The delivery count of the last delivery (of the next, if none yet)."""
        return self.record.delivery_count + max(0, self.deliveries - 1)


def topic_id_of(topic: str) -> uuid.UUID:
    """The topic id the mock gives ``topic`` (the same for every mock)."""
    return uuid.uuid5(_TOPIC_IDS, topic)


class _MockBroker:
    """The records the test added, per share-partition, and their states."""

    def __init__(self) -> None:
        self.partitions: dict[TopicIdPartition, dict[int, _Entry]] = {}
        self.delivery_count_limit = DEFAULT_DELIVERY_COUNT_LIMIT

    def add(self, record: ConsumerRecord[Any, Any]) -> None:
        tip = TopicIdPartition(topic_id_of(record.topic), record.topic, record.partition)
        entries = self.partitions.setdefault(tip, {})
        if record.offset in entries:
            raise ValueError(
                f"{record.topic}-{record.partition} already has a record at offset "
                f"{record.offset}: give another offset, or none (the next one is used)"
            )
        entries[record.offset] = _Entry(record)

    def next_offset(self, topic: str, partition: int) -> int:
        entries = self.partitions.get(TopicIdPartition(topic_id_of(topic), topic, partition))
        return max(entries) + 1 if entries else 0

    def acquire(
        self, topics: frozenset[str], limit: int
    ) -> dict[TopicIdPartition, list[ConsumerRecord[Any, Any]]]:
        """Up to ``limit`` available records of ``topics``, acquired, with their
        delivery counts (topic, partition and offset order)."""
        out: dict[TopicIdPartition, list[ConsumerRecord[Any, Any]]] = {}
        for tip in sorted(self.partitions, key=lambda t: (t.topic, t.partition)):
            if limit <= 0:
                break
            if tip.topic not in topics:
                continue
            entries = self.partitions[tip]
            for offset in sorted(entries):
                entry = entries[offset]
                if entry.state is not _State.AVAILABLE:
                    continue
                entry.state = _State.ACQUIRED
                entry.deliveries += 1
                out.setdefault(tip, []).append(
                    entry.record._replace(delivery_count=entry.delivery_count())
                )
                limit -= 1
                if limit <= 0:
                    break
        return out

    def settle(self, tip: TopicIdPartition, offset: int, ack_type: AcknowledgeType | None) -> None:
        """An acknowledgement applied (None: the lock was lost or the session closed)."""
        entry = self.partitions[tip][offset]
        if entry.state is not _State.ACQUIRED:
            return
        if ack_type is AcknowledgeType.ACCEPT:
            entry.state = _State.ACKNOWLEDGED
        elif ack_type is AcknowledgeType.REJECT:
            entry.state = _State.ARCHIVED
        elif ack_type is not AcknowledgeType.RENEW:  # RELEASE, or released by the broker
            limit_reached = entry.delivery_count() >= self.delivery_count_limit
            entry.state = _State.ARCHIVED if limit_reached else _State.AVAILABLE

    def release_acquired(self) -> None:
        """Every acquired record released (the consumer's share session closed)."""
        for tip, entries in self.partitions.items():
            for offset, entry in entries.items():
                if entry.state is _State.ACQUIRED:
                    self.settle(tip, offset, None)

    def available(self) -> list[ConsumerRecord[Any, Any]]:
        return [
            e.record._replace(delivery_count=e.record.delivery_count + e.deliveries)
            for tip in sorted(self.partitions, key=lambda t: (t.topic, t.partition))
            for _, e in sorted(self.partitions[tip].items())
            if e.state is _State.AVAILABLE
        ]


class _Completion:
    """The broker's answer to the acknowledgements of one partition."""

    __slots__ = ("error", "offsets", "partition", "renewing")

    def __init__(
        self, partition: TopicIdPartition, offsets: frozenset[int], renewing: frozenset[int],
        error: KafkaError | None,
    ) -> None:
        self.partition = partition
        self.offsets = offsets
        #: the offsets acknowledged with RENEW (renewed unless ``error``)
        self.renewing = renewing
        self.error = error


class _MockCore(Generic[K, V]):
    """The state machine both mock facades hold: the consumer's rules on one side,
    the mock broker on the other."""

    def __init__(
        self,
        facade: str,
        config: Mapping[str, object] | None,
        key_deserializer: Callable[[bytes], K] | None,
        value_deserializer: Callable[[bytes], V] | None,
        kwargs: dict[str, object],
    ) -> None:
        #: the real consumer's class name, for the errors that name it
        self.facade = facade
        self.config = _mock_config(config, key_deserializer, value_deserializer, kwargs)
        cfg = self.config
        self.client_id = cfg.client_id or f"kafka-share-{cfg.group_id}-mock-{next(_client_numbers)}"
        self.member_id = generate_member_id()
        self.explicit = cfg.share_acknowledgement_mode is AcknowledgementMode.EXPLICIT
        self.in_flight = InFlightBatch(record_spans=not self.explicit)
        self.broker = _MockBroker()
        self.metrics = ShareConsumerMetrics(
            sample_window_ms=cfg.metrics_sample_window_ms,
            num_samples=cfg.metrics_num_samples, created_ms=_now_ms(),
        )
        self.names: frozenset[str] = frozenset()
        self.pattern: re.Pattern[str] | None = None
        self.callback: AcknowledgementCommitCallback | None = None
        self.in_callback = False
        self.state = "open"
        self.wakeup_requested = False
        self.poll_kind: str | None = None
        self.pending_error: KafkaError | None = None
        self.lock_duration_ms = DEFAULT_LOCK_DURATION_MS
        self.acquisition_lock_timeout_ms: int | None = None
        self.completions: list[_Completion] = []
        self.poll_tasks: list[Callable[[], object]] = []
        self.poll_exceptions: list[BaseException] = []
        self.commit_exceptions: list[BaseException] = []
        #: (topic or None, partition or None, error), the latest first
        self.commit_errors: list[tuple[str | None, int | None, KafkaError]] = []
        self.given: dict[tuple[str, int, int], AcknowledgeType] = {}
        self.committed: dict[tuple[str, int, int], AcknowledgeType] = {}
        #: what client_instance_id() returns
        self.client_instance_id = uuid.uuid4()

    def instance_id(self) -> uuid.UUID:
        """``client_instance_id``: the real consumer's checks, then the mock's id."""
        if not self.config.enable_metrics_push:
            raise IllegalStateError(TELEMETRY_OFF)
        self.check_open()
        return self.client_instance_id

    # -- the guard ----------------------------------------------------------------------

    def check(self, *, allow_closing: bool = False) -> None:
        """The checks every call of the real consumer makes (its guard)."""
        if self.in_callback:
            raise IllegalStateError(in_callback_message(self.facade))
        if self.state != "open" and not (allow_closing and self.state == "closing"):
            raise IllegalStateError(CLOSED)

    def check_open(self) -> None:
        if self.state != "open":
            raise IllegalStateError(CLOSED)

    # -- records added by the test ---------------------------------------------------------

    def add_record(self, record: ConsumerRecord[Any, Any]) -> ConsumerRecord[Any, Any]:
        self.broker.add(record)
        return record

    # -- subscription --------------------------------------------------------------------

    def subscribe(self, topics: Collection[str] | None, pattern: object) -> None:
        self.check()
        wanted = _check_subscription(topics, pattern)
        if isinstance(wanted, re.Pattern):
            self.names, self.pattern = frozenset(), wanted
        else:
            self.names, self.pattern = wanted, None

    def unsubscribe(self) -> None:
        self.check()
        self.names, self.pattern = frozenset(), None

    @property
    def subscription(self) -> frozenset[str]:
        """The names, or what the pattern matches among the topics the test added
        records to (at once: the mock has no metadata to wait for)."""
        if self.pattern is None:
            return self.names
        return match_topics(
            self.pattern, (TopicListing(t.topic) for t in self.broker.partitions)
        )

    @property
    def subscribed(self) -> bool:
        return bool(self.names) or self.pattern is not None

    @property
    def assignment(self) -> frozenset[TopicPartition]:
        """Every partition of the subscribed topics that records were added to:
        the mock is the only member of its group."""
        topics = self.subscription
        return frozenset(TopicPartition(t.topic, t.partition)
                         for t in self.broker.partitions if t.topic in topics)

    # -- polling ---------------------------------------------------------------------

    def poll(
        self, kind: str, timeout: float | None, max_records: int | None,
        view_types: bool = False,
    ) -> ConsumerRecords[K, V] | Any:
        """``poll`` (``kind`` "poll") and ``poll_arrow``: the real poll's steps in its order."""
        _poll_timeout_ms(timeout)  # its checks; the mock never waits
        limit = _check_max_records(max_records)
        self.check()
        self.check_poll_kind(kind)
        if self.poll_tasks:
            self.poll_tasks.pop(0)()
            self.check()  # the task may have closed the consumer
        self.metrics.record_poll_start(_now_ms())
        try:
            self.start_poll()
            if self.wakeup_requested:
                self.wakeup_requested = False
                raise WakeupError(WOKEN_UP)
            self.send(self.take_acks())
            self.handle_completions()
            cap = self.config.max_poll_records if limit is None else min(
                limit, self.config.max_poll_records)
            if self.in_flight.has_renewing():
                # Renewed records come back first; no new records meanwhile.
                return self.hand_out(kind, self.in_flight.take_ready(), view_types,
                                     renewed=True)
            return self.hand_out(kind, self.broker.acquire(self.subscription, cap), view_types)
        finally:
            self.metrics.record_poll_end(_now_ms(), waited_ms=0)

    def start_poll(self) -> None:
        """What every poll does first: errors, the last batch's acks, the checks."""
        if self.poll_exceptions:
            raise self.poll_exceptions.pop(0)
        self.handle_completions()
        self.in_flight.settle_failed()
        if self.pending_error is not None:
            error, self.pending_error = self.pending_error, None
            self.in_flight.mark_failed_raised()
            raise error
        if self.explicit:
            if not self.in_flight.all_acknowledged():
                raise IllegalStateError(
                    _unacknowledged_message(self.in_flight.unacknowledged_by_partition())
                )
        else:
            self.in_flight.acknowledge_all(AcknowledgeType.ACCEPT)
        if not self.subscribed:
            raise IllegalStateError(NOT_SUBSCRIBED)

    def check_poll_kind(self, kind: str) -> None:
        """The real consumer's rule: ``poll`` or ``poll_arrow``, fixed by the first poll."""
        if self.poll_kind == kind:
            return
        if self.poll_kind is not None:
            raise IllegalStateError(
                f"this consumer was polled with {self.poll_kind}(); {kind}() cannot be "
                "mixed with it on the same consumer (use one consumer per style)"
            )
        if kind == "poll_arrow":
            if self.config.key_deserializer is not None or (
                self.config.value_deserializer is not None
            ):
                raise IllegalStateError(
                    "poll_arrow() returns keys and values as raw bytes: create the "
                    "consumer without key_deserializer/value_deserializer to use it"
                )
            _arrow()  # ImportError without the arrow extra
        self.poll_kind = kind

    def hand_out(
        self, kind: str, acquired: dict[TopicIdPartition, list[ConsumerRecord[Any, Any]]],
        view_types: bool, *, renewed: bool = False,
    ) -> ConsumerRecords[K, V] | Any:
        """Acquired records into the in-flight batch and the poll's result."""
        if kind == "poll_arrow":
            return self.hand_out_rows(acquired, view_types)
        out: dict[TopicIdPartition, list[ConsumerRecord[K, V]]] = {}
        error: RecordDeserializationError | None = None
        for tip, records in acquired.items():
            if renewed:  # handed out before: deserialized, in the batch already
                out[tip] = records
                continue
            if error is not None:  # not delivered: back to the broker, uncounted
                for r in records:
                    self.unacquire(tip, r.offset)
                continue
            delivered, error = self.deserialized(tip, records)
            if delivered:
                self.in_flight.add_records(tip, _NODE, delivered)
                out[tip] = delivered
        self.note_delivered(sum(len(r) for r in out.values()))
        if error is not None:
            if not out:
                self.in_flight.mark_failed_raised()
                raise error
            self.pending_error = error  # raised by the next poll, as the real one does
        return ConsumerRecords(out)

    def deserialized(
        self, tip: TopicIdPartition, records: list[ConsumerRecord[Any, Any]]
    ) -> tuple[list[ConsumerRecord[K, V]], RecordDeserializationError | None]:
        """``records`` with the deserializers applied, up to the first that fails:
        its error is returned, it waits for its acknowledgement by coordinates
        (default RELEASE), the records after it go back undelivered."""
        kd, vd = self.config.key_deserializer, self.config.value_deserializer
        if kd is None and vd is None:
            return records, None
        out: list[ConsumerRecord[K, V]] = []
        for i, r in enumerate(records):
            is_key = True
            try:
                key = kd(r.key) if kd is not None and r.key is not None else r.key
                is_key = False
                value = vd(r.value) if vd is not None and r.value is not None else r.value
            except Exception as exc:
                self.in_flight.add_failed(tip, _NODE, [r.offset], AcknowledgeType.RELEASE)
                for later in records[i + 1:]:
                    self.unacquire(tip, later.offset)
                return out, _poison(tip, r, exc, is_key=is_key)
            out.append(r._replace(key=key, value=value))
        return out, None

    def hand_out_rows(
        self, acquired: dict[TopicIdPartition, list[ConsumerRecord[Any, Any]]], view_types: bool
    ) -> Any:
        """``poll_arrow``'s record batch, built as the real one builds it."""
        columnar = _arrow()
        by_partition: dict[TopicIdPartition, list[Any]] = {}
        for tip, records in acquired.items():
            pieces = _pieces(records)
            self.in_flight.add_rows(tip, _NODE, pieces)
            by_partition[tip] = pieces
        self.note_delivered(sum(len(r) for r in acquired.values()))
        return columnar.to_record_batch(
            columnar.ColumnarRecords(by_partition), view_types=view_types
        )

    def note_delivered(self, count: int) -> None:
        if count:
            self.acquisition_lock_timeout_ms = self.lock_duration_ms
        self.metrics.record_consumed(count, 0, _now_ms())

    def unacquire(self, tip: TopicIdPartition, offset: int) -> None:
        """A record acquired and not handed out after all: as if never delivered."""
        entry = self.broker.partitions[tip][offset]
        entry.deliveries -= 1
        entry.state = _State.AVAILABLE

    # -- acknowledging -----------------------------------------------------------------

    def acknowledge(self, record: ConsumerRecord[K, V], type: AcknowledgeType) -> None:
        self.check()
        ack_type = _check_ack_type(type, explicit=self.explicit)
        self.in_flight.acknowledge(record, ack_type)
        self.given[(record.topic, record.partition, record.offset)] = ack_type

    def acknowledge_offset(
        self, topic: str, partition: int, offset: int, type: AcknowledgeType
    ) -> None:
        self.check()
        ack_type = _check_ack_type(type, explicit=self.explicit)
        self.in_flight.acknowledge_offset(topic, partition, offset, ack_type)
        self.given[(topic, partition, offset)] = ack_type

    def acknowledge_arrow(self, batch: Any, type: Any) -> None:
        self.check()
        if not self.explicit:
            _check_ack_type(AcknowledgeType.ACCEPT, explicit=False)  # raises: implicit mode
        rows = _arrow().rows_to_acknowledge(batch, type)
        self.in_flight.acknowledge_rows(rows)
        for topic, partition, offsets, _, types in rows:
            values = [types] * len(offsets) if isinstance(types, int) else types.tolist()
            for offset, value in zip(offsets.tolist(), values, strict=True):
                self.given[(topic, partition, offset)] = AcknowledgeType(value)

    # -- sending acknowledgements to the mock broker ------------------------------------

    def take_acks(self) -> dict[TopicIdPartition, list[tuple[int, AcknowledgeType]]]:
        """The acknowledgements made so far, out of the in-flight batch."""
        out: dict[TopicIdPartition, list[tuple[int, AcknowledgeType]]] = {}
        for tip, (_, by_offset, ranges) in self.in_flight.take_acknowledgements().items():
            acks = [(o, AcknowledgeType(t)) for o, t in by_offset.items()]
            acks += [(o, AcknowledgeType(t)) for first, last, t in ranges
                     for o in range(first, last + 1)]
            acks.sort()
            for o, t in acks:
                self.given[(tip.topic, tip.partition, o)] = t
            out[tip] = acks
        return out

    def send(
        self, acks: dict[TopicIdPartition, list[tuple[int, AcknowledgeType]]]
    ) -> dict[TopicIdPartition, KafkaError | None]:
        """The mock broker applies ``acks``; their completions wait for
        :meth:`handle_completions`. Returns the result per partition."""
        results: dict[TopicIdPartition, KafkaError | None] = {}
        for tip, offsets in acks.items():
            error = self.commit_error_for(tip)
            for offset, ack_type in offsets:
                # A failed acknowledgement: the lock runs out, the record comes back.
                self.broker.settle(tip, offset, None if error is not None else ack_type)
                if error is None:
                    self.committed[(tip.topic, tip.partition, offset)] = ack_type
            self.completions.append(_Completion(
                tip, frozenset(o for o, _ in offsets),
                frozenset(o for o, t in offsets if t is AcknowledgeType.RENEW), error,
            ))
            self.metrics.record_acknowledgements(
                len(offsets), len(offsets) if error is not None else 0, _now_ms()
            )
            results[tip] = error
        return results

    def commit_error_for(self, tip: TopicIdPartition) -> KafkaError | None:
        for topic, partition, error in self.commit_errors:
            if topic in (None, tip.topic) and partition in (None, tip.partition):
                return error
        return None

    def handle_completions(self) -> None:
        """Apply the broker's answers: renewed records back, the callback told."""
        completions, self.completions = self.completions, []
        for c in completions:
            if c.renewing:
                renewed = c.renewing if c.error is None else frozenset()
                self.in_flight.on_renew_completed(c.partition, renewed, c.renewing - renewed)
            if self.callback is not None:
                self.run_callback({c.partition: set(c.offsets)}, c.error)

    def run_callback(
        self, offsets: dict[TopicIdPartition, set[int]], error: KafkaError | None
    ) -> None:
        assert self.callback is not None
        self.in_callback = True
        try:
            self.callback(offsets, error)
        except Exception:
            log.exception("Exception thrown by acknowledgement commit callback")
        finally:
            self.in_callback = False

    # -- committing ------------------------------------------------------------------

    def commit_acks(self) -> dict[TopicIdPartition, list[tuple[int, AcknowledgeType]]]:
        """What ``commit_sync`` and ``commit_async`` send (implicit mode: the last
        batch accepted first)."""
        self.handle_completions()
        if not self.explicit:
            self.in_flight.acknowledge_all(AcknowledgeType.ACCEPT)
        self.in_flight.settle_failed()
        return self.take_acks()

    def commit_sync(self, timeout: float | None) -> dict[TopicIdPartition, KafkaError | None]:
        _timeout_ms(timeout, self.config.default_api_timeout_ms, "commit_sync")
        self.check()
        acks = self.commit_acks()
        if not acks:
            return {}
        results = self.send(acks)
        # The acknowledgements went; the outcome of a commit that raises reaches
        # the callback at the next call, as in the real consumer.
        if self.commit_exceptions:
            raise self.commit_exceptions.pop(0)
        if self.wakeup_requested:
            self.wakeup_requested = False
            raise WakeupError(WOKEN_UP)
        self.handle_completions()
        return results

    def commit_async(self) -> None:
        self.check()
        acks = self.commit_acks()
        if acks:
            self.send(acks)

    def prefetch(self, max_records: int | None) -> bool:
        _check_max_records(max_records)
        self.check()
        if not self.subscribed:
            raise IllegalStateError(NOT_SUBSCRIBED)
        if self.in_flight.has_renewing():
            return False
        acks = self.take_acks()
        if acks:
            self.send(acks)
        return True

    def set_callback(self, callback: AcknowledgementCommitCallback | None) -> None:
        self.check()
        if callback is not None and not callable(callback):
            raise TypeError(f"the callback must be callable, got {callback!r}")
        self.callback = callback

    # -- close ---------------------------------------------------------------------------

    def close(self, timeout: float | None) -> None:
        _timeout_ms(timeout, 30_000, "close")
        if self.state != "open":
            return
        self.check()
        self.state = "closing"
        try:
            # Implicit mode accepts nothing here: the broker releases the last batch.
            self.in_flight.settle_failed(everything=True)
            acks = self.take_acks()
            if acks:
                self.send(acks)
            self.handle_completions()
        finally:
            self.broker.release_acquired()
            self.state = "closed"
            self.in_flight.clear()


def _mock_config(
    config: Mapping[str, object] | None,
    key_deserializer: Callable[[bytes], Any] | None,
    value_deserializer: Callable[[bytes], Any] | None,
    kwargs: dict[str, object],
) -> ShareConsumerConfig:
    """The configuration, checked as the real consumer checks it; the settings it
    requires get a default if the test gives none."""
    given = set(config or {}) | set(kwargs)
    defaults = {
        name: value for name, value in _MOCK_DEFAULTS.items()
        if name not in given and name.replace("_", ".") not in given
    }
    if key_deserializer is not None:
        kwargs["key_deserializer"] = key_deserializer
    if value_deserializer is not None:
        kwargs["value_deserializer"] = value_deserializer
    return parse_config(config, **defaults, **kwargs)


def _poison(
    tip: TopicIdPartition, record: ConsumerRecord[Any, Any], exc: Exception, *, is_key: bool
) -> RecordDeserializationError:
    """The real consumer's error for a deserializer failure."""
    what = "key" if is_key else "value"
    err = RecordDeserializationError(
        f"Error deserializing {what} for partition {tip.topic}-{tip.partition} at offset "
        f"{record.offset}: {type(exc).__name__}: {exc}. Unless acknowledged with "
        "acknowledge_offset() (explicit mode), it is released by the next poll or commit.",
        topic=tip.topic, partition=tip.partition, offset=record.offset,
        key=record.key, value=record.value, is_key=is_key,
    )
    err.__cause__ = exc
    return err


def _arrow() -> Any:
    """``_app/columnar.py`` (pyarrow and numpy: the ``arrow`` extra), on first use."""
    try:
        from kafka_share._app import columnar  # noqa: PLC0415
    except ImportError as exc:
        raise ImportError(
            "poll_arrow() needs pyarrow and numpy: pip install 'kafka-share[arrow]' "
            f"({exc})"
        ) from exc
    return columnar


def _pieces(records: list[ConsumerRecord[Any, Any]]) -> list[Any]:
    """``records`` (one partition's, offset order) as the columnar pieces the real
    ``poll_arrow`` builds: one per run of equal timestamp types."""
    import numpy as np  # noqa: PLC0415

    from kafka_share.records.columnar import columns_from_rows  # noqa: PLC0415

    columnar = _arrow()
    pieces = []
    for timestamp_type, run in itertools.groupby(records, key=lambda r: r.timestamp_type):
        rows = list(run)
        for r in rows:
            for name, item in (("key", r.key), ("value", r.value)):
                if item is not None and not isinstance(item, bytes):
                    raise TypeError(
                        f"poll_arrow() delivers keys and values as bytes; the {name} of "
                        f"{r.topic}-{r.partition} offset {r.offset} is {type(item).__name__}"
                    )
        columns = columns_from_rows(
            [(r.offset, r.timestamp, r.key, r.value, tuple(r.headers)) for r in rows]
        )
        counts = np.array([r.delivery_count for r in rows], np.int32)
        pieces.append(columnar.Piece(columns, counts, int(timestamp_type)))
    return pieces


def _record_of(
    core: _MockCore[Any, Any],
    record: ConsumerRecord[Any, Any] | str,
    partition: int | None,
    offset: int | None,
    fields: dict[str, Any],
) -> ConsumerRecord[Any, Any]:
    """``add_record``'s arguments as the record to add (checked)."""
    if isinstance(record, ConsumerRecord):
        given = [name for name, value in (("partition", partition), ("offset", offset),
                                          *fields.items()) if value is not _UNSET]
        if given:
            raise TypeError(
                f"add_record() takes a ConsumerRecord or a topic with fields, not both "
                f"(got {', '.join(given)})"
            )
        _check_record(record)
        return record
    topic = _check_topic_name(record)
    p = 0 if partition in (None, _UNSET) else partition
    offset = None if offset is _UNSET else offset
    _check_int("add_record() partition", p, 0)
    if offset is None:
        offset = core.broker.next_offset(topic, p)
    f = {name: (_DEFAULT_FIELDS[name] if value is _UNSET else value)
         for name, value in fields.items()}
    timestamp = f["timestamp"]
    if timestamp is None:
        timestamp = int(time.time() * 1000)
    new: ConsumerRecord[Any, Any] = ConsumerRecord(
        topic, p, offset, timestamp, TimestampType(f["timestamp_type"]), f["key"], f["value"],
        tuple(f["headers"]), f["leader_epoch"], f["delivery_count"],
        _size(f["key"]), _size(f["value"]),
    )
    _check_record(new)
    return new


_UNSET: Any = object()
_DEFAULT_FIELDS: dict[str, Any] = {
    "key": None, "value": None, "headers": (), "timestamp": None,
    "timestamp_type": TimestampType.CREATE_TIME, "leader_epoch": None, "delivery_count": 1,
}


def _size(item: object) -> int:
    return len(item) if isinstance(item, bytes | bytearray | memoryview) else -1


def _check_int(name: str, value: object, minimum: int) -> None:
    if isinstance(value, bool) or not isinstance(value, int) or value < minimum:
        raise ValueError(f"{name} must be an int >= {minimum}, got {value!r}")


def _check_record(record: ConsumerRecord[Any, Any]) -> None:
    _check_topic_name(record.topic)
    _check_int("add_record() partition", record.partition, 0)
    _check_int("add_record() offset", record.offset, 0)
    _check_int("add_record() delivery_count", record.delivery_count, 1)
    if isinstance(record.timestamp, bool) or not isinstance(record.timestamp, int):
        raise ValueError(f"add_record() timestamp must be an int (ms), got {record.timestamp!r}")
    for header in record.headers:
        if (not isinstance(header, tuple) or len(header) != 2 or not isinstance(header[0], str)
                or not (header[1] is None or isinstance(header[1], bytes))):
            raise ValueError(
                f"add_record() headers must be (str, bytes | None) pairs, got {header!r}"
            )


class _MockControls(Generic[K, V]):
    """What a test does with a mock, beyond the consumer's API (both facades)."""

    _core: _MockCore[K, V]

    def add_record(
        self,
        record: ConsumerRecord[Any, Any] | str,
        /,
        partition: int | None = _UNSET,
        offset: int | None = _UNSET,
        *,
        key: Any = _UNSET,
        value: Any = _UNSET,
        headers: Sequence[tuple[str, bytes | None]] = _UNSET,
        timestamp: int | None = _UNSET,
        timestamp_type: TimestampType = _UNSET,
        leader_epoch: int | None = _UNSET,
        delivery_count: int = _UNSET,
    ) -> ConsumerRecord[Any, Any]:
        """Add a record for the mock broker to deliver; returns it as added.

        Either a :class:`~kafka_share.ConsumerRecord` (delivered as it is, its
        ``delivery_count`` the first delivery's), or a topic and fields:
        ``partition`` (default 0), ``offset`` (default: the partition's next),
        ``key`` and ``value`` (default None), ``headers`` (``(str, bytes | None)``
        pairs), ``timestamp`` (ms; default now), ``timestamp_type`` (create
        time), ``leader_epoch`` and ``delivery_count`` (default 1). With a
        deserializer configured, key and value are the serialized bytes: the
        deserializer applies at delivery, as in the real consumer.

        Raises:
            ValueError: the offset is taken, or a field is invalid.
            InvalidTopicError: the topic name is not legal.
            TypeError: a ConsumerRecord and fields together.
        """
        fields = {
            "key": key, "value": value, "headers": headers, "timestamp": timestamp,
            "timestamp_type": timestamp_type, "leader_epoch": leader_epoch,
            "delivery_count": delivery_count,
        }
        core = self._core
        return core.add_record(_record_of(core, record, partition, offset, fields))

    def add_records(
        self, topic: str, values: Iterable[Any], *, partition: int = 0, key: Any = None
    ) -> list[ConsumerRecord[Any, Any]]:
        """Add one record per value to ``topic``-``partition`` at the next offsets."""
        return [self.add_record(topic, partition, key=key, value=v) for v in values]

    def topic_id_partition(self, topic: str, partition: int = 0) -> TopicIdPartition:
        """The partition as the mock names it in results (its topic id is fixed
        by the topic name)."""
        return TopicIdPartition(topic_id_of(topic), topic, partition)

    def acknowledged(self) -> dict[tuple[str, int, int], AcknowledgeType]:
        """Every acknowledgement the consumer made, sent or not yet, implicit ones
        included: ``(topic, partition, offset) -> type`` (the latest per offset)."""
        return dict(self._core.given)

    def committed(self) -> dict[tuple[str, int, int], AcknowledgeType]:
        """The acknowledgements the mock broker applied (sent by a poll, a commit
        or close, and not failed): ``(topic, partition, offset) -> type``."""
        return dict(self._core.committed)

    def available(self) -> list[ConsumerRecord[Any, Any]]:
        """The records a poll would deliver (any topic), with the delivery count
        they would have: never delivered, released, or whose acknowledgement failed."""
        return self._core.broker.available()

    @property
    def closed(self) -> bool:
        """Whether :meth:`close` was called."""
        return self._core.state == "closed"

    @property
    def delivery_count_limit(self) -> int:
        """Deliveries after which a released record is archived (Kafka's
        ``group.share.delivery.count.limit``, default 5)."""
        return self._core.broker.delivery_count_limit

    @delivery_count_limit.setter
    def delivery_count_limit(self, limit: int) -> None:
        _check_int("delivery_count_limit", limit, 1)
        self._core.broker.delivery_count_limit = limit

    def schedule_poll_exception(self, exception: BaseException) -> None:
        """The next poll raises ``exception`` first thing (as the real one raises an
        error its network side reported), leaving the last batch in flight.
        Scheduled exceptions are raised one per poll, in order."""
        if not isinstance(exception, BaseException):
            raise TypeError(f"expected an exception instance, got {exception!r}")
        self._core.poll_exceptions.append(exception)

    def schedule_poll_task(self, task: Callable[[], object]) -> None:
        """Run ``task()`` at the start of a poll (one per poll, in order): add
        records, call ``wakeup()`` or schedule an exception while the code
        under test polls."""
        if not callable(task):
            raise TypeError(f"expected a callable, got {task!r}")
        self._core.poll_tasks.append(task)

    def schedule_commit_exception(self, exception: BaseException) -> None:
        """The next ``commit_sync`` that has acknowledgements to send raises
        ``exception`` (e.g. ``KafkaTimeoutError``) after sending them, as a real
        one whose answer came too late: their outcome reaches the callback at
        the next call."""
        if not isinstance(exception, BaseException):
            raise TypeError(f"expected an exception instance, got {exception!r}")
        self._core.commit_exceptions.append(exception)

    def set_commit_error(
        self, error: KafkaError | None, *, topic: str | None = None,
        partition: int | None = None,
    ) -> None:
        """From now on, acknowledgements of ``topic`` (every topic if None) and
        ``partition`` (every partition if None) fail with ``error``: in
        ``commit_sync``'s results and the callback, and their records are
        delivered again (as after a lock expiry, e.g. ``InvalidRecordStateError``).
        The latest matching setting wins; ``set_commit_error(None)`` clears them all."""
        core = self._core
        if error is None:
            core.commit_errors.clear()
            return
        if not isinstance(error, KafkaError):
            raise TypeError(f"expected a KafkaError instance or None, got {error!r}")
        core.commit_errors.insert(0, (topic, partition, error))


class MockShareConsumer(_MockControls[K, V], Generic[K, V]):
    """A :class:`~kafka_share.ShareConsumer` for unit tests: the same API and rules,
    records added by the test, no broker (see the module docstring).

    Takes the real consumer's configuration (checked the same way;
    ``bootstrap.servers`` and ``group.id`` default to placeholders), e.g.
    ``MockShareConsumer(share_acknowledgement_mode="explicit")``.
    """

    def __init__(
        self,
        config: Mapping[str, object] | None = None,
        /,
        *,
        key_deserializer: Callable[[bytes], K] | None = None,
        value_deserializer: Callable[[bytes], V] | None = None,
        **kwargs: object,
    ) -> None:
        self._core: _MockCore[K, V] = _MockCore(
            "ShareConsumer", config, key_deserializer, value_deserializer, kwargs
        )

    def __enter__(self) -> MockShareConsumer[K, V]:
        self._core.check_open()
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __repr__(self) -> str:
        return _repr(type(self).__name__, self._core)

    @property
    def client_id(self) -> str:
        return self._core.client_id

    @property
    def group_id(self) -> str:
        return self._core.config.group_id

    @property
    def member_id(self) -> str:
        """The member id this consumer generated for itself (kept for its lifetime)."""
        return self._core.member_id

    @property
    def acquisition_lock_timeout_ms(self) -> int | None:
        """The lock duration (30 s, ``DEFAULT_LOCK_DURATION_MS``) once records were delivered."""
        return self._core.acquisition_lock_timeout_ms

    def subscribe(
        self,
        topics: Collection[str] | None = None,
        *,
        pattern: str | re.Pattern[str] | None = None,
    ) -> None:
        """Subscribe to ``topics`` or ``pattern``, replacing the previous subscription
        (empty: unsubscribe); checked as the real consumer checks them. A pattern
        matches (whole names, internal topics never) the topics records were added
        to, at each call: no metadata refresh to wait for."""
        self._core.subscribe(topics, pattern)

    def subscription(self) -> frozenset[str]:
        """The current subscription (empty if none)."""
        self._core.check()
        return self._core.subscription

    def assignment(self) -> frozenset[TopicPartition]:
        """The partitions of the subscribed topics that records were added to (the
        mock is its group's only member)."""
        self._core.check()
        return self._core.assignment

    def unsubscribe(self) -> None:
        """Clear the subscription."""
        self._core.unsubscribe()

    def poll(
        self, timeout: float | None = None, *, max_records: int | None = None
    ) -> ConsumerRecords[K, V]:
        """Deliver available records of the subscribed topics (at most
        ``max_records`` and ``max.poll.records``); empty at once if none.
        Raises what :meth:`ShareConsumer.poll <kafka_share.ShareConsumer.poll>` raises."""
        result: ConsumerRecords[K, V] = self._core.poll("poll", timeout, max_records)
        return result

    def poll_arrow(
        self,
        timeout: float | None = None,
        *,
        max_records: int | None = None,
        view_types: bool = False,
    ) -> Any:
        """:meth:`poll` as one ``pyarrow.RecordBatch``, as the real ``poll_arrow``
        (keys and values must be bytes or None)."""
        return self._core.poll("poll_arrow", timeout, max_records, view_types)

    def metrics(self) -> dict[str, float]:
        """The real consumer's metric names (records consumed and acknowledgements
        sent are counted; the rest is NaN)."""
        return self._core.metrics.snapshot(_now_ms())

    def client_instance_id(self, timeout: float | None = None) -> uuid.UUID | None:
        """A random id per mock, as if the cluster had assigned it at once;
        IllegalStateError when ``enable.metrics.push`` is off or the mock is closed."""
        return self._core.instance_id()

    def prefetch(self, max_records: int | None = None) -> bool:
        """Send the acknowledgements made so far (records are acquired by the next
        poll); False while renewed records are outstanding."""
        return self._core.prefetch(max_records)

    def acknowledge(
        self, record: ConsumerRecord[K, V], type: AcknowledgeType = AcknowledgeType.ACCEPT
    ) -> None:
        """Acknowledge a record of the current batch (explicit mode only)."""
        self._core.acknowledge(record, type)

    def acknowledge_offset(
        self,
        topic: str,
        partition: int,
        offset: int,
        type: AcknowledgeType = AcknowledgeType.ACCEPT,
    ) -> None:
        """Acknowledge by coordinates a record ``poll`` could not deserialize."""
        self._core.acknowledge_offset(topic, partition, offset, type)

    def acknowledge_arrow(
        self, batch: Any, type: Any = AcknowledgeType.ACCEPT
    ) -> None:
        """Acknowledge rows returned by :meth:`poll_arrow` (explicit mode only)."""
        self._core.acknowledge_arrow(batch, type)

    def commit_sync(
        self, timeout: float | None = None
    ) -> dict[TopicIdPartition, KafkaError | None]:
        """Send pending acknowledgements; one entry per partition: None or its error."""
        return self._core.commit_sync(timeout)

    def commit_async(self) -> None:
        """Send pending acknowledgements; results reach the callback at the next call."""
        self._core.commit_async()

    def set_acknowledgement_commit_callback(
        self, callback: AcknowledgementCommitCallback | None
    ) -> None:
        """Set (or clear with ``None``) the acknowledgement commit callback."""
        self._core.set_callback(callback)

    def wakeup(self) -> None:
        """Make the next (or current) ``poll`` or ``commit_sync`` raise ``WakeupError``."""
        self._core.wakeup_requested = True

    def close(self, timeout: float | None = None) -> None:
        """Send pending acknowledgements; unacknowledged records are released.
        Closing twice is harmless."""
        self._core.close(timeout)


class MockAsyncShareConsumer(_MockControls[K, V], Generic[K, V]):
    """An :class:`~kafka_share.aio.AsyncShareConsumer` for unit tests: the same
    API (coroutines where the real one has them) over the same state machine as
    :class:`MockShareConsumer`. It needs no running event loop to be created.

    ``async for`` ends when the mock has nothing left to deliver (a real
    consumer would wait for more).
    """

    def __init__(
        self,
        config: Mapping[str, object] | None = None,
        /,
        *,
        key_deserializer: Callable[[bytes], K] | None = None,
        value_deserializer: Callable[[bytes], V] | None = None,
        **kwargs: object,
    ) -> None:
        self._core: _MockCore[K, V] = _MockCore(
            "AsyncShareConsumer", config, key_deserializer, value_deserializer, kwargs
        )
        self._iter: Any = None
        self._iter_last: ConsumerRecord[K, V] | None = None

    async def __aenter__(self) -> MockAsyncShareConsumer[K, V]:
        self._core.check_open()
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    def __aiter__(self) -> AsyncIterator[ConsumerRecord[K, V]]:
        return self

    async def __anext__(self) -> ConsumerRecord[K, V]:
        """The next record; in implicit mode the one handed out before is accepted."""
        core = self._core
        last, self._iter_last = self._iter_last, None
        if last is not None and not core.explicit and core.state == "open":
            core.check()
            core.in_flight.acknowledge(last, AcknowledgeType.ACCEPT)
        while True:
            if self._iter is not None:
                record: ConsumerRecord[K, V] | None = next(self._iter, None)
                if record is not None:
                    self._iter_last = record
                    return record
                self._iter = None
            if core.state != "open":
                raise StopAsyncIteration
            records: ConsumerRecords[K, V] = core.poll("poll", None, None)
            if not records:
                raise StopAsyncIteration  # nothing left to deliver
            self._iter = iter(records)

    def __repr__(self) -> str:
        return _repr(type(self).__name__, self._core)

    @property
    def client_id(self) -> str:
        return self._core.client_id

    @property
    def group_id(self) -> str:
        return self._core.config.group_id

    @property
    def member_id(self) -> str:
        """The member id this consumer generated for itself (kept for its lifetime)."""
        return self._core.member_id

    @property
    def acquisition_lock_timeout_ms(self) -> int | None:
        """The lock duration (30 s, ``DEFAULT_LOCK_DURATION_MS``) once records were delivered."""
        return self._core.acquisition_lock_timeout_ms

    async def subscribe(
        self,
        topics: Collection[str] | None = None,
        *,
        pattern: str | re.Pattern[str] | None = None,
    ) -> None:
        """As :meth:`MockShareConsumer.subscribe`."""
        self._core.subscribe(topics, pattern)

    async def unsubscribe(self) -> None:
        """Clear the subscription."""
        self._core.unsubscribe()

    def subscription(self) -> frozenset[str]:
        """The current subscription (empty if none)."""
        self._core.check()
        return self._core.subscription

    def assignment(self) -> frozenset[TopicPartition]:
        """The partitions of the subscribed topics that records were added to (the
        mock is its group's only member)."""
        self._core.check()
        return self._core.assignment

    async def poll(
        self, timeout: float | None = None, *, max_records: int | None = None
    ) -> ConsumerRecords[K, V]:
        """As :meth:`MockShareConsumer.poll`."""
        self._iter = None  # a poll of its own ends an ``async for``'s batch
        self._iter_last = None
        result: ConsumerRecords[K, V] = self._core.poll("poll", timeout, max_records)
        return result

    async def poll_arrow(
        self,
        timeout: float | None = None,
        *,
        max_records: int | None = None,
        view_types: bool = False,
    ) -> Any:
        """As :meth:`MockShareConsumer.poll_arrow`."""
        return self._core.poll("poll_arrow", timeout, max_records, view_types)

    def metrics(self) -> dict[str, float]:
        """As :meth:`MockShareConsumer.metrics`."""
        return self._core.metrics.snapshot(_now_ms())

    async def client_instance_id(self, timeout: float | None = None) -> uuid.UUID | None:
        """As :meth:`MockShareConsumer.client_instance_id`."""
        return self._core.instance_id()

    def prefetch(self, max_records: int | None = None) -> bool:
        """As :meth:`MockShareConsumer.prefetch`."""
        return self._core.prefetch(max_records)

    def acknowledge(
        self, record: ConsumerRecord[K, V], type: AcknowledgeType = AcknowledgeType.ACCEPT
    ) -> None:
        """Acknowledge a record of the current batch (explicit mode only)."""
        self._core.acknowledge(record, type)

    def acknowledge_offset(
        self,
        topic: str,
        partition: int,
        offset: int,
        type: AcknowledgeType = AcknowledgeType.ACCEPT,
    ) -> None:
        """Acknowledge by coordinates a record ``poll`` could not deserialize."""
        self._core.acknowledge_offset(topic, partition, offset, type)

    def acknowledge_arrow(
        self, batch: Any, type: Any = AcknowledgeType.ACCEPT
    ) -> None:
        """Acknowledge rows returned by :meth:`poll_arrow` (explicit mode only)."""
        self._core.acknowledge_arrow(batch, type)

    async def commit_sync(
        self, timeout: float | None = None
    ) -> dict[TopicIdPartition, KafkaError | None]:
        """As :meth:`MockShareConsumer.commit_sync`."""
        return self._core.commit_sync(timeout)

    def commit_async(self) -> None:
        """Send pending acknowledgements; results reach the callback at the next call."""
        self._core.commit_async()

    def set_acknowledgement_commit_callback(
        self, callback: AcknowledgementCommitCallback | None
    ) -> None:
        """Set (or clear with ``None``) the acknowledgement commit callback."""
        self._core.set_callback(callback)

    def wakeup(self) -> None:
        """Make the next (or current) ``poll`` or ``commit_sync`` raise ``WakeupError``."""
        self._core.wakeup_requested = True

    async def close(self, timeout: float | None = None) -> None:
        """As :meth:`MockShareConsumer.close`."""
        self._core.close(timeout)

    @property
    def blocked_loop_max_ms(self) -> int:
        """Always 0: the mock never blocks the loop."""
        return 0


def _repr(facade: str, core: _MockCore[Any, Any]) -> str:
    return (
        f"{facade}(client_id={core.client_id!r}, group_id={core.config.group_id!r}, "
        f"state={core.state})"
    )
