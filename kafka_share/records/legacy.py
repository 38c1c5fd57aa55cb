"""Legacy message sets (magic 0 and 1), each message or compressed wrapper
decoded whole into one :class:`~kafka_share.records.batch.RecordBatch`."""

from __future__ import annotations

import struct
import zlib

from kafka_share.errors import CorruptMessageError
from kafka_share.records.batch import (
    _ATTR_CODEC,
    _ATTR_LOG_APPEND_TIME,
    _MAGIC_POS,
    _PREFIX,
    _PREFIX_SIZE,
    BatchCrcError,
    CorruptBatchError,
    Record,
    RecordBatch,
)
from kafka_share.records.compression import decompress
from kafka_share.records.row_decoder import _NO_HEADERS, _RecordError

# Legacy message: crc I, magic b, attributes b, [timestamp q (v1)], key length i
_LEGACY_V0 = struct.Struct(">Ibbi")
_LEGACY_V1 = struct.Struct(">Ibbqi")
_INT32 = struct.Struct(">i")


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
