"""Acquired-record matching: delivery counts, gaps, skips, control batches."""

from __future__ import annotations

import logging
from collections.abc import Iterable

import attrs
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kafka_share.share.acquired import (
    MAX_ACQUIRED_OFFSETS,
    AcquiredRange,
    AcquiredRecords,
    match_records,
)
from tests.unit.share.helpers import exhausted, offsets_between


@attrs.frozen
class Rec:
    offset: int


@attrs.define
class Batch:
    base_offset: int
    last_offset: int
    is_control: bool = False
    present: tuple[int, ...] | None = None  # offsets that survived compaction
    iterated: bool = False

    def records(self) -> Iterable[Rec]:
        self.iterated = True
        offsets = self.present
        if offsets is None:
            offsets = tuple(range(self.base_offset, self.last_offset + 1))
        return [Rec(o) for o in offsets]


def delivered(result: object) -> list[tuple[int, int]]:
    return [(r.offset, c) for r, c in result.records]  # type: ignore[attr-defined]


def test_simple_full_match() -> None:
    acquired = AcquiredRecords.from_ranges([(0, 4, 1)])
    result = match_records(acquired, [Batch(0, 4)])
    assert delivered(result) == [(0, 1), (1, 1), (2, 1), (3, 1), (4, 1)]
    assert result.gaps == []


def test_delivery_count_comes_from_the_range() -> None:
    acquired = AcquiredRecords.from_ranges([(0, 1, 3), (2, 3, 1)])
    result = match_records(acquired, [Batch(0, 3)])
    assert delivered(result) == [(0, 3), (1, 3), (2, 1), (3, 1)]


def test_records_before_first_acquired_are_skipped() -> None:
    acquired = AcquiredRecords.from_ranges([(5, 7, 2)])
    result = match_records(acquired, [Batch(0, 9)])
    assert delivered(result) == [(5, 2), (6, 2), (7, 2)]
    assert result.gaps == []


def test_records_between_ranges_are_skipped() -> None:
    acquired = AcquiredRecords.from_ranges([(0, 1, 1), (5, 6, 1)])
    result = match_records(acquired, [Batch(0, 9)])
    assert delivered(result) == [(0, 1), (1, 1), (5, 1), (6, 1)]
    assert result.gaps == []


def test_compacted_offsets_become_gaps() -> None:
    acquired = AcquiredRecords.from_ranges([(0, 9, 1)])
    result = match_records(acquired, [Batch(0, 9, present=(0, 3, 4, 9))])
    assert delivered(result) == [(0, 1), (3, 1), (4, 1), (9, 1)]
    assert result.gaps == [1, 2, 5, 6, 7, 8]


def test_gaps_before_first_record() -> None:
    acquired = AcquiredRecords.from_ranges([(0, 5, 1)])
    result = match_records(acquired, [Batch(3, 5)])
    assert delivered(result) == [(3, 1), (4, 1), (5, 1)]
    assert result.gaps == [0, 1, 2]


def test_acquired_offsets_after_last_record_are_gaps() -> None:
    acquired = AcquiredRecords.from_ranges([(0, 3, 1), (10, 11, 2)])
    result = match_records(acquired, [Batch(0, 1)])
    assert delivered(result) == [(0, 1), (1, 1)]
    assert result.gaps == [2, 3, 10, 11]


def test_no_records_at_all_means_all_gaps() -> None:
    acquired = AcquiredRecords.from_ranges([(4, 6, 1)])
    result = match_records(acquired, [])
    assert result.records == []
    assert result.gaps == [4, 5, 6]


def test_control_batch_offsets_become_gaps_and_are_not_iterated() -> None:
    # A transaction: data 0..2, commit marker at 3, more data 4..5.
    marker = Batch(3, 3, is_control=True)
    acquired = AcquiredRecords.from_ranges([(0, 5, 1)])
    result = match_records(acquired, [Batch(0, 2), marker, Batch(4, 5)])
    assert delivered(result) == [(0, 1), (1, 1), (2, 1), (4, 1), (5, 1)]
    assert result.gaps == [3]
    assert marker.iterated is False


def test_trailing_control_batch_is_gap() -> None:
    acquired = AcquiredRecords.from_ranges([(0, 3, 1)])
    result = match_records(acquired, [Batch(0, 2), Batch(3, 3, is_control=True)])
    assert delivered(result) == [(0, 1), (1, 1), (2, 1)]
    assert result.gaps == [3]


def test_batches_outside_acquired_ranges_are_not_decoded() -> None:
    before = Batch(0, 9)
    hole = Batch(20, 29)
    after = Batch(50, 59)
    acquired = AcquiredRecords.from_ranges([(10, 19, 1), (30, 39, 1)])
    result = match_records(acquired, [before, Batch(10, 19), hole, Batch(30, 39), after])
    assert [o for o, _ in delivered(result)] == [*range(10, 20), *range(30, 40)]
    assert result.gaps == []
    assert before.iterated is False
    assert hole.iterated is False
    assert after.iterated is False


def test_duplicate_ranges_are_dropped_and_logged(caplog: pytest.LogCaptureFixture) -> None:
    with caplog.at_level(logging.ERROR, logger="kafka_share.share.acquired"):
        acquired = AcquiredRecords.from_ranges([(0, 4, 1), (0, 4, 1)])
    assert acquired.ranges == (AcquiredRange(0, 4, 1),)
    assert acquired.duplicates == 5
    assert len(acquired) == 5
    assert "duplicate" in caplog.text
    result = match_records(acquired, [Batch(0, 4)])
    assert [o for o, _ in delivered(result)] == [0, 1, 2, 3, 4]


def test_overlapping_ranges_first_one_keeps_the_offset() -> None:
    acquired = AcquiredRecords.from_ranges([(5, 9, 2), (0, 6, 1), (8, 12, 3)])
    assert acquired.ranges == (
        AcquiredRange(0, 4, 1),
        AcquiredRange(5, 9, 2),
        AcquiredRange(10, 12, 3),
    )
    assert acquired.duplicates == 2 + 2
    assert acquired.delivery_count(6) == 2
    assert acquired.delivery_count(3) == 1
    assert acquired.delivery_count(11) == 3
    assert acquired.delivery_count(13) is None


def test_unsorted_disjoint_ranges_are_sorted() -> None:
    acquired = AcquiredRecords.from_ranges([(10, 11, 1), (0, 1, 2)])
    assert [r.first_offset for r in acquired.ranges] == [0, 10]
    assert acquired.duplicates == 0
    result = match_records(acquired, [Batch(0, 11)])
    assert delivered(result) == [(0, 2), (1, 2), (10, 1), (11, 1)]


def test_invalid_ranges_raise_clear_errors() -> None:
    with pytest.raises(ValueError, match="first_offset <= last_offset"):
        AcquiredRecords.from_ranges([(5, 4, 1)])
    with pytest.raises(ValueError, match=">= 0"):
        AcquiredRecords.from_ranges([(-1, 4, 1)])
    with pytest.raises(ValueError, match="more than"):
        AcquiredRecords.from_ranges([(0, MAX_ACQUIRED_OFFSETS, 1)])


def test_offsets_between_and_contains() -> None:
    acquired = AcquiredRecords.from_ranges([(0, 2, 1), (6, 8, 1)])
    assert offsets_between(acquired, 1, 7) == [1, 2, 6, 7]
    assert offsets_between(acquired, 3, 5) == []
    assert acquired.any_between(3, 6)
    assert not acquired.any_between(3, 5)
    assert 7 in acquired
    assert 4 not in acquired
    assert list(acquired.offsets()) == [0, 1, 2, 6, 7, 8]


def test_cursor_drain_before_for_corrupt_batch() -> None:
    acquired = AcquiredRecords.from_ranges([(0, 9, 1)])
    cursor = acquired.cursor()
    gaps: list[int] = []
    assert cursor.take(0, gaps) == 1
    rejected: list[int] = []
    cursor.drain_before(6, rejected)  # batch 1..5 was corrupt
    assert rejected == [1, 2, 3, 4, 5]
    assert cursor.take(7, gaps) == 1
    assert gaps == [6]
    cursor.finish(gaps)
    assert gaps == [6, 8, 9]
    assert exhausted(cursor)
    assert cursor.next_offset is None


def test_cursor_ignores_repeated_or_backward_offsets() -> None:
    cursor = AcquiredRecords.from_ranges([(0, 3, 1)]).cursor()
    gaps: list[int] = []
    assert cursor.take(1, gaps) == 1
    assert cursor.take(1, gaps) is None
    assert cursor.take(0, gaps) is None
    assert gaps == [0]


@st.composite
def scenarios(draw: st.DrawFn) -> tuple[list[tuple[int, int, int]], list[Batch]]:
    ranges = draw(
        st.lists(st.tuples(st.integers(0, 60), st.integers(0, 8), st.integers(1, 5)), max_size=6)
    )
    acquired = [(f, f + ln, c) for f, ln, c in ranges]
    batches: list[Batch] = []
    offset = draw(st.integers(0, 5))
    while offset < 80:
        size = draw(st.integers(1, 6))
        last = offset + size - 1
        control = draw(st.booleans()) and size == 1
        present = tuple(o for o in range(offset, last + 1) if draw(st.booleans()) or control)
        if not present:
            present = (last,)
        batches.append(Batch(offset, last, is_control=control, present=present))
        offset = last + 1 + draw(st.integers(0, 3))
    return acquired, batches


@settings(max_examples=300)
@given(scenarios())
def test_property_matches_reference(
    scenario: tuple[list[tuple[int, int, int]], list[Batch]],
) -> None:
    raw, batches = scenario
    acquired = AcquiredRecords.from_ranges(raw)
    # Reference: first range in response order wins an offset.
    counts: dict[int, int] = {}
    for f, last, c in raw:
        for o in range(f, last + 1):
            counts.setdefault(o, c)
    data_offsets = {o for b in batches if not b.is_control for o in (b.present or ())}
    result = match_records(acquired, batches)
    expected_records = sorted((o, counts[o]) for o in data_offsets if o in counts)
    assert delivered(result) == expected_records
    assert result.gaps == sorted(o for o in counts if o not in data_offsets)
    assert len(acquired) == len(counts)


def test_take_span_resolves_a_batch_inside_one_range_at_once() -> None:
    cursor = AcquiredRecords.from_ranges([(10, 19, 2), (30, 39, 1)]).cursor()
    gaps: list[int] = []
    assert cursor.take_span(12, 15, gaps) == 2
    assert gaps == [10, 11]  # acquired before the span, no record
    assert cursor.next_offset == 16
    assert cursor.take_span(16, 19, gaps) == 2
    assert cursor.next_offset == 30  # moved on to the next range
    assert cursor.take_span(29, 31, gaps) is None  # starts before the range: per record
    assert cursor.take_span(30, 40, gaps) is None  # runs past the range
    assert cursor.next_offset == 30 and gaps == [10, 11]  # unchanged by refusals
    assert cursor.take_span(35, 39, gaps) == 1
    assert gaps == [10, 11, 30, 31, 32, 33, 34]
    assert exhausted(cursor)
    assert cursor.take_span(40, 41, gaps) is None


@settings(max_examples=300)
@given(
    st.lists(st.tuples(st.integers(0, 60), st.integers(0, 8), st.integers(1, 5)), max_size=6),
    st.lists(st.lists(st.integers(0, 80), min_size=1, max_size=12, unique=True), max_size=6),
)
def test_take_through_resolves_a_batch_as_take_does_record_by_record(
    raw: list[tuple[int, int, int]], pieces: list[list[int]],
) -> None:
    """take_through(last) and the caller's run matching give what take() gives
    per record: the same records with their counts, and the same gaps."""
    ranges = [(f, f + ln, c) for f, ln, c in raw]
    batches, floor = [], 0
    for piece in pieces:  # batches of ascending offsets, each after the last
        offsets = sorted(o + floor for o in piece)
        batches.append(offsets)
        floor = offsets[-1] + 1
    one, many = (AcquiredRecords.from_ranges(ranges).cursor() for _ in range(2))
    gaps_one: list[int] = []
    gaps_many: list[int] = []
    for offsets in batches:
        by_record = [(o, c) for o in offsets if (c := one.take(o, gaps_one)) is not None]
        by_run: list[tuple[int, int]] = []
        for lo, hi, count in many.take_through(offsets[-1]):
            inside = [o for o in offsets if lo <= o <= hi]
            gaps_many.extend(o for o in range(lo, hi + 1) if o not in inside)
            by_run.extend((o, count) for o in inside)
        assert by_run == by_record
        assert gaps_many == gaps_one
    assert one.next_offset == many.next_offset
