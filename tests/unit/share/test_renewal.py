"""RenewalSchedule: which held records share.auto.renew renews, and when."""

from __future__ import annotations

import uuid

from kafka_share.models import TopicIdPartition
from kafka_share.share.held import HeldRecords
from kafka_share.share.renewal import RenewalSchedule

TIP = TopicIdPartition(uuid.UUID(int=9), "t", 0)


def _free(node_id: int) -> bool:
    return True


def _held() -> HeldRecords:
    held = HeldRecords(track_acks=True)
    held.acquire(TIP, 1, 1, [(0, 9, 1)], 1_000, 1_000)  # lock ends (conservatively) at 1950
    return held


def test_a_span_is_renewed_once_half_its_lock_has_passed() -> None:
    held, schedule = _held(), RenewalSchedule(max_ms=300_000)
    assert schedule.next_due_ms(held, 1_000, _free) == 1_450
    assert schedule.due(held, 1_449, _free) == []
    [(span, offsets)] = schedule.due(held, 1_450, _free)
    assert offsets == list(range(10))
    held.renew_sent(span, offsets)
    # In flight: nothing more to renew, and nothing to wake up for (no spin).
    assert schedule.due(held, 1_460, _free) == []
    assert schedule.next_due_ms(held, 1_460, _free) is None
    held.renewed(TIP, offsets, sent_ms=1_450, lock_ms=1_000)
    assert schedule.next_due_ms(held, 1_470, _free) == 1_450 + 950 - 500


def test_acknowledged_records_are_not_renewed() -> None:
    held, schedule = _held(), RenewalSchedule(max_ms=300_000)
    held.acks_sent(TIP, range(0, 8))
    [(_span, offsets)] = schedule.due(held, 1_500, _free)
    assert offsets == [8, 9]
    held.acks_sent(TIP, [8, 9])
    assert schedule.due(held, 1_500, _free) == []
    assert schedule.next_due_ms(held, 1_500, _free) is None


def test_renewal_stops_at_the_limit() -> None:
    held, schedule = _held(), RenewalSchedule(max_ms=2_000)
    [(span, offsets)] = schedule.due(held, 1_450, _free)
    held.renew_sent(span, offsets)
    held.renewed(TIP, offsets, sent_ms=1_450, lock_ms=1_000)
    [(span, offsets)] = schedule.due(held, 1_900, _free)
    held.renew_sent(span, offsets)
    held.renewed(TIP, offsets, sent_ms=1_900, lock_ms=1_000)
    assert schedule.due(held, 3_000, _free) == []  # 2 s after the acquisition
    assert span.renewal_over
    assert schedule.next_due_ms(held, 3_000, _free) is None


def test_a_busy_node_is_not_waited_for() -> None:
    held, schedule = _held(), RenewalSchedule(max_ms=300_000)
    assert schedule.due(held, 1_500, lambda n: False) == []
    assert schedule.next_due_ms(held, 1_500, lambda n: False) is None
    assert schedule.next_due_for_node(held, 1) == 1_450
    assert schedule.next_due_for_node(held, 2) is None
