"""HeldRecords: the ledger of records held from acquisition until their ack completes."""

from __future__ import annotations

import uuid

from kafka_share.models import TopicIdPartition
from kafka_share.share.held import HeldRecords, lock_expiry_ms, lock_margin_ms

TIP = TopicIdPartition(uuid.UUID(int=9), "t", 0)


def test_lock_margin_is_five_percent_with_a_floor() -> None:
    assert lock_margin_ms(1_000) == 50
    assert lock_margin_ms(30_000) == 1_500
    assert lock_expiry_ms(10_000, 1_000) == 10_950


def test_a_resend_of_a_held_acquisition_is_left_out() -> None:
    held = HeldRecords()
    fresh, resent = held.acquire(TIP, 1, 1, [(0, 9, 1)], 0, 1_000)
    assert fresh == [(0, 9, 1)] and resent == 0
    # The same records again (same node, session and delivery count), with new ones.
    fresh, resent = held.acquire(TIP, 1, 1, [(5, 14, 1)], 10, 1_000)
    assert fresh == [(10, 14, 1)] and resent == 5


def test_a_redelivery_or_another_session_is_not_a_resend() -> None:
    held = HeldRecords()
    held.acquire(TIP, 1, 1, [(0, 9, 1)], 0, 1_000)
    assert held.acquire(TIP, 1, 1, [(0, 9, 2)], 0, 1_000) == ([(0, 9, 2)], 0)
    assert held.acquire(TIP, 1, 2, [(0, 9, 1)], 0, 1_000) == ([(0, 9, 1)], 0)
    assert held.acquire(TIP, 2, 1, [(0, 9, 1)], 0, 1_000) == ([(0, 9, 1)], 0)


def test_settled_offsets_are_no_longer_held() -> None:
    held = HeldRecords()
    held.acquire(TIP, 1, 1, [(0, 9, 1)], 0, 1_000)
    held.settle(TIP, [2, 3])
    assert held.held_count() == 8
    # Acquired again with the same count after its ack completed: a new acquisition.
    fresh, resent = held.acquire(TIP, 1, 1, [(2, 4, 1)], 0, 1_000)
    assert fresh == [(2, 3, 1)] and resent == 1
    held.settle(TIP, range(0, 10))
    held.settle(TIP, [2, 3])
    assert not held


def test_a_whole_span_settles_at_once() -> None:
    held = HeldRecords()
    held.acquire(TIP, 1, 1, [(0, 499, 1)], 0, 1_000)
    held.settle(TIP, frozenset(range(500)))
    assert not held


def test_expired_spans_and_replaced_sessions_are_forgotten() -> None:
    held = HeldRecords()
    held.acquire(TIP, 1, 1, [(0, 9, 1)], 0, 1_000)
    held.acquire(TIP, 2, 1, [(20, 29, 1)], 500, 1_000)
    assert held.next_expiry_ms() == 950
    gone = held.expire(950)
    assert [(s.first, s.node_id) for s in gone] == [(0, 1)]
    held.session_replaced(2, 2)
    assert not held


def test_acknowledged_and_renewing_offsets_are_not_renewable() -> None:
    held = HeldRecords(track_acks=True)
    held.acquire(TIP, 1, 1, [(0, 4, 1)], 0, 1_000)
    held.acks_sent(TIP, [0])
    span = next(held.spans())
    held.renew_sent(span, [1, 2])
    assert span.renewable() == [3, 4]
    held.renewed(TIP, [1, 2], sent_ms=600, lock_ms=None)
    assert span.renewable() == [1, 2, 3, 4]
    assert span.lock_expires_ms == 600 + 950
    held.ack_returned(TIP, [0])
    assert span.renewable() == [0, 1, 2, 3, 4]


def test_a_failed_renewal_ends_renewing_its_span() -> None:
    held = HeldRecords(track_acks=True)
    held.acquire(TIP, 1, 1, [(0, 4, 1)], 0, 1_000)
    span = next(held.spans())
    held.renew_sent(span, [0, 1, 2, 3, 4])
    assert held.next_expiry_ms() is None  # an answer is awaited first
    assert held.expire(5_000) == []  # kept while the RENEW is in flight
    assert held.renew_failed(TIP, [0, 1, 2, 3, 4]) == [span]
    assert span.renewal_over and not span.renewing


def test_ranges_settle_like_their_offsets() -> None:
    held = HeldRecords()
    held.acquire(TIP, 1, 1, [(0, 999, 1)], 0, 1_000)
    held.acquire(TIP, 1, 1, [(1000, 1009, 1)], 0, 1_000)
    # Touching ranges (one fetch polled in slices) cover the first span whole.
    held.settle_ranges(TIP, [(0, 499), (500, 999), (1000, 1001)])
    assert held.held_count() == 8
    held.settle_ranges(TIP, [(1005, 1020)])
    assert held.held_count() == 3
    held.settle(TIP, [1002, 1003])
    held.settle_ranges(TIP, [(1004, 1004)])
    assert not held


def test_acks_sent_as_ranges_are_those_offsets_acks_sent() -> None:
    by_offsets, by_ranges = HeldRecords(track_acks=True), HeldRecords(track_acks=True)
    for held in (by_offsets, by_ranges):
        held.acquire(TIP, 1, 1, [(0, 9, 1), (20, 29, 2)], 0, 1_000)
    ranges = [(2, 4), (8, 22), (27, 27), (40, 50)]
    by_offsets.acks_sent(TIP, [o for f, la in ranges for o in range(f, la + 1)])
    by_ranges.acks_sent_ranges(TIP, ranges)
    assert [s.renewable() for s in by_ranges.spans()] == [
        s.renewable() for s in by_offsets.spans()
    ] == [[0, 1, 5, 6, 7], [23, 24, 25, 26, 28, 29]]
    untracked = HeldRecords()
    untracked.acquire(TIP, 1, 1, [(0, 9, 1)], 0, 1_000)
    untracked.acks_sent_ranges(TIP, ranges)
    assert next(untracked.spans()).acking is None
