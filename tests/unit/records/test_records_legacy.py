"""Legacy message sets (magic 0 and 1) through iter_batches."""

import struct

import pytest

from kafka_share.models import TimestampType
from kafka_share.records import BatchCrcError, CorruptBatchError, iter_batches
from kafka_share.records.builder import build_legacy_message_set


def flip(data: bytes, pos: int) -> bytes:
    return data[:pos] + bytes([data[pos] ^ 0x01]) + data[pos + 1 :]


# ------------------------------------------------------------------ legacy v0 / v1


@pytest.mark.parametrize("magic", [0, 1])
def test_legacy_uncompressed(magic: int) -> None:
    data = build_legacy_message_set(
        [(b"a", b"1", 50), (None, None, 60)], magic=magic, base_offset=20
    )
    batches = list(iter_batches(data, check_crcs=True))
    assert [b.magic for b in batches] == [magic, magic]
    recs = [r for b in batches for r in b.records()]
    ts = [50, 60] if magic == 1 else [-1, -1]
    assert recs == [(20, ts[0], b"a", b"1", ()), (21, ts[1], None, None, ())]
    b0 = batches[0]
    assert b0.timestamp_type is (
        TimestampType.CREATE_TIME if magic else TimestampType.NO_TIMESTAMP_TYPE
    )
    assert (b0.leader_epoch, b0.producer_id, b0.is_control, b0.is_transactional) == (
        None,
        -1,
        False,
        False,
    )


@pytest.mark.parametrize("magic", [0, 1])
@pytest.mark.parametrize("codec", [1, 2, 3])
def test_legacy_compressed_wrapper(magic: int, codec: int) -> None:
    # (magic-0 lz4 here is a standard frame; Kafka's real magic-0 lz4 had a
    # broken header checksum, KAFKA-1493, which the lz4 library rejects.)
    data = build_legacy_message_set(
        [(b"a", b"1", 5), (b"b", b"2", 6), (None, b"3", 7)],
        magic=magic,
        base_offset=100,
        compression=codec,
    )
    [batch] = list(iter_batches(data, check_crcs=True))
    assert (batch.base_offset, batch.last_offset, batch.record_count) == (100, 102, 3)
    ts = [5, 6, 7] if magic else [-1, -1, -1]
    assert batch.records() == [
        (100, ts[0], b"a", b"1", ()),
        (101, ts[1], b"b", b"2", ()),
        (102, ts[2], None, b"3", ()),
    ]


def test_legacy_v1_log_append_time_wrapper() -> None:
    data = build_legacy_message_set(
        [(b"a", b"1", 5), (b"b", b"2", 6)],
        magic=1,
        compression=1,
        timestamp_type=TimestampType.LOG_APPEND_TIME,
        wrapper_timestamp=999,
    )
    [batch] = list(iter_batches(data, check_crcs=True))
    assert batch.timestamp_type is TimestampType.LOG_APPEND_TIME
    assert [r[1] for r in batch.records()] == [999, 999]


def test_legacy_crc_mismatch() -> None:
    data = build_legacy_message_set([(b"a", b"1")], magic=1, base_offset=3)
    bad = flip(data, len(data) - 1)
    with pytest.raises(BatchCrcError) as info:
        list(iter_batches(bad, check_crcs=True))
    assert (info.value.base_offset, info.value.last_offset) == (3, 3)
    [batch] = list(iter_batches(bad, check_crcs=False))
    assert batch.records()[0][3] == b"0"


def test_legacy_truncated_trailing_message_skipped() -> None:
    data = build_legacy_message_set([(b"a", b"1"), (b"b", b"2")], magic=1)
    for cut in range(len(data) // 2, len(data)):
        assert len(list(iter_batches(data[:cut], check_crcs=True))) == 1


def test_legacy_wrapper_with_garbage_inner() -> None:
    data = build_legacy_message_set([(b"a", b"1")], magic=1, compression=1)
    # Replace the compressed value with gzip of garbage inner bytes.
    import gzip

    inner = gzip.compress(b"\x00" * 12 + b"\x00\x00\x00\x03")
    body = struct.pack(">bbq", 1, 1, 0) + struct.pack(">i", -1) + struct.pack(">i", len(inner))
    body += inner
    import zlib

    msg = struct.pack(">I", zlib.crc32(body)) + body
    bad = struct.pack(">qi", 0, len(msg)) + msg
    assert data != bad
    with pytest.raises(CorruptBatchError, match="inner message"):
        list(iter_batches(bad, check_crcs=True))
