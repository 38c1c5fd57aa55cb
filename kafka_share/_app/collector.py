"""Turn completed fetches into the records one ``poll`` returns.

Application thread only (Java's ``ShareFetchCollector`` + ``ShareCompletedFetch``).
A completed fetch is decoded once, when first reached: every batch is walked
against the acquired offset ranges (:mod:`kafka_share.share.acquired`), which
yields the records to deliver with their delivery counts, and the acquired
offsets without a record (GAP acknowledgements, sent with the next acks).
Records are then handed out in offset order, at most ``max.poll.records`` per
poll, and deserialized as they are handed out.

Poison records:

* A deserializer that raises: the records before it are returned and
  :class:`RecordDeserializationError` is raised by this poll when nothing
  precedes it, else by the next one. The offending offset joins the in-flight
  batch as a failed offset with the default RELEASE (so it is redelivered until
  the delivery limit archives it); the default is applied only after the
  application has seen the error (the poll or commit after it), so in explicit
  mode it may REJECT it by coordinates meanwhile.
* A batch that fails its CRC (``check.crcs``) or cannot be decoded: its acquired
  offsets join the batch the same way, with the default REJECT, when delivery
  reaches the batch and a ``CorruptRecordError`` is reported.
"""

from __future__ import annotations

import itertools
import logging
import operator
import time
from collections import deque
from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING, Any, Generic, TypeVar

import attrs

from kafka_share._app.in_flight import InFlightBatch
from kafka_share._handoff.events import CompletedShareFetch
from kafka_share._handoff.fetch_buffer import FetchBuffer
from kafka_share._log import Logger
from kafka_share.errors import (
    CorruptMessageError,
    CorruptRecordError,
    KafkaError,
    RecordDeserializationError,
)
from kafka_share.models import (
    AcknowledgeType,
    ConsumerRecord,
    ConsumerRecords,
    TopicIdPartition,
)
from kafka_share.records.batch import CorruptBatchError, RecordBatch, RecordShape, iter_batches
from kafka_share.share.acquired import AcquiredCursor, AcquiredRecords
from kafka_share.share.held import held_ranges_without
from kafka_share.share.results import LocksLost

if TYPE_CHECKING:
    from kafka_share.metrics import ShareConsumerMetrics

__all__ = ["CollectResult", "FetchCollector"]

K = TypeVar("K")
V = TypeVar("V")

Deserializer = Callable[[bytes], Any]

log = logging.getLogger("kafka_share.consumer")


def _monotonic_ms() -> int:
    # The clock the network thread stamps responses with (lock_expires_ms).
    return time.monotonic_ns() // 1_000_000

# (offset, timestamp, key, value, headers, delivery_count, leader_epoch, timestamp_type)


@attrs.define
class CollectResult(Generic[K, V]):
    records: ConsumerRecords[K, V]
    #: raised by this poll if ``records`` is empty, else by the next one
    error: KafkaError | None = None
    acquisition_lock_timeout_ms: int | None = None
    #: serialized key + value bytes of ``records`` (for the bytes-consumed metric)
    size_bytes: int = 0


_OFFSET_FIELD = operator.itemgetter(2)
_KEY_SIZE_FIELD = operator.itemgetter(10)
_VALUE_SIZE_FIELD = operator.itemgetter(11)


#: Row decoding goes a piece of about this many records at a time, as delivery
#: needs them (about 1 ms of CPU each for small records). A record then lives
#: from the poll that returns it, not from its fetch's arrival: most die before
#: the cyclic garbage collector's first look at them (a young generation of 700
#: allocations), which over a whole decoded response cost ~0.25 µs per record.
#: A record batch larger than this is decoded in pieces this big.
_DECODE_CHUNK_RECORDS = 500
#: the decoder of a fetch whose decoder raised: see FetchCollector._decode_more
_RESUME: Iterator[int] = iter(())


def _record_count(pieces: list[Any]) -> int:
    """Records in columnar pieces."""
    return sum(piece.count for piece in pieces)


def _payload_size(records: list[Any]) -> int:
    """Key + value bytes of ConsumerRecord tuples (a null counts as 0)."""
    keys: list[int] = list(map(_KEY_SIZE_FIELD, records))
    values: list[int] = list(map(_VALUE_SIZE_FIELD, records))
    # Null keys/values carry size -1; count them back to 0 (all loops in C).
    return sum(keys) + sum(values) + keys.count(-1) + values.count(-1)


def columnar_helpers() -> Any:
    """The columnar-mode (``poll_arrow``) helpers, :mod:`kafka_share._app.columnar`,
    imported on first use: they need pyarrow and numpy (the ``arrow`` extra)."""
    from kafka_share._app import columnar  # noqa: PLC0415

    return columnar


_columnar = columnar_helpers

#: batches of at least this many records are decoded through numpy when it is
#: installed (below it the fixed cost of the vectorised decoder, ~70 µs, does
#: not pay), if their records average less than _COLUMNAR_MAX_RECORD_BYTES
#: (above, copying the values dominates and the row decoder is as fast)
_COLUMNAR_MIN_RECORDS = 64
_COLUMNAR_MAX_RECORD_BYTES = 4096


def vectorised_rows() -> Any:
    """:mod:`kafka_share.records.columnar` if numpy and pyarrow are installed, else
    None; imported once (about 0.1 s of CPU), by the first consumer created, so
    that no poll pays for it."""
    global _VECTORISED
    if _VECTORISED is False:
        try:
            from kafka_share.records import columnar  # noqa: PLC0415
        except ImportError:
            _VECTORISED = None
        else:
            _VECTORISED = columnar
    return _VECTORISED


_VECTORISED: Any = False


def _acquired_count(fetch: CompletedShareFetch) -> int:
    return sum(last - first + 1 for first, last, _ in fetch.acquired)


class _Walk:
    """What a decoder found in a fetch since its last hand-over to delivery
    (see :meth:`FetchCollector._acquired_batches`), and the decoding's state at
    that hand-over.

    A decoder is only ever suspended right after a hand-over, so delivery sees
    nothing else; if it raises instead (a ``KeyboardInterrupt`` half way through
    a piece), :meth:`roll_back` returns the fetch to its last hand-over and a new
    decoder goes on from there: nothing is lost or found twice.
    """

    __slots__ = ("_saved", "cursor", "data", "errors", "gaps", "handed_over", "size")

    def __init__(self, data: _PartitionData, cursor: AcquiredCursor) -> None:
        self.data = data
        self.cursor = cursor
        #: acquired offsets found without a record (GAP acknowledgements)
        self.gaps: list[int] = []
        #: payload bytes of the records found
        self.size = 0
        #: errors found, by the index in ``pending`` where delivery reports them
        #: (see _report_at)
        self.errors: dict[int, tuple[KafkaError, list[int]]] = {}
        #: len(data.pending) at the last hand-over (it starts empty)
        self.handed_over = 0
        self._saved = cursor.state()

    def hand_over(self) -> int:
        """Pass what was found since the last hand-over on to delivery (its payload
        bytes, GAPs and errors); returns how many records that was."""
        data = self.data
        # Everything that calls anything first (an exception can come from any
        # call); then plain stores only, so a hand-over happens whole or not at all.
        saved = self.cursor.state()
        handed_over = len(data.pending)
        gaps = data.gaps + self.gaps if self.gaps else data.gaps
        errors_at = data.errors_at
        if self.errors:
            errors_at = dict(errors_at)
            for index, (error, rejects) in self.errors.items():
                # Two corrupt batches in a row share the place: the first error,
                # every offset.
                earlier = errors_at.get(index)
                errors_at[index] = (
                    (earlier[0], earlier[1] + rejects) if earlier is not None
                    else (error, rejects)
                )
        found = handed_over - self.handed_over
        bytes_left = data.bytes_left + self.size
        data.gaps = gaps
        data.errors_at = errors_at
        data.bytes_left = bytes_left
        self.handed_over = handed_over
        self._saved = saved
        self.size = 0
        self.errors = {}
        del self.gaps[:]  # the same list: the decoders hold it
        return found

    def roll_back(self) -> None:
        """Forget what was found since the last hand-over."""
        data = self.data
        if isinstance(data.pending, list):
            del data.pending[self.handed_over :]
        else:
            data.pending.truncate(self.handed_over)
        self.size = 0
        self.gaps.clear()
        self.errors.clear()
        self.cursor.restore(self._saved)

    def finish(self) -> None:
        """Hand over the rest: the decoding is complete."""
        self.cursor.finish(self.gaps)
        self.hand_over()


class _PartitionData:
    """One completed fetch, decoded, with a cursor over its deliverable records."""

    __slots__ = (
        "acquired_count",
        "bytes_left",
        "decoder",
        "errors_at",
        "fetch",
        "gaps",
        "generation",
        "lock_expires_ms",
        "lock_timeout_ms",
        "next_index",
        "node_id",
        "partition",
        "pending",
        "walk",
    )

    def __init__(self, fetch: CompletedShareFetch) -> None:
        self.acquired_count = _acquired_count(fetch)
        self.partition = fetch.partition
        self.node_id = fetch.node_id
        self.generation = fetch.session_generation
        self.lock_timeout_ms = fetch.acquisition_lock_timeout_ms
        self.lock_expires_ms = fetch.lock_expires_ms
        #: records as decoded (key and value still bytes), in offset order; in
        #: columnar mode a ColumnarPending (pieces of columns, indexed the same way)
        self.pending: Any = []
        #: key + value bytes of the records not delivered yet (bytes-consumed metric)
        self.bytes_left = 0
        #: index in ``pending`` -> error to report when delivery reaches it, and
        #: the acquired offsets it REJECTs (they join the in-flight batch then)
        self.errors_at: dict[int, tuple[KafkaError, list[int]]] = {}
        #: acquired offsets without a record, for the in-flight batch once this
        #: fetch's delivery starts (not at decoding: see FetchCollector.collect)
        self.gaps: list[int] = []
        self.next_index = 0
        #: the decoder of the batches not decoded yet (None: done), and the fetch
        #: and walk it goes on from (see _Walk)
        self.decoder: Iterator[int] | None = None
        self.fetch: CompletedShareFetch | None = None
        self.walk: _Walk | None = None

    @property
    def undelivered(self) -> int:
        return len(self.pending) - self.next_index

    @property
    def exhausted(self) -> bool:
        return (
            self.decoder is None
            and self.next_index >= len(self.pending)
            and not any(i >= self.next_index for i in self.errors_at)
        )


class FetchCollector(Generic[K, V]):
    def __init__(
        self,
        *,
        buffer: FetchBuffer[CompletedShareFetch],
        in_flight: InFlightBatch,
        key_deserializer: Deserializer | None,
        value_deserializer: Deserializer | None,
        check_crcs: bool,
        max_poll_records: int,
        sliced_decoding: bool = False,
        vectorised: bool = True,
        metrics: ShareConsumerMetrics | None = None,
        drop_expired: bool = True,
        clock: Callable[[], int] = _monotonic_ms,
        logger: Logger | None = None,
    ) -> None:
        self._buffer = buffer
        #: decode about _DECODE_CHUNK_RECORDS per collect call at most, handing
        #: over each record batch as it is decoded: an event loop must not stop
        #: for a whole large response at once. (Row decoding always goes a piece
        #: at a time, as far as delivery needs; see _DECODE_CHUNK_RECORDS.)
        self._sliced = sliced_decoding
        #: decoding slices run so far (a caller sees progress without records)
        self.decode_steps = 0
        self._metrics = metrics
        #: drop records whose lock ran out before delivery (off under share.auto.renew:
        #: the network thread renews them, and reports those it gives up on)
        self._drop_expired = drop_expired
        #: records whose lock ends within this many ms are not handed out either
        #: (the consumer sets it per poll: FetchAheadPolicy.hand_out_margin_ms)
        self.expiry_margin_ms = 0.0
        self._clock = clock
        #: the consumer's logger (its identity on every line), once it has one
        self.log: Logger = logger or log
        self._in_flight = in_flight
        self._key_deserializer = key_deserializer
        self._value_deserializer = value_deserializer
        self._check_crcs = check_crcs
        self._max_poll_records = max_poll_records
        #: decoded fetches with records still to deliver; the first is being delivered
        self._decoded: deque[_PartitionData] = deque()
        #: decode into columns for ``poll_arrow`` instead of one ConsumerRecord per
        #: record (set once, before the first collect: the consumer never mixes them)
        self.columnar = False
        #: numpy-backed row decoding (kafka_share.records.columnar), or None (not
        #: installed, or record.decoder=python: then numpy is not even imported)
        self._vectorised = vectorised_rows() if vectorised else None

    def drop_stale(self, node_id: int, generation: int) -> int:
        """Drop fetched records of ``node_id``'s share sessions older than
        ``generation`` that were not handed out yet: their locks went with the
        session (the broker delivers them again). Returns how many fetches."""

        def stale(source: int, source_generation: int) -> bool:
            return source == node_id and source_generation < generation

        records = 0
        kept: deque[_PartitionData] = deque()
        for d in self._decoded:
            if stale(d.node_id, d.generation):
                self._decode_rest(d)
                records += d.undelivered
            else:
                kept.append(d)
        dropped = len(self._decoded) - len(kept)
        self._decoded = kept

        def stale_fetch(f: CompletedShareFetch) -> bool:
            nonlocal records
            if stale(f.node_id, f.session_generation):
                records += _acquired_count(f)
                return True
            return False

        dropped += self._buffer.remove_if(stale_fetch)
        if records:
            self.log.debug(
                "dropped %d buffered record(s) from node %s: their share session was "
                "lost, so the broker released them", records, node_id,
            )
            if self._metrics is not None:
                self._metrics.record_dropped("session-lost", records, self._clock())
        return dropped

    def drop_lost(self, lost: LocksLost) -> int:
        """Drop buffered records whose lock auto-renewal gave up on (see
        :class:`~kafka_share.share.results.LocksLost`). Returns how many."""
        offsets = lost.offsets
        dropped = 0

        def mine(tip: TopicIdPartition, node_id: int, generation: int) -> bool:
            return (tip == lost.partition and node_id == lost.node_id
                    and generation == lost.generation)

        for d in self._decoded:
            if not mine(d.partition, d.node_id, d.generation):
                continue
            # Records of the offsets may still be in batches not decoded yet.
            self._decode_rest(d)
            dropped += _drop_offsets(d, offsets)
            d.gaps = [g for g in d.gaps if g not in offsets]

        def change(f: CompletedShareFetch) -> CompletedShareFetch | None:
            nonlocal dropped
            if not mine(f.partition, f.node_id, f.session_generation):
                return f
            before = _acquired_count(f)
            ranges = [
                r for first, last, count in f.acquired
                for r in held_ranges_without(first, last, count, offsets)
            ]
            f.acquired = ranges
            dropped += before - _acquired_count(f)
            return f if ranges else None

        self._buffer.replace_each(change)
        self._decoded = deque(d for d in self._decoded if not d.exhausted or d.gaps)
        self._count_expired(dropped, lost.partition, "their lock renewal ended")
        return dropped

    def _count_expired(self, records: int, tip: TopicIdPartition, why: str) -> None:
        if records:
            self.log.debug(
                "dropped %d buffered record(s) of %s-%s whose acquisition lock ran out "
                "(%s): the broker delivers them again", records, tip.topic, tip.partition, why,
            )
            if self._metrics is not None:
                self._metrics.record_dropped("lock-expired", records, self._clock())

    def has_buffered(self) -> bool:
        return bool(self._decoded) or not self._buffer.is_empty()

    def delivering(self) -> object | None:
        """An opaque token for the fetch being delivered (None: no such fetch)."""
        return self._decoded[0] if self._decoded else None

    def delivering_acquired(self) -> int | None:
        """How many records the fetch being delivered acquired (None: no such fetch).

        The broker counts a partition's in-flight records from its oldest
        unacknowledged one, so until that fetch is fully acknowledged this is
        roughly what it holds of the partition's record-lock limit.
        """
        return self._decoded[0].acquired_count if self._decoded else None

    # Size rules waived for now: not split yet (issue 28:
    # the collector into decoding and delivery policy).
    def collect(  # noqa: PLR0912, PLR0915
        self, on_drained: Callable[[int, int], None] | None = None, *, limit: int | None = None
    ) -> CollectResult[K, V]:
        """Take up to ``max.poll.records`` records (or ``limit``, if fewer) from the
        buffered fetches.

        ``on_drained(acquired, size)`` is called (at most once) when this takes
        the last queued fetch, before decoding it: the moment to ask for the next
        response, so the broker works while this thread decodes and the
        application processes. ``acquired`` is the taken fetch's record count,
        ``size`` the bytes of its records section.

        The poll is atomic: if anything raises (a ``KeyboardInterrupt`` in a
        deserializer, ...), every fetch this call touched goes back to where it
        was, and no record of this call is in the in-flight batch, so none is
        acknowledged without the application having seen it.
        """
        out: dict[TopicIdPartition, list[ConsumerRecord[K, V]]] = {}
        budget = self._max_poll_records if limit is None else min(limit, self._max_poll_records)
        size = 0
        lock_timeout: int | None = None
        error: KafkaError | None = None
        decoded = self._decoded
        #: (fetch, next_index, bytes_left) of every fetch touched, as it was
        touched: list[tuple[_PartitionData, int, int]] = []
        delivered: list[tuple[_PartitionData, list[ConsumerRecord[Any, Any]]]] = []
        #: the node each partition's records come from in this poll
        nodes: dict[TopicIdPartition, tuple[int, int]] = {}
        fetch: CompletedShareFetch | None = None
        now_ms = self._clock() if self._drop_expired else 0
        #: records decoded in this call (sliced decoding; a slice counts 1 at least)
        decoded_now = 0
        try:
            while budget > 0 and error is None:
                if not decoded:
                    fetch = self._buffer.take()
                    if fetch is None:
                        break
                    if self._expired(fetch.lock_expires_ms, now_ms):
                        self._count_expired(
                            _acquired_count(fetch), fetch.partition, "before decoding"
                        )
                        fetch = None
                        continue
                    if on_drained is not None and self._buffer.is_empty():
                        hook, on_drained = on_drained, None
                        hook(_acquired_count(fetch), len(fetch.records))
                    decoded.append(self._decode(fetch))
                    fetch = None
                data = decoded[0]
                tip = data.partition
                if self._expired(data.lock_expires_ms, now_ms):
                    # Its lock ran out while it waited here (or ends before the
                    # application could acknowledge them): the broker makes these
                    # records available again (probably to another consumer).
                    # Handing them out would have them worked on twice, and their
                    # acknowledgements (GAPs included) would fail.
                    self._decode_rest(data)
                    self._count_expired(data.undelivered, tip, "while buffered")
                    decoded.popleft()
                    continue
                holder = nodes.get(tip)
                if holder is None:
                    holder = self._in_flight.source_of(tip)
                if holder is not None and holder != (data.node_id, data.generation):
                    # The partition's records come from a new node (its leader
                    # moved) while the old node's are still in flight: this
                    # fetch waits for a later poll, once the batch no longer
                    # holds anything of the old node (its acks must go there).
                    break
                nodes[tip] = (data.node_id, data.generation)
                if data.decoder is not None and len(data.pending) - data.next_index < budget:
                    if self._sliced and decoded_now >= _DECODE_CHUNK_RECORDS:
                        break  # enough for one call: the caller yields, then asks again
                    decoded_now += max(1, self._decode_more(data))
                if data.gaps:
                    self._in_flight.add_gaps(tip, data.node_id, data.gaps, data.generation)
                    data.gaps = []
                if not touched or touched[-1][0] is not data:
                    # The first touch only: it is what an exception restores.
                    touched.append((data, data.next_index, data.bytes_left))
                if data.lock_timeout_ms is not None:
                    lock_timeout = data.lock_timeout_ms
                records, error, delivered_bytes = self._deliver(data, budget)
                size += delivered_bytes
                if records:
                    out.setdefault(data.partition, []).extend(records)
                    delivered.append((data, records))
                    budget -= _record_count(records) if self.columnar else len(records)
                if data.exhausted:
                    decoded.popleft()
        except BaseException:
            if fetch is not None:
                self._buffer.push_front(fetch)  # not lost: the next poll takes it
            if touched and decoded and decoded[0] is touched[-1][0]:
                decoded.popleft()
            for data, next_index, bytes_left in reversed(touched):
                data.next_index = next_index
                data.bytes_left = bytes_left
                decoded.appendleft(data)
            raise
        if self.columnar:
            for data, pieces in delivered:
                self._in_flight.add_rows(data.partition, data.node_id, pieces, data.generation)
            return CollectResult(_columnar().ColumnarRecords(out), error, lock_timeout, size)
        add_records = self._in_flight.add_records
        for data, records in delivered:
            add_records(data.partition, data.node_id, records, data.generation)
        for data, start, _ in touched:
            # The fetch lets go of what it delivered (only now: a poll that raised
            # delivers it again), so those records die with the application's
            # references, young (see _DECODE_CHUNK_RECORDS).
            if data.next_index > start:
                data.pending[start : data.next_index] = [None] * (data.next_index - start)
        return CollectResult(ConsumerRecords(out), error, lock_timeout, size)

    def _expired(self, lock_expires_ms: int | None, now_ms: int) -> bool:
        """Whether a record's lock has run out, or ends too soon for the
        application to process and acknowledge it (``expiry_margin_ms``)."""
        return (
            self._drop_expired and lock_expires_ms is not None
            and now_ms + self.expiry_margin_ms >= lock_expires_ms
        )

    # -- decoding --------------------------------------------------------------

    def _decode(self, fetch: CompletedShareFetch) -> _PartitionData:
        data = _PartitionData(fetch)
        acquired = AcquiredRecords.from_ranges(fetch.acquired)
        if not acquired:
            return data
        if self.columnar:
            data.pending = _columnar().ColumnarPending()
        data.fetch = fetch
        data.walk = _Walk(data, acquired.cursor())
        data.decoder = self._decoder(data)
        if self.columnar and not self._sliced:
            self._decode_more(data)  # all of it
        # Rows: the collect loop decodes each piece when delivery reaches it.
        return data

    def _decode_rest(self, data: _PartitionData) -> None:
        """Finish a fetch decoded in slices, before its records are dropped or
        counted (a rare path, so the decoding cost does not matter)."""
        while data.decoder is not None:
            self._decode_more(data)

    def _decode_more(self, data: _PartitionData) -> int:
        """Decode the next piece of ``data`` (columnar and not sliced: all of
        it); returns how many records that piece held."""
        assert data.decoder is not None
        self.decode_steps += 1
        if data.decoder is _RESUME:
            assert data.walk is not None
            data.walk.roll_back()  # idempotent
            data.decoder = self._decoder(data)
        try:
            return next(data.decoder)
        except StopIteration:
            data.decoder = data.fetch = data.walk = None
            return 0
        except BaseException:
            # A generator that raised cannot go on: the next call rolls back to the
            # last hand-over and a new one goes on from there (there, not here: a
            # second interrupt during the roll-back only means doing it again).
            data.decoder = _RESUME
            raise

    def _decoder(self, data: _PartitionData) -> Iterator[int]:
        """A decoder of ``data.fetch`` from where ``data.walk`` is."""
        assert data.fetch is not None and data.walk is not None
        if self.columnar:
            return self._decoding_columns(data, data.fetch, data.walk)
        return self._decoding(data, data.fetch, data.walk)

    # Size rules waived for now: not split yet (issue 28:
    # the collector into decoding and delivery policy).
    def _decoding(  # noqa: PLR0912, PLR0915
        self, data: _PartitionData, fetch: CompletedShareFetch, walk: _Walk
    ) -> Iterator[int]:
        """Decode ``fetch`` into ``data`` a piece at a time: yield how many records
        were found each time at least _DECODE_CHUNK_RECORDS are (in sliced mode,
        after each batch and each piece of a large one).

        A batch inside one acquired range (the common case) is decoded in pieces,
        each handed over once its offsets check out. A piece whose offsets are out
        of order or outside the batch (a broken batch that passed its CRC) sends
        the rest of the batch through matching one record at a time; a record that
        cannot be decoded rejects the acquired offsets of the batch from the
        piece it is in (the pieces before it may have been delivered already).
        """
        tip = fetch.partition
        sliced = self._sliced
        cursor = walk.cursor
        gaps = walk.gaps
        pending = data.pending
        take = cursor.take
        take_span = cursor.take_span
        new: Any = tuple.__new__
        record_type = ConsumerRecord
        topic, partition = tip.topic, tip.partition
        for batch in self._acquired_batches(data, fetch, cursor, walk):
            if isinstance(batch, int):
                yield batch  # a slice handed over
                continue
            epoch = batch.partition_leader_epoch
            leader_epoch = epoch if epoch >= 0 else None
            ts_type = batch.timestamp_type
            # Each record is built once, here, as the ConsumerRecord handed out.
            # Without deserializers delivery is then just a slice of this list.
            base, last = batch.base_offset, batch.last_offset
            span_count = (
                cursor.span_count(base, last) if batch.magic >= 2 else None
            )
            if span_count is not None:
                # The common case: the whole batch lies in one acquired range, so
                # every record has that range's delivery count and the decoder
                # builds the ConsumerRecords itself.
                shape = RecordShape(
                    record_type, topic, partition, ts_type, leader_epoch, span_count
                )
                prev = base - 1  # the batch's last offset handed over so far
                try:
                    vectorised = (
                        self._vectorised if batch.record_count >= _COLUMNAR_MIN_RECORDS
                        and batch.size_in_bytes < batch.record_count * _COLUMNAR_MAX_RECORD_BYTES
                        else None
                    )
                    if vectorised is not None:
                        chunks = vectorised.shaped_record_chunks(
                            batch, shape, _DECODE_CHUNK_RECORDS
                        )
                    elif batch.record_count > _DECODE_CHUNK_RECORDS:
                        chunks = batch.shaped_record_chunks(shape, _DECODE_CHUNK_RECORDS)
                    else:
                        chunks = _whole(batch, shape)
                    broken = False
                    for shaped in chunks:
                        if not shaped:
                            continue
                        offsets = list(map(_OFFSET_FIELD, shaped))
                        top = offsets[-1]
                        if not (
                            offsets[0] > prev and top <= last
                            and all(map(operator.lt, offsets, itertools.islice(offsets, 1, None)))
                        ):
                            broken = True
                            break
                        take_span(prev + 1, top, gaps)
                        if len(offsets) != top - prev:
                            # Offsets of the batch without a record (compaction) are gaps.
                            present = set(offsets)
                            gaps.extend(o for o in range(prev + 1, top + 1) if o not in present)
                        prev = top
                        pending.extend(shaped)
                        walk.size += _payload_size(shaped)
                        if sliced or len(pending) - walk.handed_over >= _DECODE_CHUNK_RECORDS:
                            del shaped, offsets  # not held while suspended
                            yield walk.hand_over()  # a piece for delivery
                except CorruptBatchError as exc:
                    self._reject_batch(walk, exc)
                    continue
                if not broken:
                    if prev < last:
                        take_span(prev + 1, last, gaps)
                        gaps.extend(range(prev + 1, last + 1))
                    continue
                # Offsets out of order or outside the batch header's range (a
                # broken batch that passed its CRC): match them one by one.
            try:
                records = batch.records()
            except CorruptBatchError as exc:
                self._reject_batch(walk, exc)
                continue
            # tuple.__new__ skips NamedTuple's Python-level __new__.
            first_new = len(pending)
            # Records of this batch handed over already are behind the cursor:
            # take() skips them.
            for offset, timestamp, key, value, headers in records:
                count = take(offset, gaps)
                if count is None:
                    continue  # not acquired by us
                pending.append(new(record_type, (
                    topic, partition, offset, timestamp, ts_type, key, value, headers,
                    leader_epoch, count,
                    -1 if key is None else len(key), -1 if value is None else len(value),
                )))
            walk.size += _payload_size(pending[first_new:])
        walk.finish()

    def _decoding_columns(
        self, data: _PartitionData, fetch: CompletedShareFetch, walk: _Walk
    ) -> Iterator[int]:
        """:meth:`_decoding` for columnar mode: each record batch becomes a
        :class:`~kafka_share._app.columnar.Piece` of columns, decoded without a
        Python object per record; in sliced mode it yields after each batch."""
        columnar = _columnar()
        np = columnar.np
        piece_type = columnar.Piece
        cursor = walk.cursor
        gaps = walk.gaps
        pending = data.pending
        for batch in self._acquired_batches(data, fetch, cursor, walk):
            if isinstance(batch, int):
                yield batch  # a slice handed over
                continue
            ts_type = int(batch.timestamp_type)
            base, last = batch.base_offset, batch.last_offset
            try:
                columns = columnar.decode_columns(batch)  # legacy batches too
            except CorruptBatchError as exc:
                self._reject_batch(walk, exc)
                continue
            offsets = columns.offsets
            span_count = cursor.span_count(base, last) if batch.magic >= 2 else None
            ordered = columns.count == 0 or (
                offsets[0] >= base and offsets[-1] <= last
                and bool(np.all(offsets[1:] > offsets[:-1]))
            )
            if span_count is not None and ordered:
                # The common case: the whole batch in one acquired range.
                cursor.take_span(base, last, gaps)
                if columns.count != last - base + 1:
                    present = set(offsets.tolist())
                    gaps.extend(o for o in range(base, last + 1) if o not in present)
                piece = piece_type(
                    columns, np.full(columns.count, span_count, dtype=np.int32), ts_type
                )
            else:
                matched = (_match_runs(np, offsets, cursor, gaps) if ordered
                           else _match_each(np, offsets, cursor, gaps))
                if matched is None:
                    continue
                keep, counts = matched
                piece = piece_type(columns.take(keep), counts, ts_type)
            pending.append(piece)
            walk.size += piece.payload_size()
        walk.finish()

    def _acquired_batches(
        self, data: _PartitionData, fetch: CompletedShareFetch, cursor: Any, walk: _Walk
    ) -> Iterator[RecordBatch | int]:
        """The data batches of ``fetch`` that hold offsets at or after the cursor,
        for both decoders. A corrupt batch's acquired records are rejected; lost
        framing rejects all the rest; control batches are skipped (their acquired
        offsets become GAPs as the cursor passes them).

        In sliced mode, before reading each next batch, it hands over what the
        decoder found since the last hand-over (see :class:`_Walk`) and yields
        how many records that was, an ``int``, for the decoder to pass on; row
        decoding otherwise does so once a piece's worth has been found
        (_DECODE_CHUNK_RECORDS).
        """
        sliced = self._sliced
        # Rows hand over a piece at a time, also what the one-by-one path found.
        piece = 1 if sliced else _DECODE_CHUNK_RECORDS if not self.columnar else None
        pending = data.pending
        batches = iter_batches(fetch.records, check_crcs=self._check_crcs)
        while True:
            if piece is not None and (
                len(pending) - walk.handed_over >= piece or (sliced and walk.gaps)
            ):
                # A slice is done: hand over what it found, let delivery go on.
                yield walk.hand_over()
            try:
                batch = next(batches)
            except StopIteration:
                return
            except CorruptBatchError as exc:
                self._reject_batch(walk, exc)
                continue
            except CorruptMessageError as exc:
                # Framing is lost: nothing after this point can be trusted, so the
                # rest of what we acquired is rejected rather than left locked.
                tip = fetch.partition
                first = cursor.next_offset
                rest: list[int] = []
                cursor.finish(rest)
                _report_at(walk, CorruptRecordError(
                    f"Record batch for partition {tip.topic}-{tip.partition} at offset "
                    f"{first} is corrupt and its acquired records are rejected: {exc}"
                ), rest)
                return
            next_offset = cursor.next_offset
            if next_offset is None:
                return
            if batch.last_offset < next_offset or batch.is_control:
                continue
            yield batch

    def _reject_batch(self, walk: _Walk, exc: CorruptBatchError) -> None:
        cursor = walk.cursor
        cursor.drain_before(exc.base_offset, walk.gaps)
        rejects: list[int] = []
        cursor.drain_before(exc.last_offset + 1, rejects)
        if not rejects:
            return  # nothing of that batch was acquired by us: not our problem
        tip = walk.data.partition
        _report_at(walk, CorruptRecordError(
            f"Record batch for partition {tip.topic}-{tip.partition} at offset "
            f"{exc.base_offset} is invalid and its acquired records are rejected: {exc}"
        ), rejects)

    # -- delivery ----------------------------------------------------------------

    def _deliver(
        self, data: _PartitionData, budget: int
    ) -> tuple[list[ConsumerRecord[K, V]], KafkaError | None, int]:
        """Up to ``budget`` records from ``data``; stops at a recorded error or a
        deserializer failure, which is returned with the records before it."""
        pending = data.pending
        errors_at = data.errors_at
        start = i = data.next_index
        stop = min(len(pending), i + budget)
        if errors_at:
            stop = min(stop, min((k for k in errors_at if k >= i), default=stop))
        kd, vd = self._key_deserializer, self._value_deserializer
        out: list[Any]
        error: KafkaError | None = None
        if self.columnar:
            out = pending.rows(i, stop)  # no deserializers in columnar mode
            i = stop
        elif kd is None and vd is None:
            out = pending[i:stop]
            i = stop
        else:
            out = []
            new: Any = tuple.__new__
            record_type = ConsumerRecord
            while i < stop:
                r = pending[i]
                key, value = r[5], r[6]
                try:
                    k = kd(key) if kd is not None and key is not None else key
                except Exception as exc:
                    error = self._poison(data, r, exc, is_key=True)
                    i += 1
                    break
                try:
                    v = vd(value) if vd is not None and value is not None else value
                except Exception as exc:
                    error = self._poison(data, r, exc, is_key=False)
                    i += 1
                    break
                out.append(new(record_type, (*r[:5], k, v, *r[7:])))
                i += 1
        if error is None and i in errors_at:
            error, rejects = errors_at.pop(i)
            # Reported now: from here the application may override the REJECT.
            self._in_flight.add_failed(
                data.partition, data.node_id, rejects, AcknowledgeType.REJECT, data.generation
            )
        data.next_index = i
        # Attribute the fetch's bytes to deliveries in proportion, exactly in total.
        remaining = len(pending) - start
        size = data.bytes_left * (i - start) // remaining if remaining > 0 else 0
        data.bytes_left -= size
        return out, error, size

    def _poison(
        self, data: _PartitionData, record: ConsumerRecord[Any, Any], exc: Exception, *,
        is_key: bool,
    ) -> RecordDeserializationError:
        offset, key, value = record.offset, record.key, record.value
        tip = data.partition
        self._in_flight.add_failed(
            tip, data.node_id, [offset], AcknowledgeType.RELEASE, data.generation
        )
        what = "key" if is_key else "value"
        err = RecordDeserializationError(
            f"Error deserializing {what} for partition {tip.topic}-{tip.partition} at offset "
            f"{offset}: {type(exc).__name__}: {exc}. Unless acknowledged with "
            "acknowledge_offset() (explicit mode), it is released by the next poll or commit.",
            topic=tip.topic,
            partition=tip.partition,
            offset=offset,
            key=key,
            value=value,
            is_key=is_key,
        )
        err.__cause__ = exc
        return err


def _whole(batch: RecordBatch, shape: RecordShape) -> Iterator[list[Any]]:
    """The whole batch as one piece; unlike ``iter((piece,))``, the suspended
    generator holds no reference to the piece it handed out."""
    yield batch.shaped_records(shape)


def _report_at(walk: _Walk, error: KafkaError, rejects: list[int]) -> None:
    """Report ``error`` when delivery reaches the current end of ``pending``
    (from the next hand-over on); two corrupt batches in a row share the place:
    the first error, every offset."""
    index = len(walk.data.pending)
    earlier = walk.errors.get(index)
    if earlier is not None:
        earlier[1].extend(rejects)
    else:
        walk.errors[index] = (error, rejects)


def _drop_offsets(data: _PartitionData, offsets: frozenset[int]) -> int:
    """Remove the undelivered records of ``data`` at ``offsets``; returns how many
    (errors recorded at later indices move with their records)."""
    start = data.next_index
    columnar = not isinstance(data.pending, list)
    mask: Any
    if columnar:
        mask = data.pending.removal_mask(start, offsets)
        removed = int(mask.sum())
    else:
        mask = [r[2] in offsets for r in data.pending[start:]]
        removed = sum(mask)
    if not removed:
        return 0
    if data.errors_at:
        # Re-index the errors: each moves back by the records removed before it.
        removed_before = list(itertools.accumulate(int(m) for m in mask))
        data.errors_at = {
            (i - removed_before[i - start - 1] if i > start else i): e
            for i, e in data.errors_at.items()
        }
    if columnar:
        data.pending.remove(start, mask)
    else:
        data.pending[start:] = [
            r for r, drop in zip(data.pending[start:], mask, strict=True) if not drop
        ]
    return removed


def _match_runs(np: Any, offsets: Any, cursor: Any, gaps: list[int]) -> tuple[Any, Any] | None:
    """The rows of a batch (ascending ``offsets``) inside the acquired ranges, as
    (row indices, delivery counts), found per acquired run rather than per
    record: a batch cut by a fetch's record limit (``record_limit``, or the
    broker's lock limit) or partly delivered by an earlier fetch. None: no row."""
    if not len(offsets):
        return None
    rows: list[Any] = []
    counts: list[Any] = []
    for lo, hi, count in cursor.take_through(int(offsets[-1])):
        i = int(np.searchsorted(offsets, lo, "left"))
        j = int(np.searchsorted(offsets, hi, "right"))
        if j - i != hi - lo + 1:  # acquired offsets with no record (compaction)
            present = set(offsets[i:j].tolist())
            gaps.extend(o for o in range(lo, hi + 1) if o not in present)
        if j > i:
            rows.append(np.arange(i, j, dtype=np.int64))
            counts.append(np.full(j - i, count, dtype=np.int32))
    if not rows:
        return None
    return np.concatenate(rows), np.concatenate(counts)


def _match_each(np: Any, offsets: Any, cursor: Any, gaps: list[int]) -> tuple[Any, Any] | None:
    """:func:`_match_runs` for a broken batch whose offsets do not ascend: one
    record at a time, as in row mode."""
    keep: list[int] = []
    counts: list[int] = []
    for i, offset in enumerate(offsets.tolist()):
        count = cursor.take(offset, gaps)
        if count is not None:
            keep.append(i)
            counts.append(count)
    if not keep:
        return None
    return np.array(keep, dtype=np.int64), np.array(counts, dtype=np.int32)
