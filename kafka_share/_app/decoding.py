"""Decode a completed fetch against its acquired offsets, a piece at a time.

Application thread only (Java's ``ShareCompletedFetch``). A completed fetch is
decoded once, when delivery first reaches it: every batch is walked against the
acquired offset ranges (:mod:`kafka_share.share.acquired`), which yields the
records to deliver with their delivery counts, and the acquired offsets without
a record (GAP acknowledgements, sent with the next acks). Row decoding goes a
piece at a time, as far as delivery needs (``_DECODE_CHUNK_RECORDS``); a decoder
that raises part way is rolled back to its last hand-over (:class:`_Walk`).
What delivery does with the result (lock expiry, leader moves, the record
budget, deserializers) is :mod:`kafka_share._app.collector`'s.
"""

from __future__ import annotations

import itertools
import operator
import threading
import time
from collections.abc import Iterator
from typing import Any

from kafka_share._handoff.events import CompletedShareFetch
from kafka_share._numpy_import import import_numpy
from kafka_share.errors import CorruptMessageError, CorruptRecordError, KafkaError
from kafka_share.models import ConsumerRecord, TimestampType
from kafka_share.records import row_decoder
from kafka_share.records.batch import (
    CorruptBatchError,
    RecordBatch,
    RecordPiece,
    RecordShape,
    iter_batches,
)
from kafka_share.share.acquired import AcquiredCursor, AcquiredRecords

__all__ = [
    "FetchDecoder",
    "PartitionData",
    "acquired_count",
    "columnar_helpers",
    "drop_offsets",
    "prepare_row_decoder",
    "start_wanted_load",
    "vectorised_rows",
]


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
#: the decoder of a fetch whose decoder raised: see FetchDecoder.decode_more
_RESUME: Iterator[int] = iter(())

def _payload_size(records: list[Any]) -> int:
    """Key + value bytes of ConsumerRecord tuples (a null counts as 0)."""
    keys: list[int] = list(map(_KEY_SIZE_FIELD, records))
    values: list[int] = list(map(_VALUE_SIZE_FIELD, records))
    # Null keys/values carry size -1; count them back to 0 (all loops in C).
    return sum(keys) + sum(values) + keys.count(-1) + values.count(-1)


def columnar_helpers() -> Any:
    """The columnar-mode (``poll_arrow``) helpers, :mod:`kafka_share._app.columnar`,
    imported on first use: they need pyarrow and numpy (the ``arrow`` extra)."""
    import_numpy()  # first, without OpenBLAS's idle spin
    from kafka_share._app import columnar  # noqa: PLC0415

    return columnar


_columnar = columnar_helpers

#: batches of at least this many records are decoded through numpy when it is
#: installed (below it the fixed cost of the vectorised decoder, ~70 µs, does
#: not pay: measured on 100 B and 1 KiB records, the row decoder is faster up
#: to 130-150 records), if their records average less than
#: _VECTORISED_MAX_RECORD_BYTES (above, copying the values dominates and the
#: row decoder is as fast)
_VECTORISED_MIN_RECORDS = 160
_VECTORISED_MAX_RECORD_BYTES = 4096


def vectorised_rows() -> Any:
    """:mod:`kafka_share.records.vectorised` once numpy is loaded, else None. The
    first call asks for it to be loaded (:func:`start_wanted_load`, at the end of
    the poll) and returns None: that batch, and those until the load is done,
    decode in pure Python, so neither a poll nor the time to the first record
    waits for the import (about 0.05 s of CPU), and a consumer that never gets a
    batch worth it (idle, small batches, large records) never pays its 17 MB.
    pyarrow is not needed: only ``poll_arrow`` loads it."""
    global _load_wanted
    if _VECTORISED is False and _loading is None:
        _load_wanted = True
    return _VECTORISED or None


def start_wanted_load() -> None:
    """Start loading numpy on a daemon thread if a decoder asked for it
    (:func:`vectorised_rows`). Called as each poll ends: the import holds the
    GIL for most of its ~50 ms, which, started while the poll still decoded,
    delayed the records that poll returns (the first ones of a consumer)."""
    global _load_wanted, _loading
    if not _load_wanted:
        return
    with _loading_lock:
        _load_wanted = False
        if _loading is not None:
            return
        _loading = threading.Thread(target=_load_vectorised, name="kafka-share-numpy-import",
                                    daemon=True)
        _loading.start()


def _load_vectorised() -> None:
    global _VECTORISED
    try:
        import_numpy()  # first, without OpenBLAS's idle spin
        from kafka_share.records import vectorised  # noqa: PLC0415
    except ImportError:
        _VECTORISED = None
    else:
        _VECTORISED = vectorised


#: False: not loaded (yet); None: numpy missing; else the module
_VECTORISED: Any = False
#: a decoder asked for numpy since the last poll ended
_load_wanted = False
_loading: threading.Thread | None = None
_loading_lock = threading.Lock()


def prepare_row_decoder() -> None:
    """Build the row decoder's table of varints (:func:`row_decoder.prepare`,
    6-12 ms of CPU, about 1.7 MB) on a daemon thread, once per process. Called
    when a consumer subscribes: the group join that follows takes a second or
    more, so the table is ready before the first response to decode, instead of
    being built by the poll that brings the first records. Built in one go it
    held the GIL for 6-12 ms, and the join's first requests (the network
    thread's, or the subscribing application's) waited that long; the thread
    sleeps between slices (:func:`_let_others_run`), so no other thread waits
    more than a slice."""
    global _preparing
    if _preparing is not None or row_decoder.prepared():
        return
    with _loading_lock:
        if _preparing is None:
            _preparing = threading.Thread(target=row_decoder.prepare, args=(_let_others_run,),
                                          name="kafka-share-decoder-tables", daemon=True)
            _preparing.start()


def _let_others_run() -> None:
    time.sleep(_PREPARE_PAUSE_S)  # releases the GIL to whichever thread waits for it


_preparing: threading.Thread | None = None
_PREPARE_PAUSE_S = 0.0002


def acquired_count(fetch: CompletedShareFetch) -> int:
    return sum(last - first + 1 for first, last, _ in fetch.acquired)


class _Walk:
    """What a decoder found in a fetch since its last hand-over to delivery
    (see :meth:`FetchDecoder._acquired_batches`), and the decoding's state at
    that hand-over.

    A decoder is only ever suspended right after a hand-over, so delivery sees
    nothing else; if it raises instead (a ``KeyboardInterrupt`` half way through
    a piece), :meth:`roll_back` returns the fetch to its last hand-over and a new
    decoder goes on from there: nothing is lost or found twice.
    """

    __slots__ = ("_saved", "cursor", "data", "errors", "gaps", "handed_over", "size")

    def __init__(self, data: PartitionData, cursor: AcquiredCursor) -> None:
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


class PartitionData:
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
        self.acquired_count = acquired_count(fetch)
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
        #: fetch's delivery starts (not at decoding: see FetchCollector._deliver_into)
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


class FetchDecoder:
    """Decodes completed fetches into :class:`PartitionData` for the collector,
    a piece at a time, and resumes a decoding that raised from its last
    hand-over (see :class:`_Walk`)."""

    def __init__(self, *, check_crcs: bool, sliced_decoding: bool, vectorised: bool) -> None:
        #: hand over each record batch as it is decoded (see FetchCollector._sliced)
        self._sliced = sliced_decoding
        #: decoding slices run so far (a caller sees progress without records)
        self.decode_steps = 0
        self._check_crcs = check_crcs
        #: decode into columns for ``poll_arrow`` instead of one ConsumerRecord per
        #: record (set once, before the first collect: the consumer never mixes them)
        self.columnar = False
        #: numpy-backed row decoding (kafka_share.records.vectorised) is wanted
        #: (record.decoder=auto); imported at the first batch worth it, and
        #: never with record.decoder=python
        self._vectorised = vectorised

    def decode(self, fetch: CompletedShareFetch) -> PartitionData:
        """``fetch`` ready for delivery, its decoding started (columnar and not
        sliced: done); :meth:`decode_more` goes on with it."""
        data = PartitionData(fetch)
        acquired = AcquiredRecords.from_ranges(fetch.acquired)
        if not acquired:
            return data
        if self.columnar:
            data.pending = _columnar().ColumnarPending()
        data.fetch = fetch
        data.walk = _Walk(data, acquired.cursor())
        data.decoder = self._decoder(data)
        if self.columnar and not self._sliced:
            self.decode_more(data)  # all of it
        # Rows: the collector (FetchCollector._fill) decodes each piece when delivery
        # reaches it.
        return data

    def decode_rest(self, data: PartitionData) -> None:
        """Finish a fetch decoded in slices, before its records are dropped or
        counted (a rare path, so the decoding cost does not matter)."""
        while data.decoder is not None:
            self.decode_more(data)

    def decode_more(self, data: PartitionData) -> int:
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

    def _decoder(self, data: PartitionData) -> Iterator[int]:
        """A decoder of ``data.fetch`` from where ``data.walk`` is."""
        assert data.fetch is not None and data.walk is not None
        if self.columnar:
            return self._decoding_columns(data, data.fetch, data.walk)
        return self._decoding(data, data.fetch, data.walk)

    def _decoding(
        self, data: PartitionData, fetch: CompletedShareFetch, walk: _Walk
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
        take_span = cursor.take_span
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
                    broken = False
                    for shaped, offsets, payload, increasing in self._chunks(batch, shape):
                        if not shaped:
                            continue
                        top = offsets[-1]
                        if not (offsets[0] > prev and top <= last and (
                            all(map(operator.lt, offsets, itertools.islice(offsets, 1, None)))
                            if increasing is None else increasing
                        )):
                            broken = True
                            break
                        take_span(prev + 1, top, gaps)
                        if len(offsets) != top - prev:
                            # Offsets of the batch without a record (compaction) are gaps.
                            present = set(offsets)
                            gaps.extend(o for o in range(prev + 1, top + 1) if o not in present)
                        prev = top
                        pending.extend(shaped)
                        walk.size += payload
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
            self._match_records(walk, batch, ts_type, leader_epoch)
        walk.finish()

    def _chunks(self, batch: RecordBatch, shape: RecordShape) -> Iterator[RecordPiece]:
        """The records of ``batch``, all in one acquired range, as ConsumerRecords
        of ``shape`` in pieces of up to _DECODE_CHUNK_RECORDS (with their offsets,
        payload bytes and, from numpy, their order): through numpy for a large
        batch of small records, if installed."""
        vectorised = (
            vectorised_rows() if self._vectorised
            and batch.record_count >= _VECTORISED_MIN_RECORDS
            and batch.size_in_bytes < batch.record_count * _VECTORISED_MAX_RECORD_BYTES
            else None
        )
        if vectorised is not None:
            pieces: Iterator[RecordPiece] = vectorised.record_pieces(
                batch, shape, _DECODE_CHUNK_RECORDS
            )
            return pieces
        if batch.record_count > _DECODE_CHUNK_RECORDS:
            return _measured(batch.shaped_record_chunks(shape, _DECODE_CHUNK_RECORDS))
        return _whole(batch, shape)

    def _match_records(
        self, walk: _Walk, batch: RecordBatch, ts_type: TimestampType, leader_epoch: int | None
    ) -> None:
        """The records of ``batch`` at acquired offsets, matched one at a time: a
        batch across acquired ranges, a legacy one, or a broken one."""
        tip = walk.data.partition
        topic, partition = tip.topic, tip.partition
        gaps = walk.gaps
        pending = walk.data.pending
        take = walk.cursor.take
        new: Any = tuple.__new__
        record_type = ConsumerRecord
        try:
            records = batch.records()
        except CorruptBatchError as exc:
            self._reject_batch(walk, exc)
            return
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

    def _decoding_columns(
        self, data: PartitionData, fetch: CompletedShareFetch, walk: _Walk
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
        self, data: PartitionData, fetch: CompletedShareFetch, cursor: Any, walk: _Walk
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

def _measured(chunks: Iterator[list[Any]]) -> Iterator[RecordPiece]:
    """Row-decoded ``chunks`` as pieces like the vectorised decoder's: with their
    offsets and payload bytes, their order left to the caller (None)."""
    while True:
        # No loop variable: the suspended generator holds no reference to a piece.
        try:
            yield _with_offsets(next(chunks))
        except StopIteration:
            return


def _with_offsets(shaped: list[Any]) -> RecordPiece:
    return shaped, list(map(_OFFSET_FIELD, shaped)), _payload_size(shaped), None


def _whole(batch: RecordBatch, shape: RecordShape) -> Iterator[RecordPiece]:
    """The whole batch as one piece; unlike ``iter((piece,))``, the suspended
    generator holds no reference to the piece it handed out."""
    yield _with_offsets(batch.shaped_records(shape))


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


def drop_offsets(data: PartitionData, offsets: frozenset[int]) -> int:
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
