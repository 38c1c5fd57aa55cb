"""Turn completed fetches into the records one ``poll`` returns.

Application thread only (Java's ``ShareFetchCollector``). A completed fetch is
decoded once, when first reached, by the collector's
:class:`~kafka_share._app.decoding.FetchDecoder` (Java's ``ShareCompletedFetch``):
the records to deliver with their delivery counts, and the acquired offsets
without a record (GAP acknowledgements, sent with the next acks). Records are
then handed out in offset order, at most ``max.poll.records`` per poll, and
deserialized as they are handed out; not those whose lock ran out or ends too
soon, nor a partition's whose leader moved while the old leader's records are
still in flight, nor those of a lost share session.

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

import logging
import time
from collections import deque
from collections.abc import Callable, Collection
from typing import TYPE_CHECKING, Any, Generic, TypeVar

import attrs

from kafka_share._app.decoding import (
    _DECODE_CHUNK_RECORDS,
    FetchDecoder,
    PartitionData,
    _columnar,
    acquired_count,
    columnar_helpers,
    drop_offsets,
)
from kafka_share._app.in_flight import InFlightBatch
from kafka_share._handoff.events import CompletedShareFetch
from kafka_share._handoff.fetch_buffer import FetchBuffer
from kafka_share._log import Logger
from kafka_share._reprs import attrs_repr
from kafka_share.errors import KafkaError, RecordDeserializationError
from kafka_share.models import (
    AcknowledgeType,
    ConsumerRecord,
    ConsumerRecords,
    TopicIdPartition,
    TopicPartition,
)
from kafka_share.share.held import held_ranges_without
from kafka_share.share.results import LocksLost

if TYPE_CHECKING:
    from kafka_share.metrics import ShareConsumerMetrics

# columnar_helpers: re-exported, the consumers import it from here
__all__ = ["CollectResult", "DrainedHook", "FetchCollector", "columnar_helpers"]

K = TypeVar("K")
V = TypeVar("V")

Deserializer = Callable[[bytes], Any]
#: the collector's hook when it takes the last queued fetch: (acquired records,
#: records-section bytes, node id, partition, the poll holds records already)
#: -> True to leave that fetch for the next poll; see FetchCollector.collect
DrainedHook = Callable[[int, int, int, TopicIdPartition, bool], bool]

log = logging.getLogger("kafka_share.consumer")

#: How many of the last fetches taken tell which partitions a node is serving
#: (FetchCollector.has_company): with records spread over a node's partitions
#: its responses take turns among them; once the others are drained, this many
#: fetches later they no longer count.
_RECENT_FETCHES = 8


def _monotonic_ms() -> int:
    # The clock the network thread stamps responses with (lock_expires_ms).
    return time.monotonic_ns() // 1_000_000

# (offset, timestamp, key, value, headers, delivery_count, leader_epoch, timestamp_type)


@attrs_repr
@attrs.define(repr=False)
class CollectResult(Generic[K, V]):
    records: ConsumerRecords[K, V]
    #: raised by this poll if ``records`` is empty, else by the next one
    error: KafkaError | None = None
    acquisition_lock_timeout_ms: int | None = None
    #: serialized key + value bytes of ``records`` (for the bytes-consumed metric)
    size_bytes: int = 0


class _Poll(Generic[K, V]):
    """One ``collect`` call so far: what it returns, and what it puts back if it
    raises."""

    __slots__ = (
        "budget",
        "decoded_now",
        "delivered",
        "error",
        "holding",
        "lock_timeout",
        "nodes",
        "on_drained",
        "out",
        "size",
        "touched",
    )

    def __init__(self, budget: int, on_drained: DrainedHook | None, holding: bool) -> None:
        self.out: dict[TopicIdPartition, list[ConsumerRecord[K, V]]] = {}
        #: the poll holds records of an earlier call (a slice of the same poll)
        self.holding = holding
        #: records this poll may still hand out
        self.budget = budget
        #: key + value bytes of ``out``
        self.size = 0
        self.lock_timeout: int | None = None
        #: the error this poll reports (it ends the poll)
        self.error: KafkaError | None = None
        #: (fetch, next_index, bytes_left) of every fetch touched, as it was
        self.touched: list[tuple[PartitionData, int, int]] = []
        self.delivered: list[tuple[PartitionData, list[ConsumerRecord[Any, Any]]]] = []
        #: the node each partition's records come from in this poll
        self.nodes: dict[TopicIdPartition, tuple[int, int]] = {}
        #: records decoded in this call (sliced decoding; a slice counts 1 at least)
        self.decoded_now = 0
        #: called when this takes the last queued fetch; then None (at most once)
        self.on_drained = on_drained


def _record_count(pieces: list[Any]) -> int:
    """Records in columnar pieces."""
    return sum(piece.count for piece in pieces)


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
        self._fetch_decoder = FetchDecoder(
            check_crcs=check_crcs, sliced_decoding=sliced_decoding, vectorised=vectorised
        )
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
        self._max_poll_records = max_poll_records
        #: (node id, partition) of the last fetches taken (see has_company)
        self._recent: deque[tuple[int, TopicIdPartition]] = deque(maxlen=_RECENT_FETCHES)
        #: decoded fetches with records still to deliver; the first is being delivered
        self._decoded: deque[PartitionData] = deque()

    @property
    def decode_steps(self) -> int:
        """Decoding slices run so far (a caller sees progress without records)."""
        return self._fetch_decoder.decode_steps

    @property
    def columnar(self) -> bool:
        """Decode into columns for ``poll_arrow`` instead of one ConsumerRecord per
        record (set once, before the first collect: the consumer never mixes them)."""
        return self._fetch_decoder.columnar

    @columnar.setter
    def columnar(self, columnar: bool) -> None:
        self._fetch_decoder.columnar = columnar

    def drop_stale(self, node_id: int, generation: int) -> int:
        """Drop fetched records of ``node_id``'s share sessions older than
        ``generation`` that were not handed out yet: their locks went with the
        session (the broker delivers them again). Returns how many fetches."""

        def stale(source: int, source_generation: int) -> bool:
            return source == node_id and source_generation < generation

        records = 0
        kept: deque[PartitionData] = deque()
        for d in self._decoded:
            if stale(d.node_id, d.generation):
                self._fetch_decoder.decode_rest(d)
                records += d.undelivered
            else:
                kept.append(d)
        dropped = len(self._decoded) - len(kept)
        self._decoded = kept

        def stale_fetch(f: CompletedShareFetch) -> bool:
            nonlocal records
            if stale(f.node_id, f.session_generation):
                records += acquired_count(f)
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
            self._fetch_decoder.decode_rest(d)
            dropped += drop_offsets(d, offsets)
            d.gaps = [g for g in d.gaps if g not in offsets]

        def change(f: CompletedShareFetch) -> CompletedShareFetch | None:
            nonlocal dropped
            if not mine(f.partition, f.node_id, f.session_generation):
                return f
            before = acquired_count(f)
            ranges = [
                r for first, last, count in f.acquired
                for r in held_ranges_without(first, last, count, offsets)
            ]
            f.acquired = ranges
            dropped += before - acquired_count(f)
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

    def delivering_has_company(self, assigned: Collection[TopicPartition]) -> bool:
        """Whether the node of the fetch being delivered has recently served this
        consumer another partition that is still in ``assigned`` (see
        :meth:`has_company`)."""
        if not self._decoded:
            return False
        data = self._decoded[0]
        return self.has_company(data.node_id, data.partition, assigned)

    def has_company(
        self, node_id: int, partition: TopicIdPartition, assigned: Collection[TopicPartition]
    ) -> bool:
        """Whether one of the last :data:`_RECENT_FETCHES` fetches taken came from
        ``node_id`` with records of a partition other than ``partition`` that is
        still in ``assigned``: then a ShareFetch to that node is likely to acquire
        records of it while ``partition`` is at the broker's record-lock limit
        (the limit is per share-partition). Only recent fetches count: a partition
        drained long ago would only bring empty fetches."""
        return any(
            node == node_id and tip != partition and tip.topic_partition in assigned
            for node, tip in self._recent
        )

    def collect(
        self, on_drained: DrainedHook | None = None, *, limit: int | None = None,
        holding: bool = False,
    ) -> CollectResult[K, V]:
        """Take up to ``max.poll.records`` records (or ``limit``, if fewer) from the
        buffered fetches.

        ``on_drained(acquired, size, node_id, partition, holding)`` is called (at
        most once) when this takes the last queued fetch, before decoding it: the
        moment to ask for the next response, so the broker works while this
        thread decodes and the application processes. ``acquired`` is the taken
        fetch's record count, ``size`` the bytes of its records section,
        ``node_id`` and ``partition`` where it comes from; its last argument
        says whether the poll holds records already (delivered by this call, or
        by an earlier call of the same poll: this method's ``holding``). The hook
        returns True to leave the fetch queued: the poll ends with the records it
        holds, and the next poll takes it.

        The poll is atomic: if anything raises (a ``KeyboardInterrupt`` in a
        deserializer, ...), every fetch this call touched goes back to where it
        was, and no record of this call is in the in-flight batch, so none is
        acknowledged without the application having seen it.
        """
        budget = self._max_poll_records if limit is None else min(limit, self._max_poll_records)
        poll: _Poll[K, V] = _Poll(budget, on_drained, holding)
        now_ms = self._clock() if self._drop_expired else 0
        try:
            self._fill(poll, now_ms)
        except BaseException:
            self._restore(poll.touched)
            raise
        return self._hand_out(poll)

    def _fill(self, poll: _Poll[K, V], now_ms: int) -> None:
        """Deliver into ``poll`` from the decoded fetches in order, until its budget
        is spent, an error is to be reported, or no fetch may deliver now."""
        decoded = self._decoded
        while poll.budget > 0 and poll.error is None:
            if not decoded and not self._take_fetch(poll, now_ms):
                break  # nothing buffered
            data = decoded[0]
            if self._expired(data.lock_expires_ms, now_ms):
                # Its lock ran out while it waited here (or ends before the
                # application could acknowledge them): the broker makes these
                # records available again (probably to another consumer).
                # Handing them out would have them worked on twice, and their
                # acknowledgements (GAPs included) would fail.
                self._fetch_decoder.decode_rest(data)
                self._count_expired(data.undelivered, data.partition, "while buffered")
                decoded.popleft()
                continue
            if not self._may_deliver(poll.nodes, data):
                break
            if data.decoder is not None and len(data.pending) - data.next_index < poll.budget:
                if self._sliced and poll.decoded_now >= _DECODE_CHUNK_RECORDS:
                    break  # enough for one call: the caller yields, then asks again
                poll.decoded_now += max(1, self._fetch_decoder.decode_more(data))
            self._deliver_into(poll, data)
            if data.exhausted:
                decoded.popleft()

    def _take_fetch(self, poll: _Poll[K, V], now_ms: int) -> bool:
        """Start decoding the next buffered fetch whose lock has not run out (it
        joins ``_decoded``); False: no fetch is left. If this raises, the fetch
        it took goes back to the buffer (the next poll takes it)."""
        while True:
            fetch = self._buffer.take()
            if fetch is None:
                return False
            try:
                if self._expired(fetch.lock_expires_ms, now_ms):
                    self._count_expired(
                        acquired_count(fetch), fetch.partition, "before decoding"
                    )
                    continue
                hook = poll.on_drained
                if hook is not None and self._buffer.is_empty():
                    poll.on_drained = None
                    if hook(acquired_count(fetch), len(fetch.records), fetch.node_id,
                            fetch.partition, poll.holding or bool(poll.delivered)):
                        self._buffer.push_front(fetch)
                        return False
                self._recent.append((fetch.node_id, fetch.partition))
                self._decoded.append(self._fetch_decoder.decode(fetch))
                return True
            except BaseException:
                self._buffer.push_front(fetch)  # not lost: the next poll takes it
                raise

    def _may_deliver(
        self, nodes: dict[TopicIdPartition, tuple[int, int]], data: PartitionData
    ) -> bool:
        """Whether ``data``'s records may be handed out in this poll, whose
        partitions' records come from the nodes in ``nodes`` (this adds its own)."""
        tip = data.partition
        holder = nodes.get(tip)
        if holder is None:
            holder = self._in_flight.source_of(tip)
        if holder is not None and holder != (data.node_id, data.generation):
            # The partition's records come from a new node (its leader
            # moved) while the old node's are still in flight: this
            # fetch waits for a later poll, once the batch no longer
            # holds anything of the old node (its acks must go there).
            return False
        nodes[tip] = (data.node_id, data.generation)
        return True

    def _deliver_into(self, poll: _Poll[K, V], data: PartitionData) -> None:
        """The GAPs ``data`` found so far to the in-flight batch, then its records,
        up to the poll's budget, into ``poll``."""
        if data.gaps:
            self._in_flight.add_gaps(data.partition, data.node_id, data.gaps, data.generation)
            data.gaps = []
        touched = poll.touched
        if not touched or touched[-1][0] is not data:
            # The first touch only: it is what an exception restores.
            touched.append((data, data.next_index, data.bytes_left))
        if data.lock_timeout_ms is not None:
            poll.lock_timeout = data.lock_timeout_ms
        records, error, delivered_bytes = self._deliver(data, poll.budget)
        poll.error = error
        poll.size += delivered_bytes
        if records:
            poll.out.setdefault(data.partition, []).extend(records)
            poll.delivered.append((data, records))
            poll.budget -= _record_count(records) if self.columnar else len(records)

    def _restore(self, touched: list[tuple[PartitionData, int, int]]) -> None:
        """Put the fetches a poll that raised had touched back as they were."""
        decoded = self._decoded
        if touched and decoded and decoded[0] is touched[-1][0]:
            decoded.popleft()
        for data, next_index, bytes_left in reversed(touched):
            data.next_index = next_index
            data.bytes_left = bytes_left
            decoded.appendleft(data)

    def _hand_out(self, poll: _Poll[K, V]) -> CollectResult[K, V]:
        """The poll's records, now added to the in-flight batch."""
        if self.columnar:
            for data, pieces in poll.delivered:
                self._in_flight.add_rows(data.partition, data.node_id, pieces, data.generation)
            return CollectResult(
                _columnar().ColumnarRecords(poll.out), poll.error, poll.lock_timeout, poll.size
            )
        add_records = self._in_flight.add_records
        for data, records in poll.delivered:
            add_records(data.partition, data.node_id, records, data.generation)
        for data, start, _ in poll.touched:
            # The fetch lets go of what it delivered (only now: a poll that raised
            # delivers it again), so those records die with the application's
            # references, young (see _DECODE_CHUNK_RECORDS).
            if data.next_index > start:
                data.pending[start : data.next_index] = [None] * (data.next_index - start)
        return CollectResult(ConsumerRecords(poll.out), poll.error, poll.lock_timeout, poll.size)

    def _expired(self, lock_expires_ms: int | None, now_ms: int) -> bool:
        """Whether a record's lock has run out, or ends too soon for the
        application to process and acknowledge it (``expiry_margin_ms``)."""
        return (
            self._drop_expired and lock_expires_ms is not None
            and now_ms + self.expiry_margin_ms >= lock_expires_ms
        )

    # -- delivery ----------------------------------------------------------------

    def _deliver(
        self, data: PartitionData, budget: int
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
        self, data: PartitionData, record: ConsumerRecord[Any, Any], exc: Exception, *,
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
