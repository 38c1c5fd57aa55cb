"""AckDeferral: acknowledgements held back from fetches while a node's answers are a trickle."""

from __future__ import annotations

from kafka_share.share.ack_deferral import ACK_DEFER_MAX_RECORDS, ACK_DEFER_MS, AckDeferral
from kafka_share.share.fetch_ahead import AHEAD_MIN_BYTES
from tests.unit.share.helpers import trickle


def test_acks_ride_on_the_fetch_until_an_answer_shows_a_trickle() -> None:
    d = AckDeferral()
    assert d.hold_until_ms(0, 1) is None, "nothing answered yet"
    d.on_response(2, 200, 500)
    assert trickle(d)
    assert d.hold_until_ms(10, 2) == 10 + ACK_DEFER_MS


def test_the_window_starts_with_the_first_held_acks_and_ends_with_them_sent() -> None:
    d = AckDeferral()
    d.on_response(1, 100, 500)
    assert d.hold_until_ms(100, 1) == 100 + ACK_DEFER_MS
    d.on_response(1, 100, 500)
    # later fetches in the window hold them until the same time, not later
    assert d.hold_until_ms(120, 2) == 100 + ACK_DEFER_MS
    assert d.hold_until_ms(100 + ACK_DEFER_MS, 3) is None, "the window is over: they go"
    # a new window starts with the next held acks
    assert d.hold_until_ms(200, 1) == 200 + ACK_DEFER_MS


def test_an_empty_answer_ends_the_trickle() -> None:
    d = AckDeferral()
    d.on_response(1, 100, 500)
    d.on_response(0, 0, 500)  # the stream went idle: a held ack would wait for nothing
    assert not trickle(d)
    assert d.hold_until_ms(0, 1) is None


def test_a_large_answer_ends_the_trickle() -> None:
    d = AckDeferral()
    d.on_response(500, 50_000, 500)  # max.poll.records: the consumer is behind
    assert d.hold_until_ms(0, 1) is None
    d.on_response(10, AHEAD_MIN_BYTES, 500)  # large records
    assert d.hold_until_ms(0, 1) is None
    d.on_response(50, 5_000, 50)  # all that a fetch capped to the application's pace asked
    assert d.hold_until_ms(0, 1) is None


def test_a_failure_ends_the_trickle() -> None:
    d = AckDeferral()
    d.on_response(1, 100, 500)
    d.on_failure()
    assert d.hold_until_ms(0, 1) is None


def test_too_many_held_records_go_at_once() -> None:
    d = AckDeferral()
    d.on_response(1, 100, 500)
    assert d.hold_until_ms(0, ACK_DEFER_MAX_RECORDS) == ACK_DEFER_MS
    assert d.hold_until_ms(1, ACK_DEFER_MAX_RECORDS + 1) is None
    # and the window restarts with the next held acks
    assert d.hold_until_ms(30, 1) == 30 + ACK_DEFER_MS
