"""How often a poll wakes the network thread: once, however many events it hands over.

Each wakeup is a hand-over of the GIL to the network thread, which then runs a
round while the application thread waits to take it back. A poll queues a
PollEvent and usually a FetchEvent right after: the PollEvent goes without a
wakeup of its own, but never stays unseen while the poll waits or after it
returns. The network thread has no broker here.
"""

from __future__ import annotations

import uuid
from typing import Any

from kafka_share import ShareConsumer
from kafka_share._app.events import CompletedShareFetch, FetchEvent, PollEvent
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

    def deliver(self, count: int) -> None:
        data = build_batch([NewRecord(key=None, value=b"v") for _ in range(count)], base_offset=0)
        self.c._fetch_buffer.add_all(
            [CompletedShareFetch(1, TIP, memoryview(data), [(0, count - 1, 1)])]
        )


def test_a_poll_that_fetches_wakes_the_network_thread_once() -> None:
    h = Harness()
    try:
        h.log.clear()
        assert h.c.poll(0).count() == 0
        assert h.log == [PollEvent.__name__, FetchEvent.__name__, "wakeup"]
    finally:
        h.c.close(timeout=1)


def test_a_poll_that_only_returns_buffered_records_still_wakes_the_network_thread() -> None:
    """No FetchEvent follows the PollEvent: the poll wakes the thread before it
    returns, so the engine sees the poll (its timer, a rejoin) at once."""
    h = Harness()
    try:
        h.deliver(3)
        h.log.clear()
        # Without fetching ahead, a poll that finds a response buffered drains it
        # and fetches only at the next poll.
        h.c._prefetch = False
        records = h.c.poll(0)
        assert records.count() == 3
        assert h.log[0] == PollEvent.__name__
        assert h.log[-1] == "wakeup"
        assert h.log.count("wakeup") == 1
    finally:
        h.c.close(timeout=1)
