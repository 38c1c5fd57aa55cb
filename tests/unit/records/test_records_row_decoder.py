"""The row decoder: its templated path against its careful path."""

from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from kafka_share.models import TimestampType
from kafka_share.records import RecordShape, iter_batches, row_decoder
from kafka_share.records.batch import _PLAIN, BATCH_HEADER_SIZE
from kafka_share.records.builder import NewRecord, build_batch

# ---------------------------------------------------------------------- templated path
# The row decoder takes the records whose varints keep the last record's layout
# through its templated path and every other record through the careful path
# (_careful_record); the two together must decode and reject exactly what the
# careful path alone does.


def _outcome(decode: Any) -> Any:
    try:
        return decode()
    except row_decoder._RecordError as exc:
        return ("record error", exc.args)
    except (IndexError, ValueError) as exc:
        return (type(exc).__name__, str(exc))


def _both(buf: bytes | memoryview, count: int, end: int, shaped: bool) -> Any:
    """(decoded by the row decoder, decoded by the careful path alone), as plain
    records or the error each raised."""

    def mixed() -> Any:
        records, pos = row_decoder._decode_v2_records(
            buf, BATCH_HEADER_SIZE, end, count, base_offset=100, base_timestamp=5_000,
            append_timestamp=None, shape=_SHAPE if shaped else _PLAIN,
        )
        # the shaped fields that plain records carry
        return [(r[2], r[3], r[5], r[6], r[7]) for r in records], pos

    def careful() -> Any:
        records = []
        pos = BATCH_HEADER_SIZE
        for _ in range(count):
            ts_delta, offset_delta, key, value, headers, _k, _v, pos = (
                row_decoder._careful_record(buf, pos, end)
            )
            records.append((100 + offset_delta, 5_000 + ts_delta, key, value, headers))
        if pos != end:
            raise row_decoder._RecordError(
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
    real = row_decoder._careful_record

    def counted(buf: Any, pos: int, end: int) -> Any:
        positions.append(pos)
        return real(buf, pos, end)

    monkeypatch.setattr(row_decoder, "_careful_record", counted)
    # Each test starts with no layout carried over from the one before.
    monkeypatch.setattr(row_decoder, "_last_layout", row_decoder._INITIAL_LAYOUT)
    return positions


@pytest.fixture
def layouts_worked_out(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """The positions of the records whose head layout is worked out."""
    positions: list[int] = []
    real = row_decoder._head_layout

    def counted(buf: Any, pos: int) -> Any:
        positions.append(pos)
        return real(buf, pos)

    monkeypatch.setattr(row_decoder, "_head_layout", counted)
    return positions


def test_a_call_starts_with_the_layout_the_last_one_ended_with(
    careful_records: list[int], layouts_worked_out: list[int],
) -> None:
    # Small producer batches (15 records of 1 KiB: Java's 16 KiB batches) share
    # one layout: only the first batch's first record works it out.
    batches = [
        build_batch([NewRecord(value=bytes([i]) * 1024) for i in range(15)], base_offset=15 * n)
        for n in range(20)
    ]
    decoded = [batch.records() for data in batches
               for batch in iter_batches(data, check_crcs=True)]
    assert [[r[3] for r in records] for records in decoded] == (
        [[bytes([i]) * 1024 for i in range(15)]] * 20
    )
    assert [r[0] for r in decoded[-1]] == list(range(285, 300))
    assert len(layouts_worked_out) == 1
    assert careful_records == []


def test_a_layout_carried_over_from_other_records_is_only_a_miss(
    careful_records: list[int], layouts_worked_out: list[int],
) -> None:
    # Two-byte key lengths and values of 300 bytes, then no keys and 3-byte
    # values: the second batch's first record misses the carried layout and
    # works out its own; every record decodes as the careful path has it.
    first = build_batch([NewRecord(key=b"k" * 100, value=b"v" * 300) for _ in range(5)])
    second = build_batch(
        [NewRecord(key=None, value=b"w" * 3, headers=[("h", b"x")], timestamp=7_000 + i)
         for i in range(5)],
        base_offset=5, base_timestamp=7_000,
    )
    [batch_1] = list(iter_batches(first, check_crcs=True))
    [batch_2] = list(iter_batches(second, check_crcs=True))
    assert [(r[2], r[3]) for r in batch_1.records()] == [(b"k" * 100, b"v" * 300)] * 5
    assert batch_2.records() == [
        (5 + i, 7_000 + i, None, b"w" * 3, (("h", b"x"),)) for i in range(5)
    ]
    assert len(layouts_worked_out) == 2
    assert careful_records == []


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
    assert 100 - row_decoder._TEMPLATE_MISSES <= len(careful_records) < 100


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
    row_decoder._last_layout = row_decoder._INITIAL_LAYOUT  # its first record works it out
    recs = [NewRecord(value=b"v", timestamp=5_000 + (2**40 * (i % 2))) for i in range(100)]
    [batch] = list(iter_batches(build_batch(recs, base_timestamp=5_000), check_crcs=True))
    assert [r[1] for r in batch.records()] == [r.timestamp for r in recs]
    # The first record's head and tail layouts take two of the budget; then
    # records 1, 3, ..., 2 * misses - 1 miss, and from 2 * misses on all go careful.
    misses = row_decoder._TEMPLATE_MISSES - 2
    assert len(careful_records) == misses + (100 - 2 * misses)


def test_a_full_table_of_three_byte_varints_makes_room_for_new_ones(
    monkeypatch: pytest.MonkeyPatch, careful_records: list[int]
) -> None:
    table = row_decoder._varint_table()
    monkeypatch.setattr(row_decoder, "_three_byte_varints", 0)
    monkeypatch.setattr(row_decoder, "_MAX_THREE_BYTE_VARINTS", 4)
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


def test_prepare_builds_the_same_table_a_slice_at_a_time(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A consumer builds the table on a thread of its own while it joins: built
    in one go it held the GIL for 6-12 ms, delaying the join's first requests;
    between slices it calls its caller back (the consumer's thread sleeps there,
    which lets a waiting thread run)."""
    # Without the three-byte varints other tests' records added.
    built_at_once = {raw: v for raw, v in row_decoder._varint_table().items() if len(raw) < 3}
    monkeypatch.setattr(row_decoder, "_VARINTS", None)
    sizes_at_pauses: list[int] = []
    building: list[dict[bytes, int]] = []
    original = row_decoder._add_two_byte_varints

    def adding(table: dict[bytes, int], second_bytes: range) -> None:
        building[:] = [table]
        original(table, second_bytes)

    monkeypatch.setattr(row_decoder, "_add_two_byte_varints", adding)
    assert not row_decoder.prepared()
    row_decoder.prepare(lambda: sizes_at_pauses.append(len(building[0])))
    assert row_decoder.prepared()
    assert built_at_once == row_decoder._VARINTS
    assert sizes_at_pauses == [0x80 + 1024 * n for n in range(1, 17)]
