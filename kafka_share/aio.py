"""``AsyncShareConsumer``: a Kafka share-group consumer for asyncio applications.

The same consumer as :class:`~kafka_share.ShareConsumer` (configuration,
deserializers, errors, metrics, acknowledgement semantics: the application-side
logic is shared, :mod:`kafka_share._app.core`), with no thread: the sans-IO
engine is driven by the event loop the consumer was created on
(:mod:`kafka_share._net.aio`). Sockets are watched with the loop's reader and
writer callbacks, timers are ``call_at``, and the calls that wait for the
broker are coroutines.

Cancellation never loses a record or an acknowledgement: a cancelled ``poll``
keeps what it had collected for the next ``poll``; a cancelled ``commit_sync``
leaves its acknowledgements with the engine, which still sends them (their
outcome reaches the acknowledgement commit callback).
"""

from __future__ import annotations

import asyncio
import re
import threading
import time
import uuid
from collections.abc import AsyncIterator, Callable, Collection, Iterator, Mapping
from contextlib import AbstractContextManager
from typing import Any, Generic, TypeVar

from kafka_share._app.checks import (
    _FOREVER_MS,
    CLOSED,
    _check_max_records,
    _now_ms,
    _poll_timeout_ms,
    _timeout_ms,
    in_callback_message,
)
from kafka_share._app.collector import columnar_helpers as _columnar
from kafka_share._app.core import (
    _COMPLETABLE,
    _DEFAULT_CLOSE_TIMEOUT_S,
    _FATAL_REPEAT_WAIT_MS,
    AcknowledgementCommitCallback,
    ConsumerCore,
    K,
    V,
)
from kafka_share._app.ownership import _State
from kafka_share._handoff.events import (
    AcknowledgeOnCloseEvent,
    AcknowledgeSyncEvent,
    AcksByPartition,
    CompletableEvent,
    FetchEvent,
    LeaveGroupEvent,
)
from kafka_share._net.aio import AsyncEngineShell
from kafka_share._net.security_checks import validate_supported
from kafka_share.consumer import ShareConsumer, _instance_id
from kafka_share.errors import IllegalStateError, KafkaError, WakeupError
from kafka_share.models import (
    AcknowledgeType,
    ConsumerRecord,
    ConsumerRecords,
    TopicIdPartition,
    TopicPartition,
)

__all__ = ["AsyncShareConsumer"]

#: A poll collects at most this many records between two yields to the loop.
SLICE_RECORDS = 500
#: ... and yields only once this long has passed since the loop last had a turn
#: (across polls: back-to-back polls that never wait must not starve the other
#: tasks), so a small batch costs no extra loop iteration.
SLICE_MS = 2


_F = TypeVar("_F", bound=Callable[..., Any])


def _doc_of(sync: Callable[..., Any]) -> Callable[[_F], _F]:
    """Give a call the docstring of ``ShareConsumer``'s same call: the two facades'
    synchronous calls behave alike, so their text is written once, in consumer.py."""

    def document(method: _F) -> _F:
        method.__doc__ = sync.__doc__
        return method

    return document


class AsyncShareConsumer(Generic[K, V]):
    """A consumer in a Kafka share group (KIP-932) for asyncio.

    Created inside a running event loop, and used from that loop's thread::

        async with AsyncShareConsumer({"bootstrap.servers": "localhost:9092",
                                       "group.id": "workers"}) as consumer:
            await consumer.subscribe(["orders"])
            async for record in consumer:
                await handle(record)

    It takes the same configuration, deserializers and acknowledgement modes
    as :class:`~kafka_share.ShareConsumer`, raises the same errors and keeps the
    same metrics. ``subscribe``, ``unsubscribe``, ``poll``, ``commit_sync`` and
    ``close`` are coroutines; ``acknowledge``, ``acknowledge_offset``,
    ``commit_async`` and ``wakeup`` are plain methods.

    One task uses it at a time: while a coroutine of the consumer is awaiting
    (say ``poll``), another task calling it gets ``IllegalStateError``, except
    :meth:`wakeup` (from any thread) and :meth:`close` (which ends the pending
    call with ``WakeupError`` and then closes).

    Network I/O runs in the event loop's callbacks, so heartbeats and
    acknowledgements keep flowing while the application awaits other work;
    code that *blocks* the loop stops them. A loop blocked longer than the
    heartbeat interval is logged at WARNING; longer than the group's session
    timeout (``group.share.session.timeout.ms`` on the broker, 45 s by default),
    and the broker fences this member and gives its records to other consumers.

    Raises:
        ConfigError: a configuration key or value is invalid; the message names it.
        RuntimeError: no event loop is running in this thread.
    """

    def __init__(
        self,
        config: Mapping[str, object] | None = None,
        /,
        *,
        key_deserializer: Callable[[bytes], K] | None = None,
        value_deserializer: Callable[[bytes], V] | None = None,
        **kwargs: object,
    ) -> None:
        try:
            loop = asyncio.get_running_loop()
        except RuntimeError:
            raise RuntimeError(
                "AsyncShareConsumer must be created inside a running event loop (in a "
                "coroutine); use ShareConsumer outside asyncio"
            ) from None
        core: ConsumerCore[K, V] = ConsumerCore(
            config, key_deserializer, value_deserializer, kwargs,
            validate=validate_supported, sliced_decoding=True,
        )
        #: the state and logic shared with ShareConsumer
        self._core = core
        self._loop = loop
        self._shell = AsyncEngineShell(
            config=core._config,
            client_id=core._client_id,
            fetch_buffer=core._fetch_buffer,
            metrics=core._metrics,
            loop=loop,
        )
        self._waiting = _TaskWaiting(self._shell, threading.get_ident())
        core._attach(self._shell, self._waiting)
        # acknowledge() runs once per record in explicit mode: the instance calls
        # the core's method directly (its fast path), not through a second call.
        self.acknowledge = core.acknowledge  # type: ignore[method-assign]
        #: records a cancelled poll had collected: the next poll returns them first
        self._carry: ConsumerRecords[K, V] | None = None
        #: ``async for``: the batch being iterated and the record handed out last
        self._iter: Iterator[ConsumerRecord[K, V]] | None = None
        self._iter_last: ConsumerRecord[K, V] | None = None
        #: the poll running is the one ``async for`` asked for
        self._iterating = False
        self._turns = _LoopTurns(loop)
        self._shell.start()
        core._state = _State.OPEN
        core._log.debug("async share consumer created")

    # -- context manager and iteration -------------------------------------------------

    async def __aenter__(self) -> AsyncShareConsumer[K, V]:
        self._core._check_open()
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    def __del__(self) -> None:
        # Dropped without close(): do not leave sockets registered with the loop.
        core = getattr(self, "_core", None)
        if core is not None and core._state is _State.OPEN:
            try:
                if threading.get_ident() == self._waiting.loop_thread:
                    self._shell.stop()
                else:
                    self._loop.call_soon_threadsafe(self._shell.stop)
            except Exception:
                pass

    def __aiter__(self) -> AsyncIterator[ConsumerRecord[K, V]]:
        return self

    async def __anext__(self) -> ConsumerRecord[K, V]:
        """The next record, polling (without a timeout) when the batch is used up.

        In implicit mode the record handed out before is accepted when the
        iteration moves on (so a loop left with ``break`` or an exception does not
        accept the record it was processing: ``close`` releases it). In explicit
        mode each record must be acknowledged before the next ``poll``, as usual.
        The iteration ends when the consumer is closed (also by another task).
        """
        core = self._core
        last, self._iter_last = self._iter_last, None
        if last is not None and not core._explicit and core._state is _State.OPEN:
            with core._owned():
                core._in_flight.acknowledge(last, AcknowledgeType.ACCEPT)
        while True:
            if self._iter is not None:
                record = next(self._iter, None)
                if record is not None:
                    self._iter_last = record
                    return record
                self._iter = None
            if core._state is not _State.OPEN:
                raise StopAsyncIteration
            self._iterating = True
            try:
                records = await self.poll()
            except WakeupError:
                if core._close_requested or core._state is not _State.OPEN:
                    raise StopAsyncIteration from None
                raise
            finally:
                self._iterating = False
            self._iter = iter(records)

    def __repr__(self) -> str:
        return self._core._repr(type(self).__name__)

    # -- the single-task guard ------------------------------------------------------------

    def _awaiting(self, call: str, *, allow_closing: bool = False) -> _AwaitingCall:
        return _AwaitingCall(self._core, self._waiting, call, allow_closing)

    # -- identity ------------------------------------------------------------------------

    @property
    def client_id(self) -> str:
        return self._core._client_id

    @property
    def group_id(self) -> str:
        return self._core._config.group_id

    @property
    def member_id(self) -> str:
        """The member id this consumer generated for itself (kept for its lifetime)."""
        return self._core._shell.member_id

    @property
    def acquisition_lock_timeout_ms(self) -> int | None:
        """The acquisition lock duration the broker reported most recently, if any."""
        return self._core._rounds.acquisition_lock_timeout_ms

    # -- subscription -----------------------------------------------------------------------

    async def subscribe(
        self,
        topics: Collection[str] | None = None,
        *,
        pattern: str | re.Pattern[str] | None = None,
    ) -> None:
        """Subscribe to ``topics``, or to the topics matching ``pattern``, replacing
        the previous subscription (an empty collection of topics unsubscribes).
        The group is joined on the next :meth:`poll`.

        ``pattern`` works as in :meth:`ShareConsumer.subscribe
        <kafka_share.ShareConsumer.subscribe>`: resolved on the client every
        ``metadata.max.age.ms``, whole names matched (:func:`re.fullmatch`),
        internal topics never; while nothing matches the consumer stays out of
        the group.

        Raises:
            InvalidTopicError: a name is not a legal Kafka topic name; the message names it.
            TypeError: both ``topics`` and ``pattern`` given, or neither.
            ValueError: ``pattern`` is not a valid regular expression, or is empty.
        """
        core = self._core
        async with self._awaiting("subscribe"):
            event = core._subscribe_event(topics, pattern)
            if event is None:
                await self._unsubscribe_locked()
                return
            await self._call(event)
            core._set_subscription(event)

    async def unsubscribe(self) -> None:
        """Clear the subscription and leave the group."""
        async with self._awaiting("unsubscribe"):
            await self._unsubscribe_locked()

    def subscription(self) -> frozenset[str]:
        """The current subscription (empty if none); with a pattern, the topics it
        matched at the last metadata refresh."""
        return self._core.subscription()

    def assignment(self) -> frozenset[TopicPartition]:
        """The partitions the group's assignor gave this member, as the consumer
        last heard (empty before it has joined, and after :meth:`unsubscribe`).

        Java's share consumer has no such method: this client's extension. In a
        share group a partition may be assigned to several members at once, so
        this says where the member fetches from, not that no one else does.
        """
        return self._core.assignment()

    async def _unsubscribe_locked(self) -> None:
        core = self._core
        core._set_subscription(None)
        await self._call(LeaveGroupEvent(deadline_ms=core._api_deadline()))

    # -- polling ---------------------------------------------------------------------------

    async def poll(
        self, timeout: float | None = None, *, max_records: int | None = None
    ) -> ConsumerRecords[K, V]:
        """Fetch records, waiting up to ``timeout`` seconds for some to arrive
        (without a timeout: until records arrive, :meth:`wakeup` or :meth:`close`).

        In implicit mode the records of the previous poll are accepted first.
        A large batch is decoded in slices, yielding to the loop in between.
        Cancelling the poll loses nothing: records it had collected come back
        from the next poll.

        Raises:
            IllegalStateError: not subscribed; in explicit mode, records of the
                previous poll are not all acknowledged; another task is awaiting
                a call of this consumer.
            WakeupError: :meth:`wakeup` was called, or :meth:`close` by another task.
            RecordDeserializationError, CorruptRecordError, KafkaError: as
                :meth:`ShareConsumer.poll <kafka_share.ShareConsumer.poll>`.
        """
        core = self._core
        timeout_ms = _poll_timeout_ms(timeout)
        limit = _check_max_records(max_records)
        async with self._awaiting("poll"):
            core._check_poll_kind("poll")
            return await self._poll_call(timeout_ms, limit)

    async def poll_arrow(
        self,
        timeout: float | None = None,
        *,
        max_records: int | None = None,
        view_types: bool = False,
    ) -> Any:
        """Like :meth:`poll`, but the records come as one ``pyarrow.RecordBatch``
        built without a Python object per record (needs the ``arrow`` extra).

        Columns and rules as
        :meth:`ShareConsumer.poll_arrow <kafka_share.ShareConsumer.poll_arrow>`;
        acknowledge rows with :meth:`acknowledge_arrow` in explicit mode.
        """
        core = self._core
        timeout_ms = _poll_timeout_ms(timeout)
        limit = _check_max_records(max_records)
        async with self._awaiting("poll_arrow"):
            core._check_poll_kind("poll_arrow")
            records: Any = await self._poll_call(timeout_ms, limit)
            return _columnar().to_record_batch(records, view_types=view_types)

    async def _poll_call(
        self, timeout_ms: int | None, max_records: int | None
    ) -> ConsumerRecords[K, V]:
        core = self._core
        if self._turns.due():
            # Polls that find their records buffered never wait, so an
            # application polling in a loop would starve the other tasks: they
            # run first. Before this poll's rounds, not after: the receive marks
            # those raise must stay raised while the application is away.
            await asyncio.sleep(0)
            self._turns.ran()
        if not self._iterating:
            # A poll of its own ends an ``async for``'s batch: the next
            # iteration starts with this poll's records.
            self._iter = None
            self._iter_last = None
        started = core._rounds.begin(timeout_ms, max_records)
        records: ConsumerRecords[K, V] = core._no_records()
        try:
            if self._carry is not None:
                records, self._carry = self._carry, None
                return records
            if core._background.repeats_fatal():
                await self._wait_until(
                    started + (_FATAL_REPEAT_WAIT_MS if timeout_ms is None else timeout_ms)
                )
            records = await self._poll(
                started + (_FOREVER_MS if timeout_ms is None else timeout_ms)
            )
        finally:
            core._rounds.end(records)
            self._shell.flush()
            self._turns.watch()
        return records

    async def _wait_until(self, deadline_ms: int) -> None:
        while True:
            self._core._maybe_raise_wakeup()
            remaining_ms = deadline_ms - _now_ms()
            if remaining_ms <= 0:
                return
            await self._shell.wait(remaining_ms)

    async def _poll(self, deadline: int) -> ConsumerRecords[K, V]:
        core = self._core
        core._start_poll()
        core._rounds.fetch_sent = False
        while True:
            core._maybe_raise_wakeup()
            records, remaining = core._poll_outcome(await self._poll_sliced(), deadline)
            if records is not None:
                return records
            if not core._fetch_buffer.has_data() and not core._fetch_buffer.has_background():
                self._shell.flush()  # the engine must see this poll before it waits
                waited_from = _now_ms()
                await self._shell.wait(core._poll_wait_ms(remaining))
                self._turns.ran()
                core._rounds.waited_ms += _now_ms() - waited_from
                core._poll_still_waiting()
            core._background.raise_error()
            core._handle_completions()

    async def _poll_sliced(self) -> ConsumerRecords[K, V] | None:
        """Collect this poll's records in slices of :data:`SLICE_RECORDS` (decoding
        one record batch, or a piece of a large one, per slice), yielding to the
        loop between slices once :data:`SLICE_MS` have passed since the loop last
        had a turn. If the poll is cancelled at a yield, what it collected waits
        for the next poll."""
        core = self._core
        first: ConsumerRecords[K, V] | None = None
        parts: dict[TopicIdPartition, list[ConsumerRecord[K, V]]] = {}
        total = 0
        max_records = core._config.max_poll_records
        rounds = core._rounds
        if rounds.limit is not None:
            max_records = min(max_records, rounds.limit)
        turns = self._turns
        collector = core._collector
        while True:
            steps = collector.decode_steps
            got = rounds.poll_once(min(SLICE_RECORDS, max_records - total), have_records=total > 0)
            # A slice of a large record batch decoded, no record to hand out yet.
            decoding = got is None and collector.decode_steps != steps
            if got is not None:
                if first is None:
                    first = got  # the common case: one slice, returned as it is
                else:
                    if not parts:
                        _merge_into(parts, first)
                    _merge_into(parts, got)
                total += got.count()
            if (
                (got is None and not decoding)
                or total >= max_records
                or rounds.pending_error is not None
                or core._in_flight.has_renewing()
                or not core._collector.has_buffered()
            ):
                break
            if turns.due():
                try:
                    await asyncio.sleep(0)
                except asyncio.CancelledError:
                    self._carry = type(first)(parts) if parts and first is not None else first
                    raise
                turns.ran()
        return type(first)(parts) if parts and first is not None else first

    @_doc_of(ShareConsumer.metrics)
    def metrics(self) -> dict[str, float]:
        return self._core.metrics()

    @_doc_of(ShareConsumer.client_instance_id)
    async def client_instance_id(self, timeout: float | None = None) -> uuid.UUID | None:
        identity, wait_s = self._core.telemetry_identity(timeout)
        if not identity.settled.is_set():
            settled = asyncio.get_running_loop().create_future()

            def done() -> None:
                if not settled.done():
                    settled.set_result(None)

            # The shell settles the identity on this loop's thread.
            identity.when_settled(done)
            try:
                await asyncio.wait_for(settled, wait_s)
            except TimeoutError:
                pass
        return _instance_id(identity)

    @_doc_of(ShareConsumer.prefetch)
    def prefetch(self, max_records: int | None = None) -> bool:
        return self._core.prefetch(max_records)

    # -- acknowledging ---------------------------------------------------------------------

    @_doc_of(ShareConsumer.acknowledge)
    def acknowledge(
        self, record: ConsumerRecord[K, V], type: AcknowledgeType = AcknowledgeType.ACCEPT
    ) -> None:
        # Instances call the core's method directly (bound in __init__).
        self._core.acknowledge(record, type)

    @_doc_of(ShareConsumer.acknowledge_offset)
    def acknowledge_offset(
        self,
        topic: str,
        partition: int,
        offset: int,
        type: AcknowledgeType = AcknowledgeType.ACCEPT,
    ) -> None:
        self._core.acknowledge_offset(topic, partition, offset, type)

    @_doc_of(ShareConsumer.acknowledge_arrow)
    def acknowledge_arrow(
        self, batch: Any, type: Any = AcknowledgeType.ACCEPT
    ) -> None:
        self._core.acknowledge_arrow(batch, type)

    # -- committing ------------------------------------------------------------------------

    async def commit_sync(
        self, timeout: float | None = None
    ) -> dict[TopicIdPartition, KafkaError | None]:
        """Send pending acknowledgements and wait for the broker's answer.

        As :meth:`ShareConsumer.commit_sync <kafka_share.ShareConsumer.commit_sync>`.
        Cancelling it loses no acknowledgement: they are on their way already, and
        their outcome reaches the acknowledgement commit callback.

        Raises:
            WakeupError: :meth:`wakeup` was called.
            KafkaTimeoutError: no answer within ``timeout`` seconds
                (default ``default.api.timeout.ms``).
        """
        core = self._core
        timeout_ms = _timeout_ms(timeout, core._config.default_api_timeout_ms, "commit_sync")
        async with self._awaiting("commit_sync"):
            acks = core._commit_acks()
            if not acks:
                return {}
            result = await self._call(
                AcknowledgeSyncEvent(deadline_ms=_now_ms() + timeout_ms, acks=acks)
            )
            core._handle_completions()
            assert isinstance(result, dict)
            return result

    def commit_async(self) -> None:
        """Send pending acknowledgements without waiting; results reach the callback."""
        self._core.commit_async()

    @_doc_of(ShareConsumer.set_acknowledgement_commit_callback)
    def set_acknowledgement_commit_callback(
        self, callback: AcknowledgementCommitCallback | None
    ) -> None:
        self._core.set_acknowledgement_commit_callback(callback)

    # -- wakeup and close ------------------------------------------------------------------

    def wakeup(self) -> None:
        """Make the pending (or next) ``poll`` or ``commit_sync`` raise ``WakeupError``.
        Safe from any thread and from a signal handler."""
        self._core._wakeup_requested = True
        self._shell.wake()

    async def close(self, timeout: float | None = None) -> None:
        """Send pending acknowledgements, close share sessions and leave the group,
        within ``timeout`` seconds (default 30, capped by ``request.timeout.ms``).

        A call of this consumer awaiting in another task (typically ``poll``) ends
        first with ``WakeupError``. Records of the last poll that were not
        acknowledged are released by the broker. Closing twice is harmless.
        """
        core = self._core
        timeout_ms = _timeout_ms(timeout, int(_DEFAULT_CLOSE_TIMEOUT_S * 1000), "close")
        if core._state is not _State.OPEN:
            return
        budget_ms = min(timeout_ms, core._config.request_timeout_ms)
        busy = self._waiting.busy
        if busy is not None and busy is not asyncio.current_task():
            core._close_requested = True
            self._shell.wake()
            try:
                await asyncio.wait_for(self._waiting.idle.wait(), budget_ms / 1000)
            except TimeoutError:
                pass
            if core._state is not _State.OPEN:
                return
        async with self._awaiting("close", allow_closing=True):
            deadline = _now_ms() + budget_ms
            try:
                acks = core._close_acks()
                for event, what in (
                    (AcknowledgeOnCloseEvent(deadline_ms=deadline, acks=acks),
                     "acknowledgements on close"),
                    (LeaveGroupEvent(deadline_ms=deadline, on_close=True),
                     "leaving the group on close"),
                ):
                    try:
                        await self._call(event, wakeable=False)
                    except KafkaError as exc:
                        core._log.info("%s did not complete: %s", what, exc)
                core._handle_completions()
            finally:
                self._shell.stop()
                core._closed()

    # -- internals -------------------------------------------------------------------------

    async def _call(self, event: CompletableEvent, *, wakeable: bool = True) -> object:
        """Submit a completable event and await its result (bounded by its deadline;
        the shell completes it by then, the slack only guards against a bug)."""
        core = self._core
        assert isinstance(event, _COMPLETABLE)
        core._submit(event)
        give_up_ms = event.deadline_ms + 500
        while True:
            remaining_ms = core._call_wait_ms(event, give_up_ms, wakeable=wakeable)
            if remaining_ms is None:
                return event.future.result()
            await self._shell.wait(remaining_ms)

    @property
    def blocked_loop_max_ms(self) -> int:
        """The longest the event loop was seen blocked (ms, 0 if never), as
        measured by the consumer's timer."""
        return self._shell.max_blocked_ms


class _LoopTurns:
    """When the consumer's task last let the event loop run other tasks, as far
    as it knows: when one of its own awaits suspended it, or when the callback
    :meth:`watch` schedules ran (the application yielded between two polls)."""

    __slots__ = ("_loop", "_watching", "at")

    def __init__(self, loop: asyncio.AbstractEventLoop) -> None:
        self._loop = loop
        self._watching = False
        #: ``time.monotonic()`` of the last turn known (not ``loop.time()``:
        #: uvloop caches it per iteration)
        self.at = time.monotonic()

    def due(self) -> bool:
        """The loop has had no turn for :data:`SLICE_MS`."""
        return (time.monotonic() - self.at) * 1000 >= SLICE_MS

    def ran(self) -> None:
        """The task was just suspended: the loop had its turn."""
        self.at = time.monotonic()

    def watch(self) -> None:
        """Note the loop's next turn, whoever yields to it (one callback at a time)."""
        if not self._watching:
            self._watching = True
            self._loop.call_soon(self._turned)

    def _turned(self) -> None:
        self._watching = False
        self.at = time.monotonic()


def _merge_into(
    parts: dict[TopicIdPartition, list[ConsumerRecord[K, V]]], records: ConsumerRecords[K, V]
) -> None:
    for tip in records.partitions():
        parts.setdefault(tip, []).extend(records.records(tip))


def _task_or_none() -> asyncio.Task[Any] | None:
    try:
        return asyncio.current_task()
    except RuntimeError:
        return None


class _TaskWaiting:
    """How ``AsyncShareConsumer`` waits (:class:`~kafka_share._app.core.FacadeWaiting`):
    in a task of the loop it was created on, one task at a time inside an
    awaiting call."""

    __slots__ = ("_shell", "busy", "busy_call", "idle", "loop_thread")

    def __init__(self, shell: AsyncEngineShell, loop_thread: int) -> None:
        self._shell = shell
        self.loop_thread = loop_thread
        #: the task inside an awaiting call, and the call's name
        self.busy: asyncio.Task[Any] | None = None
        self.busy_call = ""
        self.idle = asyncio.Event()
        self.idle.set()

    def owned(
        self, core: ConsumerCore[Any, Any], allow_closing: bool
    ) -> AbstractContextManager[None]:
        return _TaskOwnership(core, self, allow_closing)

    def closed_meanwhile(self) -> str:
        return f"{self.busy_call}() was interrupted by close() from another task"

    def send_fetch_ahead(
        self, acks: AcksByPartition, max_records: int | None, ack_deadline_ms: int
    ) -> None:
        """The fetch ahead goes on the wire now, before this task decodes the
        response it holds (nothing to hand over: the loop runs on this thread)."""
        self._shell.submit(FetchEvent(acks, ahead=True, ack_deadline_ms=ack_deadline_ms,
                                      max_records=max_records))


class _TaskOwnership:
    """The guard of the plain calls: the loop's thread, no other task awaiting a call,
    not from the commit callback, not closed."""

    __slots__ = ("_allow_closing", "_consumer", "_waiting")

    def __init__(
        self, consumer: ConsumerCore[Any, Any], waiting: _TaskWaiting, allow_closing: bool
    ) -> None:
        self._consumer = consumer
        self._waiting = waiting
        self._allow_closing = allow_closing

    def __enter__(self) -> None:
        c = self._consumer
        w = self._waiting
        if threading.get_ident() != w.loop_thread:
            raise IllegalStateError(
                "AsyncShareConsumer must be used from its event loop's thread (only "
                "wakeup() may be called from other threads)"
            )
        if c._in_callback:
            raise IllegalStateError(in_callback_message("AsyncShareConsumer"))
        if c._state is not _State.OPEN and not (
            self._allow_closing and c._state is _State.CLOSING
        ):
            raise IllegalStateError(CLOSED)
        if w.busy is not None and w.busy is not _task_or_none():
            raise IllegalStateError(
                f"AsyncShareConsumer is in use by another task (awaiting {w.busy_call}()): "
                "one task at a time may use it (wakeup() and close() excepted)"
            )

    def __exit__(self, *exc: object) -> None:
        pass


class _AwaitingCall:
    """Marks the consumer busy while a coroutine of it awaits (after the checks of
    :class:`_TaskOwnership`)."""

    __slots__ = ("_allow_closing", "_call", "_consumer", "_outer", "_waiting")

    def __init__(self, consumer: ConsumerCore[Any, Any], waiting: _TaskWaiting, call: str,
                 allow_closing: bool) -> None:
        self._consumer = consumer
        self._waiting = waiting
        self._call = call
        self._allow_closing = allow_closing
        self._outer = False

    async def __aenter__(self) -> None:
        c = self._consumer
        w = self._waiting
        _TaskOwnership(c, w, self._allow_closing).__enter__()
        if w.busy is None:
            self._outer = True
            w.busy = asyncio.current_task()
            w.busy_call = self._call
            # Plain calls from other tasks take the checked path (see acknowledge).
            c._owner = -1
            w.idle.clear()

    async def __aexit__(self, *exc: object) -> None:
        if self._outer:
            w = self._waiting
            w.busy = None
            w.busy_call = ""
            self._consumer._owner = None
            w.idle.set()
