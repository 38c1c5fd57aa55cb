import struct
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from kafka_share.errors import CorruptMessageError
from kafka_share.models import TimestampType
from kafka_share.records import (
    BatchCrcError,
    CompressionType,
    ControlRecordType,
    CorruptBatchError,
    RecordBatch,
    RecordShape,
    UnsupportedCodecError,
    iter_batches,
)
from kafka_share.records import batch as batch_module
from kafka_share.records.batch import BATCH_HEADER_SIZE
from kafka_share.records.builder import (
    NewRecord,
    build_batch,
    build_control_batch,
    build_legacy_message_set,
    encode_varint,
    with_crc,
)
from tests.unit.records.helpers import compression_type, delete_horizon_ms

CODECS = list(CompressionType)

# A v2 batch written out by hand from the Kafka spec layout (not by our builder):
# one record, key "k", value "hi", header ("a", b"b"), timestamp delta 2.
GOLDEN = bytes.fromhex(
    "0000000000000005"  # baseOffset 5
    "0000003f"  # batchLength 63
    "00000007"  # partitionLeaderEpoch 7
    "02"  # magic 2
    "1c4b8621"  # crc (CRC32C of attributes..end)
    "0000"  # attributes: no compression, create time
    "00000000"  # lastOffsetDelta 0
    "00000000000003e8"  # baseTimestamp 1000
    "00000000000003ea"  # maxTimestamp 1002
    "0000000000001234"  # producerId 0x1234
    "0003"  # producerEpoch 3
    "00000009"  # baseSequence 9
    "00000001"  # records count 1
    "1a"  # record length 13 (zig-zag 26)
    "00"  # record attributes
    "04"  # timestampDelta 2
    "00"  # offsetDelta 0
    "02"
    "6b"  # key length 1, "k"
    "04"
    "6869"  # value length 2, "hi"
    "02"  # 1 header
    "02"
    "61"  # header key length 1, "a"
    "02"
    "62"  # header value length 1, "b"
)


def one(data: bytes, *, check_crcs: bool = True) -> RecordBatch:
    batches = list(iter_batches(data, check_crcs=check_crcs))
    assert len(batches) == 1
    return batches[0]


def test_golden_batch_decodes_to_exact_fields() -> None:
    batch = one(GOLDEN)
    assert batch.base_offset == 5
    assert batch.batch_length == 63
    assert batch.partition_leader_epoch == 7
    assert batch.leader_epoch == 7
    assert batch.magic == 2
    assert batch.crc == 0x1C4B8621
    assert batch.compute_crc() == 0x1C4B8621
    assert compression_type(batch) is CompressionType.NONE
    assert batch.timestamp_type is TimestampType.CREATE_TIME
    assert not batch.is_transactional
    assert not batch.is_control
    assert not batch.has_delete_horizon
    assert delete_horizon_ms(batch) is None
    assert batch.last_offset_delta == 0
    assert batch.last_offset == 5
    assert batch.next_offset == 6
    assert batch.base_timestamp == 1000
    assert batch.max_timestamp == 1002
    assert batch.producer_id == 0x1234
    assert batch.producer_epoch == 3
    assert batch.base_sequence == 9
    assert batch.record_count == 1
    assert batch.size_in_bytes == len(GOLDEN)
    assert batch.records() == [(5, 1002, b"k", b"hi", (("a", b"b"),))]


def test_builder_reproduces_golden_bytes() -> None:
    built = build_batch(
        [NewRecord(key=b"k", value=b"hi", headers=[("a", b"b")], timestamp=1002)],
        base_offset=5,
        base_timestamp=1000,
        partition_leader_epoch=7,
        producer_id=0x1234,
        producer_epoch=3,
        base_sequence=9,
    )
    assert built == GOLDEN


def test_memoryview_input_gives_bytes_values() -> None:
    data = bytearray(b"\x00" * 7 + GOLDEN)
    batch = one(memoryview(data)[7:])  # type: ignore[arg-type]
    [(offset, _ts, key, value, headers)] = batch.records()
    assert offset == 5
    assert type(key) is bytes and type(value) is bytes
    assert type(headers[0][1]) is bytes


@pytest.mark.parametrize("codec", CODECS, ids=lambda c: c.name)
@pytest.mark.parametrize("xerial", [True, False])
def test_round_trip_every_codec(codec: CompressionType, xerial: bool) -> None:
    specs = [
        NewRecord(
            key=b"k%d" % i,
            value=b"v" * i,
            headers=[("h", b"%d" % i)] * (i % 3),
            timestamp=1_700_000_000_000 + i,
        )
        for i in range(200)
    ]
    specs.append(NewRecord(key=None, value=None))
    specs.append(NewRecord(key=b"", value=b"", headers=[("", None), ("ü", b"")]))
    data = build_batch(specs, base_offset=1000, compression=codec, xerial_snappy=xerial)
    batch = one(data)
    assert compression_type(batch) is codec
    recs = batch.records()
    assert [r[0] for r in recs] == list(range(1000, 1202))
    for i, (_, ts, key, value, headers) in enumerate(recs[:200]):
        assert ts == 1_700_000_000_000 + i
        assert key == b"k%d" % i
        assert value == b"v" * i
        assert headers == (("h", b"%d" % i),) * (i % 3)
    assert recs[200][2:] == (None, None, ())
    assert recs[201][2:] == (b"", b"", (("", None), ("ü", b"")))


def test_negative_timestamp_deltas_and_big_varints() -> None:
    big = 2**62
    specs = [
        NewRecord(value=b"a", timestamp=5000),
        NewRecord(value=b"b", timestamp=10),  # delta -4990
        NewRecord(value=b"c", timestamp=-1),
        NewRecord(value=b"d" * 70_000, timestamp=5000 + 2**40, offset_delta=2**30),
    ]
    data = build_batch(specs, base_offset=big)
    batch = one(data)
    recs = batch.records()
    assert [r[1] for r in recs] == [5000, 10, -1, 5000 + 2**40]
    assert [r[0] for r in recs] == [big, big + 1, big + 2, big + 2**30]
    assert batch.last_offset == big + 2**30
    assert batch.max_timestamp == 5000 + 2**40
    assert recs[3][3] == b"d" * 70_000


# Value sizes whose (zig-zag) length varints, and the record length varints
# around them, take 1, 2, 3 and 4 bytes: the decoder reads 1- to 3-byte
# varints inline and longer ones with a helper.
VARINT_EDGE_SIZES = [0, 63, 64, 8184, 8191, 8192, 10_240, 2**20 - 16, 2**20 - 1, 2**20]


@pytest.mark.parametrize("as_view", [False, True], ids=["bytes", "memoryview"])
def test_values_at_every_varint_width(as_view: bool) -> None:
    specs = [
        NewRecord(
            key=b"k" * (size % 70), value=bytes([size % 251]) * size, timestamp=i,
            headers=[("size", b"%d" % size), ("ü", None)] if i % 2 else (),
        )
        for i, size in enumerate(VARINT_EDGE_SIZES)
    ]
    data = build_batch(specs, base_offset=10)
    # Records this large are decoded straight from a memoryview input.
    batch = one(memoryview(bytearray(data)).toreadonly() if as_view else data)  # type: ignore[arg-type]
    recs = batch.records()
    assert [(r[0], r[1]) for r in recs] == [(10 + i, i) for i in range(len(specs))]
    for i, ((_, _, key, value, headers), size) in enumerate(
        zip(recs, VARINT_EDGE_SIZES, strict=True)
    ):
        assert type(key) is bytes and type(value) is bytes
        assert key == b"k" * (size % 70)
        assert value == bytes([size % 251]) * size
        assert headers == ((("size", b"%d" % size), ("ü", None)) if i % 2 else ())
        assert all(type(v) is bytes for _, v in headers[:1])
    shape = RecordShape(tuple, "t", 0, TimestampType.CREATE_TIME, None, 1)
    assert [(r[5], r[6], r[11]) for r in batch.shaped_records(shape)] == [
        (r[2], r[3], len(r[3])) for r in recs if r[3] is not None
    ]


def test_log_append_time_uses_max_timestamp_for_every_record() -> None:
    specs = [NewRecord(value=b"a", timestamp=1), NewRecord(value=b"b", timestamp=2)]
    data = build_batch(specs, timestamp_type=TimestampType.LOG_APPEND_TIME, log_append_time=777)
    batch = one(data)
    assert batch.timestamp_type is TimestampType.LOG_APPEND_TIME
    assert [r[1] for r in batch.records()] == [777, 777]


@pytest.mark.parametrize("kind", [ControlRecordType.ABORT, ControlRecordType.COMMIT])
def test_control_batches(kind: ControlRecordType) -> None:
    data = build_batch(
        [(b"k", b"v")] * 3, base_offset=10, is_transactional=True, producer_id=77
    ) + build_control_batch(
        base_offset=13,
        control_type=kind,
        producer_id=77,
        coordinator_epoch=4,
        partition_leader_epoch=2,
    )
    data_batch, marker = list(iter_batches(data, check_crcs=True))
    assert data_batch.is_transactional and not data_batch.is_control
    assert marker.is_control and marker.is_transactional
    assert (marker.base_offset, marker.last_offset, marker.leader_epoch) == (13, 13, 2)
    [control] = marker.control_records()
    assert control.offset == 13
    assert control.version == 0
    assert control.type == kind
    # Value: version int16 + coordinator epoch int32.
    assert marker.records()[0][3] == struct.pack(">hi", 0, 4)


def test_control_records_on_data_batch_is_an_error() -> None:
    with pytest.raises(CorruptBatchError, match="data batch"):
        one(build_batch([(b"k", b"v")])).control_records()


def test_control_record_with_short_key() -> None:
    data = build_batch([(b"\x00", b"")], is_control=True)
    with pytest.raises(CorruptBatchError, match="short key"):
        one(data).control_records()


def test_delete_horizon_flag() -> None:
    batch = one(build_batch([(b"k", None)], has_delete_horizon=True, base_timestamp=99))
    assert batch.has_delete_horizon
    assert delete_horizon_ms(batch) == 99


def test_leader_epoch_none_when_absent() -> None:
    assert one(build_batch([(b"k", b"v")])).leader_epoch is None


def test_empty_input_and_multiple_batches() -> None:
    assert list(iter_batches(b"", check_crcs=True)) == []
    data = b"".join(build_batch([(None, b"%d" % i)], base_offset=i) for i in range(5))
    batches = list(iter_batches(data, check_crcs=True))
    assert [b.base_offset for b in batches] == [0, 1, 2, 3, 4]
    assert [b.records()[0][3] for b in batches] == [b"0", b"1", b"2", b"3", b"4"]


# ------------------------------------------------------------------ CRC


def flip(data: bytes, pos: int) -> bytes:
    return data[:pos] + bytes([data[pos] ^ 0x01]) + data[pos + 1 :]


def test_crc_mismatch_raises_batch_crc_error_with_offsets() -> None:
    good = build_batch([(b"k", b"v")] * 4, base_offset=100)
    bad = flip(good, len(good) - 1)
    with pytest.raises(BatchCrcError) as info:
        list(iter_batches(bad, check_crcs=True))
    assert info.value.base_offset == 100
    assert info.value.last_offset == 103
    assert "CRC" in str(info.value) and "100" in str(info.value)
    assert isinstance(info.value, CorruptBatchError)
    assert isinstance(info.value, CorruptMessageError)


def test_crc_mismatch_ignored_when_check_off() -> None:
    good = build_batch([(b"k", b"v")], base_offset=100)
    bad = flip(good, len(good) - 2)  # last byte of the value ("v" -> "w")
    assert one(bad, check_crcs=False).records() == [(100, 0, b"k", b"w", ())]


def test_iteration_continues_after_crc_error() -> None:
    a = build_batch([(b"a", b"1")], base_offset=0)
    b = flip(build_batch([(b"b", b"2")], base_offset=1), 30)
    c = build_batch([(b"c", b"3")], base_offset=2)
    it = iter_batches(a + b + c, check_crcs=True)
    assert next(it).base_offset == 0
    with pytest.raises(BatchCrcError):
        next(it)
    assert next(it).base_offset == 2
    with pytest.raises(StopIteration):
        next(it)


# ------------------------------------------------------------------ truncation / framing


def test_truncated_trailing_batch_skipped_at_every_byte() -> None:
    first = build_batch([(b"k", b"v" * 50)] * 3, base_offset=0)
    last = build_batch([(b"k", b"x" * 50)] * 3, base_offset=3, compression=CompressionType.LZ4)
    for cut in range(len(last)):
        batches = list(iter_batches(first + last[:cut], check_crcs=True))
        assert [b.base_offset for b in batches] == [0], cut
        assert len(batches[0].records()) == 3


def test_batch_length_too_small() -> None:
    data = bytearray(build_batch([(b"k", b"v")], base_offset=7))
    struct.pack_into(">i", data, 8, 20)
    with pytest.raises(CorruptMessageError, match=r"byte 0 \(base offset 7\).*minimum 49"):
        list(iter_batches(bytes(data), check_crcs=False))


def test_negative_batch_length() -> None:
    data = bytearray(build_batch([(b"k", b"v")], base_offset=7))
    struct.pack_into(">i", data, 8, -5)
    with pytest.raises(CorruptMessageError, match="batch length -5"):
        list(iter_batches(bytes(data), check_crcs=False))


def test_unknown_magic_stops_iteration() -> None:
    good = build_batch([(b"k", b"v")], base_offset=1)
    bad = bytearray(good)
    bad[16] = 3
    it = iter_batches(good + bytes(bad) + good, check_crcs=False)
    next(it)
    with pytest.raises(CorruptMessageError, match=f"byte {len(good)} .*unknown magic byte 3"):
        next(it)
    assert list(it) == []


# ------------------------------------------------------------------ corrupt record contents


def rebuild_with_body(body: bytes, count: int, codec: int = 0) -> bytes:
    """A batch whose (uncompressed) records section is ``body`` verbatim."""
    template = bytearray(build_batch([], record_count=count))
    from kafka_share.records.compression import compress

    payload = compress(codec, body)
    template[21:23] = struct.pack(">h", codec)
    struct.pack_into(">i", template, 8, 49 + len(payload))
    return with_crc(bytes(template) + payload)


def record(body: bytes) -> bytes:
    return encode_varint(len(body)) + body


GOOD_BODY = (
    b"\x00"
    + encode_varint(0)
    + encode_varint(0)
    + encode_varint(1)
    + b"k"
    + (encode_varint(1) + b"v" + encode_varint(0))
)


@pytest.mark.parametrize(
    ("body", "count", "why"),
    [
        (record(GOOD_BODY), 2, "cannot fit|malformed|does not fit"),
        (record(GOOD_BODY) + b"\x00\x00", 1, "left over"),
        (record(GOOD_BODY)[:-1], 1, "does not fit"),
        (encode_varint(len(GOOD_BODY) + 3) + GOOD_BODY + b"\x00\x00\x00", 1, "length says"),
        (record(b"\x00\x00\x00" + encode_varint(-2) + b"v\x00"), 1, "bad key length -2"),
        (record(b"\x00\x00\x00\x00" + encode_varint(-7) + b"\x00"), 1, "bad value length -7"),
        (record(b"\x00\x00\x00\x00\x00" + encode_varint(100)), 1, "header count"),
        (record(b"\x00\x00\x00\x00\x00\x02" + encode_varint(-1) + b"\x00"), 1, "header key"),
        (record(b"\x00\x00\x00\x00\x00\x02\x02\xff\x00"), 1, "malformed"),  # bad UTF-8
        (record(b"\x00" + b"\xff" * 10 + b"\x01\x00\x00\x00"), 1, "varint longer"),
        (record(b"\x00\x00\x00"), 1, "does not fit"),
        (b"", -1, "negative record count"),
    ],
)
@pytest.mark.parametrize("codec", [0, 1, 4])
def test_corrupt_inner_lengths(body: bytes, count: int, why: str, codec: int) -> None:
    batch = one(rebuild_with_body(body, count, codec))
    with pytest.raises(CorruptBatchError, match=why) as info:
        batch.records()
    assert info.value.base_offset == 0


def test_good_body_helper_decodes() -> None:
    assert one(rebuild_with_body(record(GOOD_BODY), 1)).records() == [(0, 0, b"k", b"v", ())]


def test_decompression_bomb_in_batch() -> None:
    data = build_batch(
        [(None, b"\x00" * 2_000_000)], compression=CompressionType.ZSTD, base_offset=9
    )
    [batch] = list(iter_batches(data, check_crcs=True, max_decompressed_bytes=1_000_000))
    with pytest.raises(CorruptBatchError, match="max_decompressed_bytes=1000000") as info:
        batch.records()
    assert info.value.base_offset == 9


def test_unknown_codec_in_batch() -> None:
    data = bytearray(build_batch([(b"k", b"v")]))
    data[22] |= 0x07
    batch = one(with_crc(data))
    with pytest.raises(UnsupportedCodecError):
        _ = compression_type(batch)
    with pytest.raises(CorruptBatchError, match="unknown compression codec id 7"):
        batch.records()


@pytest.mark.parametrize("codec", CODECS)
def test_shaped_records_match_records_with_the_shape_constants(codec: CompressionType) -> None:
    values = [(b"k1", b"v1"), (None, b"value-2"), (b"", None)]
    data = build_batch(
        [NewRecord(k, v, timestamp=1000 + i, headers=(("h", b"x"),) if i == 1 else ())
         for i, (k, v) in enumerate(values)],
        base_offset=40, compression=codec,
    )
    [batch] = list(iter_batches(data, check_crcs=True))
    shape = RecordShape(tuple, "orders", 3, TimestampType.CREATE_TIME, 7, 2)
    shaped = batch.shaped_records(shape)
    assert shaped == [
        ("orders", 3, off, ts, TimestampType.CREATE_TIME, k, v, h, 7, 2,
         -1 if k is None else len(k), -1 if v is None else len(v))
        for off, ts, k, v, h in batch.records()
    ]


def test_shaped_records_refuses_a_legacy_batch() -> None:
    [batch] = list(iter_batches(build_legacy_message_set([(b"a", b"1", 50)], magic=1),
                                check_crcs=True))
    with pytest.raises(ValueError, match="v2 record batch"):
        batch.shaped_records(RecordShape(tuple, "t", 0, TimestampType.CREATE_TIME, None, 1))


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


# ---------------------------------------------------------------------- templated path
# The row decoder takes the records whose varints keep the last record's layout
# through its templated path and every other record through the careful path
# (_careful_record); the two together must decode and reject exactly what the
# careful path alone does.


def _outcome(decode: Any) -> Any:
    try:
        return decode()
    except batch_module._RecordError as exc:
        return ("record error", exc.args)
    except (IndexError, ValueError) as exc:
        return (type(exc).__name__, str(exc))


def _both(buf: bytes | memoryview, count: int, end: int, shaped: bool) -> Any:
    """(decoded by the row decoder, decoded by the careful path alone), as plain
    records or the error each raised."""

    def mixed() -> Any:
        records, pos = batch_module._decode_v2_records(
            buf, BATCH_HEADER_SIZE, end, count, base_offset=100, base_timestamp=5_000,
            append_timestamp=None, shape=_SHAPE if shaped else batch_module._PLAIN,
        )
        # the shaped fields that plain records carry
        return [(r[2], r[3], r[5], r[6], r[7]) for r in records], pos

    def careful() -> Any:
        records = []
        pos = BATCH_HEADER_SIZE
        for _ in range(count):
            ts_delta, offset_delta, key, value, headers, _k, _v, pos = (
                batch_module._careful_record(buf, pos, end)
            )
            records.append((100 + offset_delta, 5_000 + ts_delta, key, value, headers))
        if pos != end:
            raise batch_module._RecordError(
                f"{end - pos} bytes left over after {count} records", pos
            )
        return records, pos

    return _outcome(mixed), _outcome(careful)


_SHAPE = RecordShape(tuple, "t", 0, TimestampType.CREATE_TIME, None, 1)
_record_specs = st.lists(
    st.builds(
        NewRecord,
        key=st.none() | st.binary(max_size=40) | st.sampled_from([b"k" * 70, b"k" * 9000]),
        value=st.none() | st.binary(max_size=300) | st.sampled_from([b"v" * 200, b"v" * 20_000]),
        headers=st.lists(st.tuples(st.text(max_size=5), st.none() | st.binary(max_size=9)),
                         max_size=2),
        timestamp=st.sampled_from([None, 5_000, 5_030, 5_100, 13_000, 2**40, -(2**20)]),
        offset_delta=st.none(),
    ),
    min_size=1,
    max_size=90,
)


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    recs=_record_specs,
    edits=st.lists(
        st.tuples(st.integers(min_value=0), st.integers(min_value=0, max_value=255)), max_size=3
    ),
    count_change=st.sampled_from([0, 0, 0, -1, 1]),
    view=st.booleans(),
    shaped=st.booleans(),
)
def test_templated_and_careful_decode_and_reject_alike(
    recs: list[NewRecord], edits: list[tuple[int, int]], count_change: int, view: bool,
    shaped: bool,
) -> None:
    data = bytearray(build_batch(recs, base_offset=100, base_timestamp=5_000))
    for pos, value in edits:  # inside the records section only: framing stays intact
        data[BATCH_HEADER_SIZE + pos % (len(data) - BATCH_HEADER_SIZE)] = value
    # A view of a larger buffer: bytes after the section must not be read as records.
    buf: bytes | memoryview = bytes(data) if not view else memoryview(data + b"\x00" * 64)
    count = max(0, len(recs) + count_change)
    mixed, careful = _both(buf, count, len(data), shaped)
    assert mixed == careful


@pytest.mark.parametrize("view", [False, True])
def test_every_single_byte_mutation_is_decoded_or_rejected_as_the_careful_path_does(
    view: bool,
) -> None:
    recs = [
        NewRecord(key=b"key", value=b"v" * 70, timestamp=5_000),
        NewRecord(key=None, value=b"w" * 3, headers=[("h", b"x")], timestamp=5_100),
        NewRecord(key=b"", value=None, timestamp=4_000),
        NewRecord(key=b"k" * 65, value=b"", timestamp=5_000),
        NewRecord(key=None, value=b"z", timestamp=5_001),
    ]
    valid = build_batch(recs, base_offset=100, base_timestamp=5_000)
    for pos in range(BATCH_HEADER_SIZE, len(valid)):
        for value in {0x00, 0x01, 0x7F, 0x80, 0xFF, valid[pos] ^ 0x01, (valid[pos] + 2) % 256}:
            data = bytearray(valid)
            data[pos] = value
            buf: bytes | memoryview = bytes(data) if not view else memoryview(data + b"\x00" * 8)
            for shaped in (False, True):
                mixed, careful = _both(buf, len(recs), len(data), shaped)
                assert mixed == careful, (pos, value)


@pytest.fixture
def careful_records(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """The positions of the records the careful path decodes."""
    positions: list[int] = []
    real = batch_module._careful_record

    def counted(buf: Any, pos: int, end: int) -> Any:
        positions.append(pos)
        return real(buf, pos, end)

    monkeypatch.setattr(batch_module, "_careful_record", counted)
    return positions


def test_the_templated_path_takes_records_whose_layout_changes(
    careful_records: list[int],
) -> None:
    # Null and non-null keys and values (same varint sizes), headers on some
    # records, offset and timestamp deltas reaching two bytes at 64, one value of
    # 20 KiB (three-byte lengths): five layouts worked out, all records templated.
    recs = [
        NewRecord(
            key=None if i % 3 else b"key",
            value=None if i % 17 == 0 else b"v" * (20_000 if i == 150 else i % 50),
            headers=[("h", b"x")] if i % 7 == 0 else [],
            timestamp=5_000 + i,
        )
        for i in range(300)
    ]
    data = build_batch(recs, base_offset=100, base_timestamp=5_000)
    [batch] = list(iter_batches(data, check_crcs=True))
    got = batch.records()
    assert careful_records == []
    assert got == [
        (100 + i, r.timestamp, r.key, r.value, tuple(r.headers)) for i, r in enumerate(recs)
    ]


def test_records_whose_layout_keeps_changing_go_through_the_careful_path(
    careful_records: list[int],
) -> None:
    # Keys of 10 and 100 bytes in turn: a one- and a two-byte key length, a new
    # layout every record, until the call's budget is spent.
    recs = [NewRecord(key=b"k" * (10 if i % 2 else 100), value=b"v") for i in range(100)]
    [batch] = list(iter_batches(build_batch(recs), check_crcs=True))
    assert [r[2] for r in batch.records()] == [r.key for r in recs]
    assert 100 - batch_module._TEMPLATE_MISSES <= len(careful_records) < 100


def test_records_the_templated_path_cannot_take_go_through_the_careful_path(
    careful_records: list[int],
) -> None:
    # A timestamp delta of 2**40 takes a 6-byte varint: one such record among
    # ordinary ones costs one careful record ...
    recs = [NewRecord(value=b"v", timestamp=5_000 + (2**40 if i == 10 else i)) for i in range(40)]
    [batch] = list(iter_batches(build_batch(recs, base_timestamp=5_000), check_crcs=True))
    assert [r[1] for r in batch.records()] == [r.timestamp for r in recs]
    assert len(careful_records) == 1
    # ... and after _TEMPLATE_MISSES of them every record of the call takes it.
    careful_records.clear()
    recs = [NewRecord(value=b"v", timestamp=5_000 + (2**40 * (i % 2))) for i in range(100)]
    [batch] = list(iter_batches(build_batch(recs, base_timestamp=5_000), check_crcs=True))
    assert [r[1] for r in batch.records()] == [r.timestamp for r in recs]
    # The first record's head and tail layouts take two of the budget; then
    # records 1, 3, ..., 2 * misses - 1 miss, and from 2 * misses on all go careful.
    misses = batch_module._TEMPLATE_MISSES - 2
    assert len(careful_records) == misses + (100 - 2 * misses)


def test_a_full_table_of_three_byte_varints_makes_room_for_new_ones(
    monkeypatch: pytest.MonkeyPatch, careful_records: list[int]
) -> None:
    table = batch_module._varint_table()
    monkeypatch.setattr(batch_module, "_three_byte_varints", 0)
    monkeypatch.setattr(batch_module, "_MAX_THREE_BYTE_VARINTS", 4)
    # Values of 9,000 to 9,011 bytes: their record and value lengths are
    # three-byte varints, two dozen different ones.
    recs = [NewRecord(value=b"v" * (9_000 + i % 12)) for i in range(48)]
    [batch] = list(iter_batches(memoryview(bytearray(build_batch(recs))), check_crcs=True))
    assert [r[3] for r in batch.records()] == [r.value for r in recs]
    assert 0 < len([raw for raw in table if len(raw) == 3]) <= 4
    # The table is full of sizes that are gone; records of a new size take the
    # templated path all the same.
    careful_records.clear()
    recs = [NewRecord(value=b"w" * 9_500) for i in range(48)]
    [batch] = list(iter_batches(memoryview(bytearray(build_batch(recs))), check_crcs=True))
    assert [r[3] for r in batch.records()] == [r.value for r in recs]
    assert careful_records == []
    assert len([raw for raw in table if len(raw) == 3]) <= 4
