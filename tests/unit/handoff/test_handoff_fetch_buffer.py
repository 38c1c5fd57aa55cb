"""FetchBuffer: FIFO hand-off between the network and application threads."""

from __future__ import annotations

import threading
import time

from kafka_share._handoff.fetch_buffer import FetchBuffer


def timed_wait(buffer: FetchBuffer[int], timeout_s: float) -> tuple[bool, float]:
    start = time.monotonic()
    result = buffer.await_not_empty(timeout_s)
    return result, time.monotonic() - start


def test_fifo_take_push_front_and_drain() -> None:
    buffer: FetchBuffer[int] = FetchBuffer()
    assert buffer.take() is None and buffer.is_empty() and len(buffer) == 0
    buffer.add_all([1, 2, 3])
    assert len(buffer) == 3 and not buffer.is_empty()
    assert buffer.take() == 1
    buffer.push_front(1)  # a partly consumed item goes back to the front
    assert buffer.take() == 1
    assert buffer.drain() == [2, 3]
    assert buffer.is_empty() and buffer.take() is None


def test_background_events_are_taken_oldest_first_and_only_once() -> None:
    buffer: FetchBuffer[int] = FetchBuffer()
    assert not buffer.has_background()
    buffer.add_background("a")
    buffer.add_background("b")
    assert buffer.has_background()
    assert buffer.take_background() == ["a", "b"]
    assert buffer.take_background() == []
    assert not buffer.has_background()
    # Background events are separate from data.
    assert buffer.is_empty()


def test_wait_returns_at_once_when_data_is_buffered() -> None:
    buffer: FetchBuffer[int] = FetchBuffer()
    buffer.add_all([7])
    result, elapsed = timed_wait(buffer, 5.0)
    assert result is True and elapsed < 1.0


def test_wait_times_out_when_nothing_happens() -> None:
    buffer: FetchBuffer[int] = FetchBuffer()
    result, elapsed = timed_wait(buffer, 0.1)
    assert result is False
    assert 0.08 <= elapsed < 2.0


def test_zero_timeout_does_not_block() -> None:
    buffer: FetchBuffer[int] = FetchBuffer()
    result, elapsed = timed_wait(buffer, 0.0)
    assert result is False and elapsed < 0.5


def test_wakeup_before_wait_is_not_lost_and_is_consumed_once() -> None:
    buffer: FetchBuffer[int] = FetchBuffer()
    buffer.wakeup()
    result, elapsed = timed_wait(buffer, 5.0)
    assert result is False and elapsed < 1.0
    # The wakeup was used up: the next wait runs to its timeout.
    result, elapsed = timed_wait(buffer, 0.1)
    assert result is False and elapsed >= 0.08


def test_wakeup_from_another_thread_ends_a_blocked_wait() -> None:
    buffer: FetchBuffer[int] = FetchBuffer()
    timer = threading.Timer(0.05, buffer.wakeup)
    timer.start()
    try:
        result, elapsed = timed_wait(buffer, 5.0)
    finally:
        timer.join()
    assert result is False and elapsed < 2.0


def test_data_from_another_thread_ends_a_blocked_wait_with_true() -> None:
    buffer: FetchBuffer[int] = FetchBuffer()
    timer = threading.Timer(0.05, buffer.add_all, args=([1, 2],))
    timer.start()
    try:
        result, elapsed = timed_wait(buffer, 5.0)
    finally:
        timer.join()
    assert result is True and elapsed < 2.0
    assert buffer.drain() == [1, 2]


def test_background_event_ends_a_blocked_wait_without_data() -> None:
    buffer: FetchBuffer[int] = FetchBuffer()
    timer = threading.Timer(0.05, buffer.add_background, args=("ack",))
    timer.start()
    try:
        result, elapsed = timed_wait(buffer, 5.0)
    finally:
        timer.join()
    assert result is False and elapsed < 2.0
    # A queued background event keeps ending waits until it is taken.
    result, elapsed = timed_wait(buffer, 5.0)
    assert result is False and elapsed < 1.0
    assert buffer.take_background() == ["ack"]


def test_adding_nothing_does_not_end_a_wait() -> None:
    buffer: FetchBuffer[int] = FetchBuffer()
    timer = threading.Timer(0.02, buffer.add_all, args=([],))
    timer.start()
    try:
        result, elapsed = timed_wait(buffer, 0.2)
    finally:
        timer.join()
    assert result is False and elapsed >= 0.15


def test_producer_consumer_sees_every_item_in_order() -> None:
    buffer: FetchBuffer[int] = FetchBuffer()
    n = 2000

    def produce() -> None:
        for i in range(0, n, 10):
            buffer.add_all(range(i, i + 10))

    got: list[int] = []
    t = threading.Thread(target=produce)
    t.start()
    deadline = time.monotonic() + 10
    while len(got) < n:
        assert time.monotonic() < deadline
        item = buffer.take()
        if item is None:
            buffer.await_not_empty(0.05)
            continue
        got.append(item)
    t.join()
    assert got == list(range(n))
