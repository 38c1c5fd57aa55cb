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
Records are read by one loop (:func:`_decode_v2_records`) with two paths: a
templated one that reads a record's varints with one ``unpack_from`` of the last
record's layout and a table lookup per varint (most records: those of a batch
nearly always share a layout), and a careful one that reads varints byte by
byte (:func:`_careful_record`) for any record the first cannot take. Both accept
and reject the same records, with the same errors.

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

from kafka_share.errors import CorruptMessageError
from kafka_share.models import TimestampType
from kafka_share.records.compression import (
    DEFAULT_MAX_DECOMPRESSED_BYTES,
    decompress,
)
from kafka_share.records.crc32c import crc32c

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
    "RecordShape",
    "iter_batches",
]

Header = tuple[str, bytes | None]
"""One record header: ``(key, value)``."""

Record = tuple[int, int, bytes | None, bytes | None, tuple[Header, ...]]
"""One decoded record: ``(offset, timestamp, key, value, headers)``."""


@attrs.frozen
class RecordShape:
    """The constants of :meth:`RecordBatch.shaped_records` for one batch."""

    #: a tuple subclass (e.g. a NamedTuple) taking the twelve fields in order
    type: type
    topic: str
    partition: int
    timestamp_type: TimestampType
    leader_epoch: int | None
    delivery_count: int

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
_MIN_RECORD_BODY = 6  # attributes + 5 one-byte varints

_ATTR_CODEC = 0x07
_ATTR_LOG_APPEND_TIME = 0x08
_ATTR_TRANSACTIONAL = 0x10
_ATTR_CONTROL = 0x20
_ATTR_DELETE_HORIZON = 0x40

_NO_HEADERS: tuple[Header, ...] = ()
#: An uncompressed batch inside a memoryview whose records average at least this
#: many bytes is decoded from the view (one copy per key and value); smaller
#: records decode faster from one ``bytes`` copy of the section (bytes slicing
#: beats a memoryview slice plus ``tobytes()`` per record; the copy is cheap
#: beside their decoding).
_VIEW_MIN_RECORD_BYTES = 2048
_CONTROL_KEY = struct.Struct(">hh")

# Legacy message: crc I, magic b, attributes b, [timestamp q (v1)], key length i
_LEGACY_V0 = struct.Struct(">Ibbi")
_LEGACY_V1 = struct.Struct(">Ibbqi")
_INT32 = struct.Struct(">i")


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


class _RecordError(Exception):
    """Internal: malformed record; args are (reason, byte position)."""


def _read_varint(buf: bytes | memoryview, pos: int) -> tuple[int, int]:
    """Zig-zag varint/varlong at ``pos``; returns (value, next position)."""
    b = buf[pos]  # IndexError past the end: converted by the caller
    if b < 0x80:  # most varints of the careful path and of headers
        return (b >> 1) ^ -(b & 1), pos + 1
    result = 0
    shift = 0
    start = pos
    while True:
        b = buf[pos]
        pos += 1
        result |= (b & 0x7F) << shift
        if b < 0x80:
            return (result >> 1) ^ -(result & 1), pos
        shift += 7
        if shift > 63:
            raise _RecordError("varint longer than 10 bytes", start)


def _read_headers(
    buf: bytes | memoryview, pos: int, count: int, rec_end: int
) -> tuple[tuple[Header, ...], int]:
    # Each header needs at least 2 bytes, which bounds a hostile count.
    if count < 0 or count * 2 > rec_end - pos:
        raise _RecordError(f"header count {count} does not fit in the record", pos)
    headers = []
    for _ in range(count):
        klen, pos = _read_varint(buf, pos)
        if klen < 0 or pos + klen > rec_end:
            raise _RecordError(f"bad header key length {klen}", pos)
        hkey = str(buf[pos : pos + klen], "utf-8")
        pos += klen
        vlen, pos = _read_varint(buf, pos)
        if vlen < 0:
            if vlen != -1:
                raise _RecordError(f"bad header value length {vlen}", pos)
            hval = None
        else:
            if pos + vlen > rec_end:
                raise _RecordError(f"header value length {vlen} overruns the record", pos)
            hval = bytes(buf[pos : pos + vlen])
            pos += vlen
        headers.append((hkey, hval))
    return tuple(headers), pos


# Size rules waived: the per-record hot loop of row decoding (bench_records.py: 1.07 us
# per 100 B record, shaped). A helper call per record costs 33 ns or more here (timeit,
# two arguments; more with the loop's state), 3-10 % of the whole; one frame keeps its
# locals fast. See docs/performance.md, the templated path.
def _decode_v2_records(  # noqa: PLR0912, PLR0915
    buf: bytes | memoryview,
    pos: int,
    end: int,
    count: int,
    *,
    base_offset: int,
    base_timestamp: int,
    append_timestamp: int | None,
    shape: RecordShape,
    to_end: bool = True,
) -> tuple[list[Any], int]:
    """``count`` records from ``pos``, and the position after them; ``to_end``:
    they must end exactly at ``end`` (the whole records section).

    The hot loop. The records of a batch almost always share a *layout*: the
    byte sizes of their length, timestamp delta, offset delta, key length and
    value length varints. A record's head is read with one ``unpack_from`` of
    the last record's layout, and each varint's bytes are looked up in a table
    of whole varints (:func:`_varint_table`). A failed lookup means the layout
    changed (no prefix of a varint is a whole varint of that size), so the
    layout is worked out again from this record (:func:`_head_layout`,
    :func:`_tail_layout`). That costs 20-30 % less per record than reading
    varints byte by byte.

    A record the templated path cannot take (a varint longer than three bytes,
    a bad length, fields that do not end at the record's end) goes through
    :func:`_careful_record`, which decodes any valid record and raises for a bad
    one; so together they accept and reject exactly what the careful path alone
    would. Every check the careful path makes before reading further is made
    here in the same order. After :data:`_TEMPLATE_MISSES` such records and
    layouts worked out, the rest of the call goes through the careful path.
    """
    records: list[Any] = []
    append = records.append
    new = tuple.__new__
    s_type, s_topic, s_partition = shape.type, shape.topic, shape.partition
    s_ts_type, s_epoch, s_count = shape.timestamp_type, shape.leader_epoch, shape.delivery_count
    varints = _varint_table()
    unpack_head: Any = _NO_LAYOUT
    length_size = head_size = 0
    unpack_tail: Any = _NO_LAYOUT
    tail_size = 0
    read_varint = _read_varint
    no_headers = _NO_HEADERS
    min_body = _MIN_RECORD_BODY
    misses_left = _TEMPLATE_MISSES  # layouts worked out and records missed
    # A memoryview (large records, see _VIEW_MIN_RECORD_BYTES) reads varints the
    # same way; only keys and values need turning into bytes.
    view = not isinstance(buf, bytes)
    key: Any
    value: Any
    for _ in range(count):
        if misses_left:
            try:
                try:
                    length_raw, ts_raw, offset_raw, klen_raw = unpack_head(buf, pos)
                    length = varints[length_raw]
                    ts_delta = varints[ts_raw]
                    offset_delta = varints[offset_raw]
                    klen = varints[klen_raw]
                except (KeyError, ValueError, struct.error):
                    # ValueError: the initial layout, which unpacks too few fields.
                    head = _head_layout(buf, pos) if misses_left > 1 else None
                    if head is None:
                        raise _TemplateMissError from None
                    misses_left -= 1
                    unpack_head, length_size, head_size, fields = head
                    length, ts_delta, offset_delta, klen = fields
                rec_end = pos + length_size + length
                if length < min_body or rec_end > end:
                    raise _TemplateMissError
                p = pos + head_size
                if klen >= 0:
                    key = buf[p : p + klen]
                    if view:
                        key = key.tobytes()
                    p += klen
                elif klen == -1:
                    key = None
                else:
                    raise _TemplateMissError
                try:
                    vlen = varints[unpack_tail(buf, p)[0]]
                except (KeyError, struct.error):
                    tail = _tail_layout(buf, p) if misses_left > 1 else None
                    if tail is None:
                        raise _TemplateMissError from None
                    misses_left -= 1
                    unpack_tail, tail_size, vlen = tail
                p += tail_size
                if vlen >= 0:
                    value = buf[p : p + vlen]
                    if view:
                        value = value.tobytes()
                    p += vlen
                elif vlen == -1:
                    value = None
                else:
                    raise _TemplateMissError
                # The careful path's reads, so its errors.
                if buf[p] == 0:
                    headers = no_headers
                    p += 1
                else:
                    header_count, p = read_varint(buf, p)
                    headers, p = _read_headers(buf, p, header_count, rec_end)
                if p != rec_end:
                    raise _TemplateMissError
            except _TemplateMissError:
                misses_left -= 1
                rec_end = 0  # no record ends there: the careful path reads this one
        else:
            rec_end = 0
        if not rec_end:
            # Outside the except block, so that its errors carry no context.
            ts_delta, offset_delta, key, value, headers, klen, vlen, rec_end = _careful_record(
                buf, pos, end
            )
        append(new(s_type, (
            s_topic, s_partition, base_offset + offset_delta,
            base_timestamp + ts_delta if append_timestamp is None else append_timestamp,
            s_ts_type, key, value, headers, s_epoch, s_count, klen, vlen,
        )))
        pos = rec_end
    if to_end and pos != end:
        raise _RecordError(f"{end - pos} bytes left over after {count} records", pos)
    return records, pos


class _TemplateMissError(Exception):
    """A record the templated path of :func:`_decode_v2_records` cannot take."""


def _varint_table() -> dict[bytes, int]:
    """Every zig-zag varint of one or two bytes, by its bytes, decoded: what the
    templated path of :func:`_decode_v2_records` looks fields up in (built at
    first use: 16,512 entries, about 1.7 MB, 7 ms). Three-byte varints are
    added as records bring them (:func:`_three_byte_varint`), up to
    :data:`_MAX_THREE_BYTE_VARINTS`."""
    global _VARINTS
    if _VARINTS is None:
        table: dict[bytes, int] = {}
        for b in range(0x80):
            table[bytes((b,))] = (b >> 1) ^ -(b & 1)
        for b2 in range(0x80):
            for b1 in range(0x80, 0x100):
                u = (b1 & 0x7F) | (b2 << 7)
                table[bytes((b1, b2))] = (u >> 1) ^ -(u & 1)
        _VARINTS = table
    return _VARINTS


_VARINTS: dict[bytes, int] | None = None
#: Three-byte varints (record and value lengths of 8 KiB to 1 MiB, timestamp
#: deltas of 8 s to 17 min) the table holds at most, about 450 KB. When it is
#: full they are all dropped and it fills again, so it never stays full of sizes
#: that no longer occur: the sizes of the records decoded now come back at once.
_MAX_THREE_BYTE_VARINTS = 4096
_three_byte_varints = 0
#: Layouts worked out plus records the templated path could not take, per call,
#: after which the rest of the call goes through the careful path: records
#: whose layouts keep changing (random sizes of large values, key lengths
#: either side of 64 bytes, event timestamps far apart) cost a few layouts more
#: than before the templated path, no more.
_TEMPLATE_MISSES = 8
#: (unpack_from, length varint size, head size) of a record's head by the sizes
#: of its length, timestamp delta, offset delta and key length varints
_HEADS: dict[tuple[int, int, int, int], tuple[Any, int, int]] = {}
#: unpack_from of a value length varint by its size
_TAILS: dict[int, Any] = {}
#: the layout before the first record: it unpacks one empty field, which no
#: lookup finds, so the first record sets the real layouts
_NO_LAYOUT = struct.Struct("0s").unpack_from


def _three_byte_varint(raw: bytes) -> int:
    """The value of the whole three-byte varint ``raw``, which the table then
    holds. A full table first drops every three-byte varint it holds."""
    global _three_byte_varints
    b, b2, b3 = raw
    u = (b & 0x7F) | ((b2 & 0x7F) << 7) | (b3 << 14)
    value = (u >> 1) ^ -(u & 1)
    table = _varint_table()
    if _three_byte_varints >= _MAX_THREE_BYTE_VARINTS:
        for old in [key for key in table if len(key) == 3]:
            table.pop(old, None)  # another thread may have dropped it first
        _three_byte_varints = 0
    table[raw] = value
    _three_byte_varints += 1
    return value


def _varint_at(buf: bytes | memoryview, pos: int) -> tuple[int, int] | None:
    """(size, value) of the varint at ``pos``; None if the templated path cannot
    take it (longer than three bytes). IndexError past the buffer's end."""
    b = buf[pos]
    if b < 0x80:
        return 1, (b >> 1) ^ -(b & 1)
    b2 = buf[pos + 1]
    if b2 < 0x80:
        u = (b & 0x7F) | (b2 << 7)
        return 2, (u >> 1) ^ -(u & 1)
    b3 = buf[pos + 2]
    if b3 >= 0x80:
        return None
    return 3, _three_byte_varint(bytes((b, b2, b3)))


def _head_layout(
    buf: bytes | memoryview, pos: int
) -> tuple[Any, int, int, tuple[int, int, int, int]] | None:
    """The head layout (see :data:`_HEADS`) of the record at ``pos`` and its four
    varints' values, or None if one of them does not suit the templated path or
    runs past the buffer."""
    sizes: list[int] = []
    values: list[int] = []
    p = pos
    try:
        for field in range(4):
            varint = _varint_at(buf, p)
            if varint is None:
                return None
            sizes.append(varint[0])
            values.append(varint[1])
            p += varint[0] + (field == 0)  # the attributes byte follows the length
    except IndexError:
        return None
    key = (sizes[0], sizes[1], sizes[2], sizes[3])
    head = _HEADS.get(key)
    if head is None:
        unpack = struct.Struct("{}sx{}s{}s{}s".format(*key)).unpack_from
        head = _HEADS[key] = (unpack, key[0], p - pos)
    return head[0], head[1], head[2], (values[0], values[1], values[2], values[3])


def _tail_layout(
    buf: bytes | memoryview, pos: int
) -> tuple[Any, int, int] | None:
    """(unpack_from, size, value) of the value length varint at ``pos``, or None
    as :func:`_head_layout`."""
    try:
        varint = _varint_at(buf, pos)
    except IndexError:
        return None
    if varint is None:
        return None
    size = varint[0]
    unpack = _TAILS.get(size)
    if unpack is None:
        unpack = _TAILS[size] = struct.Struct(f"{size}s").unpack_from
    return unpack, size, varint[1]


# Size rules waived: the per-record careful path (each varint byte by byte), taken for
# records the templated path cannot (see _decode_v2_records); every check in the same
# order as there, which one straight function keeps reviewable.
def _careful_record(  # noqa: PLR0912, PLR0915
    buf: bytes | memoryview, pos: int, end: int
) -> tuple[int, int, Any, Any, tuple[Header, ...], int, int, int]:
    """The record at ``pos`` with every varint read byte by byte: (timestamp
    delta, offset delta, key, value, headers, key length, value length, record
    end). Raises :class:`_RecordError` (or IndexError, ValueError: see
    :meth:`RecordBatch._decode_section`) for a bad record."""
    # The decoder of records whose layouts keep changing, so it stays quick:
    # varints are decoded inline with 1- and 2-byte fast paths, and 3 bytes for
    # the record and value lengths (values of 8 KiB to 1 MiB), falling back to
    # _read_varint for longer ones; zig-zag decode is (u >> 1) ^ -(u & 1).
    # Lengths are validated only where a bad one could move backwards or read
    # past the record: the final "pos == rec_end" check catches the rest.
    read_varint = _read_varint
    # A memoryview (large records, see _VIEW_MIN_RECORD_BYTES) reads varints the
    # same way; only keys and values need turning into bytes.
    view = not isinstance(buf, bytes)
    b = buf[pos]
    if b < 0x80:
        length = (b >> 1) ^ -(b & 1)
        pos += 1
    else:
        b2 = buf[pos + 1]
        if b2 < 0x80:
            u = (b & 0x7F) | (b2 << 7)
            length = (u >> 1) ^ -(u & 1)
            pos += 2
        else:
            b3 = buf[pos + 2]
            if b3 < 0x80:
                u = (b & 0x7F) | ((b2 & 0x7F) << 7) | (b3 << 14)
                length = (u >> 1) ^ -(u & 1)
                pos += 3
            else:
                length, pos = read_varint(buf, pos)
    rec_end = pos + length
    if length < _MIN_RECORD_BODY or rec_end > end:
        raise _RecordError(f"record length {length} does not fit", pos)
    # buf[pos] is the record attributes byte, unused in v2.
    pos += 1
    b = buf[pos]
    if b < 0x80:
        ts_delta = (b >> 1) ^ -(b & 1)
        pos += 1
    else:
        b2 = buf[pos + 1]
        if b2 < 0x80:
            u = (b & 0x7F) | (b2 << 7)
            ts_delta = (u >> 1) ^ -(u & 1)
            pos += 2
        else:
            ts_delta, pos = read_varint(buf, pos)
    b = buf[pos]
    if b < 0x80:
        offset_delta = (b >> 1) ^ -(b & 1)
        pos += 1
    else:
        b2 = buf[pos + 1]
        if b2 < 0x80:
            u = (b & 0x7F) | (b2 << 7)
            offset_delta = (u >> 1) ^ -(u & 1)
            pos += 2
        else:
            offset_delta, pos = read_varint(buf, pos)
    b = buf[pos]
    if b < 0x80:
        klen = (b >> 1) ^ -(b & 1)
        pos += 1
    else:
        klen, pos = read_varint(buf, pos)
    key: Any
    if klen >= 0:
        key = buf[pos : pos + klen]
        if view:
            key = key.tobytes()
        pos += klen
    elif klen == -1:
        key = None
    else:
        raise _RecordError(f"bad key length {klen}", pos)
    b = buf[pos]
    if b < 0x80:
        vlen = (b >> 1) ^ -(b & 1)
        pos += 1
    else:
        b2 = buf[pos + 1]
        if b2 < 0x80:
            u = (b & 0x7F) | (b2 << 7)
            vlen = (u >> 1) ^ -(u & 1)
            pos += 2
        else:
            b3 = buf[pos + 2]
            if b3 < 0x80:
                u = (b & 0x7F) | ((b2 & 0x7F) << 7) | (b3 << 14)
                vlen = (u >> 1) ^ -(u & 1)
                pos += 3
            else:
                vlen, pos = read_varint(buf, pos)
    value: Any
    if vlen >= 0:
        value = buf[pos : pos + vlen]
        if view:
            value = value.tobytes()
        pos += vlen
    elif vlen == -1:
        value = None
    else:
        raise _RecordError(f"bad value length {vlen}", pos)
    if buf[pos] == 0:
        headers = _NO_HEADERS
        pos += 1
    else:
        header_count, pos = read_varint(buf, pos)
        headers, pos = _read_headers(buf, pos, header_count, rec_end)
    if pos != rec_end:
        raise _RecordError(
            f"record fields end at byte {pos} but its length says {rec_end}", rec_end
        )
    return ts_delta, offset_delta, key, value, headers, klen, vlen, rec_end


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
            return _legacy_batch(
                data,
                pos,
                end,
                magic=magic,
                check_crcs=self._check_crcs,
                max_decompressed_bytes=self._max_decompressed_bytes,
            )
        self._fail(pos, base_offset, f"unknown magic byte {magic} (expected 0, 1 or 2)")

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


# ---------------------------------------------------------------------- legacy v0/v1


def _legacy_message(
    data: bytes | memoryview, pos: int, end: int, magic: int
) -> tuple[int, int, int, int, int, bytes | None, bytes | None]:
    """Parse one legacy message in ``data[pos:end]`` (after offset + size).

    Returns (crc, attributes, timestamp, crc_start, next_pos, key, value).
    Raises _RecordError.
    """
    fixed = _LEGACY_V1 if magic == 1 else _LEGACY_V0
    if pos + fixed.size > end:
        raise _RecordError("message shorter than its fixed fields", pos)
    if magic == 1:
        crc, _magic, attributes, timestamp, klen = _LEGACY_V1.unpack_from(data, pos)
    else:
        crc, _magic, attributes, klen = _LEGACY_V0.unpack_from(data, pos)
        timestamp = -1
    crc_start = pos + 4
    pos += fixed.size
    key: bytes | None = None
    if klen >= 0:
        if pos + klen > end:
            raise _RecordError(f"key length {klen} overruns the message", pos)
        key = bytes(data[pos : pos + klen])
        pos += klen
    elif klen != -1:
        raise _RecordError(f"bad key length {klen}", pos)
    if pos + 4 > end:
        raise _RecordError("message truncated before its value length", pos)
    (vlen,) = _INT32.unpack_from(data, pos)
    pos += 4
    value: bytes | None = None
    if vlen >= 0:
        if pos + vlen > end:
            raise _RecordError(f"value length {vlen} overruns the message", pos)
        value = bytes(data[pos : pos + vlen])
        pos += vlen
    elif vlen != -1:
        raise _RecordError(f"bad value length {vlen}", pos)
    if pos != end:
        raise _RecordError(f"{end - pos} unexpected bytes at the end of the message", pos)
    return crc, attributes, timestamp, crc_start, pos, key, value


# Size rules waived for now: not split yet (issue 28:
# legacy message sets).
def _legacy_batch(  # noqa: PLR0912, PLR0915
    data: bytes | memoryview,
    pos: int,
    end: int,
    *,
    magic: int,
    check_crcs: bool,
    max_decompressed_bytes: int,
) -> RecordBatch:
    offset, length = _PREFIX.unpack_from(data, pos)

    def corrupt(why: str, cls: type[CorruptBatchError] = CorruptBatchError) -> CorruptBatchError:
        return cls(
            f"corrupt legacy (magic {magic}) message at byte {pos} (offset {offset}): {why}",
            base_offset=offset,
            last_offset=offset,
        )

    try:
        crc, attributes, timestamp, crc_start, _, key, value = _legacy_message(
            data, pos + _PREFIX_SIZE, end, magic
        )
    except _RecordError as exc:
        raise corrupt(str(exc.args[0])) from None
    if check_crcs:
        actual = zlib.crc32(memoryview(data)[crc_start:end])
        if actual != crc:
            raise corrupt(
                f"CRC mismatch: stored 0x{crc:08x}, computed 0x{actual:08x}", BatchCrcError
            )
    codec = attributes & _ATTR_CODEC
    log_append = magic == 1 and bool(attributes & _ATTR_LOG_APPEND_TIME)
    records: list[Record]
    if codec == 0:
        records = [(offset, timestamp, key, value, _NO_HEADERS)]
        base_offset = offset
    else:
        if value is None:
            raise corrupt("compressed wrapper message has a null value")
        try:
            inner = decompress(codec, value, max_decompressed_bytes)
        except CorruptMessageError as exc:
            raise corrupt(str(exc)) from None
        records = []
        ipos = 0
        isize = len(inner)
        while ipos < isize:
            if ipos + _PREFIX_SIZE > isize:
                raise corrupt(f"inner message set truncated at byte {ipos}")
            ioffset, ilength = _PREFIX.unpack_from(inner, ipos)
            iend = ipos + _PREFIX_SIZE + ilength
            if ilength < 6 or iend > isize:
                raise corrupt(f"inner message at byte {ipos} has bad size {ilength}")
            imagic = inner[ipos + _MAGIC_POS]
            if imagic not in (0, 1):
                raise corrupt(f"inner message at byte {ipos} has magic {imagic}")
            try:
                icrc, iattrs, its, icrc_start, _, ikey, ivalue = _legacy_message(
                    inner, ipos + _PREFIX_SIZE, iend, imagic
                )
            except _RecordError as exc:
                raise corrupt(f"inner message at byte {ipos}: {exc.args[0]}") from None
            if iattrs & _ATTR_CODEC:
                raise corrupt(f"inner message at byte {ipos} is itself compressed")
            if check_crcs:
                iactual = zlib.crc32(memoryview(inner)[icrc_start:iend])
                if iactual != icrc:
                    raise corrupt(
                        f"inner message at byte {ipos} CRC mismatch: stored 0x{icrc:08x}, "
                        f"computed 0x{iactual:08x}",
                        BatchCrcError,
                    )
            records.append((ioffset, timestamp if log_append else its, ikey, ivalue, _NO_HEADERS))
            ipos = iend
        if not records:
            raise corrupt("compressed wrapper message holds no messages")
        if magic == 1:
            # v1 inner offsets are relative; the wrapper carries the absolute
            # offset of the last inner message.
            shift = offset - records[-1][0]
            records = [(o + shift, t, k, v, h) for o, t, k, v, h in records]
        base_offset = records[0][0]
    header = (
        base_offset,
        length,
        -1,
        magic,
        crc,
        attributes,
        offset - base_offset,
        timestamp,
        timestamp,
        -1,
        -1,
        -1,
        len(records),
    )
    return RecordBatch(
        data,
        pos,
        end,
        header,
        max_decompressed_bytes=max_decompressed_bytes,
        legacy_records=records,
    )
