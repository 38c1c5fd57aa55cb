"""Kafka wire primitives: readers over ``memoryview`` + position, writers into ``bytearray``.

Readers take ``(buf, pos)`` and return ``(value, new_pos)``. They never read
past ``len(buf)``: a length prefix that claims more bytes than remain raises
:class:`~kafka_share.errors.CorruptMessageError` *before* anything is
allocated, so a hostile length cannot make us allocate gigabytes.

Fixed-width integers are not here: the generated code in ``messages.py``
reads and writes runs of them with one precompiled :class:`struct.Struct`.
The readers below may still raise ``struct.error``/``IndexError`` on a short
buffer; the generated struct readers turn those into ``CorruptMessageError``
naming the field and offset.

Naming: ``compact`` = flexible-version encoding (unsigned-varint length + 1),
``nullable`` = a length of -1 (or compact 0) means ``None``.
"""

from __future__ import annotations

import struct
import uuid

from kafka_share.errors import CorruptMessageError


class TrailingBytesError(CorruptMessageError):
    """A message decoded completely, but bytes were left over after it.

    Strict decoding (the generated ``decode``) reports this as corruption. A
    client reading a broker's responses may instead take :attr:`decoded`, as
    Java's and librdkafka's clients do: they never look past the fields they
    know, and some brokers (librdkafka's mock cluster) end responses with an
    extra empty tagged-field section.
    """

    def __init__(self, message: str, decoded: object, trailing_bytes: int) -> None:
        super().__init__(message)
        #: The message read from the bytes before the trailing ones.
        self.decoded = decoded
        #: How many bytes were left over.
        self.trailing_bytes = trailing_bytes

__all__ = [
    "INT8",
    "INT16",
    "INT32",
    "INT64",
    "UINT16",
    "UINT32",
    "ZERO_UUID",
    "TrailingBytesError",
    "read_array_len",
    "read_bytes",
    "read_compact_array_len",
    "read_compact_bytes",
    "read_compact_nullable_bytes",
    "read_compact_nullable_string",
    "read_compact_records",
    "read_compact_string",
    "read_nullable_bytes",
    "read_nullable_string",
    "read_records",
    "read_string",
    "read_uuid",
    "read_uvarint",
    "read_uvarlong",
    "read_varint",
    "read_varlong",
    "skip_tagged_fields",
    "write_array_len",
    "write_bytes",
    "write_compact_array_len",
    "write_compact_bytes",
    "write_compact_nullable_bytes",
    "write_compact_nullable_string",
    "write_compact_string",
    "write_nullable_bytes",
    "write_nullable_string",
    "write_string",
    "write_uuid",
    "write_uvarint",
    "write_varint",
    "write_varlong",
]

INT8 = struct.Struct(">b")
INT16 = struct.Struct(">h")
INT32 = struct.Struct(">i")
INT64 = struct.Struct(">q")
UINT16 = struct.Struct(">H")
UINT32 = struct.Struct(">I")

ZERO_UUID = uuid.UUID(int=0)
"""Kafka's ``Uuid.ZERO_UUID``: the default value of every uuid field."""

_MAX_INT16 = 0x7FFF


def _short(what: str, need: int, buf: memoryview, pos: int) -> CorruptMessageError:
    have = len(buf) - pos
    return CorruptMessageError(
        f"{what} needs {need} bytes at offset {pos} but only {max(have, 0)} remain"
    )


# -- varints --------------------------------------------------------------------------------


def _read_unsigned(buf: memoryview, pos: int, max_bytes: int, what: str) -> tuple[int, int]:
    result = 0
    shift = 0
    start = pos
    end = len(buf)
    for _ in range(max_bytes):
        if pos >= end:
            raise CorruptMessageError(f"{what} at offset {start} is truncated")
        b = buf[pos]
        pos += 1
        result |= (b & 0x7F) << shift
        if not b & 0x80:
            return result, pos
        shift += 7
    raise CorruptMessageError(f"{what} at offset {start} is longer than {max_bytes} bytes")


def read_uvarint(buf: memoryview, pos: int) -> tuple[int, int]:
    """Read an unsigned varint of at most 5 bytes (a 32-bit value)."""
    if pos < len(buf):
        b = buf[pos]
        if not b & 0x80:  # one-byte fast path: tagged-field counts, short lengths
            return b, pos + 1
    value, pos = _read_unsigned(buf, pos, 5, "unsigned varint")
    if value > 0xFFFFFFFF:
        raise CorruptMessageError(f"unsigned varint ending at offset {pos} exceeds 32 bits")
    return value, pos


def read_uvarlong(buf: memoryview, pos: int) -> tuple[int, int]:
    """Read an unsigned varlong of at most 10 bytes (a 64-bit value)."""
    value, pos = _read_unsigned(buf, pos, 10, "unsigned varlong")
    if value > 0xFFFFFFFFFFFFFFFF:
        raise CorruptMessageError(f"unsigned varlong ending at offset {pos} exceeds 64 bits")
    return value, pos


def read_varint(buf: memoryview, pos: int) -> tuple[int, int]:
    """Read a zig-zag encoded signed 32-bit varint."""
    raw, pos = read_uvarint(buf, pos)
    return (raw >> 1) ^ -(raw & 1), pos


def read_varlong(buf: memoryview, pos: int) -> tuple[int, int]:
    """Read a zig-zag encoded signed 64-bit varlong."""
    raw, pos = read_uvarlong(buf, pos)
    return (raw >> 1) ^ -(raw & 1), pos


def write_uvarint(out: bytearray, value: int) -> None:
    """Append ``value`` (0 <= value < 2**64) as an unsigned varint."""
    if value < 0:
        raise ValueError(f"unsigned varint cannot encode negative value {value}")
    while value > 0x7F:
        out.append((value & 0x7F) | 0x80)
        value >>= 7
    out.append(value)


def write_varint(out: bytearray, value: int) -> None:
    """Append a signed 32-bit ``value`` zig-zag encoded."""
    if not -(2**31) <= value < 2**31:
        raise ValueError(f"varint value {value} does not fit in 32 bits")
    write_uvarint(out, ((value << 1) ^ (value >> 31)) & 0xFFFFFFFF)


def write_varlong(out: bytearray, value: int) -> None:
    """Append a signed 64-bit ``value`` zig-zag encoded."""
    if not -(2**63) <= value < 2**63:
        raise ValueError(f"varlong value {value} does not fit in 64 bits")
    write_uvarint(out, ((value << 1) ^ (value >> 63)) & 0xFFFFFFFFFFFFFFFF)


# -- lengths ---------------------------------------------------------------------------------


def _check_len(what: str, n: int, buf: memoryview, pos: int) -> None:
    if n > len(buf) - pos:
        raise CorruptMessageError(
            f"{what} length {n} at offset {pos} exceeds the {len(buf) - pos} bytes remaining"
        )


def read_array_len(buf: memoryview, pos: int) -> tuple[int, int]:
    """Read a non-compact array count (int32; -1 = null, returned as -1).

    Every array element takes at least one byte, so a count larger than the
    bytes that remain is rejected here, bounding what the caller allocates.
    """
    if pos + 4 > len(buf):
        raise _short("array length", 4, buf, pos)
    (n,) = INT32.unpack_from(buf, pos)
    pos += 4
    if n < -1:
        raise CorruptMessageError(f"negative array length {n} at offset {pos - 4}")
    _check_len("array", n, buf, pos)
    return n, pos


def read_compact_array_len(buf: memoryview, pos: int) -> tuple[int, int]:
    """Read a compact array count (uvarint N+1; 0 = null, returned as -1)."""
    n, pos = read_uvarint(buf, pos)
    n -= 1
    _check_len("compact array", n, buf, pos)
    return n, pos


def write_array_len(out: bytearray, n: int) -> None:
    out += INT32.pack(n)


def write_compact_array_len(out: bytearray, n: int) -> None:
    """Write a compact array count; pass -1 for a null array."""
    write_uvarint(out, n + 1)


# -- strings ---------------------------------------------------------------------------------


def _decode_str(buf: memoryview, pos: int, n: int) -> str:
    try:
        return str(buf[pos : pos + n], "utf-8")
    except UnicodeDecodeError as exc:
        raise CorruptMessageError(f"string at offset {pos} is not valid UTF-8: {exc}") from None


def read_string(buf: memoryview, pos: int) -> tuple[str, int]:
    """Read a non-nullable int16-length string."""
    s, pos = read_nullable_string(buf, pos)
    if s is None:
        raise CorruptMessageError(f"non-nullable string before offset {pos} is null")
    return s, pos


def read_nullable_string(buf: memoryview, pos: int) -> tuple[str | None, int]:
    """Read an int16-length string; length -1 means ``None``."""
    if pos + 2 > len(buf):
        raise _short("string length", 2, buf, pos)
    (n,) = INT16.unpack_from(buf, pos)
    pos += 2
    if n < 0:
        if n == -1:
            return None, pos
        raise CorruptMessageError(f"negative string length {n} at offset {pos - 2}")
    _check_len("string", n, buf, pos)
    return _decode_str(buf, pos, n), pos + n


def read_compact_string(buf: memoryview, pos: int) -> tuple[str, int]:
    """Read a non-nullable compact string."""
    s, pos = read_compact_nullable_string(buf, pos)
    if s is None:
        raise CorruptMessageError(f"non-nullable compact string before offset {pos} is null")
    return s, pos


def read_compact_nullable_string(buf: memoryview, pos: int) -> tuple[str | None, int]:
    """Read a compact string (uvarint N+1); 0 means ``None``."""
    n, pos = read_uvarint(buf, pos)
    if n == 0:
        return None, pos
    n -= 1
    _check_len("compact string", n, buf, pos)
    return _decode_str(buf, pos, n), pos + n


def _encode_str(s: str, limit: int) -> bytes:
    data = s.encode("utf-8")
    if len(data) > limit:
        raise ValueError(f"string of {len(data)} UTF-8 bytes exceeds the limit of {limit}")
    return data


def write_string(out: bytearray, s: str) -> None:
    data = _encode_str(s, _MAX_INT16)
    out += INT16.pack(len(data))
    out += data


def write_nullable_string(out: bytearray, s: str | None) -> None:
    if s is None:
        out += b"\xff\xff"
    else:
        write_string(out, s)


def write_compact_string(out: bytearray, s: str) -> None:
    data = _encode_str(s, 0x7FFFFFFE)
    write_uvarint(out, len(data) + 1)
    out += data


def write_compact_nullable_string(out: bytearray, s: str | None) -> None:
    if s is None:
        out.append(0)
    else:
        write_compact_string(out, s)


# -- bytes and records -----------------------------------------------------------------------


def _read_nullable_blob(buf: memoryview, pos: int) -> tuple[memoryview | None, int]:
    if pos + 4 > len(buf):
        raise _short("bytes length", 4, buf, pos)
    (n,) = INT32.unpack_from(buf, pos)
    pos += 4
    if n < 0:
        if n == -1:
            return None, pos
        raise CorruptMessageError(f"negative bytes length {n} at offset {pos - 4}")
    _check_len("bytes", n, buf, pos)
    return buf[pos : pos + n], pos + n


def _read_compact_nullable_blob(buf: memoryview, pos: int) -> tuple[memoryview | None, int]:
    n, pos = read_uvarint(buf, pos)
    if n == 0:
        return None, pos
    n -= 1
    _check_len("compact bytes", n, buf, pos)
    return buf[pos : pos + n], pos + n


def read_bytes(buf: memoryview, pos: int) -> tuple[bytes, int]:
    v, pos = _read_nullable_blob(buf, pos)
    if v is None:
        raise CorruptMessageError(f"non-nullable bytes before offset {pos} is null")
    return bytes(v), pos


def read_nullable_bytes(buf: memoryview, pos: int) -> tuple[bytes | None, int]:
    v, pos = _read_nullable_blob(buf, pos)
    return (None if v is None else bytes(v)), pos


def read_compact_bytes(buf: memoryview, pos: int) -> tuple[bytes, int]:
    v, pos = _read_compact_nullable_blob(buf, pos)
    if v is None:
        raise CorruptMessageError(f"non-nullable compact bytes before offset {pos} is null")
    return bytes(v), pos


def read_compact_nullable_bytes(buf: memoryview, pos: int) -> tuple[bytes | None, int]:
    v, pos = _read_compact_nullable_blob(buf, pos)
    return (None if v is None else bytes(v)), pos


def read_records(buf: memoryview, pos: int) -> tuple[memoryview | None, int]:
    """Read a records field as a zero-copy slice of ``buf`` (``None`` when null)."""
    return _read_nullable_blob(buf, pos)


def read_compact_records(buf: memoryview, pos: int) -> tuple[memoryview | None, int]:
    """Compact variant of :func:`read_records`."""
    return _read_compact_nullable_blob(buf, pos)


def write_bytes(out: bytearray, data: bytes | memoryview) -> None:
    out += INT32.pack(len(data))
    out += data


def write_nullable_bytes(out: bytearray, data: bytes | memoryview | None) -> None:
    if data is None:
        out += b"\xff\xff\xff\xff"
    else:
        write_bytes(out, data)


def write_compact_bytes(out: bytearray, data: bytes | memoryview) -> None:
    write_uvarint(out, len(data) + 1)
    out += data


def write_compact_nullable_bytes(out: bytearray, data: bytes | memoryview | None) -> None:
    if data is None:
        out.append(0)
    else:
        write_compact_bytes(out, data)


# -- uuid and tagged fields ------------------------------------------------------------------


def read_uuid(buf: memoryview, pos: int) -> tuple[uuid.UUID, int]:
    if pos + 16 > len(buf):
        raise _short("uuid", 16, buf, pos)
    return uuid.UUID(bytes=bytes(buf[pos : pos + 16])), pos + 16


def write_uuid(out: bytearray, value: uuid.UUID) -> None:
    out += value.bytes


def skip_tagged_fields(buf: memoryview, pos: int) -> int:
    """Skip a whole tagged-field section (count, then tag/size/data triples)."""
    count, pos = read_uvarint(buf, pos)
    _check_len("tagged field count", count, buf, pos)
    for _ in range(count):
        _tag, pos = read_uvarint(buf, pos)
        size, pos = read_uvarint(buf, pos)
        _check_len("tagged field", size, buf, pos)
        pos += size
    return pos
