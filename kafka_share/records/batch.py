"""Decode the ``records`` bytes of a (share) fetch response into record batches.

Theory of operation
===================

A fetch response carries, per partition, a byte string of concatenated
*batches*. Every batch starts with ``base_offset: int64, batch_length: int32``
and has its ``magic`` byte at position 16, whatever its format, so
:func:`iter_batches` can frame batches without understanding them:

* **magic 2** (RecordBatch v2, every Kafka >= 0.11 producer): the 61-byte
  header is read with one ``struct.unpack_from``; the records are decoded only
  when :meth:`RecordBatch.records` is called (a share consumer skips control
  batches and batches it did not acquire without paying for them).
* **magic 0 / 1** (legacy message sets, which may still sit in old segments of
  long-lived topics; Kafka 4.x brokers no longer down- or up-convert them for
  share fetch): **decoded**, including compressed wrapper messages (gzip,
  snappy, lz4; magic-0 lz4 used a non-standard frame checksum, KAFKA-1493, and
  is rejected by the lz4 library as corrupt). Each top-level legacy message,
  or each compressed wrapper with its inner messages, is exposed as one
  :class:`RecordBatch` with ``magic`` 0 or 1, ``partition_leader_epoch`` -1,
  ``producer_id`` -1 and never transactional or control. Magic 0 records have
  timestamp -1 and ``TimestampType.NO_TIMESTAMP_TYPE``. CRCs of legacy
  messages are CRC-32 (zlib), checked when ``check_crcs`` is on.
* any other magic raises :class:`~kafka_share.errors.CorruptMessageError`.

The hot path of the share consumer::

    for batch in iter_batches(records_bytes, check_crcs=True):
        if batch.is_control:
            ...  # GAP-ack batch.base_offset .. batch.last_offset if acquired
            continue
        for offset, timestamp, key, value, headers in batch.records():
            ...

A :data:`Record` is a plain tuple ``(offset, timestamp, key, value, headers)``
(a tuple costs about a third of a NamedTuple or slotted instance to build,
and every record is rebuilt into a ``ConsumerRecord`` anyway). ``key`` and
``value`` are ``bytes`` or ``None``; ``headers`` is a tuple of ``(str key,
bytes | None value)`` pairs in wire order (the shared empty tuple when there
are none). The timestamp is ``base_timestamp + delta`` for CREATE_TIME, and the
batch's ``max_timestamp`` for every record of a LOG_APPEND_TIME batch.

Copies and views
----------------
``data`` may be ``bytes`` or a zero-copy ``memoryview`` of the response
buffer. Headers are read straight from it and the CRC is computed over a view.
Record keys and values must reach users as ``bytes``; slicing ``bytes``
produces them directly and is the fastest option measured for small records
(slicing a memoryview and calling ``bytes()`` on each key and value measured
25-30% slower per record for 100 B and 1 KiB values), so the records section
is normally turned into ``bytes`` once per batch: the decompressed buffer
already is ``bytes``; an uncompressed batch inside a ``bytes`` input is sliced
in place (no copy); an uncompressed batch of small records inside a
``memoryview`` costs one copy of that batch (a memcpy, cheap beside decoding
them). An uncompressed batch whose records average 2 KiB or more is decoded
straight from the ``memoryview``: each key and value is copied once, from the
response buffer into its ``bytes``, and the section copy, which for 10 KiB
records cost about as much as the rest of their decoding, is skipped.

Decoding records
----------------
The records themselves are read by :mod:`kafka_share.records.row_decoder` (its
docstring tells how); legacy messages by :mod:`kafka_share.records.legacy`.

Errors
------
* A truncated **trailing** batch (the broker cuts the response at its byte
  limit) ends iteration silently.
* A framing problem (bad length, unknown magic) raises ``CorruptMessageError``
  naming the byte position and base offset; iteration then stops, since the
  following batch boundaries are unknown.
* A problem confined to one batch whose framing is intact raises
  :class:`CorruptBatchError` (a ``CorruptMessageError``) carrying
  ``base_offset`` and ``last_offset``, so the share consumer can REJECT that
  batch's acquired offsets and surface a corrupt-record error:

  - :class:`BatchCrcError` (subclass) from ``next()`` on the iterator when
    ``check_crcs`` is on and the CRC does not match. The iterator has already
    moved past the bad batch, so the caller may catch it and keep iterating.
  - ``CorruptBatchError`` from :meth:`RecordBatch.records` for malformed
    record contents, failed decompression or a batch inflating beyond
    ``max_decompressed_bytes``.

Nothing else escapes: no ``IndexError``, ``struct.error`` or codec exception.
"""

from __future__ import annotations

import enum
import struct
import zlib
from collections.abc import Iterator
from typing import Any, NamedTuple, NoReturn

import attrs

from kafka_share._reprs import attrs_repr
from kafka_share.errors import CorruptMessageError
from kafka_share.models import TimestampType
from kafka_share.records.compression import (
    DEFAULT_MAX_DECOMPRESSED_BYTES,
    decompress,
)
from kafka_share.records.crc32c import crc32c
from kafka_share.records.legacy import _legacy_batch, _LegacyCrcError, _LegacyError
from kafka_share.records.row_decoder import _decode_v2_records, _RecordError

__all__ = [
    "BATCH_HEADER_SIZE",
    "BatchCrcError",
    "BatchIterator",
    "ControlRecord",
    "ControlRecordType",
    "CorruptBatchError",
    "Header",
    "Record",
    "RecordBatch",
    "RecordPiece",
    "RecordShape",
    "iter_batches",
]

Header = tuple[str, bytes | None]
"""One record header: ``(key, value)``."""

Record = tuple[int, int, bytes | None, bytes | None, tuple[Header, ...]]
"""One decoded record: ``(offset, timestamp, key, value, headers)``."""


@attrs_repr
@attrs.frozen(repr=False)
class RecordShape:
    """The constants of :meth:`RecordBatch.shaped_records` for one batch."""

    #: a tuple subclass (e.g. a NamedTuple) taking the twelve fields in order
    type: type
    topic: str
    partition: int
    timestamp_type: TimestampType
    leader_epoch: int | None
    delivery_count: int


#: A piece of a batch's records as ``poll``'s decoder takes it: the records
#: (tuples of a RecordShape), their offsets, their key and value bytes (a null
#: counts 0), and whether the offsets strictly increase (None: not known, the
#: taker checks).
RecordPiece = tuple[list[Any], list[int], int, "bool | None"]

#: The shape :meth:`RecordBatch.records` decodes with (plain tuples, of which it
#: keeps five fields).
_PLAIN = RecordShape(tuple, "", 0, TimestampType.CREATE_TIME, None, 0)

# base_offset q, batch_length i, partition_leader_epoch i, magic b, crc I,
# attributes h, last_offset_delta i, base_timestamp q, max_timestamp q,
# producer_id q, producer_epoch h, base_sequence i, record count i
_HEADER = struct.Struct(">qiibIhiqqqhii")
BATCH_HEADER_SIZE = _HEADER.size  # 61
_PREFIX = struct.Struct(">qi")  # base_offset, length: common to every magic
_PREFIX_SIZE = 12
_MAGIC_POS = 16
_CRC_START = 21  # v2 CRC covers attributes .. end of batch
_MIN_V2_LENGTH = BATCH_HEADER_SIZE - _PREFIX_SIZE  # 49

_ATTR_CODEC = 0x07
_ATTR_LOG_APPEND_TIME = 0x08
_ATTR_TRANSACTIONAL = 0x10
_ATTR_CONTROL = 0x20
_ATTR_DELETE_HORIZON = 0x40

#: An uncompressed batch inside a memoryview whose records average at least this
#: many bytes is decoded from the view (one copy per key and value); smaller
#: records decode faster from one ``bytes`` copy of the section (bytes slicing
#: beats a memoryview slice plus ``tobytes()`` per record; the copy is cheap
#: beside their decoding).
_VIEW_MIN_RECORD_BYTES = 2048
_CONTROL_KEY = struct.Struct(">hh")


class CorruptBatchError(CorruptMessageError):
    """One batch is corrupt but its framing is intact.

    ``base_offset`` .. ``last_offset`` (inclusive) are the offsets the batch
    covers, so a share consumer can REJECT the ones it acquired.
    """

    def __init__(self, message: str, *, base_offset: int, last_offset: int) -> None:
        super().__init__(message)
        self.base_offset = base_offset
        self.last_offset = last_offset


class BatchCrcError(CorruptBatchError):
    """The batch's stored CRC does not match its contents (only with ``check_crcs``)."""


class ControlRecordType(enum.IntEnum):
    """Type field of a control record key (transaction markers)."""

    ABORT = 0
    COMMIT = 1


class ControlRecord(NamedTuple):
    """A parsed control record: a transaction marker for ``ABORT`` / ``COMMIT``.

    ``type`` is a plain ``int`` so unknown future types decode too; compare it
    with :class:`ControlRecordType`.
    """

    offset: int
    version: int
    type: int


class RecordBatch:
    """One batch: header fields eagerly, records on demand.

    Attributes mirror the v2 header (``base_offset``, ``batch_length``,
    ``partition_leader_epoch``, ``magic``, ``crc``, ``attributes``,
    ``last_offset_delta``, ``base_timestamp``, ``max_timestamp``,
    ``producer_id``, ``producer_epoch``, ``base_sequence``, ``record_count``).
    Instances are created by :func:`iter_batches`.
    """

    __slots__ = (
        "_data",
        "_end",
        "_legacy_records",
        "_max_decompressed_bytes",
        "_start",
        "attributes",
        "base_offset",
        "base_sequence",
        "base_timestamp",
        "batch_length",
        "crc",
        "last_offset_delta",
        "magic",
        "max_timestamp",
        "partition_leader_epoch",
        "producer_epoch",
        "producer_id",
        "record_count",
    )

    base_offset: int
    batch_length: int
    partition_leader_epoch: int
    magic: int
    crc: int
    attributes: int
    last_offset_delta: int
    base_timestamp: int
    max_timestamp: int
    producer_id: int
    producer_epoch: int
    base_sequence: int
    record_count: int

    def __init__(
        self,
        data: bytes | memoryview,
        start: int,
        end: int,
        header: tuple[int, int, int, int, int, int, int, int, int, int, int, int, int],
        *,
        max_decompressed_bytes: int,
        legacy_records: list[Record] | None = None,
    ) -> None:
        (
            self.base_offset,
            self.batch_length,
            self.partition_leader_epoch,
            self.magic,
            self.crc,
            self.attributes,
            self.last_offset_delta,
            self.base_timestamp,
            self.max_timestamp,
            self.producer_id,
            self.producer_epoch,
            self.base_sequence,
            self.record_count,
        ) = header
        self._data = data
        self._start = start
        self._end = end
        self._max_decompressed_bytes = max_decompressed_bytes
        self._legacy_records = legacy_records

    # ------------------------------------------------------------------ header views

    @property
    def last_offset(self) -> int:
        """Offset of the batch's last record (inclusive), even if compacted away."""
        return self.base_offset + self.last_offset_delta

    @property
    def next_offset(self) -> int:
        """``last_offset + 1``."""
        return self.base_offset + self.last_offset_delta + 1

    @property
    def size_in_bytes(self) -> int:
        """Bytes this batch occupies in the fetch response."""
        return self._end - self._start

    @property
    def timestamp_type(self) -> TimestampType:
        """CREATE_TIME or LOG_APPEND_TIME (NO_TIMESTAMP_TYPE for magic 0)."""
        if self.magic == 0:
            return TimestampType.NO_TIMESTAMP_TYPE
        if self.attributes & _ATTR_LOG_APPEND_TIME:
            return TimestampType.LOG_APPEND_TIME
        return TimestampType.CREATE_TIME

    @property
    def is_transactional(self) -> bool:
        """Written by a transactional producer."""
        return bool(self.attributes & _ATTR_TRANSACTIONAL) and self.magic >= 2

    @property
    def is_control(self) -> bool:
        """Holds control records (transaction markers), not user data."""
        return bool(self.attributes & _ATTR_CONTROL) and self.magic >= 2

    @property
    def has_delete_horizon(self) -> bool:
        """The log cleaner stored a delete horizon in ``base_timestamp``."""
        return bool(self.attributes & _ATTR_DELETE_HORIZON) and self.magic >= 2

    @property
    def leader_epoch(self) -> int | None:
        """``partition_leader_epoch``, or ``None`` when the batch carries none (-1)."""
        return None if self.partition_leader_epoch < 0 else self.partition_leader_epoch

    def __repr__(self) -> str:
        flags = []
        if self.is_control:
            flags.append("control")
        if self.is_transactional:
            flags.append("transactional")
        return (
            f"<RecordBatch magic={self.magic} offsets={self.base_offset}..{self.last_offset} "
            f"records={self.record_count} codec={self.attributes & _ATTR_CODEC}"
            f"{' ' + ','.join(flags) if flags else ''}>"
        )

    # ------------------------------------------------------------------ contents

    def _corrupt(self, why: str) -> CorruptBatchError:
        return CorruptBatchError(
            f"corrupt record batch at base offset {self.base_offset} "
            f"(offsets {self.base_offset}..{self.last_offset}): {why}",
            base_offset=self.base_offset,
            last_offset=self.last_offset,
        )

    def compute_crc(self) -> int:
        """CRC of the batch contents as stored (CRC32C for v2, CRC-32 for legacy)."""
        view = memoryview(self._data)
        if self.magic >= 2:
            return crc32c(view[self._start + _CRC_START : self._end])
        return zlib.crc32(view[self._start + _MAGIC_POS : self._end])

    def verify_crc(self) -> None:
        """Raise :class:`BatchCrcError` if the stored CRC does not match.

        For a legacy compressed wrapper only the wrapper's CRC is covered here;
        inner messages are checked while decoding when ``check_crcs`` is on.
        """
        actual = self.compute_crc()
        if actual != self.crc:
            raise BatchCrcError(
                f"record batch at base offset {self.base_offset} "
                f"(offsets {self.base_offset}..{self.last_offset}) failed its CRC check: "
                f"stored 0x{self.crc:08x}, computed 0x{actual:08x}",
                base_offset=self.base_offset,
                last_offset=self.last_offset,
            )

    def records(self) -> list[Record]:
        """Decode the records, in offset order.

        Returns:
            ``(offset, timestamp, key, value, headers)`` tuples (see :data:`Record`).

        Raises:
            CorruptBatchError: malformed records, bad compressed data, or a batch
                inflating beyond ``max_decompressed_bytes``.
        """
        if self._legacy_records is not None:
            return self._legacy_records
        # The decoder builds shaped tuples only; a plain record is five of their fields.
        return [
            (offset, timestamp, key, value, headers)
            for _t, _p, offset, timestamp, _tt, key, value, headers, *_ in self._decode(_PLAIN)
        ]

    def shaped_records(self, shape: RecordShape) -> list[Any]:
        """Decode the records (v2 batches only) straight into ``shape.type`` tuples.

        Each record becomes ``shape.type`` built from ``(topic, partition, offset,
        timestamp, timestamp_type, key, value, headers, leader_epoch,
        delivery_count, key_size, value_size)`` with the constants from ``shape``
        (sizes are -1 for a null key or value): the consumer's record layout,
        built once, without an intermediate tuple per record.

        Raises:
            CorruptBatchError: as :meth:`records`; ValueError for a legacy batch.
        """
        if self._legacy_records is not None:
            raise ValueError("shaped_records() needs a v2 record batch")
        return self._decode(shape)

    def shaped_record_chunks(self, shape: RecordShape, chunk_records: int) -> Iterator[list[Any]]:
        """:meth:`shaped_records` in lists of at most ``chunk_records`` records,
        each decoded when it is asked for: an event loop can decode a large batch
        in slices, running other work in between.

        Raises:
            CorruptBatchError: as :meth:`shaped_records`, when the bad record's
                chunk is asked for; ValueError for a legacy batch.
        """
        if self._legacy_records is not None:
            raise ValueError("shaped_record_chunks() needs a v2 record batch")
        section = self._records_section()
        count = section[3]
        # Boxed so that no local of this generator holds the last piece while it
        # is suspended: the caller alone decides how long those records live.
        pos = [section[1]]
        done = 0
        while True:
            n = min(chunk_records, count - done)
            done += n
            # The records' lengths say where the piece ends (the last ends the batch).
            yield self._decode_piece(section, shape, pos, n, last=done >= count)
            if done >= count:
                return

    def _decode_piece(
        self,
        section: tuple[bytes | memoryview, int, int, int, int | None],
        shape: RecordShape,
        pos: list[int],
        count: int,
        *,
        last: bool,
    ) -> list[Any]:
        records, pos[0] = self._decode_section(section, shape, pos[0], count, last=last)
        return records

    def _records_section(self) -> tuple[bytes | memoryview, int, int, int, int | None]:
        """(buffer, start, end, record count, append timestamp) of the records."""
        data = self._data
        pos = self._start + BATCH_HEADER_SIZE
        end = self._end
        codec = self.attributes & _ATTR_CODEC
        count = self.record_count
        if count < 0:
            raise self._corrupt(f"negative record count {count}")
        buf: bytes | memoryview
        if codec == 0:
            if isinstance(data, bytes) or end - pos >= count * _VIEW_MIN_RECORD_BYTES:
                # Large records are sliced straight out of the view, each key and
                # value copied once, instead of copying the whole section first.
                buf = data
            else:
                buf = data[pos:end].tobytes()
                pos, end = 0, len(buf)
        else:
            try:
                buf = decompress(codec, data[pos:end], self._max_decompressed_bytes)
            except CorruptMessageError as exc:
                raise self._corrupt(str(exc)) from None
            pos, end = 0, len(buf)
        if count > end - pos:
            raise self._corrupt(f"record count {count} cannot fit in {end - pos} bytes of records")
        log_append = bool(self.attributes & _ATTR_LOG_APPEND_TIME)
        return buf, pos, end, count, self.max_timestamp if log_append else None

    def _decode(self, shape: RecordShape) -> list[Any]:
        section = self._records_section()
        return self._decode_section(section, shape, section[1], section[3], last=True)[0]

    def _decode_section(
        self,
        section: tuple[bytes | memoryview, int, int, int, int | None],
        shape: RecordShape,
        pos: int,
        count: int,
        *,
        last: bool,
    ) -> tuple[list[Any], int]:
        """``count`` records from ``pos`` of the records section, and the position
        after them (``last``: they end the section)."""
        buf, start, end, _, append_timestamp = section
        try:
            return _decode_v2_records(
                buf,
                pos,
                end,
                count,
                base_offset=self.base_offset,
                base_timestamp=self.base_timestamp,
                append_timestamp=append_timestamp,
                shape=shape,
                to_end=last,
            )
        except _RecordError as exc:
            where = exc.args[1] - start
            raise self._corrupt(f"{exc.args[0]} (record section byte {where})") from None
        except (IndexError, ValueError) as exc:
            # IndexError: a varint ran past the buffer; ValueError: bad UTF-8
            # in a header key.
            raise self._corrupt(f"records section is malformed ({exc})") from None

    def control_records(self) -> list[ControlRecord]:
        """Parse the records of a control batch as transaction markers.

        Raises:
            CorruptBatchError: not a control batch, or a key shorter than 4 bytes.
        """
        if not self.is_control:
            raise self._corrupt("control_records() called on a data batch")
        result = []
        for offset, _ts, key, _value, _headers in self.records():
            if key is None or len(key) < _CONTROL_KEY.size:
                raise self._corrupt(f"control record at offset {offset} has a short key {key!r}")
            version, kind = _CONTROL_KEY.unpack_from(key)
            result.append(ControlRecord(offset, version, kind))
        return result


# ---------------------------------------------------------------------- iteration


class BatchIterator:
    """Iterator over the batches of one fetch response; see :func:`iter_batches`.

    After a :class:`BatchCrcError` it remains usable (it has moved past the bad
    batch). After any other ``CorruptMessageError`` it is exhausted.
    """

    __slots__ = ("_check_crcs", "_data", "_max_decompressed_bytes", "_pos", "_size")

    def __init__(
        self,
        data: bytes | bytearray | memoryview,
        *,
        check_crcs: bool,
        max_decompressed_bytes: int = DEFAULT_MAX_DECOMPRESSED_BYTES,
    ) -> None:
        if not isinstance(data, bytes):
            data = memoryview(data).cast("B")
        self._data: bytes | memoryview = data
        self._pos = 0
        self._size = len(data)
        self._check_crcs = check_crcs
        self._max_decompressed_bytes = max_decompressed_bytes

    @property
    def position(self) -> int:
        """Byte position of the next batch in the input."""
        return self._pos

    def __iter__(self) -> BatchIterator:
        return self

    def __next__(self) -> RecordBatch:
        data = self._data
        pos = self._pos
        remaining = self._size - pos
        if remaining < _PREFIX_SIZE:
            self._pos = self._size
            raise StopIteration
        base_offset, length = _PREFIX.unpack_from(data, pos)
        end = pos + _PREFIX_SIZE + length
        if length >= 0 and end > self._size:
            # Truncated trailing batch: the broker stops at its byte limit.
            self._pos = self._size
            raise StopIteration
        if length < _MAGIC_POS + 1 - _PREFIX_SIZE:
            self._fail(pos, base_offset, f"batch length {length} is too small")
        magic = data[pos + _MAGIC_POS]
        if magic == 2:
            if length < _MIN_V2_LENGTH:
                self._fail(pos, base_offset, f"v2 batch length {length} is below the minimum 49")
            header = _HEADER.unpack_from(data, pos)
            batch = RecordBatch(
                data, pos, end, header, max_decompressed_bytes=self._max_decompressed_bytes
            )
            self._pos = end
            if self._check_crcs:
                batch.verify_crc()
            return batch
        if magic in (0, 1):
            self._pos = end
            return self._legacy(pos, end, base_offset, magic)
        self._fail(pos, base_offset, f"unknown magic byte {magic} (expected 0, 1 or 2)")

    def _legacy(self, pos: int, end: int, offset: int, magic: int) -> RecordBatch:
        """The legacy message at ``pos`` (its offset ``offset``) as one batch."""
        try:
            header, records = _legacy_batch(
                self._data,
                pos,
                end,
                magic=magic,
                check_crcs=self._check_crcs,
                max_decompressed_bytes=self._max_decompressed_bytes,
            )
        except _LegacyError as exc:
            error = BatchCrcError if isinstance(exc, _LegacyCrcError) else CorruptBatchError
            raise error(
                f"corrupt legacy (magic {magic}) message at byte {pos} (offset {offset}): "
                f"{exc.args[0]}",
                base_offset=offset,
                last_offset=offset,
            ) from None
        return RecordBatch(
            self._data,
            pos,
            end,
            header,
            max_decompressed_bytes=self._max_decompressed_bytes,
            legacy_records=records,
        )

    def _fail(self, pos: int, base_offset: int, why: str) -> NoReturn:
        self._pos = self._size
        raise CorruptMessageError(
            f"corrupt record batch at byte {pos} (base offset {base_offset}): {why}"
        )


def iter_batches(
    data: bytes | bytearray | memoryview,
    *,
    check_crcs: bool,
    max_decompressed_bytes: int = DEFAULT_MAX_DECOMPRESSED_BYTES,
) -> BatchIterator:
    """Iterate over the batches in a fetch response's ``records`` bytes.

    Args:
        data: the ``records`` field (``bytes`` or a zero-copy ``memoryview``).
        check_crcs: verify each batch's CRC (``check.crcs``) as it is reached.
        max_decompressed_bytes: cap on one batch's decompressed size.

    Returns:
        A :class:`BatchIterator` yielding :class:`RecordBatch` objects. A
        truncated trailing batch ends the iteration silently.

    Raises (from ``next()``):
        BatchCrcError: CRC mismatch; iteration may continue past it.
        CorruptBatchError: a legacy message set with malformed contents.
        CorruptMessageError: broken framing; iteration ends.
    """
    return BatchIterator(data, check_crcs=check_crcs, max_decompressed_bytes=max_decompressed_bytes)

