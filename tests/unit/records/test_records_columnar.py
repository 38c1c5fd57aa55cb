"""decode_columns (the columnar decoder) and poll's numpy decoding
(vectorised.record_pieces) against the row decoder, RecordBatch.records()."""

import struct
from itertools import pairwise
from typing import Any

import numpy as np
import pyarrow as pa
import pytest
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st

from kafka_share.errors import CorruptMessageError
from kafka_share.models import TimestampType
from kafka_share.records import (
    CompressionType,
    CorruptBatchError,
    RecordBatch,
    columnar,
    iter_batches,
    vectorised,
)
from kafka_share.records.batch import RecordShape
from kafka_share.records.builder import (
    NewRecord,
    build_batch,
    build_legacy_message_set,
    encode_varint,
)
from kafka_share.records.columnar import (
    HEADERS_TYPE,
    SMALL_BATCH_RECORDS,
    RecordColumns,
    columns_from_rows,
    decode_columns,
    decode_small_columns,
)
from kafka_share.records.compression import compress
from tests.fresh import run_fresh

INT64_MIN = -(2**63)
INT64_MAX = 2**63 - 1
HEADER = struct.Struct(">qiibIhiqqqhii")


def one(data: bytes | memoryview) -> RecordBatch:
    [batch] = list(iter_batches(data, check_crcs=False))
    return batch


def rows_of(cols: RecordColumns, *, decoded: bool = True) -> list[tuple[Any, ...]]:
    """The columns as the row decoder's tuples, checking the arrays on the way
    (``decoded``: straight from decode_columns, not taken or sliced)."""
    n = cols.count
    assert len(cols) == n
    assert cols.offsets.dtype == np.int64 and cols.offsets.shape == (n,)
    assert cols.timestamps.dtype == np.int64 and cols.timestamps.shape == (n,)
    assert cols.key_sizes.dtype == np.int32 and cols.value_sizes.dtype == np.int32
    for arr, sizes in ((cols.keys, cols.key_sizes), (cols.values, cols.value_sizes)):
        assert arr.type == pa.binary_view()
        assert len(arr) == n
        arr.validate(full=True)
        pylist = arr.to_pylist()
        assert sizes.tolist() == [-1 if x is None else len(x) for x in pylist]
        # The binary (non-view) form must agree.
        assert arr.cast(pa.binary()).to_pylist() == pylist
        # Arrow requires inlined values zero padded (comparisons may use all 16 bytes).
        views = np.frombuffer(arr.buffers()[1], np.uint8).reshape(-1, 16)[arr.offset :][:n]
        view_sizes = views[:, :4].copy().view("<i4")[:, 0]
        inline = view_sizes <= 12
        padding = (np.arange(12) >= view_sizes[:, None]) & inline[:, None]
        assert not views[:, 4:][padding].any()
    if cols.headers is None:
        headers: list[Any] = [()] * n
    else:
        assert cols.headers.type == HEADERS_TYPE
        assert len(cols.headers) == n and cols.headers.null_count == 0
        cols.headers.validate(full=True)
        headers = [tuple((h["key"], h["value"]) for h in hs) for hs in cols.headers.to_pylist()]
        if decoded:
            assert any(headers), "headers must be None when no record has any"
    return list(
        zip(
            cols.offsets.tolist(),
            cols.timestamps.tolist(),
            cols.keys.to_pylist(),
            cols.values.to_pylist(),
            headers,
            strict=True,
        )
    )


def expected_rows(batch: RecordBatch) -> list[Any] | None:
    """The row decoder's rows, or None where decode_columns must raise: the row
    decoder raises, or it returns a number outside int64 (documented)."""
    try:
        rows = batch.records()
    except CorruptMessageError:
        return None
    for offset, timestamp, *_ in rows:
        if not (INT64_MIN <= offset <= INT64_MAX and INT64_MIN <= timestamp <= INT64_MAX):
            return None
    return rows


#: the shape vector_rows decodes with: plain tuples of the twelve fields
PLAIN_SHAPE = RecordShape(tuple, "t", 3, TimestampType.CREATE_TIME, None, 1)


def vector_rows(batch: RecordBatch, chunk_records: int = 7) -> list[tuple[Any, ...]]:
    """``poll``'s numpy decoding (vectorised.record_pieces, in pieces of
    ``chunk_records``) as the row decoder's tuples, checking the sizes and each
    piece's offsets, payload bytes and order against its tuples."""
    rows = []
    for chunk, offsets, payload, increasing in vectorised.record_pieces(
        batch, PLAIN_SHAPE, chunk_records
    ):
        assert 0 < len(chunk) <= chunk_records
        assert offsets == [r[2] for r in chunk]
        assert payload == sum(max(r[10], 0) + max(r[11], 0) for r in chunk)
        assert increasing == all(a < b for a, b in pairwise(offsets))
        for r in chunk:
            assert r[:2] == ("t", 3) and r[8:10] == (None, 1)
            assert r[10] == (-1 if r[5] is None else len(r[5]))
            assert r[11] == (-1 if r[6] is None else len(r[6]))
            assert r[5] is None or type(r[5]) is bytes
            assert r[6] is None or type(r[6]) is bytes
            rows.append((r[2], r[3], r[5], r[6], r[7]))
    return rows


def assert_same_as_rows(batch: RecordBatch, decode: Any = decode_columns) -> str:
    """decode_columns (or ``decode``) and poll's numpy decoding agree with the
    row decoder; "corrupt" or "decodes"."""
    expected = expected_rows(batch)
    if expected is None:
        for attempt in (decode, vector_rows):
            with pytest.raises(CorruptBatchError) as info:
                attempt(batch)
            assert info.value.base_offset == batch.base_offset
            assert info.value.last_offset == batch.last_offset
            assert f"base offset {batch.base_offset}" in str(info.value)
        return "corrupt"
    assert rows_of(decode(batch)) == expected
    assert vector_rows(batch) == expected
    return "decodes"


# ---------------------------------------------------------------------- examples


def test_golden_batch_with_a_header() -> None:
    data = build_batch(
        [NewRecord(key=b"k", value=b"hi", headers=[("a", b"b")], timestamp=1002)],
        base_offset=5,
        base_timestamp=1000,
    )
    cols = decode_columns(one(data))
    assert rows_of(cols) == [(5, 1002, b"k", b"hi", (("a", b"b"),))]


def test_plain_batch_has_no_headers_column() -> None:
    data = build_batch([(b"k%d" % i, b"v" * i) for i in range(40)], base_offset=100)
    batch = one(data)
    cols = decode_columns(batch)
    assert cols.headers is None
    assert rows_of(cols) == batch.records()
    assert cols.offsets.tolist() == list(range(100, 140))


@pytest.mark.parametrize("size", [0, 1, 11, 12, 13, 14, 100, 5000])
def test_inline_limit_and_nulls(size: int) -> None:
    recs = [
        (None, b"x" * size),
        (b"y" * size, None),
        (None, None),
        (b"", b""),
        (bytes(range(256))[:size], bytes(reversed(range(256)))[:size] * 3),
    ]
    batch = one(build_batch(recs))
    cols = decode_columns(batch)
    assert rows_of(cols) == batch.records()
    assert cols.keys.null_count == 2 and cols.values.null_count == 2


def test_views_point_into_the_fetch_response() -> None:
    """Zero copy: a long value's view addresses the response bytes themselves."""
    first = build_batch([(b"a", b"A" * 50)], base_offset=0)
    second = build_batch([(b"key", b"B" * 100), (b"k2", b"C" * 7)], base_offset=1)
    data = first + second
    batches = list(iter_batches(data, check_crcs=True))
    cols = decode_columns(batches[1])
    views = np.frombuffer(cols.values.buffers()[1], np.int32).reshape(-1, 4)
    data_buffer = cols.values.buffers()[2]
    value_at = data.index(b"B" * 100)
    section_start = len(first) + 61
    assert data_buffer.address == pa.py_buffer(data).address + section_start
    assert views[0, 0] == 100
    assert views[0, 3] == value_at - section_start
    assert views[0, 2] == 0
    assert rows_of(cols) == batches[1].records()
    # A short value is inlined (and zero-padded).
    assert views[1, 0] == 7
    assert bytes(views[1, 1:].tobytes()) == b"C" * 7 + bytes(5)


def test_memoryview_input_and_value_at_the_very_end() -> None:
    data = build_batch([(b"k", b"v" * 3)] * 3, base_offset=9)
    for buf in (data, memoryview(data), bytearray(data)):
        batch = one(buf)
        assert rows_of(decode_columns(batch)) == batch.records()


@pytest.mark.parametrize("codec", list(CompressionType))
def test_compressed_and_log_append_time(codec: CompressionType) -> None:
    recs = [
        NewRecord(key=None if i % 3 else b"k" * i, value=b"v" * (i * 7), timestamp=10_000 - i * 99)
        for i in range(60)
    ]
    for ts_type in (TimestampType.CREATE_TIME, TimestampType.LOG_APPEND_TIME):
        batch = one(
            build_batch(
                recs,
                base_offset=7,
                compression=codec,
                timestamp_type=ts_type,
                log_append_time=424242,
            )
        )
        cols = decode_columns(batch)
        assert rows_of(cols) == batch.records()
        if ts_type == TimestampType.LOG_APPEND_TIME:
            assert set(cols.timestamps.tolist()) == {424242}


def test_tiny_compressed_section_shorter_than_a_view() -> None:
    batch = one(build_batch([(None, None)], compression=CompressionType.GZIP))
    cols = decode_columns(batch)
    assert rows_of(cols) == [(0, 0, None, None, ())]
    batch = one(build_batch([(b"ab", b"c")], compression=CompressionType.ZSTD))
    assert rows_of(decode_columns(batch)) == batch.records()


def test_empty_batch() -> None:
    cols = decode_columns(one(build_batch([])))
    assert cols.count == 0 and rows_of(cols) == []


def test_legacy_batches_are_converted_from_rows() -> None:
    data = build_legacy_message_set(
        [(b"k", b"v"), (None, b"x" * 40)], magic=1, base_offset=3, compression=CompressionType.GZIP
    )
    for batch in iter_batches(data, check_crcs=True):
        assert rows_of(decode_columns(batch)) == batch.records()


def test_non_canonical_and_ten_byte_varints() -> None:
    """Varints padded with continuation bytes decode as the row decoder reads them."""
    body = (
        b"\x00"
        + padded_varint(5, 4)  # timestamp delta
        + padded_varint(0, 10)  # offset delta in 10 bytes
        + padded_varint(2, 2)
        + b"kk"
        + padded_varint(13, 3)
        + b"v" * 13
        + padded_varint(0, 2)
    )
    section = padded_varint(len(body), 3) + body
    batch = one(raw_batch(section, 1, base_offset=50, base_timestamp=1000))
    assert batch.records() == [(50, 1005, b"kk", b"v" * 13, ())]
    assert rows_of(decode_columns(batch)) == batch.records()


def test_header_key_invalid_utf8_is_corrupt() -> None:
    good = build_batch([NewRecord(key=b"k", value=b"v", headers=[("\u00e9", b"1")])])
    bad = good.replace("\u00e9".encode(), b"\xc3\x28")
    batch = one(bad)
    with pytest.raises(CorruptMessageError):
        batch.records()
    with pytest.raises(CorruptBatchError, match="UTF-8"):
        decode_columns(batch)


def test_headers_mixed_with_plain_records() -> None:
    recs = [
        NewRecord(key=b"a", value=b"1"),
        NewRecord(key=b"b", value=b"2", headers=[("h1", None), ("h2", b"x" * 20), ("", b"")]),
        NewRecord(key=b"c", value=b"3"),
        NewRecord(key=b"d", value=b"4", headers=[("\u65e5\u672c", b"y")]),
    ]
    batch = one(build_batch(recs, compression=CompressionType.LZ4))
    cols = decode_columns(batch)
    assert rows_of(cols) == batch.records()
    assert cols.headers.to_pylist()[0] == []


def test_offset_or_timestamp_outside_int64_is_corrupt() -> None:
    """The row decoder returns Python ints past int64; the columns cannot hold them."""
    big = one(
        build_batch([NewRecord(key=None, value=b"v", offset_delta=10)], base_offset=INT64_MAX)
    )
    assert big.records()[0][0] == INT64_MAX + 10
    with pytest.raises(CorruptBatchError, match="offset outside int64"):
        decode_columns(big)
    late = one(
        build_batch(
            [NewRecord(value=b"v", timestamp=INT64_MAX - 1), NewRecord(value=b"w", timestamp=0)],
            base_timestamp=INT64_MAX - 1,
        )
    )
    assert rows_of(decode_columns(late))[0][1] == INT64_MAX - 1
    section = record_bytes(ts_delta=2**62) + record_bytes(ts_delta=2**62)
    overflow = one(raw_batch(section, 2, base_timestamp=2**62))
    with pytest.raises(CorruptBatchError, match="timestamp outside int64"):
        decode_columns(overflow)
    # With LOG_APPEND_TIME the delta is not used: a 65-bit one is fine there.
    wide = b"\x00" + b"\xff" * 9 + b"\x7f" + b"\x00\x01\x02v\x00"
    for log_append, ok in ((True, True), (False, False)):
        batch = one(raw_batch(encode_varint(len(wide)) + wide, 1, log_append=log_append))
        assert_same_as_rows(batch)
        if ok:
            assert decode_columns(batch).timestamps.tolist() == [batch.max_timestamp]


@pytest.mark.parametrize(
    ("section", "count", "why"),
    [
        (b"\x02" + b"\x00" * 6, 1, "does not fit"),  # length 1 < 6
        (b"", 1, "cannot fit"),
        (b"\x0e\x00\x00\x00\x01\x03\x00\x00", 1, "bad value length -2"),
        (b"\x0e\x00\x00\x00\x05\x01\x00\x00", 1, "bad key length -3"),
        (b"\x0c\x00\x00\x00\x01\x01\x00" + b"\x0c\x00\x00\x00\x01\x01\x00", 1, "left over"),
        (b"\x0c\x00\x00\x00\x01\x01\x00", 2, "after 1 of 2 records"),
        (b"\x0c\x00\x00\x00\x01\x01\x04", 1, "header count 2 does not fit"),
        (b"\x0e\x00\x00\x00\x01\x01\x00\x00", 1, "fields end at byte 7"),
        (b"\x0c\x00\x80\x80\x80\x80\x80", 1, "timestamp delta runs past the end"),
        (b"\x1e\x00" + b"\x80" * 10 + b"\x00" * 4, 1, "longer than 10 bytes"),
        (b"\x8c" + b"\x80" * 10 + b"\x00" * 6, 1, "longer than 10 bytes"),  # the length
        (b"\x0c\x00\x80\x01\x00\x01\x01", 1, "timestamp delta runs past the end"),
        (b"\x0c\x00\x00\x00\x01\x81\x01", 1, "value length runs past the end"),
        (b"\x0c\x00\x00\x00\x01\x01\x81", 1, "header count runs past the end"),
    ],
)
def test_corrupt_sections(section: bytes, count: int, why: str) -> None:
    batch = one(raw_batch(section, count, base_offset=77))
    with pytest.raises(CorruptMessageError):
        batch.records()
    with pytest.raises(CorruptBatchError, match=why) as info:
        decode_columns(batch)
    assert "base offset 77" in str(info.value)


def test_equal_records_with_three_byte_lengths() -> None:
    """10 KiB records: three-byte length varints, found by the equal-length guess."""
    recs = [(b"k%02d" % i, bytes([i]) * 9000) for i in range(40)]
    batch = one(build_batch(recs, base_offset=5))
    assert rows_of(decode_columns(batch)) == batch.records()
    # One record a byte longer in the middle: the guess stops there, then resumes.
    recs[20] = (b"k20x", recs[20][1])
    batch = one(build_batch(recs, base_offset=5))
    assert rows_of(decode_columns(batch)) == batch.records()
    # Bytes left over after equal records.
    body = build_batch([(b"k", b"v" * 100)] * 40)[61:]
    batch = one(raw_batch(body + b"\x00" * 7, 40))
    with pytest.raises(CorruptBatchError, match="7 bytes left over after 40 records"):
        decode_columns(batch)
    # A record length broken in the middle of equal records.
    data = bytearray(build_batch(recs[:30] + recs[21:], base_offset=5))
    second = data.index(b"k01") - 5
    data[second] ^= 0x01
    assert_same_as_rows(one(bytes(data)))


def test_headers_decoded_vectorised_and_in_python_agree() -> None:
    recs = [
        NewRecord(
            key=str(i).encode(),
            value=b"v" * i,
            headers=[(f"h{j}", None if j % 2 else b"x" * (i + j)) for j in range(i % 7)],
        )
        for i in range(80)
    ]
    batch = one(build_batch(recs))
    for threshold in (1, 5, 32, 10**9):
        with vector_headers(threshold):
            cols = decode_columns(batch)
        assert rows_of(cols) == batch.records()


@pytest.mark.parametrize("threshold", [1, 10**9])
@pytest.mark.parametrize(
    ("headers", "why"),
    [
        (b"\x02" + encode_varint(-1) + encode_varint(0), "bad header key length -1"),
        (b"\x02" + encode_varint(9) + b"k" + encode_varint(0), "bad header key length 9"),
        (b"\x02" + encode_varint(1) + b"k" + encode_varint(-2), "bad header value length -2"),
        (b"\x02" + encode_varint(1) + b"k" + encode_varint(5), "header value length 5"),
        (b"\x02" + encode_varint(1) + b"\xff" + encode_varint(0), "not UTF-8"),
        (b"\x02" + encode_varint(1) + b"k" + b"\x80\x80", "header value length runs past"),
        # Two headers counted, room for one and a byte.
        (b"\x04" + encode_varint(1) + b"k" + encode_varint(0) + b"\x00", "header"),
    ],
)
def test_corrupt_headers(headers: bytes, why: str, threshold: int) -> None:
    good = b"\x00\x00\x00\x00\x00" + encode_varint(1) + encode_varint(1) + b"k" + b"\x00"
    bad = b"\x00\x00\x00\x00\x00" + headers
    section = b"".join(encode_varint(len(body)) + body for body in [good] * 3 + [bad] + [good])
    batch = one(raw_batch(section, 5, base_offset=10))
    with pytest.raises(CorruptMessageError):
        batch.records()
    with vector_headers(threshold), pytest.raises(CorruptBatchError, match=why) as info:
        decode_columns(batch)
    assert "record 3" in str(info.value)


def test_corrupt_compressed_payload() -> None:
    data = bytearray(build_batch([(b"k", b"v" * 100)] * 5, compression=CompressionType.ZSTD))
    data[70] ^= 0xFF
    assert_same_as_rows(one(bytes(data)))


def test_take_and_slice() -> None:
    recs = [
        NewRecord(
            key=None if i % 4 == 0 else b"key%d" % i,
            value=b"v" * (i * 3),
            headers=[("h", b"%d" % i)] if i % 5 == 0 else (),
        )
        for i in range(30)
    ]
    batch = one(build_batch(recs, base_offset=1000))
    cols = decode_columns(batch)
    rows = batch.records()
    idx = np.array([29, 0, 4, 4, 13], np.int64)
    assert rows_of(cols.take(idx), decoded=False) == [rows[i] for i in idx]
    mask = np.array([i % 3 == 1 for i in range(30)])
    assert rows_of(cols.take(mask), decoded=False) == [r for i, r in enumerate(rows) if i % 3 == 1]
    assert rows_of(cols.slice(5, 12), decoded=False) == rows[5:12]
    assert rows_of(cols.slice(25, 100), decoded=False) == rows[25:]
    assert rows_of(cols.slice(-3, 30), decoded=False) == rows[-3:]
    assert cols.slice(20, 10).count == 0
    # take from a slice: views are read at the slice's offset
    sub = cols.slice(10, 20)
    assert rows_of(sub.take(np.array([9, 0, 3])), decoded=False) == [rows[19], rows[10], rows[13]]
    assert cols.take(np.array([], np.int64)).count == 0
    assert cols.take([]).count == 0
    with pytest.raises(IndexError):
        cols.take(np.array([30]))
    with pytest.raises(IndexError):
        cols.take(np.array([-1]))
    with pytest.raises(IndexError):
        cols.take(np.ones(5, bool))
    with pytest.raises(IndexError):
        cols.take(np.array([0.5]))
    with pytest.raises(IndexError):
        cols.take(np.zeros((2, 2), np.int64))
    assert repr(cols) == "<RecordColumns count=30 offsets=1000..1029>"
    assert repr(cols.slice(3, 3)) == "<RecordColumns count=0>"
    nohead = decode_columns(one(build_batch([(b"a", b"b")] * 3)))
    assert nohead.take(np.array([2, 1])).headers is None
    assert nohead.slice(1, 2).headers is None


def test_sections_over_the_single_buffer_limit_use_several(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A section over 2 GiB is split into buffers every 2**30 bytes; shown here at 32 bytes."""
    monkeypatch.setattr(columnar, "_MAX_SINGLE_BUFFER", 40)
    monkeypatch.setattr(columnar, "_BUFFER_SPAN_BITS", 5)
    recs = [(b"k" * (i % 20), b"%03d" % i * (i % 9)) for i in range(50)]
    for codec in (CompressionType.NONE, CompressionType.LZ4):
        batch = one(build_batch(recs, compression=codec))
        cols = decode_columns(batch)
        assert len(cols.values.buffers()) > 4
        assert rows_of(cols) == batch.records()
        taken = cols.take(np.arange(49, -1, -2))
        assert rows_of(taken, decoded=False) == batch.records()[49::-2]


# ---------------------------------------------------------------------- raw sections


def padded_varint(value: int, size: int) -> bytes:
    """``value`` zig-zag encoded in exactly ``size`` bytes (padded with continuation)."""
    enc = bytearray(encode_varint(value))
    while len(enc) < size:
        enc[-1] |= 0x80
        enc.append(0)
    return bytes(enc)


def record_bytes(
    *, ts_delta: int = 0, offset_delta: int = 0, key: bytes | None = None, value: bytes = b"v"
) -> bytes:
    body = b"\x00" + encode_varint(ts_delta) + encode_varint(offset_delta)
    body += encode_varint(-1) if key is None else encode_varint(len(key)) + key
    body += encode_varint(len(value)) + value + b"\x00"
    return encode_varint(len(body)) + body


def raw_batch(
    section: bytes,
    count: int,
    *,
    base_offset: int = 0,
    base_timestamp: int = 0,
    log_append: bool = False,
    codec: int = 0,
) -> bytes:
    """A v2 batch around a hand-made records section (CRC not computed)."""
    payload = compress(codec, section) if codec else section
    attributes = codec | (0x08 if log_append else 0)
    header = HEADER.pack(
        base_offset,
        49 + len(payload),
        -1,
        2,
        0,
        attributes,
        max(count - 1, 0),
        base_timestamp,
        555,
        -1,
        -1,
        -1,
        count,
    )
    return header + payload


# ---------------------------------------------------------------------- properties

maybe_bytes = st.none() | st.binary(max_size=40) | st.binary(min_size=120, max_size=300)
header_lists = st.lists(
    st.tuples(st.text(max_size=8), st.none() | st.binary(max_size=20)), max_size=3
)
timestamps = st.integers(min_value=-(2**45), max_value=2**45)
record_lists = st.lists(
    st.builds(
        NewRecord,
        key=maybe_bytes,
        value=maybe_bytes,
        headers=st.just(()) | header_lists,
        timestamp=timestamps,
        offset_delta=st.none() | st.integers(min_value=0, max_value=2**31 - 1),
    ),
    max_size=40,
)
uniform_lists = st.builds(
    lambda n, size, key: [NewRecord(key=key, value=b"u" * size, timestamp=5) for _ in range(n)],
    st.integers(min_value=1, max_value=70),
    st.integers(min_value=0, max_value=200),
    st.none() | st.binary(max_size=14),
)
# Enough records with headers for the vectorised header path (see vector_headers).
header_heavy = st.lists(
    st.builds(
        NewRecord,
        key=st.none() | st.binary(max_size=20),
        value=maybe_bytes,
        headers=st.lists(
            st.tuples(
                st.sampled_from(["", "trace-id", "\u00e9t\u00e9", "k" * 13]) | st.text(max_size=6),
                st.none() | st.binary(max_size=30),
            ),
            min_size=0,
            max_size=4,
        ),
    ),
    min_size=8,
    max_size=60,
)
any_records = record_lists | uniform_lists | header_heavy


class vector_headers:  # noqa: N801 - used like a function
    """Run with the vectorised-header threshold at ``threshold`` (1: every
    header index vectorised; 10**9: every header in Python)."""

    def __init__(self, threshold: int) -> None:
        self.threshold = threshold

    def __enter__(self) -> None:
        self.saved = vectorised._MIN_VECTOR_HEADERS
        vectorised._MIN_VECTOR_HEADERS = self.threshold

    def __exit__(self, *exc: object) -> None:
        vectorised._MIN_VECTOR_HEADERS = self.saved


thresholds = st.sampled_from([1, 4, 32, 10**9])


@settings(max_examples=400, deadline=None)
@given(
    recs=any_records,
    base_offset=st.integers(min_value=0, max_value=2**62),
    codec=st.sampled_from(list(CompressionType)),
    log_append=st.booleans(),
    prefix=st.binary(max_size=3),
    threshold=thresholds,
)
def test_columns_equal_rows(
    recs: list[NewRecord],
    base_offset: int,
    codec: int,
    log_append: bool,
    prefix: bytes,
    threshold: int,
) -> None:
    ts_type = TimestampType.LOG_APPEND_TIME if log_append else TimestampType.CREATE_TIME
    data = build_batch(
        recs,
        base_offset=base_offset,
        compression=codec,
        timestamp_type=ts_type,
        log_append_time=1_700_000_000_000,
    )
    # Another batch before it: the section does not start at byte 0 of the buffer.
    data = build_batch([(prefix, prefix)], base_offset=0) + data
    batch = list(iter_batches(data, check_crcs=True))[1]
    with vector_headers(threshold):
        cols = decode_columns(batch)
        rows = vector_rows(batch)
    assert rows_of(cols) == batch.records()
    assert rows == batch.records()


def mutate(section: bytes, edits: list[tuple[int, int, int]]) -> bytes:
    """Apply (kind, position, byte) edits: 0 set, 1 delete, 2 insert, 3 truncate."""
    buf = bytearray(section)
    for kind, where, byte in edits:
        if not buf and kind != 2:
            continue
        i = where % (len(buf) + (kind == 2))
        if kind == 0:
            buf[i] = byte
        elif kind == 1:
            del buf[i]
        elif kind == 2:
            buf.insert(i, byte)
        else:
            del buf[i:]
    return bytes(buf)


interesting_bytes = st.sampled_from([0x00, 0x01, 0x02, 0x03, 0x7F, 0x80, 0x81, 0xFE, 0xFF]) | (
    st.integers(min_value=0, max_value=255)
)
edits = st.lists(
    st.tuples(st.integers(min_value=0, max_value=3), st.integers(min_value=0), interesting_bytes),
    min_size=1,
    max_size=4,
)


@settings(max_examples=1500, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    recs=any_records.filter(bool),
    changes=edits,
    count_change=st.sampled_from([0, 0, 0, -1, 1]),
    codec=st.sampled_from([CompressionType.NONE, CompressionType.NONE, CompressionType.LZ4]),
    log_append=st.booleans(),
    threshold=thresholds,
)
def test_mutated_sections_fail_exactly_like_rows(
    recs: list[NewRecord],
    changes: list[tuple[int, int, int]],
    count_change: int,
    codec: int,
    log_append: bool,
    threshold: int,
) -> None:
    valid = build_batch(recs, base_offset=1234)
    section = mutate(valid[61:], changes)
    data = raw_batch(
        section,
        len(recs) + count_change,
        base_offset=1234,
        base_timestamp=2**40,
        log_append=log_append,
        codec=codec,
    )
    with vector_headers(threshold):
        event(assert_same_as_rows(one(data + build_batch([(b"next", b"batch")])[:70])))


varint_values = st.integers(min_value=-3, max_value=300) | st.integers(
    min_value=-(2**63), max_value=2**63 - 1
)


def rarely(draw: st.DrawFn, odds: int) -> bool:
    """True about once in ``odds`` draws (shrinking towards False)."""
    return draw(st.sampled_from([False] * (odds - 1) + [True]))


@st.composite
def raw_records(draw: st.DrawFn) -> bytes:
    """A record with arbitrary (often odd) varints, sometimes padded or 10 bytes long,
    and now and then a broken field."""

    def varint(value: int) -> bytes:
        enc = encode_varint(value)
        pad = draw(st.sampled_from([0, 0, 0, 1, 10 - len(enc)]))
        return padded_varint(value, len(enc) + max(pad, 0))

    body = b"\x00" + varint(draw(varint_values)) + varint(draw(varint_values))
    for _ in range(2):  # key, value
        size = draw(st.sampled_from([-1, 0, 3, 12, 13, 40]))
        if rarely(draw, 30):
            size = draw(st.sampled_from([-2, -(2**40), 2**40]))
        body += varint(size) + b"z" * max(min(size, 50), 0)
    nheaders = draw(st.sampled_from([0, 0, 1, 2]))
    if rarely(draw, 30):
        nheaders = draw(st.sampled_from([-1, 100, 2**33]))
    body += varint(nheaders)
    for _ in range(min(nheaders, 2) - (1 if nheaders == 2 and rarely(draw, 20) else 0)):
        klen = draw(st.sampled_from([-1, 0, 2])) if rarely(draw, 20) else 1
        body += varint(klen) + (b"\xff" if rarely(draw, 20) else b"h")
        hsize = draw(st.sampled_from([-1, 0, 2]))
        if rarely(draw, 20):
            hsize = draw(st.sampled_from([-2, 3]))
        body += varint(hsize) + b"hv"[: max(hsize, 0)]
    if rarely(draw, 20):
        body = body[: draw(st.integers(min_value=0, max_value=len(body)))]
    length = len(body) + (draw(st.sampled_from([-1, 1])) if rarely(draw, 20) else 0)
    if rarely(draw, 40):
        # A 10-byte length whose tenth byte carries bits past 64.
        return b"\x80" * 9 + b"\x7e" + body
    return varint(length) + body


#: batches with odd varints, counts that disagree with the records, offsets and
#: timestamps at the int64 edges
_ODD_BATCHES = st.builds(
    lambda records, count_change, base_offset, base_timestamp, log_append: raw_batch(
        b"".join(records),
        len(records) + count_change,
        base_offset=base_offset,
        base_timestamp=base_timestamp,
        log_append=log_append,
    ),
    records=st.lists(raw_records(), min_size=1, max_size=8),
    count_change=st.sampled_from([0, 0, -1, 1]),
    base_offset=st.sampled_from([0, 0, 0, 2**62, INT64_MAX - 5]),
    base_timestamp=st.sampled_from([0, 0, 0, -(2**62), 2**62]),
    log_append=st.booleans(),
)


@settings(max_examples=1000, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=_ODD_BATCHES, threshold=thresholds)
def test_odd_varints_decode_exactly_like_rows(data: bytes, threshold: int) -> None:
    with vector_headers(threshold):
        event(assert_same_as_rows(one(data)))


def test_records_package_does_not_import_columnar() -> None:
    code = (
        "import sys, kafka_share.records; print('numpy' in sys.modules, 'pyarrow' in sys.modules)"
    )
    assert run_fresh(code).split() == ["False", "False"]


def test_large_records_decoded_from_a_memoryview() -> None:
    # Records of 2 KiB and more are decoded straight from the response buffer (a
    # memoryview), without copying the section first: header keys checked as
    # UTF-8 and values ending at the buffer's end must work on a view too.
    import os

    from kafka_share.records.batch import CorruptBatchError, iter_batches
    from kafka_share.records.builder import NewRecord, build_batch

    records = [
        NewRecord(key=None, value=os.urandom(2500), headers=[("ключ", b"x")], timestamp=5 + i)
        for i in range(40)
    ] + [NewRecord(key=None, value=b"ab", timestamp=9)]
    data = build_batch(records, base_offset=0)
    (batch,) = iter_batches(memoryview(bytearray(data)), check_crcs=True)
    rows = batch.records()
    columns = decode_columns(batch)
    assert columns.values.to_pylist() == [r[3] for r in rows]
    assert columns.headers is not None
    assert [[(h["key"], h["value"]) for h in hs] for hs in columns.headers.to_pylist()] == [
        list(r[4]) for r in rows
    ]
    bad = bytearray(data)
    bad[bytes(bad).index("ключ".encode())] = 0xFF
    (broken,) = iter_batches(memoryview(bad), check_crcs=False)
    with pytest.raises(CorruptBatchError, match="not UTF-8"):
        decode_columns(broken)


# ---------------------------------------------------------------------- small batches


def test_small_batches_are_decoded_by_the_row_decoder(monkeypatch: pytest.MonkeyPatch) -> None:
    """decode_small_columns (poll_arrow's decoder) leaves batches of a few records
    to the row decoder: decode_columns' fixed cost (about 80 µs) was most of a
    poll at a low rate, where each fetch brings a record or two."""
    calls: list[int] = []
    vectorised = columnar.decode_columns

    def counting(batch: RecordBatch) -> RecordColumns:
        calls.append(batch.record_count)
        return vectorised(batch)

    monkeypatch.setattr(columnar, "decode_columns", counting)
    small = one(build_batch([(b"k", b"v" * 20), (None, b"w"), (b"", None)], base_offset=7))
    cols = decode_small_columns(small)
    assert calls == []
    assert rows_of(cols) == small.records()
    big = one(build_batch([(None, b"v%d" % i) for i in range(SMALL_BATCH_RECORDS)]))
    assert rows_of(decode_small_columns(big)) == big.records()
    assert calls == [SMALL_BATCH_RECORDS]
    # A few large values take the vectorised path too (no copies).
    large = one(build_batch([(None, b"x" * 70_000)]))
    assert rows_of(decode_small_columns(large)) == large.records()
    assert calls == [SMALL_BATCH_RECORDS, 1]


def test_small_batch_outside_int64_is_corrupt_as_with_decode_columns() -> None:
    big = one(
        build_batch([NewRecord(key=None, value=b"v", offset_delta=10)], base_offset=INT64_MAX)
    )
    with pytest.raises(CorruptBatchError, match="offset outside int64"):
        decode_small_columns(big)
    section = record_bytes(ts_delta=2**62) + record_bytes(ts_delta=2**62)
    with pytest.raises(CorruptBatchError, match="timestamp outside int64"):
        decode_small_columns(one(raw_batch(section, 2, base_timestamp=2**62)))


@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=_ODD_BATCHES)
def test_small_batches_decode_and_fail_exactly_like_rows(data: bytes) -> None:
    event(assert_same_as_rows(one(data), decode_small_columns))


@pytest.mark.parametrize("sizes", [[0], [12], [13], [-1, 12, 13, 0, 40, -1, 1], [-1] * 9])
def test_columns_from_rows_packs_views_as_arrow_requires(sizes: list[int]) -> None:
    rows = [
        (i, 1000 + i, None if n < 0 else bytes([65 + i]) * n, b"%d" % i if i % 2 else None, ())
        for i, n in enumerate(sizes)
    ]
    cols = columns_from_rows(rows)
    assert rows_of(cols, decoded=False) == rows  # validates, padding checked
    assert cols.keys.null_count == sizes.count(-1)


def test_columns_from_rows_splits_data_buffers_at_the_view_offset_limit(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A view's offset is an int32: values past 2 GiB go to another data buffer
    (shown with the limit lowered to 40 bytes)."""
    monkeypatch.setattr(columnar, "_INT32_MAX", 40)
    rows = [(i, 0, None, bytes([97 + i]) * 15, ()) for i in range(6)]
    cols = columns_from_rows(rows)
    assert len(cols.values.buffers()) == 2 + 3  # validity, views, 2 values per buffer
    assert rows_of(cols, decoded=False) == rows


def test_record_pieces_say_when_offsets_do_not_increase() -> None:
    # A broken batch that passed its CRC: poll's decoder then matches its records
    # one by one, so the piece must say so.
    recs = [NewRecord(key=None, value=b"v%d" % d, offset_delta=d) for d in (0, 2, 1, 3)]
    batch = one(build_batch(recs, base_offset=100))
    [(rows, offsets, payload, increasing)] = list(
        vectorised.record_pieces(batch, PLAIN_SHAPE, 10)
    )
    assert offsets == [100, 102, 101, 103] == [r[2] for r in rows]
    assert (payload, increasing) == (8, False)
    sorted_batch = one(build_batch(sorted(recs, key=lambda r: r.offset_delta), base_offset=100))
    assert [p[3] for p in vectorised.record_pieces(sorted_batch, PLAIN_SHAPE, 10)] == [True]
