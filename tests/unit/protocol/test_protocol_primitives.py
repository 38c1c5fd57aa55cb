"""Wire primitives: varints, strings, bytes, bounds."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from kafka_share.errors import CorruptMessageError
from kafka_share.protocol import primitives as p


@given(st.integers(-(2**31), 2**31 - 1))
def test_varint_round_trip(v: int) -> None:
    out = bytearray()
    p.write_varint(out, v)
    assert p.read_varint(memoryview(bytes(out)), 0) == (v, len(out))


@given(st.integers(-(2**63), 2**63 - 1))
def test_varlong_round_trip(v: int) -> None:
    out = bytearray()
    p.write_varlong(out, v)
    assert p.read_varlong(memoryview(bytes(out)), 0) == (v, len(out))


def test_known_varint_encodings() -> None:
    for value, enc in [(0, "00"), (-1, "01"), (1, "02"), (63, "7e"), (-64, "7f"), (64, "8001")]:
        out = bytearray()
        p.write_varint(out, value)
        assert out.hex() == enc
    out = bytearray()
    p.write_uvarint(out, 300)
    assert out.hex() == "ac02"


def test_varint_too_long_or_truncated() -> None:
    with pytest.raises(CorruptMessageError, match="longer than 5"):
        p.read_uvarint(memoryview(b"\xff" * 6), 0)
    with pytest.raises(CorruptMessageError, match="truncated"):
        p.read_uvarint(memoryview(b"\xff\xff"), 0)
    with pytest.raises(CorruptMessageError, match="exceeds 32 bits"):
        p.read_uvarint(memoryview(b"\xff\xff\xff\xff\x7f"), 0)


@given(st.text(max_size=50) | st.none())
def test_strings(s: str | None) -> None:
    for write, read in [
        (p.write_nullable_string, p.read_nullable_string),
        (p.write_compact_nullable_string, p.read_compact_nullable_string),
    ]:
        out = bytearray()
        write(out, s)
        assert read(memoryview(bytes(out)), 0) == (s, len(out))


def test_length_prefix_beyond_buffer_is_corrupt() -> None:
    with pytest.raises(CorruptMessageError, match="exceeds"):
        p.read_string(memoryview(b"\x00\x10abc"), 0)
    with pytest.raises(CorruptMessageError, match="exceeds"):
        p.read_compact_bytes(memoryview(b"\x7fab"), 0)
    with pytest.raises(CorruptMessageError, match="exceeds"):
        p.read_bytes(memoryview(b"\x7f\xff\xff\xff"), 0)
    with pytest.raises(CorruptMessageError, match="negative"):
        p.read_nullable_string(memoryview(b"\xff\xfe"), 0)
    with pytest.raises(CorruptMessageError, match="UTF-8"):
        p.read_string(memoryview(b"\x00\x01\xff"), 0)
    with pytest.raises(CorruptMessageError, match="is null"):
        p.read_compact_string(memoryview(b"\x00"), 0)


def test_records_are_zero_copy_slices() -> None:
    data = b"\x00\x00\x00\x03abc"
    view, pos = p.read_records(memoryview(data), 0)
    assert view is not None and view.obj is data and bytes(view) == b"abc" and pos == 7


def test_tagged_fields_skip_and_uuid() -> None:
    buf = memoryview(bytes.fromhex("02" "00" "01" "aa" "05" "02" "bbcc" "ff"))
    assert p.skip_tagged_fields(buf, 0) == 8
    with pytest.raises(CorruptMessageError):
        p.skip_tagged_fields(memoryview(bytes.fromhex("01" "00" "05" "aa")), 0)
    out = bytearray()
    p.write_uuid(out, p.ZERO_UUID)
    assert p.read_uuid(memoryview(bytes(out)), 0) == (p.ZERO_UUID, 16)
