"""``ShareWorker``: a handler over a share group, ``concurrency`` calls at once in
threads, each record acknowledged by its outcome as its handler finishes."""

from __future__ import annotations

import logging
import queue
import signal
import threading
import time
from collections.abc import Callable, Collection, Iterator, Mapping, Sequence
from typing import Any, Final, Generic, Protocol

from kafka_share.consumer import ShareConsumer
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

__all__ = ["ShareWorker", "SyncConsumer"]

_log = logging.getLogger("kafka_share.workers")

#: Put on the outcome queue to wake the polling thread (``stop``).
_WAKE: Final = object()


class SyncConsumer(Protocol[K, V]):
    """What a worker needs of its consumer: :class:`~kafka_share.ShareConsumer`
    (or :class:`~kafka_share.testing.MockShareConsumer`)."""

    def subscribe(self, topics: Collection[str]) -> None: ...
    def poll(
        self, timeout: float | None = None, *, max_records: int | None = None
    ) -> ConsumerRecords[K, V]: ...
    def prefetch(self, max_records: int | None = None) -> bool: ...
    def acknowledge(self, record: ConsumerRecord[K, V], type: AcknowledgeType = ...) -> None: ...
    def acknowledge_offset(
        self, topic: str, partition: int, offset: int, type: AcknowledgeType = ...
    ) -> None: ...
    def commit_async(self) -> None: ...
    def commit_sync(self, timeout: float | None = None) -> Mapping[Any, Any]: ...
    def wakeup(self) -> None: ...
    def close(self, timeout: float | None = None) -> None: ...
    def metrics(self) -> dict[str, float]: ...


class _HandlerThreads(Generic[K, V]):
    """``count`` daemon threads calling the handler: records in, outcomes out.

    Daemon threads, not a ``ThreadPoolExecutor``: the interpreter waits for an
    executor's threads at exit, so one handler stuck for good would keep a
    stopped worker's process alive.
    """

    def __init__(
        self, call: Callable[[ConsumerRecord[K, V]], Handled[K, V]], count: int,
        outcomes: queue.SimpleQueue[object],
    ) -> None:
        self._jobs: queue.SimpleQueue[ConsumerRecord[K, V] | None] = queue.SimpleQueue()
        self._call = call
        self._outcomes = outcomes
        self._threads = [
            threading.Thread(target=self._work, name=f"kafka-share-handler-{i}", daemon=True)
            for i in range(count)
        ]
        for thread in self._threads:
            thread.start()

    def _work(self) -> None:
        while (record := self._jobs.get()) is not None:
            self._outcomes.put(self._call(record))

    def submit(self, record: ConsumerRecord[K, V]) -> None:
        self._jobs.put(record)

    def take_unstarted(self) -> list[ConsumerRecord[K, V]]:
        """The records no thread has taken yet (they never will)."""
        taken: list[ConsumerRecord[K, V]] = []
        while True:
            try:
                record = self._jobs.get_nowait()
            except queue.Empty:
                return taken
            if record is not None:
                taken.append(record)

    def shutdown(self) -> None:
        """Threads end once their current handler returns (never waited for)."""
        self.take_unstarted()
        for _ in self._threads:
            self._jobs.put(None)


class ShareWorker(Generic[K, V]):
    """Runs ``handler(record)`` for a share group's records, ``concurrency`` at once.

    Each record is acknowledged by its outcome as its handler finishes:

    * the handler returned: ACCEPT;
    * it raised one of ``retryable``: RELEASE (delivered again, to any member,
      with ``delivery_count + 1``);
    * it raised anything else: REJECT (a poison record: archived, or sent to the
      group's dead-letter topic where one is configured).

    ``config`` is the consumer's (Kafka's dotted keys, ``bootstrap.servers`` and
    ``group.id`` included); the worker sets explicit acknowledgement (refusing
    another mode) and, unless ``config`` says otherwise,
    ``share.acquire.mode=record_limit`` (nothing is acquired before the worker
    asks), ``max.poll.records`` of ``max(500, 4 * concurrency)`` (a cap: each
    poll asks for 4 waves of handlers at least, about 0.3 s of work by their
    average time) and
    ``share.auto.renew=true``, so a handler slower than the lock keeps its record
    (both need Kafka 4.2+). The handlers run in ``concurrency`` daemon threads
    (for I/O-bound handlers; the consumer is used from the thread that runs
    the worker only). The next poll's records are fetched while the handlers
    work, and outcomes reach the broker every 0.2 s at least.

    ``retry``, a ``tenacity.Retrying``, retries a handler in place before its
    record is released: only for errors of ``retryable`` (and those its own
    ``retry`` accepts), never once the worker is stopping.

    Stopping (:meth:`stop`, or SIGINT/SIGTERM in :meth:`run`): no more polls;
    records not started are released at once; running handlers get
    ``stop_timeout_s`` to finish, their outcomes acknowledged; those still
    running then are abandoned (their threads are daemons) and their records
    released, so they may be handled twice. A second signal (or
    ``stop(force=True)``) abandons them at once. Acknowledgements are committed
    before the consumer closes, which releases the records fetched ahead for the
    next poll: nothing is lost, nothing accepted comes back.

    ``consumer_factory(config)`` makes the consumer (default
    :class:`~kafka_share.ShareConsumer`): pass
    :class:`~kafka_share.testing.MockShareConsumer`'s maker in unit tests.

    Raises:
        ValueError: an argument is invalid (named).
        ConfigError: a consumer setting is invalid.
    """

    def __init__(
        self,
        handler: Callable[[ConsumerRecord[K, V]], object],
        config: Mapping[str, object] | None = None,
        *,
        topics: Sequence[str],
        concurrency: int = 1,
        retryable: tuple[type[BaseException], ...] = (),
        retry: Any = None,
        stop_timeout_s: float = DEFAULT_STOP_TIMEOUT_S,
        consumer_factory: Callable[[dict[str, object]], SyncConsumer[K, V]] | None = None,
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
        self._stopping = threading.Event()  # set by the polling thread, for retries
        self._retry = None if retry is None else in_place_retries(
            retry, retryable, lambda: self._stop_reason is not None,
            self._stopping.wait, asynchronous=False,
        )
        self._consumer: SyncConsumer[K, V] | None = None
        self._last_consumer: SyncConsumer[K, V] | None = None  # its metrics, after a run
        self._outcomes: queue.SimpleQueue[object] = queue.SimpleQueue()
        # Set by stop(), also from a signal handler: plain attributes (no lock).
        self._stop_reason: str | None = None
        self._force = False
        self._polling = False
        self._fatal: BaseException | None = None

    @property
    def config(self) -> dict[str, object]:
        """The consumer settings the worker uses (its defaults filled in)."""
        return dict(self._config)

    def metrics(self) -> dict[str, float]:
        """The consumer's metrics (:meth:`ShareConsumer.metrics
        <kafka_share.ShareConsumer.metrics>`) and the worker's: records
        ``accepted``, ``released``, ``rejected`` and ``released-on-stop`` (each
        ``-rate`` and ``-total``), ``handler-time-avg`` and ``-max`` (ms),
        ``handlers-running`` (names in :data:`kafka_share.metrics.WORKER_METRIC_GROUPS`).
        Safe to call from any thread."""
        consumer = self._consumer or self._last_consumer
        base = consumer.metrics() if consumer is not None else {}
        return {**base, **self._metrics.snapshot(now_ms())}

    def stop(self, *, force: bool = False) -> None:
        """Stop the run in order (see the class docstring); ``force``: without
        waiting for running handlers. Safe from any thread and from a signal
        handler (it takes no lock); returns at once. Called before :meth:`run`,
        it makes that run return at once (a worker started on one thread and
        stopped from another cannot lose the stop to the start)."""
        self._request_stop("stop()", force)

    def _request_stop(self, reason: str, force: bool) -> None:
        if self._stop_reason is None:
            self._stop_reason = reason
        self._force = self._force or force
        consumer = self._consumer
        if consumer is not None and self._polling:
            # Lock-free; only while polling, so that no wakeup is left over for
            # a later commit_sync (which would raise WakeupError).
            consumer.wakeup()
        self._outcomes.put(_WAKE)  # SimpleQueue.put is reentrant (signal-safe)

    def _on_signal(self, signum: int) -> None:
        # The first signal stops in order, a second one forces.
        self._request_stop(signal.Signals(signum).name, self._stop_reason is not None)

    def run(
        self,
        *,
        max_records: int | None = None,
        max_seconds: float | None = None,
        idle_timeout_s: float | None = None,
        handle_signals: bool = True,
    ) -> WorkerSummary:
        """Handle records until stopped, or until a limit: ``max_records``
        handled (exactly: polls ask for no more), ``max_seconds`` passed (the
        records of the poll in hand are finished first), or no record for
        ``idle_timeout_s`` (before the first record, at least 10 s: joining
        takes a few seconds).

        With ``handle_signals`` (the default) SIGINT and SIGTERM stop the worker
        in order, a second one forcing (the previous handlers are back when
        ``run`` returns). Signal handlers can only be installed from the main
        thread: elsewhere this raises RuntimeError; pass ``handle_signals=False``
        there and call :meth:`stop`.

        Raises:
            RuntimeError: ``handle_signals`` off the main thread.
            KafkaError: the consumer failed (records not acknowledged are
                released when it closes).
        """
        restore = install_stop_signals(self._on_signal) if handle_signals else None
        try:
            tally = Tally(self._metrics)
            for _ in self._handle(Limits(max_records, max_seconds, idle_timeout_s), tally):
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
    ) -> Iterator[Handled[K, V]]:
        """:meth:`run` as a generator of the records handled, as their handlers
        finish; no signal handling (call :meth:`stop`). Closing the generator
        early closes the consumer, which releases the records not acknowledged.
        ``first_record_timeout_s``: the idle timeout's least wait for the first
        record."""
        limits = Limits(max_records, max_seconds, idle_timeout_s, first_record_timeout_s)
        self._check_can_run(limits)  # now, not at the first next()
        return self._handle(limits, Tally(self._metrics))

    def _check_can_run(self, limits: Limits) -> None:
        limits.check()
        if self._consumer is not None:
            raise RuntimeError(f"this {type(self).__name__} is already running")

    def _handle(self, limits: Limits, tally: Tally) -> Iterator[Handled[K, V]]:
        self._check_can_run(limits)
        self._fatal = None
        consumer = self._factory(dict(self._config))
        self._consumer = self._last_consumer = consumer
        threads = _HandlerThreads(self._call, self._concurrency, self._outcomes)
        try:
            consumer.subscribe(self._topics)
            yield from self._loop(consumer, threads, Clock(limits), tally)
            _commit(consumer)
        finally:
            threads.shutdown()
            self._metrics.set_running(0)
            self._outcomes = queue.SimpleQueue()  # outcomes of abandoned handlers dropped
            try:
                consumer.close(timeout=CLOSE_TIMEOUT_S)
            finally:
                self._consumer = None
                # A stop asked for before a run ends that run; one asked for
                # during a run ends it only.
                self._stop_reason, self._force = None, False
                self._stopping.clear()
        if self._fatal is not None:
            raise self._fatal

    def _loop(
        self, consumer: SyncConsumer[K, V], threads: _HandlerThreads[K, V], clock: Clock,
        tally: Tally,
    ) -> Iterator[Handled[K, V]]:
        """Poll, hand the records to the threads, acknowledge; until a stop or a limit."""
        while True:
            reason, wait_s = clock.ended()
            reason = self._stop_reason or reason
            if reason is not None:
                tally.stopped_by = reason
                _log.info("worker stopping (%s)", reason)
                return
            records = self._poll(
                consumer, wait_s, self._batch_size.records(clock.wanted()), tally
            )
            if not records:
                continue
            clock.got_records(len(records))
            wanted = clock.wanted()
            if self._stop_reason is None and wanted != 0:
                # The next poll's records come while the handlers work on these
                # (record_limit acquires nothing between polls otherwise).
                consumer.prefetch(self._batch_size.records(wanted))
            yield from self._batch(consumer, threads, records, tally)

    def _poll(
        self, consumer: SyncConsumer[K, V], wait_s: float, wanted: int | None, tally: Tally,
    ) -> list[ConsumerRecord[K, V]]:
        """One poll: empty after a stop, or a record that could not be deserialized."""
        self._polling = True
        try:
            if self._stop_reason is not None:  # came before _polling was set
                return []
            return list(consumer.poll(wait_s, max_records=wanted))
        except WakeupError:
            return []  # a stop (the loop's top says which)
        except RecordDeserializationError as exc:
            _reject_undeserializable(consumer, exc, tally)
            return []
        finally:
            self._polling = False

    def _batch(
        self, consumer: SyncConsumer[K, V], threads: _HandlerThreads[K, V],
        records: list[ConsumerRecord[K, V]], tally: Tally,
    ) -> Iterator[Handled[K, V]]:
        """Handle one poll's records, acknowledging each as its handler finishes.

        Their locks are kept alive meanwhile by the consumer's auto-renewal: this
        thread only waits (a handler that runs past ``share.auto.renew.max.ms``,
        or a broker that refuses RENEW, loses its record to another member,
        which the consumer reports).
        """
        pending = {id(r): r for r in records}
        for record in records:
            threads.submit(record)
        flushed, dirty = time.monotonic(), False
        stop_deadline: float | None = None
        while pending:
            if self._stop_reason is not None and stop_deadline is None:
                stop_deadline = self._begin_stop(consumer, threads, pending, tally)
                dirty = False
                continue
            if stop_deadline is not None and (self._force or time.monotonic() >= stop_deadline):
                self._abandon(consumer, pending, tally)
                return
            self._metrics.set_running(min(len(pending), self._concurrency))
            item = self._next_outcome(flushed, stop_deadline)
            if isinstance(item, Handled) and id(item.record) in pending:
                del pending[id(item.record)]
                consumer.acknowledge(item.record, item.outcome)
                tally.handled(item.outcome, item.handler_time_s)
                self._batch_size.handled(item.handler_time_s)
                dirty = True
                yield item
            if dirty and time.monotonic() - flushed >= ACK_EVERY_S:
                # Outcomes reach the broker as they come, not only with the next
                # poll: a worker that is killed hands back only what it had not finished.
                consumer.commit_async()
                flushed, dirty = time.monotonic(), False
        self._metrics.set_running(0)

    def _next_outcome(self, flushed: float, stop_deadline: float | None) -> object:
        """The next outcome, or None once it is time to flush or to give up."""
        wait_s = max(0.0, flushed + ACK_EVERY_S - time.monotonic())
        if stop_deadline is not None:
            wait_s = min(wait_s, max(0.0, stop_deadline - time.monotonic()))
        try:
            return self._outcomes.get(timeout=max(wait_s, 0.001))
        except queue.Empty:
            return None

    def _begin_stop(
        self, consumer: SyncConsumer[K, V], threads: _HandlerThreads[K, V],
        pending: dict[int, ConsumerRecord[K, V]], tally: Tally,
    ) -> float:
        """Release the records no handler started, at once; returns when the
        running handlers must have finished."""
        self._stopping.set()  # in-place retries end
        unstarted = threads.take_unstarted()
        for record in unstarted:
            del pending[id(record)]
            consumer.acknowledge(record, AcknowledgeType.RELEASE)
        tally.released_unhandled(len(unstarted))
        consumer.commit_async()
        _log.info(
            "worker stopping (%s): %d records not started released, %d handlers running "
            "(waiting %.1f s for them)", self._stop_reason, len(unstarted), len(pending),
            0.0 if self._force else self._stop_timeout_s,
        )
        return time.monotonic() + self._stop_timeout_s

    def _abandon(
        self, consumer: SyncConsumer[K, V], pending: dict[int, ConsumerRecord[K, V]],
        tally: Tally,
    ) -> None:
        """Give up on the handlers still running: release their records."""
        for record in pending.values():
            consumer.acknowledge(record, AcknowledgeType.RELEASE)
        if pending:
            _log.warning(
                "worker stopping: %d handlers still running were abandoned, their records "
                "released (they may be handled again)", len(pending),
            )
        tally.released_unhandled(len(pending), abandoned=True)
        pending.clear()

    def _call(self, record: ConsumerRecord[K, V]) -> Handled[K, V]:
        """One handler call (on a handler thread), and its outcome."""
        started = time.monotonic()
        try:
            if self._retry is not None:
                result = self._retry.copy()(self._handler, record)
            else:
                result = self._handler(record)
        except BaseException as exc:
            outcome = outcome_of(exc, self._retryable)
            if not isinstance(exc, Exception):
                # SystemExit or the like from a handler: the worker stops, and
                # raises it once closed.
                self._fatal = self._fatal or exc
                self._request_stop(type(exc).__name__, False)
            return Handled(record, outcome, None, exc, time.monotonic() - started)
        return Handled(record, AcknowledgeType.ACCEPT, result, None, time.monotonic() - started)


def _real_consumer(config: dict[str, object]) -> SyncConsumer[Any, Any]:
    return ShareConsumer(config)


def _commit(consumer: SyncConsumer[Any, Any]) -> None:
    """The last acknowledgements, committed before the consumer closes."""
    try:
        results = consumer.commit_sync(timeout=COMMIT_TIMEOUT_S)
    except WakeupError:  # a stop's wakeup that no poll took
        results = consumer.commit_sync(timeout=COMMIT_TIMEOUT_S)
    for partition, error in results.items():
        if error is not None:
            _log.warning("acknowledgements of %s failed: %s (its records come back)",
                         partition, error)


def _reject_undeserializable(
    consumer: SyncConsumer[Any, Any], exc: RecordDeserializationError, tally: Tally,
) -> None:
    """A record that cannot be deserialized never reaches the handler: REJECT it."""
    _log.warning("rejecting %s-%d offset %d: %s", exc.topic, exc.partition, exc.offset, exc)
    consumer.acknowledge_offset(exc.topic, exc.partition, exc.offset, AcknowledgeType.REJECT)
    tally.handled(AcknowledgeType.REJECT, 0.0)
