"""Decode a v2 record batch into columns (numpy and pyarrow) without a Python object per record.

The arrow path of the share consumer (``poll_arrow()``) turns every batch into
a :class:`RecordColumns` with :func:`decode_columns`. This module is imported
only by that path: it needs numpy and pyarrow (the ``arrow`` extra), which the
rest of the package does not. ``poll``'s vectorised decoding needs numpy only
and lives in :mod:`kafka_share.records.vectorised`.

Theory of operation
===================

:func:`~kafka_share.records.vectorised.decode_fields` finds every record's
fields (see that module for how, and for what it validates: wherever the row
decoder raises, so does it). Here they become columns:

* **Keys and values** become ``binary_view`` arrays whose views point into the
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
* **Headers**, when some record has one, become
  ``list<struct<key: string, value: binary>>`` (header keys and values copied:
  they are small).
"""

from __future__ import annotations

import struct
import sys
from array import array
from itertools import accumulate
from typing import Any

import numpy as np
import pyarrow as pa

from kafka_share.records.batch import RecordBatch
from kafka_share.records.vectorised import INT32_MAX as _INT32_MAX
from kafka_share.records.vectorised import Fields, HeaderFields, decode_fields, gather

__all__ = [
    "HEADERS_TYPE", "SMALL_BATCH_BYTES", "SMALL_BATCH_RECORDS", "RecordColumns",
    "binary_array", "columns_from_rows", "decode_columns", "decode_small_columns",
]

if sys.byteorder != "little":  # pragma: no cover - no such CI machine
    # Arrow buffers are native-endian; the views here are written little-endian.
    raise ImportError("kafka_share.records.columnar needs a little-endian machine")

HEADERS_TYPE: Any = pa.list_(pa.struct([("key", pa.string()), ("value", pa.binary())]))
"""Arrow type of :attr:`RecordColumns.headers`."""

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




def decode_columns(batch: RecordBatch) -> RecordColumns:
    """Decode ``batch`` into :class:`RecordColumns`.

    Row ``i`` equals ``batch.records()[i]``. Keys and values are zero-copy
    views into the batch's (decompressed) records section. A legacy (magic
    0/1) batch is converted from its rows instead.

    Raises:
        CorruptBatchError: wherever :meth:`RecordBatch.records` raises, and for
            offsets or timestamps outside int64 (see
            :mod:`kafka_share.records.vectorised`).
    """
    if batch.magic < 2:
        return columns_from_rows(batch.records())
    f = decode_fields(batch)
    if f.count == 0:
        return columns_from_rows([])
    keys, values, key_sizes, value_sizes = _key_value_arrays(f)
    return RecordColumns(
        f.count, f.offsets, f.timestamps, keys, values, key_sizes, value_sizes,
        None if f.headers is None else _header_array(f.buf, f.headers),
    )


def _header_array(buf: bytes | memoryview, h: HeaderFields) -> Any:
    """The :data:`HEADERS_TYPE` column of the headers ``h`` locates in ``buf``."""
    a = np.frombuffer(buf, np.uint8)
    total = h.total
    hkeys = pa.Array.from_buffers(
        pa.string(), total, [None, pa.py_buffer(h.key_offsets), pa.py_buffer(h.key_data)]
    )
    value_len = h.value_len
    value_offsets, value_data = gather(a, h.value_pos, np.maximum(value_len, 0))
    nulls = int(np.count_nonzero(value_len < 0))
    validity = pa.py_buffer(np.packbits(value_len >= 0, bitorder="little")) if nulls else None
    hvalues = pa.Array.from_buffers(
        pa.binary(),
        total,
        [validity, pa.py_buffer(value_offsets), pa.py_buffer(value_data)],
        null_count=nulls,
    )
    items = pa.StructArray.from_arrays([hkeys, hvalues], names=["key", "value"])
    return pa.ListArray.from_arrays(_int32_array(h.list_offsets), items, type=HEADERS_TYPE)


def _key_value_arrays(f: Fields) -> tuple[Any, Any, Any, Any]:
    """(keys, values, key sizes, value sizes): the ``binary_view`` arrays over
    the records section of every key and value ``f`` locates, and their sizes
    as int32."""
    buf, start, end, count = f.buf, f.start, f.end, f.count
    key_pos, key_sizes = f.key_pos, f.key_sizes
    value_pos, value_sizes = f.value_pos, f.value_sizes
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
    views = _views(np.frombuffer(buf, np.uint8), buf, both_pos, both_sizes, rel, long_index)
    key_sizes = key_sizes.astype(np.int32)
    value_sizes = value_sizes.astype(np.int32)
    keys = _view_array(count, views[:count], key_sizes, data_buffers)
    values = _view_array(count, views[count:], value_sizes, data_buffers)
    return keys, values, key_sizes, value_sizes




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


