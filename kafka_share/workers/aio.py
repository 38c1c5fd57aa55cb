"""``AsyncShareWorker``: :class:`~kafka_share.workers.ShareWorker` for asyncio, on an
:class:`~kafka_share.aio.AsyncShareConsumer`, with coroutine handlers."""

from __future__ import annotations

import asyncio
import inspect
import logging
import signal
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Collection, Mapping, Sequence
from typing import Any, Final, Generic, Protocol

from kafka_share.aio import AsyncShareConsumer
from kafka_share.errors import RecordDeserializationError, WakeupError
from kafka_share.metrics import WorkerMetrics
from kafka_share.models import AcknowledgeType, ConsumerRecord, ConsumerRecords
from kafka_share.workers._common import (
    ACK_EVERY_S,
    CLOSE_TIMEOUT_S,
    COMMIT_TIMEOUT_S,
    DEFAULT_STOP_TIMEOUT_S,
    FIRST_RECORD_TIMEOUT_S,
    BatchSize,
    Clock,
    Handled,
    K,
    Limits,
    Tally,
    V,
    WorkerSummary,
    check_arguments,
    in_place_retries,
    install_stop_signals,
    max_poll_records,
    now_ms,
    outcome_of,
    worker_config,
    worker_metrics,
)

__all__ = ["AsyncConsumer", "AsyncShareWorker"]

_log = logging.getLogger("kafka_share.workers")

_WAKE: Final = object()


class AsyncConsumer(Protocol[K, V]):
    """What an asyncio worker needs of its consumer:
    :class:`~kafka_share.aio.AsyncShareConsumer` (or
    :class:`~kafka_share.testing.MockAsyncShareConsumer`)."""

    async def subscribe(self, topics: Collection[str]) -> None: ...
    async def poll(
        self, timeout: float | None = None, *, max_records: int | None = None
    ) -> ConsumerRecords[K, V]: ...
    def prefetch(self, max_records: int | None = None) -> bool: ...
    def acknowledge(self, record: ConsumerRecord[K, V], type: AcknowledgeType = ...) -> None: ...
    def acknowledge_offset(
        self, topic: str, partition: int, offset: int, type: AcknowledgeType = ...
    ) -> None: ...
    def commit_async(self) -> None: ...
    async def commit_sync(self, timeout: float | None = None) -> Mapping[Any, Any]: ...
    def wakeup(self) -> None: ...
    async def close(self, timeout: float | None = None) -> None: ...
    def metrics(self) -> dict[str, float]: ...


class _Batch(Generic[K, V]):
    """One poll's records: their tasks, and which have started."""

    def __init__(self) -> None:
        self.tasks: dict[int, tuple[asyncio.Task[None], ConsumerRecord[K, V]]] = {}
        self.started: set[int] = set()


class AsyncShareWorker(Generic[K, V]):
    """:class:`~kafka_share.workers.ShareWorker` on the event loop: ``await
    handler(record)`` for a share group's records, ``concurrency`` at once
    (tasks), each record acknowledged by its outcome as its handler finishes
    (ACCEPT, RELEASE for ``retryable`` errors, REJECT otherwise). The same
    settings, limits, metrics and stop as ``ShareWorker``; ``retry`` is a
    ``tenacity.AsyncRetrying``. A handler may also be a plain function (it then
    runs on the loop: keep it short).

    On a stop, handlers not started are cancelled before they begin and their
    records released at once; running ones get ``stop_timeout_s``, then are
    cancelled (``CancelledError`` in the handler) and their records released.

    ``consumer_factory(config)`` makes the consumer (default
    :class:`~kafka_share.aio.AsyncShareConsumer`; it is called on the loop):
    pass :class:`~kafka_share.testing.MockAsyncShareConsumer`'s maker in unit tests.

    Raises:
        ValueError: an argument is invalid (named).
        ConfigError: a consumer setting is invalid.
    """

    def __init__(
        self,
        handler: Callable[[ConsumerRecord[K, V]], Awaitable[object] | object],
        config: Mapping[str, object] | None = None,
        *,
        topics: Sequence[str],
        concurrency: int = 1,
        retryable: tuple[type[BaseException], ...] = (),
        retry: Any = None,
        stop_timeout_s: float = DEFAULT_STOP_TIMEOUT_S,
        consumer_factory: Callable[[dict[str, object]], AsyncConsumer[K, V]] | None = None,
    ) -> None:
        check_arguments(handler, topics, concurrency, retryable, stop_timeout_s)
        self._handler = handler
        self._config = worker_config(config or {}, concurrency, type(self).__name__)
        self._metrics: WorkerMetrics = worker_metrics(
            self._config, own_factory=consumer_factory is not None
        )
        self._batch_size = BatchSize(concurrency, max_poll_records(
            self._config, own_factory=consumer_factory is not None
        ))
        self._topics = list(topics)
        self._concurrency = concurrency
        self._retryable = retryable
        self._stop_timeout_s = float(stop_timeout_s)
        self._factory = consumer_factory or _real_consumer
        self._retry = None if retry is None else in_place_retries(
            retry, retryable, lambda: self._stop_reason is not None, self._retry_sleep,
            asynchronous=True,
        )
        self._consumer: AsyncConsumer[K, V] | None = None
        self._last_consumer: AsyncConsumer[K, V] | None = None  # its metrics, after a run
        self._loop: asyncio.AbstractEventLoop | None = None
        self._outcomes: asyncio.Queue[object] | None = None
        self._stopping: asyncio.Event | None = None
        self._stop_reason: str | None = None
        self._force = False
        self._polling = False
        self._fatal: BaseException | None = None

    @property
    def config(self) -> dict[str, object]:
        """The consumer settings the worker uses (its defaults filled in)."""
        return dict(self._config)

    def metrics(self) -> dict[str, float]:
        """The consumer's metrics and the worker's (see ``ShareWorker.metrics``)."""
        consumer = self._consumer or self._last_consumer
        base = consumer.metrics() if consumer is not None else {}
        return {**base, **self._metrics.snapshot(now_ms())}

    def stop(self, *, force: bool = False) -> None:
        """Stop the run in order; ``force``: without waiting for running handlers.
        Safe from any thread and from a signal handler; returns at once."""
        self._request_stop("stop()", force)

    def _request_stop(self, reason: str, force: bool) -> None:
        if self._stop_reason is None:
            self._stop_reason = reason
        self._force = self._force or force
        consumer, loop = self._consumer, self._loop
        if consumer is not None and self._polling:
            consumer.wakeup()  # only while polling: none left over for commit_sync
        if loop is not None and not loop.is_closed():
            loop.call_soon_threadsafe(self._wake)

    def _wake(self) -> None:
        if self._outcomes is not None:
            self._outcomes.put_nowait(_WAKE)

    def _on_signal(self, signum: int) -> None:
        self._request_stop(signal.Signals(signum).name, self._stop_reason is not None)

    async def run(
        self,
        *,
        max_records: int | None = None,
        max_seconds: float | None = None,
        idle_timeout_s: float | None = None,
        handle_signals: bool = True,
    ) -> WorkerSummary:
        """Handle records until stopped or a limit (see ``ShareWorker.run``).

        With ``handle_signals`` (the default) SIGINT and SIGTERM stop the worker
        in order, a second one forcing; the loop must run on the main thread
        (elsewhere this raises RuntimeError: pass ``handle_signals=False`` and
        call :meth:`stop`).
        """
        restore = install_stop_signals(self._on_signal) if handle_signals else None
        try:
            tally = Tally(self._metrics)
            async for _ in self._handle(Limits(max_records, max_seconds, idle_timeout_s), tally):
                pass
            return tally.summary()
        finally:
            if restore is not None:
                restore()

    def handled(
        self,
        *,
        max_records: int | None = None,
        max_seconds: float | None = None,
        idle_timeout_s: float | None = None,
        first_record_timeout_s: float = FIRST_RECORD_TIMEOUT_S,
    ) -> AsyncIterator[Handled[K, V]]:
        """:meth:`run` as an async generator of the records handled (no signal
        handling: call :meth:`stop`)."""
        limits = Limits(max_records, max_seconds, idle_timeout_s, first_record_timeout_s)
        self._check_can_run(limits)  # now, not at the first next()
        return self._handle(limits, Tally(self._metrics))

    def _check_can_run(self, limits: Limits) -> None:
        limits.check()
        if self._consumer is not None:
            raise RuntimeError(f"this {type(self).__name__} is already running")

    async def _handle(self, limits: Limits, tally: Tally) -> AsyncIterator[Handled[K, V]]:
        self._check_can_run(limits)
        self._fatal = None
        self._loop = asyncio.get_running_loop()
        self._outcomes, self._stopping = asyncio.Queue(), asyncio.Event()
        consumer = self._factory(dict(self._config))
        self._consumer = self._last_consumer = consumer
        batch: _Batch[K, V] = _Batch()
        try:
            await consumer.subscribe(self._topics)
            async for handled in self._poll_loop(consumer, batch, Clock(limits), tally):
                yield handled
            await _commit(consumer)
        finally:
            for task, _ in batch.tasks.values():
                task.cancel()
            self._metrics.set_running(0)
            try:
                await consumer.close(timeout=CLOSE_TIMEOUT_S)
            finally:
                self._consumer = self._loop = None
                # A stop asked for before a run ends that run; one asked for
                # during a run ends it only.
                self._stop_reason, self._force = None, False
        if self._fatal is not None:
            raise self._fatal

    async def _poll_loop(
        self, consumer: AsyncConsumer[K, V], batch: _Batch[K, V], clock: Clock, tally: Tally,
    ) -> AsyncIterator[Handled[K, V]]:
        while True:
            reason, wait_s = clock.ended()
            reason = self._stop_reason or reason
            if reason is not None:
                tally.stopped_by = reason
                _log.info("worker stopping (%s)", reason)
                return
            records = await self._poll(
                consumer, wait_s, self._batch_size.records(clock.wanted()), tally
            )
            if not records:
                continue
            clock.got_records(len(records))
            wanted = clock.wanted()
            if self._stop_reason is None and wanted != 0:
                consumer.prefetch(self._batch_size.records(wanted))
            async for handled in self._batch(consumer, batch, records, tally):
                yield handled

    async def _poll(
        self, consumer: AsyncConsumer[K, V], wait_s: float, wanted: int | None, tally: Tally,
    ) -> list[ConsumerRecord[K, V]]:
        """One poll: empty after a stop, or a record that could not be deserialized
        (it is rejected: it never reaches the handler)."""
        self._polling = True
        try:
            if self._stop_reason is not None:  # came before _polling was set
                return []
            return list(await consumer.poll(wait_s, max_records=wanted))
        except WakeupError:
            return []
        except RecordDeserializationError as exc:
            _log.warning("rejecting %s-%d offset %d: %s",
                         exc.topic, exc.partition, exc.offset, exc)
            consumer.acknowledge_offset(
                exc.topic, exc.partition, exc.offset, AcknowledgeType.REJECT
            )
            tally.handled(AcknowledgeType.REJECT, 0.0)
            return []
        finally:
            self._polling = False

    async def _batch(
        self, consumer: AsyncConsumer[K, V], batch: _Batch[K, V],
        records: list[ConsumerRecord[K, V]], tally: Tally,
    ) -> AsyncIterator[Handled[K, V]]:
        """One poll's records, each acknowledged as its handler finishes."""
        slots = asyncio.Semaphore(self._concurrency)
        batch.started.clear()
        for record in records:
            batch.tasks[id(record)] = (
                asyncio.create_task(self._call(record, slots, batch)), record
            )
        flushed, dirty = time.monotonic(), False
        stop_deadline: float | None = None
        while batch.tasks:
            if self._stop_reason is not None and stop_deadline is None:
                stop_deadline = self._begin_stop(consumer, batch, tally)
                dirty = False
                continue
            if stop_deadline is not None and (self._force or time.monotonic() >= stop_deadline):
                self._abandon(consumer, batch, tally)
                return
            self._metrics.set_running(len(batch.started))
            item = await self._next_outcome(flushed, stop_deadline)
            if isinstance(item, Handled) and id(item.record) in batch.tasks:
                del batch.tasks[id(item.record)]
                batch.started.discard(id(item.record))
                consumer.acknowledge(item.record, item.outcome)
                tally.handled(item.outcome, item.handler_time_s)
                self._batch_size.handled(item.handler_time_s)
                dirty = True
                yield item
            if dirty and time.monotonic() - flushed >= ACK_EVERY_S:
                consumer.commit_async()
                flushed, dirty = time.monotonic(), False
        self._metrics.set_running(0)

    async def _next_outcome(self, flushed: float, stop_deadline: float | None) -> object:
        assert self._outcomes is not None
        wait_s = max(0.0, flushed + ACK_EVERY_S - time.monotonic())
        if stop_deadline is not None:
            wait_s = min(wait_s, max(0.0, stop_deadline - time.monotonic()))
        try:
            async with asyncio.timeout(max(wait_s, 0.001)):
                return await self._outcomes.get()
        except TimeoutError:
            return None

    def _begin_stop(
        self, consumer: AsyncConsumer[K, V], batch: _Batch[K, V], tally: Tally,
    ) -> float:
        """Cancel the handlers not started and release their records at once."""
        assert self._stopping is not None
        self._stopping.set()
        unstarted = [key for key in batch.tasks if key not in batch.started]
        for key in unstarted:
            task, record = batch.tasks.pop(key)
            task.cancel()
            consumer.acknowledge(record, AcknowledgeType.RELEASE)
        tally.released_unhandled(len(unstarted))
        consumer.commit_async()
        _log.info(
            "worker stopping (%s): %d records not started released, %d handlers running "
            "(waiting %.1f s for them)", self._stop_reason, len(unstarted), len(batch.tasks),
            0.0 if self._force else self._stop_timeout_s,
        )
        return time.monotonic() + self._stop_timeout_s

    def _abandon(self, consumer: AsyncConsumer[K, V], batch: _Batch[K, V], tally: Tally) -> None:
        """Cancel the handlers still running and release their records."""
        for task, record in batch.tasks.values():
            task.cancel()
            consumer.acknowledge(record, AcknowledgeType.RELEASE)
        if batch.tasks:
            _log.warning(
                "worker stopping: %d handlers still running were cancelled, their records "
                "released (they may be handled again)", len(batch.tasks),
            )
        tally.released_unhandled(len(batch.tasks), abandoned=True)
        batch.tasks.clear()
        batch.started.clear()

    async def _call(
        self, record: ConsumerRecord[K, V], slots: asyncio.Semaphore, batch: _Batch[K, V],
    ) -> None:
        async with slots:
            batch.started.add(id(record))
            started = time.monotonic()
            handled = await self._outcome(record, started)
        assert self._outcomes is not None
        self._outcomes.put_nowait(handled)

    async def _outcome(self, record: ConsumerRecord[K, V], started: float) -> Handled[K, V]:
        try:
            if self._retry is not None:
                result = await self._retry.copy()(self._handler, record)
            else:
                result = self._handler(record)
                if inspect.isawaitable(result):
                    result = await result
        except asyncio.CancelledError:
            raise  # abandoned at a stop: the record is released by the worker
        except BaseException as exc:
            if not isinstance(exc, Exception):
                self._fatal = self._fatal or exc
                self._request_stop(type(exc).__name__, False)
            return Handled(record, outcome_of(exc, self._retryable), None, exc,
                           time.monotonic() - started)
        return Handled(record, AcknowledgeType.ACCEPT, result, None, time.monotonic() - started)

    async def _retry_sleep(self, seconds: float) -> None:
        """A wait between retries in place, which a stop ends early."""
        if self._stopping is None:
            await asyncio.sleep(seconds)
            return
        try:
            async with asyncio.timeout(seconds):
                await self._stopping.wait()
        except TimeoutError:
            pass


def _real_consumer(config: dict[str, object]) -> AsyncConsumer[Any, Any]:
    return AsyncShareConsumer(config)


async def _commit(consumer: AsyncConsumer[Any, Any]) -> None:
    try:
        results = await consumer.commit_sync(timeout=COMMIT_TIMEOUT_S)
    except WakeupError:  # a stop's wakeup that no poll took
        results = await consumer.commit_sync(timeout=COMMIT_TIMEOUT_S)
    for partition, error in results.items():
        if error is not None:
            _log.warning("acknowledgements of %s failed: %s (its records come back)",
                         partition, error)
