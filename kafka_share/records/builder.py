"""Encode record batches: RecordBatch v2 and legacy v0/v1 message sets.

Used by the unit tests here, by the share-engine tests and by the fake broker,
to produce exactly what a Kafka producer or broker would put in a fetch
response. The encoder is straightforward rather than fast.

:func:`build_batch` takes records as :class:`NewRecord` or plain tuples
``(key, value)`` / ``(key, value, headers)``::

    data = build_batch([(b"k", b"v"), NewRecord(value=b"x", timestamp=1_700_000_000_123)],
                       base_offset=42, compression=CompressionType.ZSTD)

Defaults follow Java's ``MemoryRecordsBuilder``: offset deltas are 0..n-1,
``base_timestamp`` is the first record's timestamp, ``max_timestamp`` the
largest record timestamp (or ``log_append_time`` for LOG_APPEND_TIME),
``last_offset_delta`` the largest offset delta. Every field can be overridden,
so tests can also build odd but valid batches (compacted gaps, negative
timestamp deltas) and, through :func:`with_crc` / byte edits, invalid ones.

:func:`build_control_batch` writes a transaction marker (ABORT/COMMIT).
:func:`build_legacy_message_set` writes magic 0/1 messages, optionally inside a
compressed wrapper message.
"""

from __future__ import annotations

import struct
import zlib
from collections.abc import Iterable, Sequence

import attrs

from kafka_share._reprs import attrs_repr
from kafka_share.models import TimestampType
from kafka_share.records.batch import BATCH_HEADER_SIZE, ControlRecordType, Header
from kafka_share.records.compression import CompressionType, compress
from kafka_share.records.crc32c import crc32c

__all__ = [
    "NewRecord",
    "RecordSpec",
    "build_batch",
    "build_control_batch",
    "build_legacy_message_set",
    "encode_varint",
    "with_crc",
]

_HEADER = struct.Struct(">qiibIhiqqqhii")
_CRC_POS = 17
_CRC_START = 21


@attrs_repr
@attrs.frozen(repr=False)
class NewRecord:
    """A record to encode. ``timestamp``/``offset_delta`` default from the batch."""

    key: bytes | None = None
    value: bytes | None = None
    headers: Sequence[Header] = ()
    timestamp: int | None = None
    offset_delta: int | None = None


RecordSpec = (
    NewRecord
    | tuple[bytes | None, bytes | None]
    | tuple[bytes | None, bytes | None, Sequence[Header]]
)


def encode_varint(value: int) -> bytes:
    """Zig-zag varint (Kafka's varint / varlong) of a signed 64-bit value."""
    u = (value << 1) ^ (value >> 63)
    u &= 0xFFFFFFFFFFFFFFFF
    out = bytearray()
    while u >= 0x80:
        out.append((u & 0x7F) | 0x80)
        u >>= 7
    out.append(u)
    return bytes(out)


def _bytes_field(data: bytes | None) -> bytes:
    if data is None:
        return encode_varint(-1)
    return encode_varint(len(data)) + data


def _encode_record(
    offset_delta: int,
    timestamp_delta: int,
    key: bytes | None,
    value: bytes | None,
    headers: Sequence[Header],
) -> bytes:
    body = bytearray(b"\x00")  # attributes: unused
    body += encode_varint(timestamp_delta)
    body += encode_varint(offset_delta)
    body += _bytes_field(key)
    body += _bytes_field(value)
    body += encode_varint(len(headers))
    for hkey, hvalue in headers:
        encoded = hkey.encode()
        body += encode_varint(len(encoded)) + encoded
        body += _bytes_field(hvalue)
    return encode_varint(len(body)) + bytes(body)


def _normalise(records: Iterable[RecordSpec]) -> list[NewRecord]:
    out = []
    for r in records:
        if isinstance(r, NewRecord):
            out.append(r)
        elif len(r) == 2:
            out.append(NewRecord(key=r[0], value=r[1]))
        else:
            out.append(NewRecord(key=r[0], value=r[1], headers=tuple(r[2])))
    return out


def with_crc(batch: bytes | bytearray) -> bytes:
    """Return ``batch`` (one v2 batch) with its CRC field recomputed."""
    buf = bytearray(batch)
    struct.pack_into(">I", buf, _CRC_POS, crc32c(bytes(buf[_CRC_START:])))
    return bytes(buf)


def build_batch(
    records: Iterable[RecordSpec],
    *,
    base_offset: int = 0,
    compression: int = CompressionType.NONE,
    timestamp_type: TimestampType = TimestampType.CREATE_TIME,
    base_timestamp: int | None = None,
    max_timestamp: int | None = None,
    log_append_time: int | None = None,
    partition_leader_epoch: int = -1,
    is_transactional: bool = False,
    is_control: bool = False,
    has_delete_horizon: bool = False,
    producer_id: int = -1,
    producer_epoch: int = -1,
    base_sequence: int = -1,
    last_offset_delta: int | None = None,
    record_count: int | None = None,
    xerial_snappy: bool = True,
) -> bytes:
    """Encode one RecordBatch v2 (magic 2) with a correct CRC32C.

    Args:
        records: the records, in order.
        base_offset: offset of the first record (offset delta 0).
        compression: codec id (:class:`CompressionType`).
        timestamp_type: CREATE_TIME, or LOG_APPEND_TIME (sets attribute bit 3).
        base_timestamp: default: the first record timestamp, else 0.
        max_timestamp: default: ``log_append_time`` for LOG_APPEND_TIME, else
            the largest record timestamp.
        log_append_time: broker append time for LOG_APPEND_TIME batches.
        partition_leader_epoch: -1 for none.
        is_transactional, is_control, has_delete_horizon: attribute bits.
        producer_id, producer_epoch, base_sequence: idempotence fields.
        last_offset_delta: default: the largest record offset delta (or 0).
        record_count: override the header's record count (for corrupt tests).
        xerial_snappy: snappy in the xerial framing (as Java writes) or raw.

    Returns:
        The batch bytes, ready to concatenate into a fetch response.
    """
    recs = _normalise(records)
    if base_timestamp is None:
        base_timestamp = next((r.timestamp for r in recs if r.timestamp is not None), 0)
    body, timestamps, deltas = _encode_records(recs, base_timestamp)
    if max_timestamp is None:
        if timestamp_type == TimestampType.LOG_APPEND_TIME and log_append_time is not None:
            max_timestamp = log_append_time
        else:
            max_timestamp = max(timestamps, default=base_timestamp)
    if last_offset_delta is None:
        last_offset_delta = max(deltas, default=0)
    attributes = _attributes(
        compression, timestamp_type, is_transactional, is_control, has_delete_horizon
    )
    payload = compress(compression, bytes(body), xerial=xerial_snappy)
    batch_length = BATCH_HEADER_SIZE - 12 + len(payload)
    header = _HEADER.pack(
        base_offset,
        batch_length,
        partition_leader_epoch,
        2,
        0,  # CRC, filled in below
        attributes,
        last_offset_delta,
        base_timestamp,
        max_timestamp,
        producer_id,
        producer_epoch,
        base_sequence,
        len(recs) if record_count is None else record_count,
    )
    return with_crc(header + payload)


def _encode_records(
    recs: list[NewRecord], base_timestamp: int
) -> tuple[bytearray, list[int], list[int]]:
    """The records section, and each record's timestamp and offset delta."""
    body = bytearray()
    timestamps = []
    deltas = []
    for i, r in enumerate(recs):
        ts = base_timestamp if r.timestamp is None else r.timestamp
        delta = i if r.offset_delta is None else r.offset_delta
        timestamps.append(ts)
        deltas.append(delta)
        body += _encode_record(delta, ts - base_timestamp, r.key, r.value, r.headers)
    return body, timestamps, deltas


def _attributes(
    compression: int, timestamp_type: TimestampType, is_transactional: bool,
    is_control: bool, has_delete_horizon: bool,
) -> int:
    """The batch header's attribute bits."""
    attributes = compression & 0x07
    if timestamp_type == TimestampType.LOG_APPEND_TIME:
        attributes |= 0x08
    if is_transactional:
        attributes |= 0x10
    if is_control:
        attributes |= 0x20
    if has_delete_horizon:
        attributes |= 0x40
    return attributes


def build_control_batch(
    *,
    base_offset: int,
    control_type: int = ControlRecordType.COMMIT,
    producer_id: int = 1000,
    producer_epoch: int = 0,
    coordinator_epoch: int = 0,
    timestamp: int = 0,
    partition_leader_epoch: int = -1,
    version: int = 0,
) -> bytes:
    """Encode a transaction marker batch as a broker writes it.

    The single control record has key ``(version: int16, type: int16)`` and
    value ``(version: int16, coordinator_epoch: int32)``; the batch is
    transactional and control.
    """
    key = struct.pack(">hh", version, control_type)
    value = struct.pack(">hi", 0, coordinator_epoch)
    return build_batch(
        [NewRecord(key=key, value=value, timestamp=timestamp)],
        base_offset=base_offset,
        is_transactional=True,
        is_control=True,
        producer_id=producer_id,
        producer_epoch=producer_epoch,
        partition_leader_epoch=partition_leader_epoch,
    )


def _legacy_message(
    offset: int,
    magic: int,
    *,
    attributes: int,
    timestamp: int,
    key: bytes | None,
    value: bytes | None,
) -> bytes:
    body = bytearray(struct.pack(">bb", magic, attributes))
    if magic == 1:
        body += struct.pack(">q", timestamp)
    for field in (key, value):
        if field is None:
            body += struct.pack(">i", -1)
        else:
            body += struct.pack(">i", len(field)) + field
    crc = zlib.crc32(body)
    message = struct.pack(">I", crc) + bytes(body)
    return struct.pack(">qi", offset, len(message)) + message


def build_legacy_message_set(
    records: Iterable[tuple[bytes | None, bytes | None] | tuple[bytes | None, bytes | None, int]],
    *,
    magic: int,
    base_offset: int = 0,
    compression: int = CompressionType.NONE,
    timestamp_type: TimestampType = TimestampType.CREATE_TIME,
    wrapper_timestamp: int | None = None,
) -> bytes:
    """Encode a magic 0 or 1 message set (the pre-0.11 format).

    Args:
        records: ``(key, value)`` or ``(key, value, timestamp)`` (timestamp
            ignored for magic 0; default 0).
        magic: 0 or 1.
        base_offset: offset of the first message.
        compression: NONE writes one message per record; a codec writes one
            wrapper message (at the last offset) holding the others, with
            relative inner offsets for magic 1 and absolute ones for magic 0.
        timestamp_type: magic 1 wrapper only: LOG_APPEND_TIME sets attribute bit 3.
        wrapper_timestamp: magic 1 wrapper timestamp (default: max inner).
    """
    recs = [(r[0], r[1], r[2] if len(r) == 3 else 0) for r in records]
    if compression == CompressionType.NONE:
        return b"".join(
            _legacy_message(base_offset + i, magic, attributes=0, timestamp=ts, key=k, value=v)
            for i, (k, v, ts) in enumerate(recs)
        )
    inner = b"".join(
        _legacy_message(
            i if magic == 1 else base_offset + i, magic, attributes=0, timestamp=ts, key=k, value=v
        )
        for i, (k, v, ts) in enumerate(recs)
    )
    attributes = compression & 0x07
    if magic == 1 and timestamp_type == TimestampType.LOG_APPEND_TIME:
        attributes |= 0x08
    if wrapper_timestamp is None:
        wrapper_timestamp = max((ts for _k, _v, ts in recs), default=0)
    return _legacy_message(
        base_offset + len(recs) - 1,
        magic,
        attributes=attributes,
        timestamp=wrapper_timestamp,
        key=None,
        value=compress(compression, inner),
    )
