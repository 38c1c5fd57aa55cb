"""Legacy message sets (magic 0 and 1): each top-level message, or compressed
wrapper with its inner messages, decoded whole into the header fields and
records of one :class:`~kafka_share.records.batch.RecordBatch`, which
:class:`~kafka_share.records.batch.BatchIterator` builds. Nothing here imports
``batch.py``: the errors raised are internal, turned into
:class:`~kafka_share.records.batch.CorruptBatchError` (or ``BatchCrcError``)
there."""

from __future__ import annotations

import struct
import zlib
from typing import TYPE_CHECKING

from kafka_share.errors import CorruptMessageError
from kafka_share.records.compression import decompress
from kafka_share.records.row_decoder import _NO_HEADERS, _RecordError

if TYPE_CHECKING:
    from kafka_share.records.batch import Record

# The legacy format's own constants, which the v2 batch kept (batch.py has its
# own copies, as Kafka's LegacyRecord and DefaultRecordBatch do): every entry of
# a message set starts with offset q, size i, and has its magic byte at 16.
_PREFIX = struct.Struct(">qi")
_PREFIX_SIZE = 12
_MAGIC_POS = 16
_ATTR_CODEC = 0x07
_ATTR_LOG_APPEND_TIME = 0x08  # magic 1 only
#: the fewest bytes a message can take after its offset and size (crc, magic, attributes)
_MIN_MESSAGE_SIZE = 6

#: RecordBatch's header fields: base_offset, batch_length, partition_leader_epoch,
#: magic, crc, attributes, last_offset_delta, base_timestamp, max_timestamp,
#: producer_id, producer_epoch, base_sequence, record count
_BatchHeader = tuple[int, int, int, int, int, int, int, int, int, int, int, int, int]

# Legacy message: crc I, magic b, attributes b, [timestamp q (v1)], key length i
_LEGACY_V0 = struct.Struct(">Ibbi")
_LEGACY_V1 = struct.Struct(">Ibbqi")
_INT32 = struct.Struct(">i")


class _LegacyError(Exception):
    """Internal: a corrupt legacy message; args are (reason,)."""


class _LegacyCrcError(_LegacyError):
    """Internal: a legacy message (or an inner one) failed its CRC check."""


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


def _legacy_batch(
    data: bytes | memoryview,
    pos: int,
    end: int,
    *,
    magic: int,
    check_crcs: bool,
    max_decompressed_bytes: int,
) -> tuple[_BatchHeader, list[Record]]:
    """The header fields and records of the legacy message at ``data[pos:end]``
    (from its offset): one record, or a compressed wrapper's inner messages.

    Raises:
        _LegacyError: a malformed message (``_LegacyCrcError``: a CRC mismatch,
            only with ``check_crcs``).
    """
    offset, length = _PREFIX.unpack_from(data, pos)
    try:
        crc, attributes, timestamp, crc_start, _, key, value = _legacy_message(
            data, pos + _PREFIX_SIZE, end, magic
        )
    except _RecordError as exc:
        raise _LegacyError(str(exc.args[0])) from None
    if check_crcs:
        actual = zlib.crc32(memoryview(data)[crc_start:end])
        if actual != crc:
            raise _LegacyCrcError(f"CRC mismatch: stored 0x{crc:08x}, computed 0x{actual:08x}")
    codec = attributes & _ATTR_CODEC
    records: list[Record]
    if codec == 0:
        records = [(offset, timestamp, key, value, _NO_HEADERS)]
    else:
        log_append = magic == 1 and bool(attributes & _ATTR_LOG_APPEND_TIME)
        records = _wrapper_records(
            codec,
            value,
            magic=magic,
            offset=offset,
            append_timestamp=timestamp if log_append else None,
            check_crcs=check_crcs,
            max_decompressed_bytes=max_decompressed_bytes,
        )
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
    return header, records


def _wrapper_records(
    codec: int,
    value: bytes | None,
    *,
    magic: int,
    offset: int,
    append_timestamp: int | None,
    check_crcs: bool,
    max_decompressed_bytes: int,
) -> list[Record]:
    """The inner messages of a compressed wrapper message at ``offset`` whose
    value is ``value``; ``append_timestamp``: the wrapper's LOG_APPEND_TIME,
    every record's timestamp. Raises _LegacyError."""
    if value is None:
        raise _LegacyError("compressed wrapper message has a null value")
    try:
        inner = decompress(codec, value, max_decompressed_bytes)
    except CorruptMessageError as exc:
        raise _LegacyError(str(exc)) from None
    records: list[Record] = []
    ipos = 0
    isize = len(inner)
    while ipos < isize:
        ioffset, its, ikey, ivalue, iend = _inner_message(inner, ipos, check_crcs=check_crcs)
        its = its if append_timestamp is None else append_timestamp
        records.append((ioffset, its, ikey, ivalue, _NO_HEADERS))
        ipos = iend
    if not records:
        raise _LegacyError("compressed wrapper message holds no messages")
    if magic == 1:
        # v1 inner offsets are relative; the wrapper carries the absolute
        # offset of the last inner message.
        shift = offset - records[-1][0]
        records = [(o + shift, t, k, v, h) for o, t, k, v, h in records]
    return records


def _inner_message(
    inner: bytes, ipos: int, *, check_crcs: bool
) -> tuple[int, int, bytes | None, bytes | None, int]:
    """(offset, timestamp, key, value, end) of the inner message at ``ipos`` of a
    decompressed message set; an inner message may not itself be compressed.
    Raises _LegacyError."""
    isize = len(inner)
    if ipos + _PREFIX_SIZE > isize:
        raise _LegacyError(f"inner message set truncated at byte {ipos}")
    ioffset, ilength = _PREFIX.unpack_from(inner, ipos)
    iend = ipos + _PREFIX_SIZE + ilength
    if ilength < _MIN_MESSAGE_SIZE or iend > isize:
        raise _LegacyError(f"inner message at byte {ipos} has bad size {ilength}")
    imagic = inner[ipos + _MAGIC_POS]
    if imagic not in (0, 1):
        raise _LegacyError(f"inner message at byte {ipos} has magic {imagic}")
    try:
        icrc, iattrs, its, icrc_start, _, ikey, ivalue = _legacy_message(
            inner, ipos + _PREFIX_SIZE, iend, imagic
        )
    except _RecordError as exc:
        raise _LegacyError(f"inner message at byte {ipos}: {exc.args[0]}") from None
    if iattrs & _ATTR_CODEC:
        raise _LegacyError(f"inner message at byte {ipos} is itself compressed")
    if check_crcs:
        iactual = zlib.crc32(memoryview(inner)[icrc_start:iend])
        if iactual != icrc:
            raise _LegacyCrcError(
                f"inner message at byte {ipos} CRC mismatch: stored 0x{icrc:08x}, "
                f"computed 0x{iactual:08x}"
            )
    return ioffset, its, ikey, ivalue, iend
