"""Acknowledgements: map semantics, wire batch coalescing and completion."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kafka_share.models import AcknowledgeType
from kafka_share.share.acknowledgements import (
    GAP,
    MAX_RECORDS_WITH_SAME_ACKNOWLEDGE_TYPE,
    AckBatch,
    Acknowledgements,
    batches_to_map,
)
from tests.unit.share.helpers import add_gap, add_if_absent, as_dict, has_non_gap, remove, succeeded

A = int(AcknowledgeType.ACCEPT)
RL = int(AcknowledgeType.RELEASE)
RJ = int(AcknowledgeType.REJECT)
RN = int(AcknowledgeType.RENEW)
MAX = MAX_RECORDS_WITH_SAME_ACKNOWLEDGE_TYPE


def acks_of(entries: dict[int, int]) -> Acknowledgements:
    acks = Acknowledgements()
    for offset, t in entries.items():
        if t == GAP:
            add_gap(acks, offset)
        else:
            acks.add(offset, t)
    return acks


def test_empty_has_no_batches() -> None:
    acks = Acknowledgements()
    assert acks.to_batches() == []
    assert len(acks) == 0
    assert not acks


def test_single_record_single_batch() -> None:
    acks = acks_of({0: A})
    assert acks.to_batches() == [AckBatch(0, 0, (A,))]
    # Building batches does not consume the map (Java can call it twice).
    assert acks.to_batches() == [AckBatch(0, 0, (A,))]


def test_last_add_wins() -> None:
    acks = Acknowledgements()
    acks.add(5, AcknowledgeType.RELEASE)
    acks.add(5, AcknowledgeType.ACCEPT)
    assert acks.get(5) == A
    assert len(acks) == 1


def test_add_if_absent_never_overrides() -> None:
    acks = Acknowledgements()
    acks.add(1, AcknowledgeType.REJECT)
    assert add_if_absent(acks, 1, AcknowledgeType.ACCEPT) is False
    assert add_if_absent(acks, 2, AcknowledgeType.ACCEPT) is True
    assert as_dict(acks) == {1: RJ, 2: A}


def test_invalid_type_and_offset_rejected_with_clear_error() -> None:
    acks = Acknowledgements()
    with pytest.raises(ValueError, match="invalid acknowledge type"):
        acks.add(1, 0)
    with pytest.raises(ValueError, match="invalid acknowledge type"):
        acks.add(1, 5)
    with pytest.raises(ValueError, match=">= 0"):
        acks.add(-1, AcknowledgeType.ACCEPT)
    with pytest.raises(ValueError, match=">= 0"):
        add_gap(acks, -3)
    assert len(acks) == 0


def test_single_type_multi_record_collapses() -> None:
    acks = acks_of(dict.fromkeys(range(5), A))
    assert acks.to_batches() == [AckBatch(0, 4, (A,))]


def test_mixed_types_keep_full_array() -> None:
    acks = acks_of({0: A, 1: A, 2: A, 3: RL, 4: RL})
    assert acks.to_batches() == [AckBatch(0, 4, (A, A, A, RL, RL))]


def test_gaps_mix_into_batches() -> None:
    acks = acks_of({0: RL, 1: GAP, 2: GAP, 3: A, 4: A})
    assert acks.to_batches() == [AckBatch(0, 4, (RL, GAP, GAP, A, A))]
    only_gaps = acks_of({0: GAP, 1: GAP})
    assert only_gaps.to_batches() == [AckBatch(0, 1, (GAP,))]


def test_hole_in_offsets_starts_new_batch() -> None:
    acks = acks_of({0: A, 1: RL, 3: RJ, 4: RJ, 6: RJ})
    assert acks.to_batches() == [
        AckBatch(0, 1, (A, RL)),
        AckBatch(3, 4, (RJ,)),
        AckBatch(6, 6, (RJ,)),
    ]


def test_out_of_order_adds_are_sorted() -> None:
    acks = Acknowledgements()
    for offset in (7, 3, 5, 4, 6):
        acks.add(offset, AcknowledgeType.ACCEPT)
    assert acks.to_batches() == [AckBatch(3, 7, (A,))]


def test_run_of_exactly_max_is_not_split() -> None:
    # Java splits only when it sees the 11th identical type in a row.
    entries = dict.fromkeys(range(MAX), A)
    entries[MAX] = RJ
    assert acks_of(entries).to_batches() == [AckBatch(0, MAX, (A,) * MAX + (RJ,))]


def test_run_longer_than_max_is_split_out() -> None:
    entries = dict.fromkeys(range(MAX + 1), A)
    entries[MAX + 1] = RJ
    assert acks_of(entries).to_batches() == [
        AckBatch(0, MAX, (A,)),
        AckBatch(MAX + 1, MAX + 1, (RJ,)),
    ]


def test_two_long_runs_become_two_single_type_batches() -> None:
    # Java testSingleAcknowledgeTypeExceedingLimit: 12 ACCEPT then 11 REJECT.
    entries = dict.fromkeys(range(MAX + 2), A)
    entries.update(dict.fromkeys(range(MAX + 2, 2 * MAX + 3), RJ))
    assert acks_of(entries).to_batches() == [
        AckBatch(0, MAX + 1, (A,)),
        AckBatch(MAX + 2, 2 * MAX + 2, (RJ,)),
    ]


def test_optimise_batches_like_java() -> None:
    # Java testOptimiseBatches: 10 A, RJ, A, RL, GAP, 11 A, RJ, RL.
    types = [A] * MAX + [RJ, A, RL, GAP] + [A] * (MAX + 1) + [RJ, RL]
    batches = acks_of(dict(enumerate(types))).to_batches()
    assert batches == [
        AckBatch(0, MAX + 3, tuple([A] * MAX + [RJ, A, RL, GAP])),
        AckBatch(MAX + 4, 2 * MAX + 4, (A,)),
        AckBatch(2 * MAX + 5, 2 * MAX + 6, (RJ, RL)),
    ]


def test_long_run_in_the_middle_splits_three_ways() -> None:
    types = [RL, RJ] + [A] * 15 + [RJ, RJ]
    batches = acks_of(dict(enumerate(types, start=100))).to_batches()
    assert batches == [
        AckBatch(100, 101, (RL, RJ)),
        AckBatch(102, 116, (A,)),
        AckBatch(117, 118, (RJ,)),
    ]


def test_long_gap_run_is_split() -> None:
    types = [A] + [GAP] * 12 + [A]
    batches = acks_of(dict(enumerate(types))).to_batches()
    assert batches == [AckBatch(0, 0, (A,)), AckBatch(1, 12, (GAP,)), AckBatch(13, 13, (A,))]


def test_has_renew_and_has_non_gap() -> None:
    acks = acks_of({0: GAP})
    assert not acks.has_renew
    assert not has_non_gap(acks)
    acks.add(1, AcknowledgeType.RENEW)
    assert acks.has_renew
    assert has_non_gap(acks)
    acks.add(1, AcknowledgeType.ACCEPT)
    assert not acks.has_renew


def test_merge_other_wins() -> None:
    a = acks_of({1: A, 2: RL})
    b = acks_of({2: RJ, 3: GAP})
    a.merge(b)
    assert as_dict(a) == {1: A, 2: RJ, 3: GAP}
    assert len(b) == 2  # the source is untouched


def test_remove_and_contains() -> None:
    acks = acks_of({1: A})
    assert 1 in acks
    assert remove(acks, 1) == A
    assert 1 not in acks
    assert remove(acks, 1) is None


def test_completion_and_result() -> None:
    acks = acks_of({1: A, 2: GAP, 3: RJ})
    assert not acks.is_completed
    with pytest.raises(RuntimeError, match="not completed"):
        acks.result()
    acks.complete(121, "Invalid record state")
    # A later duplicate completion does not overwrite the broker's answer.
    acks.complete(0)
    result = acks.result()
    assert acks.is_completed
    assert result.error_code == 121
    assert result.error_message == "Invalid record state"
    assert not succeeded(result)
    assert result.offsets == frozenset({1, 3})  # the GAP is internal


def test_successful_result() -> None:
    acks = acks_of({4: A})
    acks.complete(0)
    assert succeeded(acks.result())
    assert acks.error_code == 0


def test_batches_to_map_rejects_invalid_batches() -> None:
    with pytest.raises(ValueError, match="first_offset > last_offset"):
        batches_to_map([AckBatch(5, 4, (A,))])
    with pytest.raises(ValueError, match="overlaps"):
        batches_to_map([AckBatch(0, 4, (A,)), AckBatch(4, 5, (A,))])
    with pytest.raises(ValueError, match="types for"):
        batches_to_map([AckBatch(0, 4, (A, RL))])
    assert batches_to_map([AckBatch(0, 1, (A, RL)), AckBatch(3, 4, (GAP,))]) == {
        0: A,
        1: RL,
        3: GAP,
        4: GAP,
    }


ack_maps = st.dictionaries(
    keys=st.integers(min_value=0, max_value=300),
    values=st.sampled_from([GAP, A, RL, RJ, RN]),
    max_size=200,
)

# Long same-type runs are rare under plain dictionaries(); build them on purpose.
run_lists = st.lists(
    st.tuples(st.sampled_from([GAP, A, RL, RJ, RN]), st.integers(1, 25), st.integers(0, 3)),
    max_size=12,
)


def _runs_to_map(runs: list[tuple[int, int, int]]) -> dict[int, int]:
    out: dict[int, int] = {}
    offset = 0
    for t, length, hole in runs:
        offset += hole
        for _ in range(length):
            out[offset] = t
            offset += 1
    return out


def _check_broker_rules(batches: list[AckBatch]) -> None:
    previous_last = -1
    for b in batches:
        assert b.first_offset <= b.last_offset
        assert b.first_offset > previous_last
        assert len(b.acknowledge_types) >= 1
        assert len(b.acknowledge_types) in (1, b.last_offset - b.first_offset + 1)
        assert all(0 <= t <= 4 for t in b.acknowledge_types)
        # The client never wastes a full array on a single-type batch.
        if len(b.acknowledge_types) > 1:
            assert len(set(b.acknowledge_types)) > 1
        previous_last = b.last_offset


@settings(max_examples=300)
@given(ack_maps)
def test_property_batches_valid_and_round_trip(entries: dict[int, int]) -> None:
    batches = acks_of(entries).to_batches()
    _check_broker_rules(batches)
    assert batches_to_map(batches) == entries


@settings(max_examples=300)
@given(run_lists)
def test_property_long_runs_split_and_round_trip(runs: list[tuple[int, int, int]]) -> None:
    entries = _runs_to_map(runs)
    batches = acks_of(entries).to_batches()
    _check_broker_rules(batches)
    assert batches_to_map(batches) == entries
    # No mixed batch contains a run longer than the limit.
    for b in batches:
        if len(b.acknowledge_types) > 1:
            run = 1
            for prev, cur in zip(b.acknowledge_types, b.acknowledge_types[1:], strict=False):
                run = run + 1 if cur == prev else 1
                assert run <= MAX


# -- ranges -------------------------------------------------------------------------


def test_ranges_go_on_the_wire_as_they_are() -> None:
    acks = Acknowledgements.from_types({}, ranges=[(20, 29, 2), (0, 9, 1)])
    assert len(acks) == 20 and acks and 25 in acks and 15 not in acks
    assert acks.offset_ranges() == [(0, 9), (20, 29)]
    assert acks.to_batches() == [AckBatch(0, 9, (1,)), AckBatch(20, 29, (2,))]
    assert not acks.has_renew and has_non_gap(acks)


def test_ranges_are_spelled_out_for_per_offset_work() -> None:
    acks = Acknowledgements.from_types({12: 0}, ranges=[(0, 2, 1)])
    assert acks.offset_ranges() is None
    assert acks.to_batches() == [AckBatch(0, 2, (1,)), AckBatch(12, 12, (0,))]
    acks.add(1, AcknowledgeType.REJECT)  # the last type wins, also inside a range
    assert as_dict(acks) == {0: 1, 1: 3, 2: 1, 12: 0}
    acks.complete(0)
    assert acks.result().offsets == frozenset({0, 1, 2})


def test_merging_ranges_keeps_ranges_unless_they_overlap() -> None:
    a = Acknowledgements.from_types({}, ranges=[(0, 4, 1)])
    a.merge(Acknowledgements.from_types({}, ranges=[(5, 6, 2)]))
    assert a.offset_ranges() == [(0, 4), (5, 6)]
    a.merge(Acknowledgements.from_types({}, ranges=[(6, 7, 3)]))  # overlaps: other wins
    assert a.offset_ranges() is None
    assert as_dict(a) == {0: 1, 1: 1, 2: 1, 3: 1, 4: 1, 5: 2, 6: 3, 7: 3}


def test_bad_ranges_are_refused() -> None:
    with pytest.raises(ValueError, match="overlap"):
        Acknowledgements.from_types({}, ranges=[(0, 4, 1), (4, 5, 1)])
    with pytest.raises(ValueError, match="both in the map and in a range"):
        Acknowledgements.from_types({3: 1}, ranges=[(0, 4, 1)])
    with pytest.raises(ValueError, match="invalid acknowledge type"):
        Acknowledgements.from_types({}, ranges=[(0, 4, 9)])


def _ranges_of(entries: dict[int, int]) -> list[tuple[int, int, int]]:
    """``entries`` as one (first, last, type) range per offset (the finest split
    the consumer can hand over: alternating types)."""
    return [(o, o, t) for o, t in sorted(entries.items())]


@settings(max_examples=300)
@given(ack_maps, st.booleans())
def test_property_ranges_give_the_batches_of_the_offsets_spelled_out(
    entries: dict[int, int], per_offset: bool
) -> None:
    # Explicit acknowledgements of mixed types arrive as runs: the wire batches
    # must be those of the same offsets given one by one (a mixed stretch is one
    # batch with a type per offset, not a batch per run).
    if per_offset:
        ranges = _ranges_of(entries)
    else:
        ranges = []
        for o, t in sorted(entries.items()):
            if ranges and ranges[-1][1] + 1 == o and ranges[-1][2] == t:
                ranges[-1] = (ranges[-1][0], o, t)
            else:
                ranges.append((o, o, t))
    from_ranges = Acknowledgements.from_types({}, ranges=ranges)
    assert from_ranges.offset_ranges() is not None  # not spelled out
    batches = from_ranges.to_batches()
    assert batches == acks_of(dict(entries)).to_batches()
    _check_broker_rules(batches)
    assert batches_to_map(batches) == entries


@settings(max_examples=300)
@given(run_lists)
def test_property_long_runs_as_ranges_split_like_offsets(
    runs: list[tuple[int, int, int]]
) -> None:
    entries = _runs_to_map(runs)
    batches = Acknowledgements.from_types({}, ranges=_ranges_of(entries)).to_batches()
    assert batches == acks_of(dict(entries)).to_batches()


def test_mixed_runs_are_one_batch_with_a_type_per_offset() -> None:
    ranges = [(0, 1, 1), (2, 2, 3), (3, 14, 1), (15, 15, 2), (20, 20, 1)]
    assert Acknowledgements.from_types({}, ranges=ranges).to_batches() == [
        AckBatch(0, 2, (1, 1, 3)), AckBatch(3, 14, (1,)), AckBatch(15, 15, (2,)),
        AckBatch(20, 20, (1,)),
    ]


def test_many_ranges_merge_and_check_without_comparing_every_pair() -> None:
    a = Acknowledgements.from_types({}, ranges=[(o, o, 1 + o % 2) for o in range(0, 20000, 2)])
    b = Acknowledgements.from_types({}, ranges=[(o, o, 3) for o in range(1, 20000, 2)])
    a.merge(b)  # disjoint: still ranges
    assert a.offset_ranges() is not None and len(a) == 20000
    with pytest.raises(ValueError, match="both in the map"):
        Acknowledgements.from_types({19998: 1}, ranges=[(o, o, 1) for o in range(0, 20000, 2)])
    assert Acknowledgements.from_types(
        {o: 0 for o in range(1, 20000, 2)}, ranges=[(o, o, 1) for o in range(0, 20000, 2)]
    )
