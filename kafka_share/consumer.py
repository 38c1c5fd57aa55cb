"""``ShareConsumer``: the application-thread facade of a Kafka share-group consumer.

Theory of operation
-------------------
Two threads. The *application thread* (whoever calls ``poll``) owns this
object, the batch of records it handed out (:class:`InFlightBatch`) and the
acknowledgement-commit callback. A *network thread* owns every socket and the
share engine: metadata, coordinator discovery, the ShareGroupHeartbeat
membership state machine, one share session per broker, ShareFetch and
ShareAcknowledge.

They meet at three points only:

* an event queue (app -> network), see :mod:`kafka_share._handoff.events`;
* the fetch buffer (network -> app), which also carries background events
  (errors to raise, acknowledgement results);
* futures with deadlines for the calls that wait for an answer
  (``subscribe``, ``commit_sync``, ``unsubscribe``, ``close``). The network
  thread completes each by its deadline, so no call waits past its timeout.

Acknowledgements are recorded locally by ``acknowledge`` and shipped on the
next ``poll`` (riding on the next ShareFetch to the node that delivered the
records, or as a standalone ShareAcknowledge), ``commit_sync``,
``commit_async`` or ``close``.
"""

from __future__ import annotations

import copy
import re
import threading
import time
import uuid
from collections.abc import Callable, Collection, Mapping
from contextlib import AbstractContextManager
from typing import Any, Generic

from kafka_share._app.checks import (
    _FOREVER_MS,
    _check_max_records,
    _now_ms,
    _poll_timeout_ms,
    _timeout_ms,
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
from kafka_share._app.ownership import _Ownership, _State
from kafka_share._handoff.events import (
    AcknowledgeOnCloseEvent,
    AcknowledgeSyncEvent,
    AcksByPartition,
    CompletableEvent,
    FetchEvent,
    LeaveGroupEvent,
)
from kafka_share._handoff.telemetry import TelemetryIdentity
from kafka_share._net.security_checks import validate_supported
from kafka_share._net.thread import NetworkThread
from kafka_share.errors import KafkaError
from kafka_share.models import (
    AcknowledgeType,
    ConsumerRecord,
    ConsumerRecords,
    TopicIdPartition,
    TopicPartition,
)

__all__ = ["AcknowledgementCommitCallback", "ShareConsumer"]

#: how often close() from another thread checks that the blocked call has left
_CLOSE_HANDOVER_S = 0.005
#: Longest a poll waits for the network thread to send a fetch ahead.
_FETCH_HANDOFF_S = 0.002
#: a poll that runs the I/O loop and still has records to hand out goes round the
#: loop first only if it has not gone round for this long
_ROUND_EVERY_MS = 10


class ShareConsumer(Generic[K, V]):
    """A consumer in a Kafka share group (KIP-932), like Java's ``KafkaShareConsumer``.

    Configuration takes Kafka's dotted keys, Python keyword names, or both::

        ShareConsumer({"bootstrap.servers": "localhost:9092", "group.id": "workers"})
        ShareConsumer(bootstrap_servers="localhost:9092", group_id="workers",
                      share_acknowledgement_mode="explicit")

    Records are acknowledged implicitly (ACCEPT on the next ``poll`` or commit)
    unless ``share.acknowledgement.mode`` is ``explicit``, in which case every
    record returned by ``poll`` must be acknowledged before the next ``poll``.

    A ``ShareConsumer`` is not thread-safe: one thread uses it, except for
    :meth:`wakeup`, which any thread may call. Use it as a context manager or
    call :meth:`close`.

    Raises:
        ConfigError: a configuration key or value is invalid; the message names it.
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
        core: ConsumerCore[K, V] = ConsumerCore(
            config, key_deserializer, value_deserializer, kwargs, validate=validate_supported
        )
        #: the state and logic shared with AsyncShareConsumer
        self._core = core
        self._thread: NetworkThread = NetworkThread(
            config=core._config,
            client_id=core._client_id,
            fetch_buffer=core._fetch_buffer,
            metrics=core._metrics,
        )
        core._attach(self._thread, _ThreadWaiting(self._thread))
        # acknowledge() runs once per record in explicit mode: the instance calls
        # the core's method directly (its fast path), not through a second call.
        self.acknowledge = core.acknowledge  # type: ignore[method-assign]
        self._thread.start()
        core._state = _State.OPEN
        core._log.debug("share consumer created")

    # -- context manager -------------------------------------------------------

    def __enter__(self) -> ShareConsumer[K, V]:
        self._core._check_open()
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __del__(self) -> None:
        # A consumer dropped without close() must not leave a thread behind.
        core = getattr(self, "_core", None)
        if core is not None and core._state is _State.OPEN:
            try:
                self._thread.stop_now()
            except Exception:
                pass

    def __repr__(self) -> str:
        return self._core._repr(type(self).__name__)

    # -- identity --------------------------------------------------------------

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

    # -- subscription ----------------------------------------------------------

    def subscribe(
        self,
        topics: Collection[str] | None = None,
        *,
        pattern: str | re.Pattern[str] | None = None,
    ) -> None:
        """Subscribe to ``topics``, or to the topics matching ``pattern``, replacing
        the previous subscription.

        An empty collection of topics is the same as :meth:`unsubscribe`. The
        group is joined on the next :meth:`poll`.

        ``pattern`` (a regular expression, as a string or compiled with
        :func:`re.compile`) is this client's extension: Kafka's share consumer
        subscribes by names only. It is resolved on the client, as Java's classic
        ``KafkaConsumer.subscribe(Pattern)`` does: every ``metadata.max.age.ms``
        the consumer lists all topics (a Metadata request for all topics; those it
        may not DESCRIBE are not listed) and subscribes by the names that match, so
        a topic created later is joined, and a deleted one left, within
        ``metadata.max.age.ms``. A name matches when the whole of it matches
        (:func:`re.fullmatch`, Java's ``Pattern.matcher(topic).matches()``):
        ``"orders"`` matches ``orders`` only, ``"orders-.*"`` every topic starting
        with ``orders-``. Internal topics (``__consumer_offsets``,
        ``__share_group_state``, any name starting with ``__``) are never matched.
        While nothing matches, the consumer stays out of the group (the broker
        refuses a member without topics), and its polls return no records; it
        joins at the poll after a matching topic appears. :meth:`subscription`
        returns the names matched at the last refresh (empty until the first).

        Raises:
            InvalidTopicError: a name is not a legal Kafka topic name (1 to 249 of
                ``[a-zA-Z0-9._-]``, not ``.`` or ``..``); the message names it.
            TypeError: both ``topics`` and ``pattern`` given, or neither.
            ValueError: ``pattern`` is not a valid regular expression (the message
                names it and says why), or is empty.
        """
        core = self._core
        with core._owned():
            event = core._subscribe_event(topics, pattern)
            if event is None:
                self._unsubscribe_locked()
                return
            self._call(event)
            core._set_subscription(event)


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

    def unsubscribe(self) -> None:
        """Clear the subscription and leave the group."""
        with self._core._owned():
            self._unsubscribe_locked()

    def _unsubscribe_locked(self) -> None:
        core = self._core
        core._set_subscription(None)
        self._call(LeaveGroupEvent(deadline_ms=core._api_deadline()))

    # -- polling -------------------------------------------------------------------

    def poll(
        self, timeout: float | None = None, *, max_records: int | None = None
    ) -> ConsumerRecords[K, V]:
        """Fetch records, waiting up to ``timeout`` seconds for some to arrive.

        Without a timeout, blocks until records arrive, :meth:`wakeup` is called
        (also from a signal handler), or another thread calls :meth:`close`.
        ``poll(0)`` returns at once with what is buffered.

        ``max_records``: at most this many records (and ``max.poll.records``);
        a fetch this poll sends asks the broker for no more, which with
        ``share.acquire.mode=record_limit`` means no more are acquired. Records
        already buffered beyond it stay for the next poll. With
        ``record_limit`` a poll's fetching ends with the poll: nothing is
        acquired for a poll that has returned.

        In implicit mode the records of the previous poll are accepted first.

        Raises:
            IllegalStateError: not subscribed; or, in explicit mode, records of the
                previous poll are not all acknowledged.
            WakeupError: :meth:`wakeup` was called, or :meth:`close` from another thread.
            RecordDeserializationError: a deserializer failed for a record. Unless
                acknowledged with :meth:`acknowledge_offset` first, it is released by
                the next poll or commit.
            CorruptRecordError: a record batch failed its CRC; its records were rejected.
            KafkaError: a fatal group error (authorization, group full, share groups
                not enabled on the cluster, ...). The consumer cannot recover: close
                it and create a new one. The first poll after the error raises it at
                once; every later poll raises it again after waiting out its timeout
                (1 s without a timeout), so a loop that catches it cannot spin.
        """
        core = self._core
        timeout_ms = _poll_timeout_ms(timeout)
        limit = _check_max_records(max_records)
        with core._owned():
            core._check_poll_kind("poll")
            return self._poll_call(timeout_ms, limit)

    def poll_arrow(
        self,
        timeout: float | None = None,
        *,
        max_records: int | None = None,
        view_types: bool = False,
    ) -> Any:
        """Like :meth:`poll`, but the records come as one ``pyarrow.RecordBatch``,
        built without a Python object per record (needs the ``arrow`` extra).

        Columns: ``topic`` (string), ``partition`` (int32), ``offset`` (int64),
        ``timestamp`` (timestamp[ms, UTC], null when the record has none),
        ``timestamp_type`` (int8: 0 create time, 1 log append time), ``key`` and
        ``value`` (``binary``), ``headers`` (list of key/value structs) and
        ``delivery_count`` (int32).

        ``view_types=True`` returns ``key`` and ``value`` as ``binary_view``
        columns pointing into the fetched bytes instead of copying them
        (batches of 32 records or more; smaller ones are copied once): the
        fastest form, read natively by Polars and DuckDB, but pyarrow 26's
        compute kernels (``filter``, ``take``) do not take view types yet.
        Rows are in partition order, then offset order. An empty batch (0 rows)
        when nothing arrived in time.

        In implicit mode the previous batch is accepted first, as by
        :meth:`poll`. In explicit mode acknowledge the rows with
        :meth:`acknowledge_arrow` before the next poll. A consumer uses either
        ``poll`` or ``poll_arrow``, not both. Deserializers do not apply (keys
        and values stay bytes): a consumer configured with one refuses.

        Raises:
            IllegalStateError: as :meth:`poll`; also the consumer was polled with
                ``poll()`` before, or has a key or value deserializer.
            ImportError: pyarrow or numpy is not installed.
            WakeupError, CorruptRecordError, KafkaError: as :meth:`poll`.
        """
        core = self._core
        timeout_ms = _poll_timeout_ms(timeout)
        limit = _check_max_records(max_records)
        with core._owned():
            core._check_poll_kind("poll_arrow")
            records: Any = self._poll_call(timeout_ms, limit)
            return _columnar().to_record_batch(records, view_types=view_types)

    def _poll_call(self, timeout_ms: int | None, max_records: int | None) -> ConsumerRecords[K, V]:
        core = self._core
        started = core._rounds.begin(timeout_ms, max_records)
        records: ConsumerRecords[K, V] = core._no_records()
        try:
            if core._background.repeats_fatal():
                self._wait_until(
                    started + (_FATAL_REPEAT_WAIT_MS if timeout_ms is None else timeout_ms)
                )
            records = self._poll(started + (_FOREVER_MS if timeout_ms is None else timeout_ms))
        finally:
            core._rounds.end(records)
            self._thread.flush()
        return records


    def _wait_until(self, deadline_ms: int) -> None:
        """Sleep until ``deadline_ms``; :meth:`wakeup` (or a close from another
        thread) ends it with ``WakeupError``."""
        core = self._core
        pipe = core._fetch_buffer.wake_pipe
        while True:
            pipe.drain()  # before the checks: a byte written after them ends the wait
            core._maybe_raise_wakeup()
            remaining_ms = deadline_ms - _now_ms()
            if remaining_ms <= 0:
                return
            pipe.wait(remaining_ms / 1000.0)

    def _poll(self, deadline: int) -> ConsumerRecords[K, V]:
        # This thread runs the I/O loop while it polls (see _net/loop_owner.py).
        thread = self._thread
        runs_loop = thread.enter_loop()
        try:
            if runs_loop and (
                not self._core._collector.has_buffered()
                or _now_ms() - thread.last_round_ms >= _ROUND_EVERY_MS
            ):
                # What arrived while the application processed the last batch. Not
                # while records are still buffered to hand out (a round costs tens
                # of µs: once per 500 small records it was a sixth of the CPU),
                # unless the loop has not gone round for _ROUND_EVERY_MS (timers).
                thread.drive(0)
            records = self._poll_loop(deadline)
            thread.run_owed_round()
            return records
        finally:
            if runs_loop:
                thread.leave_loop()

    def _poll_loop(self, deadline: int) -> ConsumerRecords[K, V]:
        core = self._core
        core._start_poll()
        rounds = core._rounds
        rounds.fetch_sent = False
        while True:
            core._maybe_raise_wakeup()
            adds = core._fetch_buffer.adds
            records, remaining = core._poll_outcome(rounds.poll_once(rounds.limit), deadline)
            if records is not None:
                return records
            self._thread.flush()  # the engine must see this poll before it waits
            waited_from = _now_ms()
            wait_ms = core._poll_wait_ms(remaining)
            if not self._drive_until_news(wait_ms, adds):
                core._fetch_buffer.await_not_empty(wait_ms / 1000.0)
            rounds.waited_ms += _now_ms() - waited_from
            core._poll_still_waiting()
            core._background.raise_error()
            core._handle_completions()

    def _drive_until_news(self, wait_ms: int, adds: int) -> bool:
        """Run the I/O loop on this thread until a response brings records (the
        buffer's ``adds`` moved past ``adds``) or an error, :meth:`wakeup` or a
        close is called, or ``wait_ms`` passes. Buffered records the poll could
        not hand out (renewed records come first) are no news: the loop waits for
        the answer that frees them instead of spinning. False when this thread
        does not run the loop (the caller waits for the network thread)."""
        core = self._core
        buffer = core._fetch_buffer
        thread = self._thread
        end = _now_ms() + wait_ms
        while not (buffer.adds != adds or buffer.has_background() or core._wakeup_requested
                   or core._close_requested):
            left = end - _now_ms()
            # At least one round, even for poll(0): it puts this poll's fetch on
            # the wire (nothing else would until the next poll).
            if not thread.drive(max(0, left)):
                return False
            if left <= 0:
                break
        return True

    def metrics(self) -> dict[str, float]:
        """A snapshot of this consumer's metrics, under Java's share-consumer names
        (``records-consumed-rate``, ``fetch-latency-avg``, ``heartbeat-rate``, ...;
        see :data:`kafka_share.metrics.METRIC_GROUPS`). NaN where nothing was measured.
        Safe to call from any thread.
        """
        return self._core.metrics()

    def client_instance_id(self, timeout: float | None = None) -> uuid.UUID | None:
        """The id the cluster gave this client for its telemetry (KIP-714), as
        Java's ``clientInstanceId``: the key under which the cluster's metrics
        reporter files what this consumer pushes.

        Waits up to ``timeout`` seconds (default ``default.api.timeout.ms``; 0: no
        wait) for the cluster's first telemetry answer, and returns None if none
        came by then (as Java returns null). Safe to call from any thread.

        Raises:
            IllegalStateError: ``enable.metrics.push`` is off, or the consumer is closed.
            UnsupportedVersionError: the cluster does not offer telemetry (its
                brokers have no metrics reporter that receives it).
            KafkaError: the cluster refused this client's telemetry.
        """
        identity, wait_s = self._core.telemetry_identity(timeout)
        identity.settled.wait(wait_s)
        return _instance_id(identity)

    def prefetch(self, max_records: int | None = None) -> bool:
        """Ask the broker for the next poll's records now, while this thread
        works on the last ones: one ShareFetch, answered at once with what the
        broker can acquire (it does not wait for records to arrive), carrying
        the acknowledgements made so far. The next :meth:`poll` hands its
        records out, or fetches as usual if it brought none.

        Meant for ``share.acquire.mode=record_limit``, which otherwise acquires
        only inside a poll: with ``max_records`` the broker acquires no more
        than that, so an application that knows how many records it still
        wants (a batch with a size) overlaps the round trip without taking
        records it will not process. Records so fetched are locked for this
        consumer from now on: call it only when a poll follows soon (closing
        the consumer releases them).

        Returns False, sending nothing, when records are still buffered for the
        next poll (a second response would only hold more locks) or are being
        renewed. Acknowledgements made so far still go out with the next poll
        or commit then.

        Raises:
            ValueError: ``max_records`` is not a positive int.
            IllegalStateError: not subscribed, or the consumer is closed.
            KafkaError: as :meth:`poll`, an error the network thread reported.
        """
        return self._core.prefetch(max_records)

    # -- acknowledging ---------------------------------------------------------------

    def acknowledge(
        self, record: ConsumerRecord[K, V], type: AcknowledgeType = AcknowledgeType.ACCEPT
    ) -> None:
        """Acknowledge a record of the current batch (explicit mode only).

        Acknowledging the same record twice before it is sent keeps the last type.
        The acknowledgement is sent by the next ``poll``, ``commit_sync``,
        ``commit_async`` or ``close``.

        Raises:
            IllegalStateError: implicit mode, or the record is not in the current batch.
            UnsupportedVersionError: RENEW on a broker without ShareAcknowledge v2.
        """
        # Instances call the core's method directly (bound in __init__).
        self._core.acknowledge(record, type)

    def acknowledge_offset(
        self,
        topic: str,
        partition: int,
        offset: int,
        type: AcknowledgeType = AcknowledgeType.ACCEPT,
    ) -> None:
        """Acknowledge by coordinates a record that could not be returned by ``poll``
        (deserialization failure or corrupt batch), e.g. to REJECT a poison record.

        Raises:
            IllegalStateError: implicit mode, or the offset is not such a record.
        """
        self._core.acknowledge_offset(topic, partition, offset, type)

    def acknowledge_arrow(
        self, batch: Any, type: Any = AcknowledgeType.ACCEPT
    ) -> None:
        """Acknowledge rows returned by ``poll_arrow`` (explicit mode only).

        ``batch`` is the record batch ``poll_arrow`` returned, or any record batch
        or table with its ``topic``, ``partition``, ``offset`` and
        ``delivery_count`` columns (a filtered or sliced part of it, for
        example). ``type`` is one AcknowledgeType for every row (ACCEPT, RELEASE
        or REJECT), or a sequence (list, numpy or Arrow array) with one type per
        row. All or nothing: if one row cannot be acknowledged nothing is.
        Acknowledging a row again before it is sent keeps the last type.

        Raises:
            IllegalStateError: implicit mode, or a row is not a record of the
                last ``poll_arrow`` still awaiting its acknowledgement.
            ValueError: a bad type, RENEW (use ``share.auto.renew``), a wrong
                number of types, or a batch without the columns above.
        """
        self._core.acknowledge_arrow(batch, type)

    # -- committing ------------------------------------------------------------------


    def commit_sync(
        self, timeout: float | None = None
    ) -> dict[TopicIdPartition, KafkaError | None]:
        """Send pending acknowledgements and wait for the broker's answer.

        In implicit mode every record of the last poll is accepted first.
        Returns one entry per partition that had acknowledgements: ``None`` on
        success, else the error (an empty dict when there was nothing to commit).
        Per-partition failures are returned, not raised.

        Raises:
            WakeupError: :meth:`wakeup` was called.
            KafkaTimeoutError: no answer within ``timeout`` seconds
                (default ``default.api.timeout.ms``).
        """
        core = self._core
        timeout_ms = _timeout_ms(timeout, core._config.default_api_timeout_ms, "commit_sync")
        with core._owned():
            acks = core._commit_acks()
            if not acks:
                return {}
            event = AcknowledgeSyncEvent(deadline_ms=_now_ms() + timeout_ms, acks=acks)
            result = self._call(event)
            core._handle_completions()
            assert isinstance(result, dict)
            return result

    def commit_async(self) -> None:
        """Send pending acknowledgements without waiting; results reach the callback."""
        self._core.commit_async()

    def set_acknowledgement_commit_callback(
        self, callback: AcknowledgementCommitCallback | None
    ) -> None:
        """Set (or clear with ``None``) the callback told about every acknowledgement
        batch's outcome. It runs on the application thread, inside ``poll``,
        ``commit_sync``, ``commit_async`` and ``close``. Exceptions it raises are
        logged, not propagated. It must not call this consumer (except ``wakeup``).
        """
        self._core.set_acknowledgement_commit_callback(callback)

    # -- wakeup and close -------------------------------------------------------------

    def wakeup(self) -> None:
        """Make the blocked (or next) ``poll`` or ``commit_sync`` raise ``WakeupError``.

        Safe to call from any thread, from inside the commit callback, and from
        a signal handler (e.g. SIGINT/SIGTERM to stop a worker blocked in
        ``poll``): it sets a flag and writes a byte to a pipe the blocked call
        sleeps on, taking no lock.
        """
        core = self._core
        core._wakeup_requested = True
        core._fetch_buffer.wakeup()
        self._thread.wake_loop()  # a poll running the loop waits in its select

    def close(self, timeout: float | None = None) -> None:
        """Send pending acknowledgements, close share sessions, leave the group and
        stop the network thread, within ``timeout`` seconds (default 30, capped by
        ``request.timeout.ms``).

        Records of the last poll that were not acknowledged are released by the
        broker for other consumers. Closing twice is harmless.
        """
        core = self._core
        timeout_ms = _timeout_ms(timeout, int(_DEFAULT_CLOSE_TIMEOUT_S * 1000), "close")
        if core._state is not _State.OPEN:
            return
        owner = core._owner
        if owner is not None and owner != threading.get_ident() and not core._in_callback:
            # Another thread is inside a call (typically a poll blocked without a
            # timeout): make that call raise WakeupError, then close once it has
            # left. Checked every few ms for at most the close timeout.
            core._close_requested = True
            core._fetch_buffer.wakeup()
            self._thread.wake_loop()  # a poll running the loop waits in its select
            give_up = time.monotonic() + min(timeout_ms, core._config.request_timeout_ms) / 1000
            while core._owner is not None and time.monotonic() < give_up:
                time.sleep(_CLOSE_HANDOVER_S)
            if core._state is not _State.OPEN:
                return
        with core._owned(allow_closing=True):
            deadline = _now_ms() + min(timeout_ms, core._config.request_timeout_ms)
            first_error: BaseException | None = None
            try:
                acks = core._close_acks()
                try:
                    self._call(AcknowledgeOnCloseEvent(deadline_ms=deadline, acks=acks),
                               wakeable=False)
                except KafkaError as exc:
                    core._log.info("acknowledgements on close did not complete: %s", exc)
                try:
                    self._call(LeaveGroupEvent(deadline_ms=deadline, on_close=True),
                               wakeable=False)
                except KafkaError as exc:
                    core._log.info("leaving the group on close did not complete: %s", exc)
                core._handle_completions()
            except BaseException as exc:  # run every step, then raise the first error
                first_error = exc
            finally:
                self._thread.stop(max(0, deadline - _now_ms()))
                core._closed()
            if first_error is not None:
                raise first_error


    def _call(self, event: CompletableEvent, *, wakeable: bool = True) -> object:
        """Submit a completable event and wait for its result (bounded by its deadline).

        The wait is a ``select`` on the wake pipe: the network thread writes to
        it when it completes the future (the done callback below runs on that
        thread), ``wakeup()`` when it is called. Nothing here waits on a lock a
        signal handler could need.
        """
        core = self._core
        assert isinstance(event, _COMPLETABLE)
        pipe = core._fetch_buffer.wake_pipe
        event.future.add_done_callback(lambda _: pipe.wake())
        core._submit(event)
        # A little slack past the deadline: the network thread completes the
        # future by then at the latest; this only guards against a dead thread.
        give_up_ms = event.deadline_ms + 500
        while True:
            pipe.drain()  # before the checks: a byte written after them ends the wait
            remaining_ms = core._call_wait_ms(event, give_up_ms, wakeable=wakeable)
            if remaining_ms is None:
                return event.future.result()
            pipe.wait(remaining_ms / 1000.0)


class _ThreadWaiting:
    """How ``ShareConsumer`` waits (:class:`~kafka_share._app.core.FacadeWaiting`):
    on its own thread, under the single-thread guard, with a network thread
    that may be running the I/O loop."""

    __slots__ = ("_thread",)

    def __init__(self, thread: NetworkThread) -> None:
        self._thread = thread

    def owned(
        self, core: ConsumerCore[Any, Any], allow_closing: bool
    ) -> AbstractContextManager[None]:
        return _Ownership(core, allow_closing)

    def closed_meanwhile(self) -> str:
        return "the blocking call was interrupted by close() from another thread"

    def send_fetch_ahead(
        self, acks: AcksByPartition, max_records: int | None, ack_deadline_ms: int
    ) -> None:
        """Submit a fetch ahead and have it sent before going on: by this thread's own
        round when it runs the I/O loop (``NetworkThread.submit``), else by the
        network thread, handed the GIL as described below.

        The network thread sends it only if no other response is queued by then
        (else ``acks`` go out on their own): with one ShareFetch per node in
        flight, at most one response then waits behind the one being delivered,
        which keeps the records this consumer holds locked well under the
        broker's per-partition limit (``group.share.partition.max.record.locks``).
        A fetch that found that limit reached would wait on the broker until
        ``fetch.max.wait.ms`` while the acks that free locks wait behind it.

        The network thread needs the GIL to write the request. Left alone, this
        thread keeps the GIL while it decodes and the application processes, and
        the interpreter only forces a switch after ``sys.getswitchinterval()``
        (5 ms), the request waiting all that time. Blocking briefly on the event
        hands the GIL over at once; the wait is capped so a busy network thread
        never stalls the application.
        """
        # When this thread runs the loop, submitting puts the fetch on the wire.
        sent = None if self._thread.runs_loop else threading.Event()
        self._thread.submit(FetchEvent(acks, sent=sent, ahead=True,
                                       ack_deadline_ms=ack_deadline_ms, max_records=max_records))
        if sent is not None:
            sent.wait(_FETCH_HANDOFF_S)


def _instance_id(identity: TelemetryIdentity) -> uuid.UUID | None:
    """What ``client_instance_id`` returns once it has waited: the id, None if it
    is not known yet, or the error telemetry stopped with (a copy: raising the one
    object again and again would chain its tracebacks)."""
    if identity.instance_id is None and identity.error is not None:
        raise copy.copy(identity.error)
    return identity.instance_id
