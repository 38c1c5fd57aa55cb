"""InFlightBatch: which records may be acknowledged, and what goes to the broker."""

from __future__ import annotations

import itertools
import uuid
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kafka_share._app.in_flight import GAP, InFlightBatch
from kafka_share.errors import IllegalStateError
from kafka_share.models import AcknowledgeType, ConsumerRecord, TimestampType, TopicIdPartition
from tests.unit.app.helpers import (
    current_records,
    has_pending_acks,
    has_records,
    is_empty,
    node_of,
    take_acknowledged,
)

TIP = TopicIdPartition(uuid.UUID(int=1), "t", 0)
TIP1 = TopicIdPartition(uuid.UUID(int=1), "t", 1)
ACCEPT = AcknowledgeType.ACCEPT
RELEASE = AcknowledgeType.RELEASE
REJECT = AcknowledgeType.REJECT
RENEW = AcknowledgeType.RENEW


def rec(offset: int, count: int = 1, tip: TopicIdPartition = TIP) -> ConsumerRecord[Any, Any]:
    return ConsumerRecord(
        tip.topic, tip.partition, offset, 0, TimestampType.CREATE_TIME, None, b"v", (), None, count
    )


def batch_with(*offsets: int, node: int = 1, count: int = 1) -> InFlightBatch:
    b = InFlightBatch()
    b.add_records(TIP, node, [rec(o, count) for o in offsets])
    return b


def test_acknowledge_of_a_record_not_in_the_batch_raises() -> None:
    b = batch_with(0, 1)
    with pytest.raises(IllegalStateError, match="cannot be acknowledged"):
        b.acknowledge(rec(5), ACCEPT)
    with pytest.raises(IllegalStateError):
        b.acknowledge(rec(0, tip=TIP1), ACCEPT)  # another partition
    with pytest.raises(IllegalStateError):
        InFlightBatch().acknowledge(rec(0), ACCEPT)


def test_acknowledge_of_an_older_delivery_raises() -> None:
    b = batch_with(0, count=3)
    with pytest.raises(IllegalStateError):
        b.acknowledge(rec(0, count=2), ACCEPT)
    b.acknowledge(rec(0, count=3), ACCEPT)
    assert b.all_acknowledged()


def test_last_acknowledge_wins() -> None:
    b = batch_with(0)
    b.acknowledge(rec(0), RELEASE)
    b.acknowledge(rec(0), ACCEPT)
    assert take_acknowledged(b) == {TIP: (1, {0: int(ACCEPT)})}


def test_implicit_acknowledge_all_never_overwrites_an_explicit_type() -> None:
    b = batch_with(0, 1, 2)
    b.acknowledge(rec(1), REJECT)
    assert b.unacknowledged_count() == 2 and not b.all_acknowledged()
    assert b.unacknowledged_by_partition() == {TIP: 2}
    b.acknowledge_all(ACCEPT)
    assert b.unacknowledged_by_partition() == {}
    assert b.all_acknowledged() and b.unacknowledged_count() == 0
    assert take_acknowledged(b) == {
        TIP: (1, {0: int(ACCEPT), 1: int(REJECT), 2: int(ACCEPT)})
    }


def test_take_acknowledged_removes_records_so_they_cannot_be_acknowledged_again() -> None:
    b = batch_with(0, 1)
    b.acknowledge(rec(0), ACCEPT)
    taken = take_acknowledged(b)
    assert taken == {TIP: (1, {0: int(ACCEPT)})}
    with pytest.raises(IllegalStateError):
        b.acknowledge(rec(0), RELEASE)
    # The unacknowledged record stays.
    assert current_records(b) == {TIP: [rec(1)]}
    assert take_acknowledged(b) == {}
    b.acknowledge(rec(1), ACCEPT)
    assert take_acknowledged(b) == {TIP: (1, {1: int(ACCEPT)})}
    assert is_empty(b) and not has_records(b)


def test_acks_are_routed_to_the_node_that_delivered_each_partition() -> None:
    b = InFlightBatch()
    b.add_records(TIP, 1, [rec(0)])
    b.add_records(TIP1, 2, [rec(0, tip=TIP1)])
    b.acknowledge_all(ACCEPT)
    assert node_of(b, TIP) == 1 and node_of(b, TIP1) == 2
    assert take_acknowledged(b) == {TIP: (1, {0: 1}), TIP1: (2, {0: 1})}


def test_records_of_a_partition_from_a_new_node_while_old_ones_are_in_flight_raise() -> None:
    b = batch_with(0, node=1)
    with pytest.raises(IllegalStateError, match="node 1"):
        b.add_records(TIP, 2, [rec(5)])
    b.acknowledge_all(ACCEPT)
    take_acknowledged(b)
    b.add_records(TIP, 2, [rec(5)])  # nothing left from node 1: fine
    assert node_of(b, TIP) == 2


def test_gaps_are_sent_but_are_not_records() -> None:
    b = batch_with(0, 3)
    b.add_gaps(TIP, 1, [1, 2])
    assert has_pending_acks(b)
    assert b.unacknowledged_count() == 2
    with pytest.raises(IllegalStateError):
        b.acknowledge(rec(1), ACCEPT)
    b.acknowledge_all(ACCEPT)
    assert take_acknowledged(b) == {TIP: (1, {0: 1, 1: GAP, 2: GAP, 3: 1})}


def test_gap_only_batch_counts_as_fully_acknowledged() -> None:
    b = InFlightBatch()
    b.add_gaps(TIP, 1, [4])
    assert b.all_acknowledged() and not has_records(b) and not is_empty(b)
    assert take_acknowledged(b) == {TIP: (1, {4: GAP})}
    assert is_empty(b)


def test_failed_offsets_are_auto_acknowledged_and_may_be_overridden_by_coordinates() -> None:
    b = batch_with(0)
    b.add_failed(TIP, 1, [1], RELEASE)
    # Only failed offsets may be acknowledged by coordinates.
    with pytest.raises(IllegalStateError):
        b.acknowledge_offset("t", 0, 0, REJECT)
    with pytest.raises(IllegalStateError):
        b.acknowledge_offset("t", 0, 9, REJECT)
    with pytest.raises(IllegalStateError):
        b.acknowledge_offset("other", 0, 1, REJECT)
    b.acknowledge_offset("t", 0, 1, REJECT)
    b.acknowledge(rec(0), ACCEPT)
    assert take_acknowledged(b) == {TIP: (1, {0: 1, 1: int(REJECT)})}
    # Once sent, the failed offset can no longer be acknowledged.
    with pytest.raises(IllegalStateError):
        b.acknowledge_offset("t", 0, 1, ACCEPT)


def test_failed_offset_without_override_keeps_its_automatic_type() -> None:
    b = InFlightBatch()
    b.add_failed(TIP, 3, [7, 8], REJECT)
    assert b.all_acknowledged()
    # Held until the application has seen the error, then settled to the default.
    b.settle_failed()
    assert take_acknowledged(b) == {}
    b.mark_failed_raised()
    b.acknowledge_offset("t", 0, 8, AcknowledgeType.ACCEPT)
    b.settle_failed()
    assert take_acknowledged(b) == {TIP: (3, {7: int(REJECT), 8: int(ACCEPT)})}
    assert is_empty(b)


def test_renew_moves_records_to_renewing_and_renewed_ones_come_back() -> None:
    b = batch_with(0, 1, 2, count=2)
    b.acknowledge(rec(0, 2), RENEW)
    b.acknowledge(rec(1, 2), RENEW)
    b.acknowledge(rec(2, 2), ACCEPT)
    taken = take_acknowledged(b)
    assert taken == {TIP: (1, {0: int(RENEW), 1: int(RENEW), 2: int(ACCEPT)})}
    assert b.has_renewing() and not has_records(b)
    # While renewing, the records cannot be acknowledged.
    with pytest.raises(IllegalStateError):
        b.acknowledge(rec(0, 2), ACCEPT)
    b.on_renew_completed(TIP, frozenset({0}), frozenset({1}))
    # The renewed record waits for the next poll, which hands it back; until then it
    # is neither acknowledgeable nor counted as unacknowledged.
    assert b.has_renewing() and b.all_acknowledged()
    with pytest.raises(IllegalStateError):
        b.acknowledge(rec(0, 2), ACCEPT)
    assert b.take_ready() == {TIP: [rec(0, 2)]}
    assert not b.has_renewing()
    # Back in the batch, with its delivery count, and it needs a new ack.
    assert current_records(b) == {TIP: [rec(0, 2)]}
    assert not b.all_acknowledged()
    assert b.take_ready() == {}
    b.acknowledge(rec(0, 2), ACCEPT)
    assert take_acknowledged(b) == {TIP: (1, {0: int(ACCEPT)})}
    # The failed renewal was dropped for good.
    with pytest.raises(IllegalStateError):
        b.acknowledge(rec(1, 2), ACCEPT)
    assert is_empty(b)


def test_renew_completion_for_unknown_partition_is_ignored() -> None:
    b = InFlightBatch()
    b.on_renew_completed(TIP, frozenset({0}), frozenset())
    assert is_empty(b)


def test_implicit_acknowledge_all_does_not_touch_renewing_records() -> None:
    b = batch_with(0, 1)
    b.acknowledge(rec(0), RENEW)
    take_acknowledged(b)
    b.acknowledge_all(ACCEPT)
    assert take_acknowledged(b) == {TIP: (1, {1: int(ACCEPT)})}
    assert b.has_renewing()


def test_clear_forgets_everything() -> None:
    b = batch_with(0)
    b.add_gaps(TIP, 1, [1])
    b.clear()
    assert is_empty(b) and take_acknowledged(b) == {} and node_of(b, TIP) is None
    with pytest.raises(IllegalStateError):
        b.acknowledge(rec(0), ACCEPT)


def test_current_records_are_in_offset_order() -> None:
    b = InFlightBatch()
    b.add_records(TIP, 1, [rec(5), rec(2)])
    b.add_records(TIP, 1, [rec(3)])
    assert [r.offset for r in current_records(b)[TIP]] == [2, 3, 5]


# -- poll_arrow rows ----------------------------------------------------------------


def _piece(offsets: list[int], count: int = 1) -> Any:
    np = pytest.importorskip("numpy")
    from kafka_share._app.columnar import Piece
    from kafka_share.records.columnar import columns_from_rows

    columns = columns_from_rows([(o, 0, None, b"v", ()) for o in offsets])
    return Piece(columns, np.full(len(offsets), count, dtype=np.int32), 0)


def rows_batch(*offsets: int, count: int = 1) -> InFlightBatch:
    b = InFlightBatch()
    b.add_rows(TIP, 1, [_piece(list(offsets), count)])
    return b


def test_rows_are_accepted_as_a_whole_in_implicit_mode() -> None:
    b = rows_batch(3, 4, 5)
    assert has_records(b) and not b.all_acknowledged()
    b.acknowledge_all(ACCEPT)
    assert take_acknowledged(b) == {TIP: (1, {3: 1, 4: 1, 5: 1})}
    assert is_empty(b)


def _rows(partition: int, offsets: list[int], counts: list[int], types: Any) -> Any:
    np = pytest.importorskip("numpy")
    return ("t", partition, np.array(offsets, dtype=np.int64), np.array(counts, dtype=np.int64),
            types if isinstance(types, int) else np.array(types, dtype=np.int64))


def test_rows_are_acknowledged_all_or_nothing() -> None:
    b = rows_batch(3, 4, count=2)
    b.add_rows(TIP1, 1, [_piece([9])])
    with pytest.raises(IllegalStateError, match="earlier delivery"):
        b.acknowledge_rows([_rows(1, [9], [1], 1), _rows(0, [3, 4], [2, 1], [1, 2])])
    with pytest.raises(IllegalStateError, match="not returned by the last poll"):
        b.acknowledge_rows([_rows(1, [9], [1], 1), _rows(0, [7], [2], 1)])
    assert not has_pending_acks(b)  # the refused calls recorded nothing
    b.acknowledge_rows([_rows(0, [3, 4], [2, 2], [1, 3])])
    assert b.unacknowledged_count() == 1
    b.acknowledge_rows([_rows(1, [9], [1], 2)])
    assert b.all_acknowledged()
    assert take_acknowledged(b) == {TIP: (1, {3: 1, 4: 3}), TIP1: (1, {9: 2})}
    with pytest.raises(IllegalStateError, match="already acknowledged"):
        b.acknowledge_rows([_rows(0, [3], [2], 1)])


def test_a_whole_span_with_one_type_is_one_range_and_the_last_call_wins() -> None:
    b = rows_batch(10, 11, 12)
    b.acknowledge_rows([_rows(0, [11], [1], 2)])  # one row first...
    b.acknowledge_rows([_rows(0, [12, 10, 11], [1, 1, 1], 3)])  # ...then all: REJECT
    taken = b.take_acknowledgements()
    assert taken == {TIP: (1, {}, [(10, 12, 3)])}
    b = rows_batch(10, 11, 12)
    b.acknowledge_rows([_rows(0, [10, 11, 12], [1, 1, 1], 1)])
    b.acknowledge_rows([_rows(0, [11], [1], 2)])  # the whole span, then one row again
    # one range per run of equal types
    assert b.take_acknowledgements() == {TIP: (1, {}, [(10, 10, 1), (11, 11, 2), (12, 12, 1)])}
    b = rows_batch(10, 11, 12)
    with pytest.raises(IllegalStateError, match="not returned"):
        b.acknowledge_rows([_rows(0, [10, 11, 12, 13], [1, 1, 1, 1], 1)])
    b.acknowledge_rows([_rows(0, [10, 10, 11], [1, 1, 1], 1)])  # 12 missing: not whole
    assert b.unacknowledged_count() == 1


def test_implicit_record_spans_are_one_range_and_async_for_acks_one_by_one() -> None:
    b = InFlightBatch(record_spans=True)
    b.add_records(TIP, 1, [rec(o) for o in (5, 6, 7)])
    b.add_records(TIP1, 1, [rec(o, tip=TIP1) for o in (1, 3)])  # a hole: two spans
    b.acknowledge(rec(6), ACCEPT)  # async for accepts as it goes
    with pytest.raises(IllegalStateError):
        b.acknowledge(rec(8), ACCEPT)
    b.acknowledge_all(ACCEPT)
    assert b.take_acknowledgements() == {
        TIP: (1, {}, [(5, 7, 1)]), TIP1: (1, {}, [(1, 1, 1), (3, 3, 1)]),
    }
    b.add_records(TIP, 1, [rec(o) for o in (8, 9)])
    b.acknowledge_all(ACCEPT)
    assert b.take_acknowledgements() == {TIP: (1, {}, [(8, 9, 1)])}
    assert is_empty(b)
    with pytest.raises(IllegalStateError, match="already acknowledged"):
        b.acknowledge(rec(9), ACCEPT)


def test_partly_acknowledged_rows_stay_in_the_batch() -> None:
    b = rows_batch(0, 1, 2)
    b.acknowledge_rows([_rows(0, [1], [1], 2)])
    assert take_acknowledged(b) == {TIP: (1, {1: 2})}
    assert b.unacknowledged_count() == 2 and not is_empty(b)
    with pytest.raises(IllegalStateError, match="from node 1"):
        b.add_rows(TIP, 2, [_piece([5])])  # another node while rows are in flight


# -- explicit mode's record spans against a reference model -----------------------------

_TYPES = [ACCEPT, RELEASE, REJECT, RENEW]


def test_records_acknowledged_in_order_with_one_type_leave_as_one_range() -> None:
    records = [rec(o) for o in range(100, 600)]
    b = InFlightBatch()
    b.add_records(TIP, 1, records)
    for r in records:
        b.acknowledge(r, ACCEPT)
    assert b.all_acknowledged()
    assert b.take_acknowledgements() == {TIP: (1, {}, [(100, 599, 1)])}
    assert is_empty(b)
    with pytest.raises(IllegalStateError, match="already acknowledged"):
        b.acknowledge(records[7], ACCEPT)  # the same object, once sent


def test_mixed_types_leave_as_one_range_per_run_and_unacknowledged_ones_stay() -> None:
    records = [rec(o, 2) for o in range(10)]
    b = InFlightBatch()
    b.add_records(TIP, 1, records)
    for r in records[:4]:
        b.acknowledge(r, ACCEPT)
    b.acknowledge(records[4], REJECT)
    b.acknowledge(rec(5, 2), RENEW)  # an equal record, not the one handed out
    b.acknowledge(records[8], RELEASE)
    assert b.unacknowledged_count() == 3
    assert b.take_acknowledgements() == {
        TIP: (1, {}, [(0, 3, 1), (4, 4, 3), (5, 5, 4), (8, 8, 2)]),
    }
    assert b.has_renewing() and current_records(b) == {TIP: [records[6], records[7],
                                                              records[9]]}
    with pytest.raises(IllegalStateError, match="being renewed"):
        b.acknowledge(records[5], ACCEPT)
    with pytest.raises(IllegalStateError, match="earlier delivery"):
        b.acknowledge(rec(6, 1), ACCEPT)
    b.acknowledge(records[9], ACCEPT)
    b.acknowledge(records[6], ACCEPT)
    assert b.unacknowledged_count() == 1
    assert b.take_acknowledgements() == {TIP: (1, {}, [(6, 6, 1), (9, 9, 1)])}


_Op = tuple[str, int, int, int, int]


@st.composite
def _explicit_scenarios(draw: st.DrawFn) -> tuple[list[list[int]], list[_Op]]:
    # Per partition, the offsets handed out (ascending, with holes), and a list of
    # operations: ("ack", partition, offset, how, type index) with how 0 = the
    # record handed out, 1 = an equal copy, 2 = an older delivery; ("take", ...).
    parts = [
        sorted(draw(st.sets(st.integers(0, 40), min_size=1, max_size=25)))
        for _ in range(draw(st.integers(1, 2)))
    ]
    ops = draw(st.lists(st.one_of(
        st.tuples(st.just("ack"), st.integers(0, len(parts) - 1), st.integers(0, 42),
                  st.integers(0, 2), st.integers(0, 3)),
        st.tuples(st.just("take"), st.just(0), st.just(0), st.just(0), st.just(0)),
    ), max_size=80))
    return parts, ops


def _expand(ranges: list[tuple[int, int, int]]) -> dict[int, int]:
    out: dict[int, int] = {}
    for first, last, t in ranges:
        out.update(dict.fromkeys(range(first, last + 1), t))
    return out


@settings(max_examples=400, deadline=None)
@given(_explicit_scenarios(), st.booleans())
def test_property_explicit_acknowledgements_match_a_reference_model(
    scenario: tuple[list[list[int]], list[_Op]], split: bool
) -> None:
    parts, ops = scenario
    tips = [TIP, TIP1]
    b = InFlightBatch()
    handed: dict[tuple[int, int], ConsumerRecord[Any, Any]] = {}
    for p, offsets in enumerate(parts):
        records = [rec(o, 2, tips[p]) for o in offsets]
        if split:  # two polls' worth of records for the partition
            b.add_records(tips[p], 1, records[: len(records) // 2])
            b.add_records(tips[p], 1, records[len(records) // 2 :])
        else:
            b.add_records(tips[p], 1, records)
        handed.update(((p, r.offset), r) for r in records)
    originals = dict(handed)  # each record object handed out, also once sent
    pending: dict[tuple[int, int], int] = {}  # the model: last type wins
    renewing: set[tuple[int, int]] = set()

    def check_take() -> None:
        taken = b.take_acknowledgements()
        got: dict[tuple[int, int], int] = {}
        for tip, (node, acks, ranges) in taken.items():
            assert node == 1 and acks == {}
            assert ranges == sorted(ranges)
            # One range per run: touching ranges of one span differ in type.
            for (_, last, t), (first, _, u) in itertools.pairwise(ranges):
                assert last < first and (split or last + 1 < first or t != u)
            got.update(((tip.partition, o), t) for o, t in _expand(ranges).items())
        assert got == pending
        for key, t in pending.items():
            del handed[key]
            if t == RENEW:
                renewing.add(key)
        pending.clear()

    for op, p, offset, how, type_index in ops:
        if op == "take":
            check_take()
            continue
        key = (p, offset)
        ack_type = _TYPES[type_index]
        record = handed.get(key)
        if how == 0 and key in originals:
            candidate = originals[key]  # also once it was sent: refused then
        elif record is None:
            candidate = rec(offset, 2, tips[p])
        else:
            candidate = rec(offset, 2 if how == 1 else 1, tips[p])
        if record is None or how == 2:
            with pytest.raises(IllegalStateError):
                b.acknowledge(candidate, ack_type)
        else:
            b.acknowledge(candidate, ack_type)
            pending[key] = int(ack_type)
        assert b.unacknowledged_count() == len(handed) - len(pending)
        assert b.all_acknowledged() == (len(handed) == len(pending))
    check_take()
    assert current_records(b) == {
        tip: [handed[(p, o)] for o in sorted(o for q, o in handed if q == p)]
        for p, tip in enumerate(tips[: len(parts)]) if any(q == p for q, _ in handed)
    }
    for p, o in renewing:
        with pytest.raises(IllegalStateError, match="being renewed"):
            b.acknowledge(rec(o, 2, tips[p]), ACCEPT)
