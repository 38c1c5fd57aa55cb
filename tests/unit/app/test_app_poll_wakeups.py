"""How often a poll wakes the network thread: once to take the I/O loop, then never.

Each wakeup is a hand-over to the network thread on another CPU. The
application thread takes the loop at its first poll (one wakeup: the request)
and runs it inside every poll after that, applying its own events (the
PollEvent, the FetchEvent, acknowledgements) in its own rounds. The network
thread takes the loop back once the application has been away from ``poll``
for ``AWAY_MS``, and whenever the application blocks on a call the network
thread completes. The network thread has no broker here.
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Iterator
from typing import Any

import pytest

from kafka_share import ShareConsumer
from kafka_share._handoff.events import CompletedShareFetch, FetchEvent, PollEvent
from kafka_share._net.loop_owner import AWAY_MS, INSIDE_CHECK_MS, LoopOwner
from kafka_share.errors import WakeupError
from kafka_share.models import TopicIdPartition
from kafka_share.records.builder import NewRecord, build_batch

NOWHERE = "127.0.0.1:9"
TIP = TopicIdPartition(uuid.UUID(int=21), "jobs", 0)


class Harness:
    def __init__(self) -> None:
        self.c: ShareConsumer[Any, Any] = ShareConsumer(bootstrap_servers=NOWHERE, group_id="g")
        self.c.subscribe(["jobs"])
        self.log: list[str] = []
        thread = self.c._thread
        real_submit, real_wakeup = thread.submit, thread._client.wakeup

        def submit(event: Any) -> None:
            self.log.append(type(event).__name__)
            real_submit(event)

        def wakeup() -> None:
            self.log.append("wakeup")
            real_wakeup()

        thread.submit = submit  # type: ignore[method-assign]
        thread._client.wakeup = wakeup  # type: ignore[method-assign]

    @property
    def owner(self) -> LoopOwner:
        return self.c._thread._ownership.owner

    def last_poll_ms(self) -> int:
        return int(self.c._thread._driver.engine.membership._last_poll_ms or 0)

    def deliver(self, count: int) -> None:
        data = build_batch([NewRecord(key=None, value=b"v") for _ in range(count)], base_offset=0)
        self.c._core._fetch_buffer.add_all(
            [CompletedShareFetch(1, TIP, memoryview(data), [(0, count - 1, 1)])]
        )


def wait_for(condition: Any, timeout_s: float = 2.0) -> bool:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if condition():
            return True
        time.sleep(0.002)
    return bool(condition())


@pytest.fixture
def h() -> Iterator[Harness]:
    harness = Harness()
    try:
        yield harness
    finally:
        harness.c.close(timeout=1)


def test_the_first_poll_asks_for_the_loop_with_one_wakeup_and_sends_its_fetch_itself(
    h: Harness,
) -> None:
    h.log.clear()
    assert h.c.poll(0).count() == 0
    assert h.log == ["wakeup", PollEvent.__name__, FetchEvent.__name__]
    # poll(0) ran one round: its events were applied on this thread.
    assert h.c._thread._events.empty()
    assert h.owner is LoopOwner.AWAY


def test_polls_while_the_application_holds_the_loop_wake_nothing(h: Harness) -> None:
    h.c.poll(0)
    for _ in range(5):
        h.log.clear()
        h.deliver(3)
        h.c._core._rounds._prefetch = False  # fetch only when the buffer is empty
        assert h.c.poll(0).count() == 3
        assert h.c.poll(0).count() == 0
        assert "wakeup" not in h.log, h.log
        assert h.owner is LoopOwner.AWAY


def test_the_engine_sees_a_poll_that_only_returned_buffered_records(h: Harness) -> None:
    """Its PollEvent waits in the queue for the next round: the next poll's, or
    the network thread's once it takes the loop back, within AWAY_MS."""
    h.c.poll(0)
    h.deliver(3)
    h.c._core._rounds._prefetch = False
    before = h.last_poll_ms()
    time.sleep(0.01)
    assert h.c.poll(0).count() == 3
    assert wait_for(lambda: h.last_poll_ms() > before, (AWAY_MS + INSIDE_CHECK_MS) / 1000 + 1)
    assert wait_for(lambda: h.owner is LoopOwner.NETWORK)


def test_the_network_thread_takes_the_loop_back_and_the_next_poll_asks_again(h: Harness) -> None:
    h.c.poll(0)
    assert h.owner is LoopOwner.AWAY
    assert wait_for(lambda: h.owner is LoopOwner.NETWORK)
    h.log.clear()
    h.c.poll(0)
    assert h.log.count("wakeup") == 1
    assert h.owner is LoopOwner.AWAY


def test_a_call_the_network_thread_completes_releases_the_loop_first(h: Harness) -> None:
    h.c.poll(0)
    assert h.owner is LoopOwner.AWAY
    h.c.subscribe(["jobs", "more"])  # waits for the network thread's round
    assert h.owner is LoopOwner.NETWORK


def test_a_poll_that_waits_sends_its_fetch_in_its_wait_s_first_round(h: Harness) -> None:
    """A poll that found nothing runs no round of its own for its fetch (50-100 µs
    of CPU): the wait that follows applies and sends it in its first round."""
    h.c.poll(0)
    thread = h.c._thread
    real_drive = thread.drive

    def drive(max_wait_ms: int) -> bool:
        kind = "0" if max_wait_ms == 0 else "wait"
        h.log.append(f"drive({kind}) events={thread._events.qsize()}")
        return real_drive(max_wait_ms)

    thread.drive = drive  # type: ignore[method-assign]
    h.log.clear()
    assert h.c.poll(0.05).count() == 0
    at = h.log.index(FetchEvent.__name__)
    # the next round is the wait's, and it finds the fetch (and the PollEvent) queued
    assert h.log[at + 1] == "drive(wait) events=2", h.log


def test_a_poll_that_raises_before_its_wait_hands_its_fetch_to_the_network_thread(
    h: Harness,
) -> None:
    h.c.poll(0)
    core = h.c._core
    real_poll_once = core._rounds.poll_once

    def poll_once(*args: Any, **kwargs: Any) -> Any:
        got = real_poll_once(*args, **kwargs)
        h.c.wakeup()  # the poll raises WakeupError before it waits
        return got

    core._rounds.poll_once = poll_once  # type: ignore[method-assign]
    with pytest.raises(WakeupError):
        h.c.poll(1.0)
    # Released at once (not after AWAY_MS): the network thread sends the fetch.
    assert h.owner is LoopOwner.NETWORK
    assert wait_for(h.c._thread._events.empty)
