"""kafka_share.workers.AsyncShareWorker on MockAsyncShareConsumer."""

from __future__ import annotations

import asyncio
import os
import signal
import threading
import time
from collections import Counter
from collections.abc import Coroutine
from typing import Any, TypeVar

import pytest
import tenacity

from kafka_share import AcknowledgeType, ConsumerRecord
from kafka_share.metrics import WORKER_METRIC_GROUPS
from kafka_share.testing import MockAsyncShareConsumer
from kafka_share.workers import AsyncShareWorker, WorkerSummary

Record = ConsumerRecord[bytes, bytes]
ACCEPT, RELEASE, REJECT = AcknowledgeType.ACCEPT, AcknowledgeType.RELEASE, AcknowledgeType.REJECT
T = TypeVar("T")


def run(coro: Coroutine[Any, Any, T]) -> T:
    return asyncio.run(coro)


class Mocks:
    def __init__(self, values: list[bytes], **config: object) -> None:
        self.values = values
        self.config = config
        self.made: list[MockAsyncShareConsumer[bytes, bytes]] = []

    def __call__(self, config: dict[str, object]) -> MockAsyncShareConsumer[bytes, bytes]:
        consumer: MockAsyncShareConsumer[bytes, bytes] = MockAsyncShareConsumer(
            {**config, **self.config}
        )
        consumer.add_records("t", self.values)
        self.made.append(consumer)
        return consumer

    @property
    def consumer(self) -> MockAsyncShareConsumer[bytes, bytes]:
        return self.made[-1]

    def final(self) -> dict[int, AcknowledgeType]:
        return {offset: t for (_, _, offset), t in self.consumer.committed().items()}


def values(n: int) -> list[bytes]:
    return [f"v{i}".encode() for i in range(n)]


def test_each_record_acknowledged_by_its_outcome_with_coroutine_handlers() -> None:
    mocks = Mocks([b"ok", b"retry", b"poison"])

    async def handle(record: Record) -> int:
        await asyncio.sleep(0.001)
        if record.value == b"retry" and record.delivery_count == 1:
            raise TimeoutError("busy")
        if record.value == b"poison":
            raise ValueError("bad")
        return len(record.value)

    async def main() -> tuple[WorkerSummary, dict[str, float]]:
        w = AsyncShareWorker(handle, topics=["t"], consumer_factory=mocks, concurrency=2,
                             retryable=(TimeoutError,))
        summary = await w.run(idle_timeout_s=0.2, handle_signals=False)
        return summary, w.metrics()

    summary, metrics = run(main())
    assert (summary.accepted, summary.released, summary.rejected) == (2, 1, 1)
    assert mocks.final() == {0: ACCEPT, 1: ACCEPT, 2: REJECT}
    assert set(WORKER_METRIC_GROUPS) <= set(metrics)
    assert metrics["records-released-total"] == 1 and mocks.consumer.closed


def test_concurrency_tasks_at_once() -> None:
    mocks = Mocks(values(40))
    running = most = 0

    async def handle(record: Record) -> None:
        nonlocal running, most
        running += 1
        most = max(most, running)
        await asyncio.sleep(0.01)
        running -= 1

    async def main() -> WorkerSummary:
        w = AsyncShareWorker(handle, topics=["t"], consumer_factory=mocks, concurrency=8)
        return await w.run(max_records=40, handle_signals=False)

    assert run(main()).accepted == 40
    assert most == 8


def test_stop_releases_unstarted_and_cancels_handlers_past_the_bound() -> None:
    mocks = Mocks(values(10), **{"max.poll.records": 10})
    started: list[int] = []
    cancelled: list[int] = []

    async def handle(record: Record) -> None:
        started.append(record.offset)
        try:
            await asyncio.sleep(0.05 if record.offset == 0 else 30)
        except asyncio.CancelledError:
            cancelled.append(record.offset)
            raise

    async def main() -> WorkerSummary:
        w = AsyncShareWorker(handle, topics=["t"], consumer_factory=mocks, concurrency=3,
                             stop_timeout_s=0.3)
        task = asyncio.create_task(w.run(handle_signals=False))
        while len(started) < 3:
            await asyncio.sleep(0.005)
        w.stop()
        return await asyncio.wait_for(task, 5)

    began = time.monotonic()
    summary = run(main())
    assert time.monotonic() - began < 3
    # Offset 0 finished within the bound; 1 and 2 were cancelled; 3-9 never started.
    assert (summary.accepted, summary.released_on_stop, summary.abandoned) == (1, 9, 2)
    assert sorted(cancelled) == [1, 2] and sorted(started) == [0, 1, 2]
    assert mocks.final()[0] is ACCEPT
    assert len(mocks.consumer.available()) == 9


def test_retries_in_place_with_async_retrying() -> None:
    mocks = Mocks([b"flaky", b"poison"])
    calls: Counter[bytes] = Counter()

    async def handle(record: Record) -> None:
        calls[record.value] += 1
        if record.value == b"flaky" and calls[b"flaky"] < 2:
            raise TimeoutError("busy")
        if record.value == b"poison":
            raise ValueError("bad")

    async def main() -> WorkerSummary:
        policy = tenacity.AsyncRetrying(stop=tenacity.stop_after_attempt(4),
                                        wait=tenacity.wait_fixed(0.01))
        w = AsyncShareWorker(handle, topics=["t"], consumer_factory=mocks,
                             retryable=(TimeoutError,), retry=policy)
        return await w.run(max_records=2, handle_signals=False)

    summary = run(main())
    assert (summary.accepted, summary.rejected) == (1, 1)
    assert calls == {b"flaky": 2, b"poison": 1}
    with pytest.raises(ValueError, match=r"retry must be a tenacity\.AsyncRetrying"):
        AsyncShareWorker(handle, topics=["t"], retry=tenacity.Retrying(),
                         consumer_factory=mocks)


def test_sigterm_stops_the_asyncio_worker_in_order() -> None:
    mocks = Mocks(values(6), **{"max.poll.records": 6})
    previous = signal.getsignal(signal.SIGTERM)

    async def handle(record: Record) -> None:
        if record.offset == 0:
            threading.Timer(0.05, os.kill, (os.getpid(), signal.SIGTERM)).start()
        await asyncio.sleep(0.2)

    async def main() -> WorkerSummary:
        w = AsyncShareWorker(handle, topics=["t"], consumer_factory=mocks, concurrency=2)
        return await w.run()

    summary = run(main())
    assert summary.stopped_by == "SIGTERM"
    assert (summary.accepted, summary.released_on_stop, summary.abandoned) == (2, 4, 0)
    assert signal.getsignal(signal.SIGTERM) is previous


def test_signal_handlers_need_the_main_thread() -> None:
    mocks = Mocks([b"a"])
    out: list[Any] = []

    async def handle(record: Record) -> None:
        return None

    def in_thread() -> None:
        w = AsyncShareWorker(handle, topics=["t"], consumer_factory=mocks)
        try:
            run(w.run(max_records=1))
        except RuntimeError as exc:
            out.append(exc)
        out.append(run(w.run(max_records=1, handle_signals=False)))

    thread = threading.Thread(target=in_thread)
    thread.start()
    thread.join(5)
    assert "handle_signals=False" in str(out[0])
    assert out[1].accepted == 1
