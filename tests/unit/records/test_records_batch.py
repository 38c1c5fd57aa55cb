import struct

import pytest

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
