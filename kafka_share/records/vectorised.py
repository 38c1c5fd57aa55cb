"""Decode a v2 record batch's fields with numpy: where every record's key, value
and headers are, its offset and timestamp, one numpy operation per field rather
than a Python loop per record; and the batch's records (``poll``'s rows) from
that.

Needs numpy only. :mod:`kafka_share.records.columnar` (``poll_arrow``) builds
Arrow columns on these fields; ``poll`` builds its records from them here
(:func:`record_pieces`), so a consumer that only polls never loads
pyarrow (about 28 MB and 0.15 s of CPU at its first large batch).

Theory of operation
===================

A v2 records section is a sequence of records, each prefixed by its length as
a zig-zag varint. Only the *starts* of the records are sequential: once they
are known, every field of every record can be decoded at once.

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
3. **Headers** are located only when some record's header count is not a
   single 0 byte. Header ``j`` of every record having one is located
   vectorised, ``j`` = 0, 1, ... while enough records take part; the remaining
   headers of a few records are read in Python.
4. **Rows** (:func:`record_pieces`): keys and values are sliced out of
   the section by a comprehension each (none for keys when every key is
   null), offsets and timestamps come from ``tolist()``, and each record's
   tuple is built by ``map`` over ``zip``.

Validation
==========

The row decoder (:meth:`RecordBatch.records`) is the reference: for every
batch it decodes, :func:`decode_fields` finds the same records, and wherever
it raises, :func:`decode_fields` raises :class:`CorruptBatchError` (with the
batch's offsets and a reason naming the record and the byte). Every check is
vectorised: each varint ends inside its record and within 10 bytes, every
record is at least 6 bytes and inside the section, lengths are >= -1 (header
keys >= 0) and fit in the record, every record's fields end exactly at its
declared length, the section holds exactly ``record_count`` records with no
bytes left over. A header key must be valid UTF-8 (it is decoded with
``bytes.decode``, exactly as the row decoder does); otherwise the batch is
corrupt.

Where the row decoder would return a number an int64 cannot hold, this module
raises :class:`CorruptBatchError` instead (the row decoder uses Python ints;
Kafka's own encoder can never write such a batch): an offset or a CREATE_TIME
timestamp outside int64 (from an absurd delta varint), a varint whose value
needs more than 64 bits (a record length, key or value length over 2**31-1 is
rejected for the same reason).
"""

from __future__ import annotations

from array import array
from collections.abc import Iterator
from functools import partial
from itertools import pairwise, repeat
from typing import Any

import numpy as np

from kafka_share.records.batch import RecordBatch, RecordPiece, RecordShape

__all__ = [
    "INT32_MAX", "Fields", "HeaderFields", "decode_fields", "gather", "record_pieces",
]

INT32_MAX = 2**31 - 1
_INT64_MIN = -(2**63)
_INT64_MAX = 2**63 - 1
_MIN_RECORD_BODY = 6  # attributes + 5 one-byte varints (as the row decoder)
_MAX_VARINT_BYTES = 10


class HeaderFields:
    """Where the headers of a batch's records are: flat arrays over every header
    of every record, in order; record ``i``'s headers are the flat indices
    ``list_offsets[i]`` .. ``list_offsets[i + 1] - 1``."""

    __slots__ = ("key_data", "key_len", "key_offsets", "key_pos", "list_offsets",
                 "total", "value_len", "value_pos")

    def __init__(self, list_offsets: Any, positions: Any, key_offsets: Any,
                 key_data: Any) -> None:
        self.list_offsets = list_offsets  #: int64, count + 1
        self.total = int(list_offsets[-1])
        #: int64 position and length in the buffer of each header's key and
        #: value (a value's length is -1 for a null value)
        self.key_pos, self.key_len, self.value_pos, self.value_len = positions
        #: the keys concatenated (uint8, valid UTF-8) and their int32 offsets
        self.key_offsets = key_offsets
        self.key_data = key_data


class Fields:
    """The fields of a batch's records, row ``i`` being record ``i`` (offset
    order): numpy arrays, and the buffer the positions point into."""

    __slots__ = ("buf", "count", "end", "headers", "key_pos", "key_sizes", "offsets",
                 "start", "timestamps", "value_pos", "value_sizes")

    def __init__(self, buf: bytes | memoryview, start: int, end: int, count: int,
                 numbers: tuple[Any, Any], keys: tuple[Any, Any], values: tuple[Any, Any],
                 headers: HeaderFields | None) -> None:
        #: the records section is ``buf[start:end]``
        self.buf, self.start, self.end, self.count = buf, start, end, count
        #: int64 absolute offsets, int64 timestamps (LOG_APPEND_TIME applied)
        self.offsets, self.timestamps = numbers
        #: positions in ``buf`` (int64) and sizes (int32 or int64; -1: null) of
        #: keys and values
        self.key_pos, self.key_sizes = keys
        self.value_pos, self.value_sizes = values
        #: None when no record of the batch has a header
        self.headers = headers


def decode_fields(batch: RecordBatch) -> Fields:
    """The fields of a v2 ``batch``'s records.

    Raises:
        CorruptBatchError: wherever :meth:`RecordBatch.records` raises, and for
            offsets or timestamps outside int64 (see the module docstring).
        ValueError: a legacy (magic 0/1) batch.
    """
    if batch.magic < 2:
        raise ValueError("decode_fields() needs a v2 record batch")
    buf, start, end, count, append_timestamp = batch._records_section()
    try:
        return _decode_fields(batch, buf, start, end, count, append_timestamp)
    except _CorruptError as exc:
        why, rows, where = exc.args
        if rows is not None:
            index = rows if isinstance(rows, int) else _first(rows)
            if not isinstance(where, int):
                where = int(where[index])
            why = f"record {index}: {why}"
        raise batch._corrupt(f"{why} (record section byte {where - start})") from None


_NO_POSITIONS: Any = np.zeros(0, np.int64)


def _decode_fields(
    batch: RecordBatch,
    buf: bytes | memoryview,
    start: int,
    end: int,
    count: int,
    append_timestamp: int | None,
) -> Fields:
    if count == 0:
        if end != start:
            raise _CorruptError(f"{end - start} bytes left over after 0 records", None, start)
        none = (_NO_POSITIONS, _NO_POSITIONS)
        return Fields(buf, start, end, 0, none, none, none, None)
    a = np.frombuffer(buf, np.uint8)
    # The buffer as unaligned little-endian uint16 at every byte position: a
    # varint's first two bytes in one gather.
    w16 = np.ndarray(shape=(max(len(a) - 1, 0),), dtype="<u2", buffer=buf, strides=(1,))
    starts, pos, lengths = _record_starts(a, w16, buf, start, end, count)
    if end - start > INT32_MAX:
        # Only with a raised decompression cap. Kafka's record lengths are
        # int32, and so are the sizes in arrow's views.
        bad = lengths > INT32_MAX
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
    return Fields(buf, start, end, count, (offsets, timestamps), (key_pos, key_sizes),
                  (value_pos, value_sizes), headers)


# ---------------------------------------------------------------------- rows


def record_pieces(
    batch: RecordBatch, shape: RecordShape, chunk_records: int
) -> Iterator[RecordPiece]:
    """:meth:`RecordBatch.shaped_record_chunks` through :func:`decode_fields`,
    each chunk as a :data:`~kafka_share.records.batch.RecordPiece`: the varints
    of the whole batch decoded at once, then each chunk's keys and values
    sliced by one comprehension each, its tuples built by a C loop (``map``
    over ``zip``), and its offsets, bytes and order taken from the arrays (no
    pass over the tuples). About half the row decoder's cost per record for
    batches of more than a few dozen small records.

    Raises:
        CorruptBatchError: as :func:`decode_fields` (before the first piece).
        ValueError: a legacy (magic 0/1) batch.
    """
    fields = decode_fields(batch)
    step = max(1, chunk_records)
    for first in range(0, fields.count, step):
        # Yielded unbound: the suspended generator holds no reference to the piece.
        yield _piece(fields, shape, first, min(fields.count, first + step))


def _piece(f: Fields, shape: RecordShape, first: int, stop: int) -> RecordPiece:
    offsets = f.offsets[first:stop]
    offset_list = offsets.tolist()
    payload = int(np.maximum(f.key_sizes[first:stop], 0).sum()) + int(
        np.maximum(f.value_sizes[first:stop], 0).sum()
    )
    increasing = bool((offsets[1:] > offsets[:-1]).all())
    return _rows(f, shape, first, stop, offset_list), offset_list, payload, increasing


def _rows(
    f: Fields, shape: RecordShape, first: int, stop: int, offsets: list[int]
) -> list[Any]:
    """Records ``first`` .. ``stop - 1`` of ``f`` (at ``offsets``) as tuples of ``shape``."""
    key_sizes = f.key_sizes[first:stop]
    value_sizes = f.value_sizes[first:stop]
    headers: Any = repeat(()) if f.headers is None else _header_tuples(f, first, stop)
    return list(map(partial(tuple.__new__, shape.type), zip(
        repeat(shape.topic), repeat(shape.partition), offsets,
        f.timestamps[first:stop].tolist(), repeat(shape.timestamp_type),
        _slices(f.buf, f.key_pos[first:stop], key_sizes),
        _slices(f.buf, f.value_pos[first:stop], value_sizes),
        headers, repeat(shape.leader_epoch), repeat(shape.delivery_count),
        key_sizes.tolist(), value_sizes.tolist(),
        strict=False,  # the repeat()s are endless
    )))


def _slices(buf: bytes | memoryview, pos: Any, sizes: Any) -> Any:
    """``bytes`` of ``buf`` at ``pos`` of ``sizes`` (None where the size is -1),
    each copied once."""
    if not len(sizes):
        return []
    nulls = sizes < 0
    if nulls.all():
        return repeat(None)  # no keys: the common case
    # A comprehension's BUILD_SLICE + BINARY_SUBSCR: half the cost of map()
    # over slice objects (which calls the slice type for each).
    ends = (pos + sizes).tolist()
    if isinstance(buf, bytes):
        items: list[Any] = [buf[a:b] for a, b in zip(pos.tolist(), ends, strict=True)]
    else:
        items = [buf[a:b].tobytes() for a, b in zip(pos.tolist(), ends, strict=True)]
    if nulls.any():
        for i in np.flatnonzero(nulls).tolist():
            items[i] = None
    return items


def _header_tuples(f: Fields, first: int, stop: int) -> list[tuple[tuple[str, bytes | None], ...]]:
    """Each record's headers as the row decoder gives them: (key, value or
    None) pairs; keys are valid UTF-8 (checked by :func:`decode_fields`)."""
    h = f.headers
    assert h is not None
    buf = f.buf
    bounds = h.list_offsets[first : stop + 1].tolist()
    lo, hi = bounds[0], bounds[-1]
    key_pos = h.key_pos[lo:hi].tolist()
    key_len = h.key_len[lo:hi].tolist()
    value_pos = h.value_pos[lo:hi].tolist()
    value_len = h.value_len[lo:hi].tolist()
    pairs = [
        (str(buf[kp : kp + kl], "utf-8"), None if vl < 0 else bytes(buf[vp : vp + vl]))
        for kp, kl, vp, vl in zip(key_pos, key_len, value_pos, value_len, strict=True)
    ]
    return [tuple(pairs[b - lo : e - lo]) for b, e in pairwise(bounds)]


# ---------------------------------------------------------------------- errors


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


# ---------------------------------------------------------------------- varints


def _varint2_tables() -> tuple[Any, Any, Any]:
    """Lookup tables over the 65536 values of a varint's first two bytes
    (little-endian ``uint16``): the zig-zag value (int32) and size (1 or 2) of
    a varint that ends within them; for a longer one, size
    :data:`_LONGER` and the unsigned 14-bit payload of the two bytes."""
    # int32 throughout (every intermediate fits): half the temporary memory,
    # which the allocator keeps in the process once freed.
    w = np.arange(1 << 16, dtype=np.int32)
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
    minimum or the varint is longer (or shorter, in the two-byte table).

    Built in Python, not numpy: ``tolist()`` would make 65536 int objects (2.6
    MB with the temporaries); here the 8,000 or so valid steps are the only
    ones, every bad entry the same object (0.8 MB)."""
    bad = _BAD_STEP
    one = [bad] * 0x80
    for b in range(0x80):
        length = (b >> 1) ^ -(b & 1)
        if length >= _MIN_RECORD_BODY:
            one[b] = 1 + length
    two = [bad] * (1 << 16)
    for b1 in range(0x80):  # the second (last) byte
        for b0 in range(0x80, 0x100):  # the first, with its continuation bit
            u = (b0 & 0x7F) | (b1 << 7)
            length = (u >> 1) ^ -(u & 1)
            if length >= _MIN_RECORD_BODY:
                two[b0 | (b1 << 8)] = 2 + length
    return one, two


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


def gather(a: Any, starts: Any, sizes: Any) -> tuple[Any, Any]:
    """The byte ranges ``starts[i] .. starts[i] + sizes[i]`` of ``a`` concatenated,
    and their int32 offsets (arrow's binary layout)."""
    offsets = np.zeros(len(sizes) + 1, np.int64)
    np.cumsum(sizes, out=offsets[1:])
    total = int(offsets[-1])
    if total > INT32_MAX:
        raise _CorruptError("headers over 2 GiB", None, int(starts[0]))
    index = np.repeat(starts - offsets[:-1], sizes) + np.arange(total)
    return offsets.astype(np.int32), a[index]


def _sized_fields(a: Any, w16: Any, pos: Any, limit: Any, what: str) -> tuple[Any, Any, Any]:
    """(sizes, positions, positions after) of every record's key or value: its
    length varint ``what`` at ``pos``, then its bytes (none for -1, null)."""
    sizes, pos = _varints(a, w16, pos, limit, what)
    bad = (sizes < -1) | (sizes > limit - pos)
    if bad.any():
        raise _CorruptError(f"bad {what} {int(sizes[_first(bad)])}", bad, pos)
    return sizes, pos, pos + np.maximum(sizes, 0)


def _add_base(deltas: Any, base: int, what: str, starts: Any) -> Any:
    """``base + deltas`` as int64; raises if one falls outside int64."""
    low = base + int(deltas.min())
    high = base + int(deltas.max())
    if low < _INT64_MIN or high > _INT64_MAX:
        wide = deltas.astype(object) + base
        bad = (wide < _INT64_MIN) | (wide > _INT64_MAX)
        raise _CorruptError(f"{what} outside int64", bad.astype(bool), starts)
    return deltas.astype(np.int64) + base


def _record_headers(
    a: Any, w16: Any, buf: bytes | memoryview, pos: Any, rec_end: Any, count: int, start: int
) -> HeaderFields | None:
    """Where the headers are (None when no record has any), from the header
    counts at ``pos``; each record's fields must then end where its length says."""
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


def _headers(
    a: Any, w16: Any, buf: bytes | memoryview, rows: Any, pos: Any, rec_end: Any, n: int
) -> HeaderFields | None:
    """Where the headers are, given ``rows``: the records whose header count is
    not a single 0 byte. Advances every position in ``pos`` past its header
    count and headers. ``None`` if every count is 0 after all (a padded 0).

    Keys that are all ASCII are valid UTF-8; otherwise every key is decoded
    with ``bytes.decode``, exactly as the row decoder does.
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
    key_pos, key_len = out[0], out[1]
    key_offsets, key_data = gather(a, key_pos, key_len)
    if int(np.maximum(out[3], 0).sum()) > INT32_MAX:
        # Arrow's binary offsets are int32 (checked here, once for both decoders).
        raise _CorruptError("headers over 2 GiB", None, int(out[2][0]))
    if key_data.size and int(key_data.max()) >= 0x80:
        # Not all ASCII: check the keys exactly as the row decoder decodes them.
        for k in range(total):
            at = int(key_pos[k])
            try:
                bytes(buf[at : at + int(key_len[k])]).decode()
            except UnicodeDecodeError as exc:
                record = int(np.searchsorted(list_offsets, k, side="right")) - 1
                raise _CorruptError(f"header key is not UTF-8 ({exc})", record, at) from None
    return HeaderFields(list_offsets, out, key_offsets, key_data)
