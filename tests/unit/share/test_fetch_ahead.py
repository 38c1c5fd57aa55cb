"""The fetch-ahead policy: pure decisions over response sizes, the application's
pace (an injected clock) and the acquisition lock."""

from __future__ import annotations

from kafka_share.share.fetch_ahead import (
    ACK_ALLOWANCE_MS,
    AHEAD_MAX_HELD,
    AHEAD_MIN_BYTES,
    FetchAheadPolicy,
    caught_up,
    may_fetch_ahead,
)


def test_fetch_ahead_follows_response_size_and_application_pace() -> None:
    # A fast application and a small response: fetch ahead.
    assert may_fetch_ahead(967, 0.005, 30_000)
    # A response bigger than half the broker's default lock limit: never.
    assert not may_fetch_ahead(AHEAD_MAX_HELD + 1, 0.0, 30_000)
    # 1000 records at 3.75 ms each take 3.75 s, twice that is a quarter of 30 s.
    assert may_fetch_ahead(1000, 3.75, 30_000)
    assert not may_fetch_ahead(1000, 3.8, 30_000)
    # A shorter lock tightens the bound.
    assert not may_fetch_ahead(1000, 3.75, 15_000)
    # A slow handler: one record per second, 10 records, 30 s lock -> no.
    assert not may_fetch_ahead(10, 1000.0, 30_000)


def test_a_small_response_means_caught_up() -> None:
    assert caught_up(1, 100, 500)  # a live trickle: long-poll instead
    assert not caught_up(967, 990_000, 500)  # a backlog of 1 KiB records
    assert not caught_up(97, 1_000_000, 500)  # 10 KiB records: cut by bytes
    assert not caught_up(500, 50_000, 500)  # a full poll's worth of small records
    assert caught_up(499, AHEAD_MIN_BYTES - 1, 500)
    assert not caught_up(499, AHEAD_MIN_BYTES, 500)


class Clock:
    def __init__(self) -> None:
        self.now_ms = 1_000.0

    def advance(self, ms: float) -> float:
        self.now_ms += ms
        return self.now_ms


def test_the_pace_is_a_moving_average_of_time_between_polls_per_record() -> None:
    clock = Clock()
    policy = FetchAheadPolicy(max_poll_records=500)
    policy.poll_started(clock.now_ms)  # no earlier poll: nothing to measure
    assert policy.ms_per_record == 0.0
    policy.poll_returned(clock.now_ms, 100)
    policy.poll_started(clock.advance(200.0))  # 2 ms per record
    assert policy.ms_per_record == 1.0  # halfway from 0 to 2
    policy.poll_returned(clock.now_ms, 100)
    policy.poll_started(clock.advance(200.0))
    assert policy.ms_per_record == 1.5
    # An empty poll tells nothing about the pace.
    policy.poll_returned(clock.now_ms, 0)
    policy.poll_started(clock.advance(10_000.0))
    assert policy.ms_per_record == 1.5
    # poll_started without a poll_returned in between measures nothing either.
    policy.poll_started(clock.advance(10_000.0))
    assert policy.ms_per_record == 1.5


def test_a_slow_application_switches_fetching_ahead_off_and_a_fast_one_on() -> None:
    clock = Clock()
    policy = FetchAheadPolicy(max_poll_records=500)
    assert policy.ahead_on_drained(1000, 1_000_000)
    for _ in range(10):  # 100 ms per record: 1000 records take far too long
        policy.poll_returned(clock.now_ms, 10)
        policy.poll_started(clock.advance(1000.0))
    assert not policy.ahead_on_drained(1000, 1_000_000)
    assert not policy.ahead_while_delivering(object(), 1000, True)
    for _ in range(20):  # 0.01 ms per record: on again
        policy.poll_returned(clock.now_ms, 500)
        policy.poll_started(clock.advance(5.0))
    assert policy.ahead_on_drained(1000, 1_000_000)


def test_the_lock_the_broker_reports_bounds_the_pace() -> None:
    clock = Clock()
    policy = FetchAheadPolicy(max_poll_records=500)
    policy.poll_returned(clock.now_ms, 1000)
    policy.poll_started(clock.advance(4000.0))  # 4 ms per record -> average 2 ms
    assert policy.ms_per_record == 2.0
    assert policy.may_fetch_ahead(1000)  # 4 s for both <= 30 s / 4
    policy.note_lock_timeout(15_000)
    assert not policy.may_fetch_ahead(1000)  # 4 s > 15 s / 4
    policy.note_lock_timeout(None)  # unknown: the last known one stays
    policy.note_lock_timeout(0)
    assert not policy.may_fetch_ahead(1000)


def test_no_fetch_ahead_after_a_small_response() -> None:
    policy = FetchAheadPolicy(max_poll_records=500)
    assert not policy.ahead_on_drained(3, 300)  # caught up: long-poll instead
    assert policy.ahead_on_drained(500, 300)


def test_fetch_ahead_while_delivering_once_per_response_and_only_when_nothing_is_queued() -> (
    None
):
    policy = FetchAheadPolicy(max_poll_records=500)
    response, other = object(), object()
    assert not policy.ahead_while_delivering(None, None, True)  # nothing being delivered
    assert not policy.ahead_while_delivering(response, 499, True)  # a trickle
    assert not policy.ahead_while_delivering(response, 1001, True)  # too many held
    assert not policy.ahead_while_delivering(response, 900, False)  # one already queued
    assert policy.ahead_while_delivering(response, 900, True)
    policy.sent_for(response)
    assert not policy.ahead_while_delivering(response, 900, True)  # once per response
    assert policy.ahead_while_delivering(other, 900, True)


def test_a_large_response_is_fetched_ahead_of_when_its_node_has_other_partitions() -> None:
    """The record-lock limit is per share-partition: while a response of more
    than AHEAD_MAX_HELD records of one partition is delivered, a fetch ahead can
    still acquire records of the node's other partitions."""
    policy = FetchAheadPolicy(max_poll_records=500)
    response = object()
    assert not policy.ahead_on_drained(2500, 250_000)
    assert policy.ahead_on_drained(2500, 250_000, company=lambda: True)
    assert not policy.ahead_while_delivering(response, 2500, True)
    assert policy.ahead_while_delivering(response, 2500, True, company=lambda: True)
    assert not policy.ahead_while_delivering(response, 2500, False, company=lambda: True)  # queued
    assert not policy.ahead_on_drained(3, 300, company=lambda: True)  # caught up all the same
    asked: list[int] = []

    def company() -> bool:
        asked.append(1)
        return True

    assert policy.ahead_on_drained(900, 250_000, company=company)
    assert asked == []  # not asked for a response within AHEAD_MAX_HELD
    for _ in range(10):  # 100 ms per record: the pace rule still holds
        policy.poll_returned(0.0, 10)
        policy.poll_started(1000.0)
    assert not policy.ahead_on_drained(2500, 250_000, company=lambda: True)


def test_a_slow_application_asks_for_what_it_processes_in_half_the_lock() -> None:
    policy = FetchAheadPolicy(max_poll_records=500)
    assert policy.max_records() is None  # pace unknown: max.poll.records
    policy.note_lock_timeout(10_000)
    # 100 records in 1 s: 10 ms each -> 500 records take 5 s, half the lock: no cap.
    policy.poll_returned(0.0, 100)
    policy.poll_started(1_000.0)
    assert policy.ms_per_record == 5.0  # the moving average starts from 0
    assert policy.max_records() is None
    # Much slower: 100 records in 10 s (the average moves to 52.5 ms per record).
    policy.poll_returned(1_000.0, 100)
    policy.poll_started(11_000.0)
    assert policy.max_records() == int(5_000 / 52.5)
    # Slower than half a lock per record: still one record per fetch.
    policy.poll_returned(11_000.0, 1)
    policy.poll_started(111_000.0)
    assert policy.max_records() == 1


def test_records_are_handed_out_only_with_time_left_to_process_and_acknowledge_them() -> None:
    clock = Clock()
    policy = FetchAheadPolicy(max_poll_records=50)
    # Pace unknown: only the acknowledgement's way to the broker.
    assert policy.hand_out_margin_ms(50) == ACK_ALLOWANCE_MS
    policy.poll_returned(clock.now_ms, 50)
    policy.poll_started(clock.advance(50.0))  # 1 ms per record: 0.5 on average
    # Twice the time for a poll's records, plus the allowance.
    assert policy.hand_out_margin_ms(50) == 2 * 0.5 * 50 + ACK_ALLOWANCE_MS
    # At most a quarter of the lock, so a slow application still gets records.
    policy.note_lock_timeout(1_000)
    policy.poll_returned(clock.now_ms, 50)
    policy.poll_started(clock.advance(5_000.0))
    assert policy.hand_out_margin_ms(50) == 250
