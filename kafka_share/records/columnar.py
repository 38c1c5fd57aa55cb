"""Decode a v2 record batch into columns (numpy and pyarrow) without a Python object per record.

The arrow path of the share consumer (``poll_arrow()``) turns every batch into
a :class:`RecordColumns` with :func:`decode_columns`. This module is imported
only by that path: it needs numpy and pyarrow (the ``arrow`` extra), which the
rest of the package does not.

Theory of operation
===================

A v2 records section is a sequence of records, each prefixed by its length as
a zig-zag varint. Only the *starts* of the records are sequential: once they
are known, every field of every record can be decoded at once, one numpy
operation per field rather than per record.

1. **Record starts** (:func:`_record_starts`). From a record read in Python,
   the following ones are guessed to be equally long and the guess is checked
   vectorised (each guessed start must hold the same length varint bytes):
   the records up to the first mismatch are confirmed, and guessing resumes
   there. Records of a batch are often equally long or change length only a
   few times (an offset delta reaching two bytes), so this usually takes a
   few numpy operations. Once a guess confirms few records, the rest is read
   by a Python loop over the length varints only, one list lookup per record
   (:func:`_quick_scan`); anything unusual there (a varint over two bytes, a
   bad length) goes to a careful loop that says what is wrong.
2. **Fields.** Position arrays advance field by field: attributes byte,
   timestamp delta, offset delta, key length, key, value length, value,
   header count. A varint's first two bytes are read at once (the buffer
   viewed as unaligned ``uint16`` at every byte) and decoded by two lookups
   in 65536-entry tables (value, size); only varints longer than two bytes
   take further, per-byte vectorised steps. Each varint must leave at least a
   byte for every field after it, which a valid record always does; that
   keeps every two-byte read inside the buffer.
3. **Keys and values** become ``binary_view`` arrays whose views point into the
   records-section buffer (zero-copy): a value of at most 12 bytes is inlined in
   its 16-byte view, a longer one stores its length, a 4-byte prefix, a buffer
   index and an offset. All views (keys and values together) are built in one
   pass: one gather copies the 12 bytes after each value's start, a mask by
   size class keeps the inline bytes (zero padded, as arrow requires) or the
   prefix, and long values get their offset. The section bytes are wrapped
   with ``pyarrow.py_buffer`` so the arrays keep them alive. (For an
   uncompressed batch that buffer is the whole fetch response's ``bytes``; a
   section over 2 GiB, possible only with a raised decompression cap, is
   addressed as several overlapping buffers because a view's offset is an
   int32.)
4. **Headers** are decoded only when some record's header count is not a
   single 0 byte, into ``list<struct<key: string, value: binary>>`` (header
   keys and values copied: they are small). Header ``j`` of every record having
   one is decoded vectorised, ``j`` = 0, 1, ... while enough records take part;
   the remaining headers of a few records are read in Python.

Validation
==========

The row decoder (:meth:`RecordBatch.records`) is the reference: for every
batch it decodes, :func:`decode_columns` gives the same rows, and wherever it
raises, :func:`decode_columns` raises :class:`CorruptBatchError` (with the
batch's offsets and a reason naming the record and the byte). Every check is
vectorised: each varint ends inside its record and within 10 bytes, every
record is at least 6 bytes and inside the section, lengths are >= -1 (header
keys >= 0) and fit in the record, every record's fields end exactly at its
declared length, the section holds exactly ``record_count`` records with no
bytes left over. A header key must be valid UTF-8 (it is decoded with
``bytes.decode``, exactly as the row decoder does); otherwise the batch is
corrupt.

Where the row decoder would return a number a column cannot hold, this module
raises :class:`CorruptBatchError` instead (the row decoder uses Python ints;
Kafka's own encoder can never write such a batch): an offset or a CREATE_TIME
timestamp outside int64 (from an absurd delta varint), a varint whose value
needs more than 64 bits (a record length, key or value length over 2**31-1 is
rejected for the same reason).
"""

from __future__ import annotations

import struct
import sys
from array import array
from collections.abc import Iterator
from functools import partial
from itertools import accumulate, repeat
from typing import Any

import numpy as np
import pyarrow as pa

from kafka_share.records.batch import RecordBatch, RecordShape

__all__ = [
    "HEADERS_TYPE", "SMALL_BATCH_BYTES", "SMALL_BATCH_RECORDS", "RecordColumns",
    "binary_array", "columns_from_rows", "decode_columns", "decode_small_columns",
    "shaped_record_chunks",
]

if sys.byteorder != "little":  # pragma: no cover - no such CI machine
    # Arrow buffers are native-endian; the views here are written little-endian.
    raise ImportError("kafka_share.records.columnar needs a little-endian machine")

HEADERS_TYPE: Any = pa.list_(pa.struct([("key", pa.string()), ("value", pa.binary())]))
"""Arrow type of :attr:`RecordColumns.headers`."""

_INT64_MIN = -(2**63)
_INT64_MAX = 2**63 - 1
_INT32_MAX = 2**31 - 1
_MIN_RECORD_BODY = 6  # attributes + 5 one-byte varints (as the row decoder)
_MAX_VARINT_BYTES = 10
_INLINE = 12  # binary_view: values up to 12 bytes live inside the view
_LONG = _INLINE + 1  # class index of a value stored in the data buffer

# A view's offset is an int32: a section larger than this is addressed as
# overlapping buffers starting every 2**_BUFFER_SPAN_BITS bytes (module
# globals so that tests can exercise the split with small sections).
_MAX_SINGLE_BUFFER = _INT32_MAX
_BUFFER_SPAN_BITS = 30


# A view as written: its size, then 12 bytes (inline data, or prefix + buffer
# index + offset); the same memory as (size, first 8 of those bytes, last 4).
_VIEW_BYTES = np.dtype({"names": ["size", "data"], "formats": ["<i4", "V12"], "itemsize": 16})
_VIEW_WORDS = np.dtype(
    {"names": ["size", "lo", "hi"], "formats": ["<i4", "<u8", "<u4"], "offsets": [0, 4, 12]}
)
_WINDOW = np.dtype("V12")


def _view_masks() -> tuple[Any, Any]:
    """Masks over a view's 12 bytes after its size, by size class.

    Class ``n <= 12``: keep the first ``n`` inline bytes, zero the rest (arrow
    requires zero padding). Class 13 (a long value): keep the 4-byte prefix,
    zero the buffer index and offset words (filled in afterwards). Returned
    as the (uint64, uint32) halves of :data:`_VIEW_WORDS`.
    """
    masks = np.zeros((_LONG + 1, _INLINE), np.uint8)
    for n in range(_INLINE + 1):
        masks[n, :n] = 0xFF
    masks[_LONG, :4] = 0xFF
    return masks[:, :8].copy().view("<u8")[:, 0], masks[:, 8:].copy().view("<u4")[:, 0]


_VIEW_MASK_LO, _VIEW_MASK_HI = _view_masks()
_EMPTY_I64: Any = np.zeros(0, np.int64)


class _CorruptError(Exception):
    """Internal: (reason, row mask or index, byte position array or int)."""


def _first(rows: Any) -> int:
    """Index of the first True in a boolean mask."""
    return int(np.argmax(rows))


def _in_records(exc: _CorruptError, records: Any) -> _CorruptError:
    """``exc`` raised for a subset of the records, renumbered: row ``k`` of
    the subset is record ``records[k]``."""
    why, sub, where = exc.args
    if sub is None:
        if len(records) != 1:
            return exc
        sub = 0
    k = sub if isinstance(sub, int) else _first(sub)
    return _CorruptError(why, int(records[k]), where if isinstance(where, int) else int(where[k]))


class RecordColumns:
    """The records of one batch, column by column.

    Row ``i`` is record ``i`` of the batch, in offset order.
    """

    __slots__ = (
        "_keys",
        "_values",
        "count",
        "headers",
        "items",
        "key_sizes",
        "offsets",
        "timestamps",
        "value_sizes",
    )

    #: number of records
    count: int
    #: int64 absolute offsets
    offsets: Any
    #: int64 milliseconds, as :meth:`RecordBatch.records` gives them (LOG_APPEND_TIME applied)
    timestamps: Any
    #: int32 key sizes in bytes, -1 for a null key
    key_sizes: Any
    #: int32 value sizes in bytes, -1 for a null value
    value_sizes: Any
    #: :data:`HEADERS_TYPE` array (an empty list for a record without headers),
    #: or ``None`` when no record of the batch has a header
    headers: Any
    #: the keys and the values as lists of ``bytes`` (None for a null) when the
    #: columns were built from decoded rows (:func:`columns_from_rows`), else
    #: None: a consumer wanting ``binary`` columns builds them from these
    #: directly, and :attr:`keys` and :attr:`values` are built only if read
    items: tuple[list[bytes | None], list[bytes | None]] | None

    def __init__(
        self,
        count: int,
        offsets: Any,
        timestamps: Any,
        keys: Any,
        values: Any,
        key_sizes: Any,
        value_sizes: Any,
        headers: Any,
        *,
        items: tuple[list[bytes | None], list[bytes | None]] | None = None,
    ) -> None:
        """``keys`` and ``values`` may be None if ``items`` holds them."""
        if (keys is None or values is None) and items is None:
            raise ValueError("RecordColumns needs keys and values, as arrays or as items")
        self.count = count
        self.offsets = offsets
        self.timestamps = timestamps
        self._keys = keys
        self._values = values
        self.key_sizes = key_sizes
        self.value_sizes = value_sizes
        self.headers = headers
        self.items = items

    @property
    def keys(self) -> Any:
        """pyarrow ``binary_view``, null where the key is null."""
        if self._keys is None:
            assert self.items is not None
            self._keys = _binary_view(self.items[0])
        return self._keys

    @property
    def values(self) -> Any:
        """pyarrow ``binary_view``, null where the value is null."""
        if self._values is None:
            assert self.items is not None
            self._values = _binary_view(self.items[1])
        return self._values

    def __len__(self) -> int:
        return self.count

    def __repr__(self) -> str:
        span = f" offsets={int(self.offsets[0])}..{int(self.offsets[-1])}" if self.count else ""
        return f"<RecordColumns count={self.count}{span}>"

    def take(self, indices: Any) -> RecordColumns:
        """The rows at ``indices`` (an integer array, or a boolean mask of ``count`` rows).

        Keys and values still point into the same section buffer (only the
        16-byte views are copied).

        Raises:
            IndexError: an index outside ``0 .. count - 1``.
        """
        idx = np.asarray(indices)
        if idx.dtype == np.bool_:
            if idx.shape != (self.count,):
                raise IndexError(f"boolean mask of {idx.shape} for {self.count} rows")
            idx = np.flatnonzero(idx)
        elif idx.size == 0:
            idx = _EMPTY_I64
        elif idx.dtype.kind not in "iu":
            raise IndexError(f"indices must be integers, not {idx.dtype}")
        if idx.ndim != 1:
            raise IndexError("indices must be one-dimensional")
        if idx.size and (int(idx.min()) < 0 or int(idx.max()) >= self.count):
            raise IndexError(f"row index out of range for {self.count} rows")
        key_sizes = self.key_sizes[idx]
        value_sizes = self.value_sizes[idx]
        return RecordColumns(
            len(idx),
            self.offsets[idx],
            self.timestamps[idx],
            _take_views(self.keys, key_sizes, idx),
            _take_views(self.values, value_sizes, idx),
            key_sizes,
            value_sizes,
            None if self.headers is None else self.headers.take(_int64_array(idx)),
        )

    def slice(self, start: int, stop: int) -> RecordColumns:
        """Rows ``start`` .. ``stop - 1`` (Python slice rules), without copying anything."""
        start, stop, _ = slice(start, stop).indices(self.count)
        stop = max(start, stop)
        n = stop - start
        items = self.items
        return RecordColumns(
            n,
            self.offsets[start:stop],
            self.timestamps[start:stop],
            None if self._keys is None else self._keys.slice(start, n),
            None if self._values is None else self._values.slice(start, n),
            self.key_sizes[start:stop],
            self.value_sizes[start:stop],
            None if self.headers is None else self.headers.slice(start, n),
            items=None if items is None else (items[0][start:stop], items[1][start:stop]),
        )


def _take_views(arr: Any, sizes: Any, idx: Any) -> Any:
    """``arr`` (binary_view) rows at ``idx``: new views, same data buffers."""
    bufs = arr.buffers()
    views = np.frombuffer(bufs[1], np.int32).reshape(-1, 4)[arr.offset : arr.offset + len(arr)]
    picked = views[idx]
    return _view_array(len(idx), picked, sizes, bufs[2:])


def _view_array(n: int, views: Any, sizes: Any, data_buffers: list[Any]) -> Any:
    """A binary_view array from ``(n, 4)`` int32 views; null where ``sizes`` < 0."""
    null_count = int(np.count_nonzero(sizes < 0)) if n else 0
    validity = None
    if null_count:
        validity = pa.py_buffer(np.packbits(sizes >= 0, bitorder="little"))
    return pa.Array.from_buffers(
        pa.binary_view(), n, [validity, pa.py_buffer(views), *data_buffers], null_count=null_count
    )


# ---------------------------------------------------------------------- varints


def _varint2_tables() -> tuple[Any, Any, Any]:
    """Lookup tables over the 65536 values of a varint's first two bytes
    (little-endian ``uint16``): the zig-zag value (int32) and size (1 or 2) of
    a varint that ends within them; for a longer one, size
    :data:`_LONGER` and the unsigned 14-bit payload of the two bytes."""
    w = np.arange(1 << 16, dtype=np.int64)
    b0 = w & 0xFF
    b1 = w >> 8
    one = b0 < 0x80
    raw = np.where(one, b0, (b0 & 0x7F) | ((b1 & 0x7F) << 7))
    size = np.where(one, 1, np.where(b1 < 0x80, 2, _LONGER))
    value = (raw >> 1) ^ -(raw & 1)
    return value.astype(np.int32), size.astype(np.int8), raw.astype(np.uint64)


_LONGER = 3  # size entry: the varint continues past its second byte
_VARINT2_VALUE, _VARINT2_SIZE, _VARINT2_RAW = _varint2_tables()
_VARINT1_VALUE = _VARINT2_VALUE[:0x100].copy()  # by first byte, for one-byte varints


def _py_varint(buf: bytes | memoryview, pos: int, limit: int, what: str) -> tuple[int, int]:
    """One zig-zag varint at ``pos`` that must end by ``limit``; (value, next pos)."""
    result = 0
    shift = 0
    start = pos
    while True:
        if pos >= limit:
            raise _CorruptError(f"{what} runs past the end of the record", None, start)
        b = buf[pos]
        pos += 1
        result |= (b & 0x7F) << shift
        if b < 0x80:
            return (result >> 1) ^ -(result & 1), pos
        shift += 7
        if shift > 63:
            raise _CorruptError(f"{what} varint longer than 10 bytes", None, start)


def _varints(
    a: Any, w16: Any, pos: Any, limit: Any, what: str, *, wide_ok: bool = False
) -> tuple[Any, Any]:
    """Zig-zag varints at every position of ``pos``; (values, next positions).

    Each must end by its ``limit`` (an array, or a scalar for all; never past
    the buffer) and take at most 10 bytes; unless ``wide_ok`` (the value is
    not used), its unsigned value must fit in 64 bits. The caller guarantees
    ``pos <= len(a) - 2`` so that ``w16`` (the buffer as unaligned ``uint16``)
    can be read at every position. Values are int32 when every varint has
    one or two bytes (the common case: two table lookups), else int64.
    """
    w = w16[pos]
    size = _VARINT2_SIZE.take(w)
    values = _VARINT2_VALUE.take(w)
    if size.max() == _LONGER:
        values, nxt = _longer_varints(a, w, pos, size, values, limit, what, wide_ok)
    else:
        nxt = pos + size
    bad = nxt > limit
    if bad.any():
        raise _CorruptError(f"{what} runs past the end of the record", bad, pos)
    return values, nxt


def _longer_varints(
    a: Any, w: Any, pos: Any, size: Any, values: Any, limit: Any, what: str, wide_ok: bool
) -> tuple[Any, Any]:
    """:func:`_varints` for the rows whose varint has more than two bytes."""
    every = bool(size.min() == _LONGER)  # e.g. the lengths of 10 KiB records
    rows = None if every else np.flatnonzero(size == _LONGER)
    start = pos if rows is None else pos[rows]
    lim = limit if rows is None or not isinstance(limit, np.ndarray) else limit[rows]
    u = _VARINT2_RAW.take(w if rows is None else w[rows])
    # Third bytes first, for all of them at once: most varints end there.
    p = start + 2
    over = p >= lim
    if over.any():
        row = _first(over) if rows is None else int(rows[_first(over)])
        raise _CorruptError(f"{what} runs past the end of the record", row, pos)
    b2 = a[p]
    u |= (b2 & 0x7F).astype(np.uint64) << np.uint64(14)
    cont = b2 >= 0x80
    sizes = np.full(len(start), 3, np.int64)
    if cont.any():
        cur = np.flatnonzero(cont)  # rows (of the subset) whose varint continues
        for k in range(3, _MAX_VARINT_BYTES):
            p = start[cur] + k
            over = p >= (lim if not isinstance(lim, np.ndarray) else lim[cur])
            if over.any():
                sub = int(cur[over][0])
                row = sub if rows is None else int(rows[sub])
                raise _CorruptError(f"{what} runs past the end of the record", row, pos)
            bk = a[p]
            u[cur] |= (bk & 0x7F).astype(np.uint64) << np.uint64(7 * k)
            sizes[cur] += 1
            more = bk >= 0x80
            if k == _MAX_VARINT_BYTES - 1:
                # The tenth byte carries bit 63 only; more bits need over 64.
                wide = (bk & 0x7E) != 0
                bad, why = (more, "varint longer than 10 bytes") if more.any() else (wide, "")
                if why or (not wide_ok and wide.any()):
                    sub = int(cur[bad][0])
                    row = sub if rows is None else int(rows[sub])
                    raise _CorruptError(f"{what} {why or 'does not fit in 64 bits'}", row, pos)
            cur = cur[more]
            if not cur.size:
                break
    decoded = (u >> np.uint64(1)).view(np.int64) ^ -((u & np.uint64(1)).view(np.int64))
    if rows is None:
        return decoded, pos + sizes
    values = values.astype(np.int64)
    values[rows] = decoded
    nxt = pos + size
    nxt[rows] = start + sizes
    return values, nxt


# ---------------------------------------------------------------------- record starts

# Guessing equally long records pays when it confirms at least this many.
_MIN_GUESSED = 16


def _record_starts(
    a: Any, w16: Any, buf: bytes | memoryview, start: int, end: int, count: int
) -> tuple[Any, Any, Any]:
    """Every record's start, body start (after its length) and length
    (validated: lengths fit, none left over).

    Records of a batch are often equally long, or change length a few times
    (an offset delta reaching two bytes), so from a record read in Python the
    following ones are guessed to be as long and the guess is checked
    vectorised: each guessed record must start with the same length varint.
    The records up to the first mismatch are confirmed (each one's length
    says where the next starts); decoding continues in Python from there. Once
    a guess confirms fewer than :data:`_MIN_GUESSED` records, the rest is read
    with a Python loop over the length varints only.
    """
    parts: list[tuple[Any, Any, Any]] = []
    pos = start
    i = 0
    while i < count:
        if pos >= end:
            raise _CorruptError(f"the section ends after {i} of {count} records", None, pos)
        length, body = _py_varint(buf, pos, end, "record length")
        if length < _MIN_RECORD_BODY or length > end - body:
            raise _CorruptError(f"record {i} length {length} does not fit", None, pos)
        stride = body - pos + length
        # Guessed records i+1 .. i+m, each ending inside the section.
        m = min(count - i - 1, (end - pos) // stride - 1)
        if m < _MIN_GUESSED:
            break
        guesses = np.arange(pos + stride, pos + (m + 1) * stride, stride, dtype=np.int64)
        # The same length means the same varint bytes (a differently padded
        # encoding of the same length is a mismatch: the Python path takes it).
        if body - pos == 1:
            same = a[guesses] == buf[pos]
        else:
            same = w16[guesses] == buf[pos] | (buf[pos + 1] << 8)
            for j in range(2, body - pos):
                same &= a[guesses + j] == buf[pos + j]
        confirmed = m if same.all() else int(np.argmin(same))
        # Records i .. i+confirmed start where guessed; record i+confirmed+1
        # starts right after the last of them.
        starts = np.arange(pos, pos + (confirmed + 1) * stride, stride, dtype=np.int64)
        parts.append((starts, starts + (body - pos), np.full(confirmed + 1, length, np.int64)))
        i += confirmed + 1
        pos += (confirmed + 1) * stride
        if confirmed < _MIN_GUESSED:
            break
    if i < count:
        starts = _quick_scan(buf, pos, end, count - i)
        if starts is None:
            starts = _scan_starts(buf, pos, end, i, count)
        lengths, bodies = _varints(a, w16, starts, end, "record length")
        parts.append((starts, bodies, lengths))
    elif pos != end:
        raise _CorruptError(f"{end - pos} bytes left over after {count} records", None, pos)
    if len(parts) == 1:
        return parts[0]
    return (
        np.concatenate([part[0] for part in parts]),
        np.concatenate([part[1] for part in parts]),
        np.concatenate([part[2] for part in parts]),
    )


def _step_tables() -> tuple[list[int], list[int]]:
    """Record steps (length varint size + record length) by the varint's first
    byte (one-byte varints) and by its first two bytes as a little-endian
    uint16 (two-byte ones); :data:`_BAD_STEP` where the length is below the
    minimum or the varint is longer (or shorter, in the two-byte table)."""
    b = np.arange(0x80)
    length = (b >> 1) ^ -(b & 1)
    one = np.where(length >= _MIN_RECORD_BODY, 1 + length, _BAD_STEP)
    w = np.arange(1 << 16)
    u = (w & 0x7F) | ((w >> 8) << 7)
    length = (u >> 1) ^ -(u & 1)
    two_bytes = (w & 0x80 != 0) & (w >> 8 < 0x80)
    two = np.where(two_bytes & (length >= _MIN_RECORD_BODY), 2 + length, _BAD_STEP)
    return one.tolist(), two.tolist()


# Past any buffer: the next read raises IndexError, or the last step overshoots.
_BAD_STEP = 1 << 62
_STEP1, _STEP2 = _step_tables()


def _quick_scan(buf: bytes | memoryview, pos: int, end: int, count: int) -> Any:
    """Starts of the ``count`` records from ``pos``, the last one ending the
    section, when every length varint has one or two bytes; else (or for
    any problem) ``None``, and :func:`_scan_starts` says what is wrong.

    Sound because every step is a valid record (length >= 6) or
    :data:`_BAD_STEP`: positions only grow, so ending exactly at ``end``
    means every record lies inside the section.
    """
    starts = [0] * count
    one = _STEP1
    two = _STEP2
    try:
        for i in range(count):
            starts[i] = pos
            b = buf[pos]
            pos += one[b] if b < 0x80 else two[b | (buf[pos + 1] << 8)]
    except IndexError:
        return None
    if pos != end:
        return None
    return np.array(starts, np.int64)


def _scan_starts(buf: bytes | memoryview, pos: int, end: int, first: int, count: int) -> Any:
    """Starts of records ``first`` .. ``count - 1`` from ``pos``, the last one
    ending the section: a loop over the length varints only."""
    starts = array("q")
    append = starts.append
    for i in range(first, count):
        if pos >= end:
            raise _CorruptError(f"the section ends after {i} of {count} records", None, pos)
        append(pos)
        b = buf[pos]
        if b < 0x80:
            length = (b >> 1) ^ -(b & 1)
            pos += 1
        elif pos + 2 < end and (b1 := buf[pos + 1]) < 0x80:
            u = (b & 0x7F) | (b1 << 7)
            length = (u >> 1) ^ -(u & 1)
            pos += 2
        elif pos + 2 < end and (b2 := buf[pos + 2]) < 0x80:
            u = (b & 0x7F) | ((b1 & 0x7F) << 7) | (b2 << 14)
            length = (u >> 1) ^ -(u & 1)
            pos += 3
        else:
            length, pos = _py_varint(buf, pos, end, "record length")
        if length < _MIN_RECORD_BODY or length > end - pos:
            raise _CorruptError(f"record {i} length {length} does not fit", None, pos)
        pos += length
    if pos != end:
        raise _CorruptError(f"{end - pos} bytes left over after {count} records", None, pos)
    return np.frombuffer(starts, np.int64)


# ---------------------------------------------------------------------- keys and values


def _views(a: Any, buf: bytes | memoryview, pos: Any, sizes: Any, rel: Any, long_index: Any) -> Any:
    """Binary_view views (16 bytes each) of the values at ``pos`` with ``sizes``.

    ``rel`` is each value's offset in its data buffer, ``long_index`` its
    buffer index (0 for all, or an array). Every view's 12 bytes after the
    size are first copied from the buffer in one gather, then masked by size
    class: the inlined bytes of a short value (zero padded), the 4-byte
    prefix of a long one, which then gets its buffer index and offset.
    """
    n = len(pos)
    alen = len(a)
    clipped = np.maximum(sizes, 0)
    size_class = np.minimum(clipped, _LONG)
    views = np.empty(n, _VIEW_BYTES)
    views["size"] = clipped
    last = int(pos.max())
    if alen >= _INLINE:
        windows = np.ndarray(shape=(alen - _INLINE + 1,), dtype=_WINDOW, buffer=buf, strides=(1,))
        if last <= alen - _INLINE:
            views["data"] = windows[pos]
            tail: list[int] = []
        else:
            views["data"] = windows[np.minimum(pos, alen - _INLINE)]
            tail = np.flatnonzero(pos > alen - _INLINE).tolist()
    else:
        tail = list(range(n))
    if tail:
        # Windows that would run past the buffer's end: what exists (the
        # value itself ends inside the buffer), then zeros.
        raw = views.view(np.uint8).reshape(n, 16)
        for i in tail:
            p = int(pos[i])
            raw[i, 4:] = np.frombuffer(bytes(buf[p : p + _INLINE]).ljust(_INLINE, b"\0"), np.uint8)
    words = views.view(_VIEW_WORDS)
    lo = words["lo"]
    lo &= _VIEW_MASK_LO.take(size_class)
    hi = words["hi"]
    hi &= _VIEW_MASK_HI.take(size_class)
    long_rows = size_class == _LONG
    np.copyto(hi, rel, casting="unsafe", where=long_rows)
    if not isinstance(long_index, int):
        lo |= (long_index.astype(np.uint64) << np.uint64(32)) * long_rows
    return views


# ---------------------------------------------------------------------- headers


# Header positions are decoded vectorised, one header index at a time over the
# records having that many, while at least this many records take part; the
# remaining headers of fewer records are read in Python.
_MIN_VECTOR_HEADERS = 32


def _end_varints(a: Any, w16: Any, pos: Any, limit: Any, what: str) -> tuple[Any, Any]:
    """:func:`_varints` where ``pos`` may be the buffer's last byte (a single
    byte varint there is fine): one-byte varints first, the rest after."""
    b = a[pos]
    longer = b >= 0x80
    if not longer.any():
        nxt = pos + 1
        bad = nxt > limit
        if bad.any():
            raise _CorruptError(f"{what} runs past the end of the record", bad, pos)
        return _VARINT1_VALUE.take(b), nxt
    rows = np.flatnonzero(longer)
    lim = limit[rows]
    # A longer varint has its second byte before the limit (so inside the buffer).
    bad = pos[rows] + 1 >= lim
    if bad.any():
        raise _CorruptError(f"{what} runs past the end of the record", int(rows[_first(bad)]), pos)
    values = _VARINT1_VALUE.take(b).astype(np.int64)
    nxt = pos + 1
    try:
        sub_values, sub_nxt = _varints(a, w16, pos[rows], lim, what)
    except _CorruptError as exc:
        raise _in_records(exc, rows) from None
    values[rows] = sub_values
    nxt[rows] = sub_nxt
    bad = nxt > limit
    if bad.any():
        raise _CorruptError(f"{what} runs past the end of the record", bad, pos)
    return values, nxt


def _headers(
    a: Any, w16: Any, buf: bytes | memoryview, rows: Any, pos: Any, rec_end: Any, n: int
) -> Any:
    """The headers column, given ``rows``: the records whose header count is
    not a single 0 byte. Advances every position in ``pos`` past its header
    count and headers. ``None`` if every count is 0 after all (a padded 0).

    Header keys and values are copied (into the struct's string and binary
    arrays): they are few and small next to keys and values. Keys that are
    all ASCII are valid UTF-8; otherwise every key is decoded with
    ``bytes.decode``, exactly as the row decoder does.
    """
    p = pos[rows]
    r_end = rec_end[rows]
    try:
        counts, p = _end_varints(a, w16, p, r_end, "header count")
    except _CorruptError as exc:
        raise _in_records(exc, rows) from None
    # Each header needs at least 2 bytes, which bounds a hostile count.
    bad = (counts < 0) | (counts > (r_end - p) // 2)
    if bad.any():
        i = _first(bad)
        raise _CorruptError(
            f"header count {int(counts[i])} does not fit in the record", int(rows[i]), int(p[i])
        )
    pos += 1  # the records without headers: past their single 0 byte
    per_record = np.zeros(n, np.int64)
    per_record[rows] = counts
    total = int(counts.sum())
    if total == 0:
        pos[rows] = p
        return None
    list_offsets = np.zeros(n + 1, np.int64)
    np.cumsum(per_record, out=list_offsets[1:])
    first_flat = list_offsets[rows]  # flat index of each row's first header
    out = np.empty((4, total), np.int64)  # key position, key length, value position and length
    key_pos, key_len, value_pos, value_len = out
    active = np.flatnonzero(counts)  # indices into rows
    j = 0
    while active.size >= _MIN_VECTOR_HEADERS:
        try:
            p[active] = _header_step(a, w16, p[active], r_end[active], first_flat[active] + j, out)
        except _CorruptError as exc:
            raise _in_records(exc, rows[active]) from None
        j += 1
        active = active[counts[active] > j]
    for sub in active.tolist():  # the few records with more headers: in Python
        try:
            p[sub] = _py_headers(
                buf, int(p[sub]), int(r_end[sub]), out, int(first_flat[sub]), j, int(counts[sub])
            )
        except _CorruptError as exc:
            raise _in_records(exc, [int(rows[sub])]) from None
    pos[rows] = p

    key_offsets, key_data = _gather(a, key_pos, key_len)
    if key_data.size and int(key_data.max()) >= 0x80:
        # Not all ASCII: check the keys exactly as the row decoder decodes them.
        for k in range(total):
            start = int(key_pos[k])
            try:
                bytes(buf[start : start + int(key_len[k])]).decode()
            except UnicodeDecodeError as exc:
                record = int(np.searchsorted(list_offsets, k, side="right")) - 1
                raise _CorruptError(f"header key is not UTF-8 ({exc})", record, start) from None
    hkeys = pa.Array.from_buffers(
        pa.string(), total, [None, pa.py_buffer(key_offsets), pa.py_buffer(key_data)]
    )
    value_offsets, value_data = _gather(a, value_pos, np.maximum(value_len, 0))
    nulls = int(np.count_nonzero(value_len < 0))
    validity = pa.py_buffer(np.packbits(value_len >= 0, bitorder="little")) if nulls else None
    hvalues = pa.Array.from_buffers(
        pa.binary(),
        total,
        [validity, pa.py_buffer(value_offsets), pa.py_buffer(value_data)],
        null_count=nulls,
    )
    items = pa.StructArray.from_arrays([hkeys, hvalues], names=["key", "value"])
    return pa.ListArray.from_arrays(_int32_array(list_offsets), items, type=HEADERS_TYPE)


def _py_headers(
    buf: bytes | memoryview, q: int, end: int, out: Any, flat: int, first: int, count: int
) -> int:
    """Headers ``first`` .. ``count - 1`` of one record from ``q``, in Python;
    stores them as :func:`_header_step` does; the position after them."""
    for k in range(flat + first, flat + count):
        klen, q = _py_varint(buf, q, end, "header key length")
        if klen < 0 or klen > end - q:
            raise _CorruptError(f"bad header key length {klen}", 0, q)
        out[0, k] = q
        out[1, k] = klen
        q += klen
        vlen, q = _py_varint(buf, q, end, "header value length")
        if vlen < -1 or vlen > end - q:
            raise _CorruptError(f"bad header value length {vlen}", 0, q)
        out[2, k] = q
        out[3, k] = vlen
        q += max(vlen, 0)
    return q


def _header_step(a: Any, w16: Any, hp: Any, he: Any, flat: Any, out: Any) -> Any:
    """One header of each record at ``hp`` (ending by ``he``): stores its key
    and value position and length at ``flat`` in ``out``; the positions after."""
    # A header is at least 2 bytes: its key length must leave 1 for the value's.
    bad = hp > he - 2
    if bad.any():
        raise _CorruptError("header runs past the end of the record", bad, hp)
    klen, hp = _varints(a, w16, hp, he - 1, "header key length")
    bad = (klen < 0) | (klen > he - 1 - hp)
    if bad.any():
        raise _CorruptError(f"bad header key length {int(klen[_first(bad)])}", bad, hp)
    out[0, flat] = hp
    out[1, flat] = klen
    hp = hp + klen
    vlen, hp = _end_varints(a, w16, hp, he, "header value length")
    bad = (vlen < -1) | (vlen > he - hp)
    if bad.any():
        raise _CorruptError(f"bad header value length {int(vlen[_first(bad)])}", bad, hp)
    out[2, flat] = hp
    out[3, flat] = vlen
    return hp + np.maximum(vlen, 0)


def _gather(a: Any, starts: Any, sizes: Any) -> tuple[Any, Any]:
    """The byte ranges ``starts[i] .. starts[i] + sizes[i]`` of ``a`` concatenated,
    and their int32 offsets (arrow's binary layout)."""
    offsets = np.zeros(len(sizes) + 1, np.int64)
    np.cumsum(sizes, out=offsets[1:])
    total = int(offsets[-1])
    if total > _INT32_MAX:
        raise _CorruptError("headers over 2 GiB", None, int(starts[0]))
    index = np.repeat(starts - offsets[:-1], sizes) + np.arange(total)
    return offsets.astype(np.int32), a[index]


# ---------------------------------------------------------------------- decode


def decode_columns(batch: RecordBatch) -> RecordColumns:
    """Decode ``batch`` into :class:`RecordColumns`.

    Row ``i`` equals ``batch.records()[i]``. Keys and values are zero-copy
    views into the batch's (decompressed) records section. A legacy (magic
    0/1) batch is converted from its rows instead.

    Raises:
        CorruptBatchError: wherever :meth:`RecordBatch.records` raises, and for
            offsets or timestamps outside int64 (see the module docstring).
    """
    if batch.magic < 2:
        return columns_from_rows(batch.records())
    buf, start, end, count, append_timestamp = batch._records_section()
    try:
        return _decode(batch, buf, start, end, count, append_timestamp)
    except _CorruptError as exc:
        why, rows, where = exc.args
        if rows is not None:
            index = rows if isinstance(rows, int) else _first(rows)
            if not isinstance(where, int):
                where = int(where[index])
            why = f"record {index}: {why}"
        raise batch._corrupt(f"{why} (record section byte {where - start})") from None


def _decode(
    batch: RecordBatch,
    buf: bytes | memoryview,
    start: int,
    end: int,
    count: int,
    append_timestamp: int | None,
) -> RecordColumns:
    if count == 0:
        if end != start:
            raise _CorruptError(f"{end - start} bytes left over after 0 records", None, start)
        return columns_from_rows([])
    a = np.frombuffer(buf, np.uint8)
    alen = len(a)
    # The buffer as unaligned little-endian uint16 at every byte position: a
    # varint's first two bytes in one gather.
    w16 = np.ndarray(shape=(max(alen - 1, 0),), dtype="<u2", buffer=buf, strides=(1,))
    starts, pos, lengths = _record_starts(a, w16, buf, start, end, count)
    if end - start > _INT32_MAX:
        # Only with a raised decompression cap. Kafka's record lengths are
        # int32, and so are the sizes in arrow's views.
        bad = lengths > _INT32_MAX
        if bad.any():
            raise _CorruptError("record length over 2**31-1", bad, starts)
    rec_end = pos + lengths  # inside the section: checked by _record_starts

    # Each varint must leave room for the fields after it (one byte at least
    # each): a record breaking that is corrupt anyway, and it keeps every
    # position but the header count's at least 2 bytes before the buffer's
    # end, so that w16 can be read there.
    pos = pos + 1  # the attributes byte, unused in v2
    limit = rec_end - 4
    ts_delta, pos = _varints(
        a, w16, pos, limit, "timestamp delta", wide_ok=append_timestamp is not None
    )
    limit += 1
    offset_delta, pos = _varints(a, w16, pos, limit, "offset delta")
    limit += 1
    key_sizes, key_pos, pos = _sized_fields(a, w16, pos, limit, "key length")
    limit += 1
    value_sizes, value_pos, pos = _sized_fields(a, w16, pos, limit, "value length")
    headers = _record_headers(a, w16, buf, pos, rec_end, count, start)

    offsets = _add_base(offset_delta, batch.base_offset, "offset", starts)
    if append_timestamp is None:
        timestamps = _add_base(ts_delta, batch.base_timestamp, "timestamp", starts)
    else:
        timestamps = np.full(count, append_timestamp, np.int64)
    keys, values, key_sizes, value_sizes = _key_value_arrays(
        a, buf, start, end, count, (key_pos, key_sizes), (value_pos, value_sizes)
    )
    return RecordColumns(count, offsets, timestamps, keys, values, key_sizes, value_sizes, headers)


def _sized_fields(a: Any, w16: Any, pos: Any, limit: Any, what: str) -> tuple[Any, Any, Any]:
    """(sizes, positions, positions after) of every record's key or value: its
    length varint ``what`` at ``pos``, then its bytes (none for -1, null)."""
    sizes, pos = _varints(a, w16, pos, limit, what)
    bad = (sizes < -1) | (sizes > limit - pos)
    if bad.any():
        raise _CorruptError(f"bad {what} {int(sizes[_first(bad)])}", bad, pos)
    return sizes, pos, pos + np.maximum(sizes, 0)


def _record_headers(
    a: Any, w16: Any, buf: bytes | memoryview, pos: Any, rec_end: Any, count: int, start: int
) -> Any:
    """The headers column (None when no record has any) from the header counts
    at ``pos``; each record's fields must then end where its length says."""
    # The header count: almost always a single 0 byte.
    with_headers = a[pos]
    headers = None
    if with_headers.any():
        headers = _headers(a, w16, buf, np.flatnonzero(with_headers), pos, rec_end, count)
    else:
        pos = pos + 1
    bad = pos != rec_end
    if bad.any():
        i = _first(bad)
        raise _CorruptError(
            f"fields end at byte {int(pos[i]) - start} but its length says "
            f"{int(rec_end[i]) - start}",
            i,
            int(rec_end[i]),
        )
    return headers


def _key_value_arrays(
    a: Any,
    buf: bytes | memoryview,
    start: int,
    end: int,
    count: int,
    key_fields: tuple[Any, Any],
    value_fields: tuple[Any, Any],
) -> tuple[Any, Any, Any, Any]:
    """(keys, values, key sizes, value sizes): the ``binary_view`` arrays over
    the records section of the (positions, sizes) of every key and value, and
    their sizes as int32."""
    key_pos, key_sizes = key_fields
    value_pos, value_sizes = value_fields
    # Keys and values share one views computation: rows 0..n-1 keys, n..2n-1 values.
    section = pa.py_buffer(buf)
    if start or end != len(buf):
        section = section.slice(start, end - start)
    both_pos = np.concatenate((key_pos, value_pos))
    both_sizes = np.concatenate((key_sizes, value_sizes))
    rel = both_pos - start
    data_buffers = [section]
    long_index: Any = 0
    if end - start > _MAX_SINGLE_BUFFER:
        span = 1 << _BUFFER_SPAN_BITS
        long_index = rel >> _BUFFER_SPAN_BITS
        rel = rel & (span - 1)
        data_buffers = [section.slice(j * span) for j in range((end - start - 1) // span + 1)]
    views = _views(a, buf, both_pos, both_sizes, rel, long_index)
    key_sizes = key_sizes.astype(np.int32)
    value_sizes = value_sizes.astype(np.int32)
    keys = _view_array(count, views[:count], key_sizes, data_buffers)
    values = _view_array(count, views[count:], value_sizes, data_buffers)
    return keys, values, key_sizes, value_sizes


def _add_base(deltas: Any, base: int, what: str, starts: Any) -> Any:
    """``base + deltas`` as int64; raises if one falls outside int64."""
    low = base + int(deltas.min())
    high = base + int(deltas.max())
    if low < _INT64_MIN or high > _INT64_MAX:
        wide = deltas.astype(object) + base
        bad = (wide < _INT64_MIN) | (wide > _INT64_MAX)
        raise _CorruptError(f"{what} outside int64", bad.astype(bool), starts)
    return deltas.astype(np.int64) + base


def _int32_array(values: Any) -> Any:
    """An int32 Arrow array of ``values``, from its buffer. Never ``pa.array``
    in this module: on first use it imports pandas (to recognise pandas
    objects), half a second of CPU for a consumer that never needs pandas."""
    data = np.ascontiguousarray(values, dtype=np.int32)
    return pa.Array.from_buffers(pa.int32(), len(data), [None, pa.py_buffer(data)])


def _int64_array(values: Any) -> Any:
    data = np.ascontiguousarray(values, dtype=np.int64)
    return pa.Array.from_buffers(pa.int64(), len(data), [None, pa.py_buffer(data)])


def binary_array(items: list[bytes | None]) -> Any:
    """A ``binary`` array of ``items`` (None is null), from buffers; None when
    they hold over 2 GiB (``binary`` offsets are int32: the caller then needs
    ``large_binary``, which the ``cast`` kernel builds)."""
    offsets = array("i", (0,))
    try:
        offsets.extend(accumulate(0 if b is None else len(b) for b in items))
    except OverflowError:
        return None
    nulls = items.count(None)
    return pa.Array.from_buffers(
        pa.binary(), len(items),
        [_validity_bitmap(items) if nulls else None, pa.py_buffer(offsets),
         pa.py_buffer(b"".join([b for b in items if b is not None]))],
        null_count=nulls,
    )


# A binary_view view packed in Python: inline (size, up to 12 bytes, zero padded
# by struct), or long (size, 4-byte prefix, buffer index, offset).
_INLINE_VIEW = struct.Struct("<i12s")
_LONG_VIEW = struct.Struct("<i4sii")
_NULL_VIEW = bytes(16)


def _binary_view(items: list[bytes | None]) -> Any:
    """A ``binary_view`` array of ``items`` (None is null), its views packed in
    Python: for a few records far cheaper than building a ``binary`` array and
    casting it (a compute kernel call), and no numpy call unless one is null."""
    views: list[bytes] = []
    buffers: list[list[bytes]] = [[]]
    at = index = 0
    null = False
    inline, long, limit = _INLINE_VIEW.pack, _LONG_VIEW.pack, _INT32_MAX
    for b in items:
        if b is None:
            views.append(_NULL_VIEW)
            null = True
            continue
        size = len(b)
        if size <= _INLINE:
            views.append(inline(size, b))
            continue
        if at + size > limit:  # a view's offset is an int32: start another buffer
            buffers.append([])
            at = 0
            index += 1
        views.append(long(size, b[:4], index, at))
        buffers[index].append(b)
        at += size
    validity = _validity_bitmap(items) if null else None
    return pa.Array.from_buffers(
        pa.binary_view(), len(items),
        [validity, pa.py_buffer(b"".join(views)),
         *(pa.py_buffer(b"".join(chunk)) for chunk in buffers)],
    )


def _validity_bitmap(items: list[Any]) -> Any:
    """An Arrow validity bitmap of ``items`` (a bit per item, clear where None)."""
    if len(items) > 64:
        present = np.fromiter((b is not None for b in items), dtype=bool, count=len(items))
        return pa.py_buffer(np.packbits(present, bitorder="little"))
    bits = 0  # a few items: an int is cheaper than two numpy calls
    for i, b in enumerate(items):
        if b is not None:
            bits |= 1 << i
    return pa.py_buffer(bits.to_bytes((len(items) + 7) // 8, "little"))


def _sizes(items: list[bytes | None]) -> Any:
    """int32 sizes, -1 for None."""
    return np.array([-1 if b is None else len(b) for b in items], np.int32)


def columns_from_rows(rows: list[Any]) -> RecordColumns:
    """Columns of already decoded ``(offset, timestamp, key, value, headers)``
    rows (:data:`~kafka_share.records.batch.Record`): legacy (magic 0/1)
    message sets, empty batches, and the few records of a small batch (see
    :func:`decode_small_columns`). Copies keys and values; a Python loop per row.

    Raises:
        OverflowError: an offset or timestamp outside int64.
    """
    keys = [r[2] for r in rows]
    values = [r[3] for r in rows]
    headers = None
    if any(r[4] for r in rows):
        pairs = [h for r in rows for h in r[4]]
        ends = np.zeros(len(rows) + 1, dtype=np.int64)
        np.cumsum([len(r[4]) for r in rows], out=ends[1:])
        headers = pa.ListArray.from_arrays(
            _int32_array(ends),
            pa.StructArray.from_arrays(
                # Within one record batch: far under 2 GiB.
                [binary_array([k.encode() for k, _ in pairs]).cast(pa.string()),
                 binary_array([v for _, v in pairs])],
                names=["key", "value"],
            ),
            type=HEADERS_TYPE,
        )
    # The binary_view arrays are built only if read (RecordColumns.keys/values):
    # poll_arrow's default binary columns are built from the lists directly.
    return RecordColumns(
        len(rows),
        np.array([r[0] for r in rows], np.int64),
        np.array([r[1] for r in rows], np.int64),
        None,
        None,
        _sizes(keys),
        _sizes(values),
        headers,
        items=(keys, values),
    )


#: below this many records (and SMALL_BATCH_BYTES) a batch is decoded by the row
#: decoder and converted (:func:`decode_small_columns`): :func:`decode_columns`
#: costs about 80 µs whatever the batch's size (a few dozen numpy calls), the
#: row decoder and :func:`columns_from_rows` about 10 µs plus 1.5 µs per record
#: (measured on 100 B and 1 KiB records: even at about 48 records)
SMALL_BATCH_RECORDS = 32
#: ... and up to this many bytes: the row path copies keys and values twice,
#: which for large values costs more than the fixed cost it saves
SMALL_BATCH_BYTES = 64 * 1024


def decode_small_columns(batch: RecordBatch) -> RecordColumns:
    """:func:`decode_columns`, through the row decoder for a batch of fewer than
    :data:`SMALL_BATCH_RECORDS` records (keys and values then copied into the
    arrays rather than viewed in place: a few small copies).

    What ``poll_arrow`` decodes with: at low rates each fetch brings a record or
    two, and the vectorised decoder's fixed cost would be most of the poll's.

    Raises:
        CorruptBatchError: as :func:`decode_columns`.
    """
    if batch.record_count >= SMALL_BATCH_RECORDS or batch.size_in_bytes > SMALL_BATCH_BYTES:
        return decode_columns(batch)
    rows = batch.records()  # raises CorruptBatchError as decode_columns does
    try:
        return columns_from_rows(rows)
    except OverflowError:
        # An offset or timestamp beyond int64: decode_columns names the record.
        return decode_columns(batch)


# ---------------------------------------------------------------------- rows from columns


def shaped_record_chunks(
    batch: RecordBatch, shape: RecordShape, chunk_records: int
) -> Iterator[list[Any]]:
    """:meth:`RecordBatch.shaped_record_chunks` through :func:`decode_columns`:
    the varints of the whole batch decoded at once, then each chunk's tuples
    built by C loops (``map`` over ``zip``), about half the row decoder's cost
    per record for batches of more than a few dozen records.

    Raises:
        CorruptBatchError: as :func:`decode_columns` (before the first chunk).
    """
    columns = decode_columns(batch)
    step = max(1, chunk_records)
    for start in range(0, columns.count, step):
        part = columns if step >= columns.count else columns.slice(start, start + step)
        yield _shaped(part, shape)


def _shaped(c: RecordColumns, shape: RecordShape) -> list[Any]:
    headers: Any
    if c.headers is None:
        headers = repeat(())
    else:
        headers = [
            tuple((h["key"], h["value"]) for h in record) for record in c.headers.to_pylist()
        ]
    return list(map(partial(tuple.__new__, shape.type), zip(
        repeat(shape.topic), repeat(shape.partition), c.offsets.tolist(),
        c.timestamps.tolist(), repeat(shape.timestamp_type), c.keys.to_pylist(),
        c.values.to_pylist(), headers, repeat(shape.leader_epoch),
        repeat(shape.delivery_count), c.key_sizes.tolist(), c.value_sizes.tolist(),
        strict=False,  # the repeat()s are endless
    )))
