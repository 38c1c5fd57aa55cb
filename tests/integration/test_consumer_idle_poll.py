"""A poll that waits on a quiet topic is asking for records: it keeps the member in
the group past ``max.poll.interval.ms`` (as Java's consumer does), and a record
produced afterwards reaches it. Only an application that stops calling ``poll``
leaves (test_consumer_ops.py covers that it rejoins on its next poll)."""

from __future__ import annotations

import asyncio
import logging
import threading
from collections.abc import Callable
from typing import Any

import pytest
from share_helpers import run_loop

from kafka_share import ConsumerRecords
from kafka_share.admin import Admin
from kafka_share.aio import AsyncShareConsumer

pytestmark = pytest.mark.integration

INTERVAL_MS = 2000
#: Idle for well over two intervals before the record is produced.
IDLE_S = 5.5


def _members(bootstrap: str, group: str) -> int:
    with Admin(bootstrap_servers=bootstrap) as admin:
        return len(admin.describe_share_groups([group], timeout=10.0)[group].members)


def _produce_later(
    bootstrap: str, group: str, produce: Callable[[], None], seen_members: list[int]
) -> threading.Timer:
    """After IDLE_S, note how many members the group has, then produce the record."""

    def fire() -> None:
        seen_members.append(_members(bootstrap, group))
        produce()

    timer = threading.Timer(IDLE_S, fire)
    timer.start()
    return timer


def _assert_stayed(caplog: pytest.LogCaptureFixture, seen_members: list[int]) -> None:
    assert seen_members == [1], f"group members while the poll waited: {seen_members}"
    assert "poll timeout has expired" not in caplog.text


@pytest.mark.parametrize("timeout", [None, 30.0], ids=["no-timeout", "timeout-over-interval"])
def test_waiting_poll_stays_in_the_group(
    timeout: float | None, topic_factory: Any, share_group: str, kafka_produce: Any,
    consumer_factory: Any, kafka_bootstrap: str, caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.WARNING, logger="kafka_share")
    topic = topic_factory(partitions=1)
    consumer = consumer_factory(share_group, max_poll_interval_ms=INTERVAL_MS)
    consumer.subscribe([topic])
    seen_members: list[int] = []
    timer = _produce_later(kafka_bootstrap, share_group,
                           lambda: kafka_produce(topic, [b"late"], partition=0), seen_members)
    # Without the fix the poll never returns: a watchdog ends it with WakeupError.
    watchdog = threading.Timer(IDLE_S + 25, consumer.wakeup)
    watchdog.start()
    try:
        records: ConsumerRecords[Any, Any] = ConsumerRecords()
        while not records:  # the join's empty polls return at once only with a timeout
            records = consumer.poll() if timeout is None else consumer.poll(timeout=timeout)
    finally:
        watchdog.cancel()
        timer.join()
    assert [r.value for r in records] == [b"late"]
    _assert_stayed(caplog, seen_members)


@pytest.mark.parametrize("style", ["await-poll", "async-for"])
def test_waiting_async_poll_stays_in_the_group(
    style: str, topic_factory: Any, share_group: str, kafka_produce: Any,
    kafka_bootstrap: str, caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.WARNING, logger="kafka_share")
    topic = topic_factory(partitions=1)
    seen_members: list[int] = []

    async def main() -> bytes:
        async with AsyncShareConsumer(bootstrap_servers=kafka_bootstrap, group_id=share_group,
                                      max_poll_interval_ms=INTERVAL_MS) as consumer:
            await consumer.subscribe([topic])
            timer = _produce_later(
                kafka_bootstrap, share_group,
                lambda: kafka_produce(topic, [b"late"], partition=0), seen_members,
            )
            try:
                if style == "await-poll":
                    async def first() -> bytes:
                        while True:
                            records = await consumer.poll()
                            for record in records:
                                return record.value  # type: ignore[no-any-return]
                else:
                    async def first() -> bytes:
                        async for record in consumer:
                            return record.value  # type: ignore[no-any-return]
                        raise AssertionError("the iteration ended")
                return await asyncio.wait_for(first(), IDLE_S + 25)
            finally:
                await asyncio.to_thread(timer.join)

    assert run_loop(main()) == b"late"
    _assert_stayed(caplog, seen_members)
