"""The row decoder: the records of a v2 batch, one tuple each.

Decoding records
----------------
Records are read by one loop (:func:`_decode_v2_records`) with two paths: a
templated one that reads a record's varints with one ``unpack_from`` of the last
record's layout and a table lookup per varint (most records: those of a batch
nearly always share a layout), and a careful one that reads varints byte by
byte (:func:`_careful_record`) for any record the first cannot take. Both accept
and reject the same records, with the same errors.
"""

from __future__ import annotations

import struct
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from collections.abc import Callable

    from kafka_share.records.batch import Header, RecordShape

_MIN_RECORD_BODY = 6  # attributes + 5 one-byte varints

_NO_HEADERS: tuple[Header, ...] = ()


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


# Size rules waived: the per-record hot loop of row decoding. Measured (best of
# interleaved runs, CPython 3.11, a shared 2-core machine): benchmarks/bench_records.py
# decodes 500-record batches of 100 B values in 1.01-1.07 us per record shaped, 1.15 us
# as records(); a helper call (two arguments, a tuple back) cost 47 ns against an
# inline step in a loop of 500, so each step moved into a function would add about
# 4-5 % per record. One frame keeps its locals fast. See docs/performance.md, the
# templated path.
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
    the last record's layout (for the first record, the one the last call ended
    with: :data:`_last_layout`), and each varint's bytes are looked up in a table
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
    global _last_layout
    varints = _varint_table()
    unpack_head: Any
    unpack_tail: Any
    unpack_head, length_size, head_size, unpack_tail, tail_size = _last_layout
    read_varint = _read_varint
    no_headers = _NO_HEADERS
    min_body = _MIN_RECORD_BODY
    misses_left = _TEMPLATE_MISSES  # layouts worked out and records missed
    # A memoryview (large records, see batch.py's _VIEW_MIN_RECORD_BYTES) reads varints the
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
    _last_layout = (unpack_head, length_size, head_size, unpack_tail, tail_size)
    return records, pos


class _TemplateMissError(Exception):
    """A record the templated path of :func:`_decode_v2_records` cannot take."""


def _varint_table() -> dict[bytes, int]:
    """Every zig-zag varint of one or two bytes, by its bytes, decoded: what the
    templated path of :func:`_decode_v2_records` looks fields up in (16,512
    entries, about 1.7 MB, 6-12 ms; built by :func:`prepare`, else at first use).
    Three-byte varints are added as records bring them
    (:func:`_three_byte_varint`), up to :data:`_MAX_THREE_BYTE_VARINTS`."""
    global _VARINTS
    if _VARINTS is None:
        table = _one_byte_varints()
        _add_two_byte_varints(table, range(0x80))
        _VARINTS = table
    return _VARINTS


def _one_byte_varints() -> dict[bytes, int]:
    return {bytes((b,)): (b >> 1) ^ -(b & 1) for b in range(0x80)}


def _add_two_byte_varints(table: dict[bytes, int], second_bytes: range) -> None:
    """Add the two-byte varints whose second byte is in ``second_bytes``."""
    for b2 in second_bytes:
        for b1 in range(0x80, 0x100):
            u = (b1 & 0x7F) | (b2 << 7)
            table[bytes((b1, b2))] = (u >> 1) ^ -(u & 1)


_VARINTS: dict[bytes, int] | None = None
#: :func:`prepare` builds the table this many second bytes (1,024 entries,
#: under a millisecond) at a time
_PREPARE_SLICE = 8


def prepare(between_slices: Callable[[], None]) -> None:
    """Build the varint table now rather than at the first record decoded, a
    slice at a time, calling ``between_slices`` after each: the consumer builds
    it on a thread of its own while it joins its group, and pauses there so that
    no other thread waits for the GIL more than a slice
    (:func:`kafka_share._app.decoding.prepare_row_decoder`)."""
    global _VARINTS
    if _VARINTS is not None:
        return
    table = _one_byte_varints()
    for first in range(0, 0x80, _PREPARE_SLICE):
        _add_two_byte_varints(table, range(first, first + _PREPARE_SLICE))
        between_slices()
    if _VARINTS is None:  # a decoder may have built its own meanwhile
        _VARINTS = table


def prepared() -> bool:
    """Whether :func:`prepare` has nothing left to do."""
    return _VARINTS is not None


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
#: (unpack head, length size, head size, unpack tail, tail size) the last call
#: ended with, where the next starts: the records of consecutive batches of a
#: topic share a layout as a batch's do, and working one out costs 4-5 µs, per
#: batch with small producer batches (15 records of 1 KiB in Java's 16 KiB).
#: Shared by threads without a lock: a layout is only a guess, which the table
#: lookups check (a wrong one is a miss), and the tuple is replaced whole.
_INITIAL_LAYOUT: tuple[Any, int, int, Any, int] = (_NO_LAYOUT, 0, 0, _NO_LAYOUT, 0)
_last_layout = _INITIAL_LAYOUT


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
# records the templated path cannot (see _decode_v2_records), so every record of a batch
# whose layouts keep changing. Measured on the records of bench_records.py's batches,
# every one through this path (best of interleaved runs): 1.11 us per 100 B record and
# 1.27 us per 1 KiB one; the same steps as helpers (a call per varint with the same
# fast paths, one per key and value) took 1.50 and 1.68 us, 32-35 % slower. Every check
# is in the same order as there, which one straight function keeps reviewable.
def _careful_record(  # noqa: PLR0912, PLR0915
    buf: bytes | memoryview, pos: int, end: int
) -> tuple[int, int, Any, Any, tuple[Header, ...], int, int, int]:
    """The record at ``pos`` with every varint read byte by byte: (timestamp
    delta, offset delta, key, value, headers, key length, value length, record
    end). Raises :class:`_RecordError` (or IndexError, ValueError: see
    :meth:`~kafka_share.records.batch.RecordBatch._decode_section`) for a bad record."""
    # The decoder of records whose layouts keep changing, so it stays quick:
    # varints are decoded inline with 1- and 2-byte fast paths, and 3 bytes for
    # the record and value lengths (values of 8 KiB to 1 MiB), falling back to
    # _read_varint for longer ones; zig-zag decode is (u >> 1) ^ -(u & 1).
    # Lengths are validated only where a bad one could move backwards or read
    # past the record: the final "pos == rec_end" check catches the rest.
    read_varint = _read_varint
    # A memoryview (large records, see batch.py's _VIEW_MIN_RECORD_BYTES) reads varints the
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
