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

import threading
import time
from collections.abc import Callable, Collection, Mapping
from typing import Any

from kafka_share._app.checks import _FOREVER_MS, _now_ms, _timeout_ms
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
    SubscriptionChangeEvent,
)
from kafka_share._net.security import validate_supported
from kafka_share._net.thread import NetworkThread
from kafka_share.errors import KafkaError
from kafka_share.models import ConsumerRecords, TopicIdPartition

__all__ = ["AcknowledgementCommitCallback", "ShareConsumer"]

#: how often close() from another thread checks that the blocked call has left
_CLOSE_HANDOVER_S = 0.005
#: Longest a poll waits for the network thread to send a fetch ahead.
_FETCH_HANDOFF_S = 0.002
#: a poll that runs the I/O loop and still has records to hand out goes round the
#: loop first only if it has not gone round for this long
_ROUND_EVERY_MS = 10


class ShareConsumer(ConsumerCore[K, V]):
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
        super().__init__(config, key_deserializer, value_deserializer, kwargs,
                         validate=validate_supported)
        cfg = self._config
        self._thread: NetworkThread = NetworkThread(
            config=cfg,
            client_id=self._client_id,
            fetch_buffer=self._fetch_buffer,
            metrics=self._metrics,
        )
        self._attach(self._thread)
        self._thread.start()
        self._state = _State.OPEN
        self._log.debug("share consumer created")

    # -- context manager -------------------------------------------------------

    def __enter__(self) -> ShareConsumer[K, V]:
        self._check_open()
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __del__(self) -> None:
        # A consumer dropped without close() must not leave a thread behind.
        if getattr(self, "_state", _State.CLOSED) is _State.OPEN:
            try:
                self._thread.stop_now()
            except Exception:
                pass

    # -- subscription ----------------------------------------------------------

    def subscribe(self, topics: Collection[str]) -> None:
        """Subscribe to ``topics``, replacing the previous subscription.

        An empty collection is the same as :meth:`unsubscribe`. The group is
        joined on the next :meth:`poll`.

        Raises:
            InvalidTopicError: a name is not a legal Kafka topic name (1 to 249 of
                ``[a-zA-Z0-9._-]``, not ``.`` or ``..``); the message names it.
        """
        with self._owned():
            new = self._check_topics(topics)
            if not new:
                self._unsubscribe_locked()
                return
            self._call(SubscriptionChangeEvent(deadline_ms=self._api_deadline(), topics=new))
            self._subscription = new


    def unsubscribe(self) -> None:
        """Clear the subscription and leave the group."""
        with self._owned():
            self._unsubscribe_locked()

    def _unsubscribe_locked(self) -> None:
        self._subscription = frozenset()
        self._call(LeaveGroupEvent(deadline_ms=self._api_deadline()))

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
        timeout_ms = self._poll_timeout_ms(timeout)
        limit = self._check_max_records(max_records)
        with self._owned():
            self._check_poll_kind("poll")
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
        timeout_ms = self._poll_timeout_ms(timeout)
        limit = self._check_max_records(max_records)
        with self._owned():
            self._check_poll_kind("poll_arrow")
            records: Any = self._poll_call(timeout_ms, limit)
            return _columnar().to_record_batch(records, view_types=view_types)

    def _poll_call(self, timeout_ms: int | None, max_records: int | None) -> ConsumerRecords[K, V]:
        started = self._poll_begin(timeout_ms, max_records)
        records: ConsumerRecords[K, V] = self._no_records()
        try:
            if self._fatal_error is not None and self._fatal_raised:
                self._wait_until(
                    started + (_FATAL_REPEAT_WAIT_MS if timeout_ms is None else timeout_ms)
                )
            records = self._poll(started + (_FOREVER_MS if timeout_ms is None else timeout_ms))
        finally:
            self._poll_end(records)
            self._thread.flush()
        return records


    def _wait_until(self, deadline_ms: int) -> None:
        """Sleep until ``deadline_ms``; :meth:`wakeup` (or a close from another
        thread) ends it with ``WakeupError``."""
        pipe = self._fetch_buffer.wake_pipe
        while True:
            pipe.drain()  # before the checks: a byte written after them ends the wait
            self._maybe_raise_wakeup()
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
                not self._collector.has_buffered()
                or _now_ms() - thread.last_round_ms >= _ROUND_EVERY_MS
            ):
                # What arrived while the application processed the last batch. Not
                # while records are still buffered to hand out (a round costs tens
                # of µs: once per 500 small records it was a sixth of the CPU),
                # unless the loop has not gone round for _ROUND_EVERY_MS (timers).
                thread.drive(0)
            return self._poll_loop(deadline)
        finally:
            if runs_loop:
                thread.leave_loop()

    def _poll_loop(self, deadline: int) -> ConsumerRecords[K, V]:
        self._start_poll()
        self._fetch_sent = False
        while True:
            self._maybe_raise_wakeup()
            adds = self._fetch_buffer.adds
            records, remaining = self._poll_outcome(self._poll_once(self._poll_limit), deadline)
            if records is not None:
                return records
            self._thread.flush()  # the engine must see this poll before it waits
            waited_from = _now_ms()
            wait_ms = self._poll_wait_ms(remaining)
            if not self._drive_until_news(wait_ms, adds):
                self._fetch_buffer.await_not_empty(wait_ms / 1000.0)
            self._poll_waited_ms += _now_ms() - waited_from
            self._poll_still_waiting()
            self._raise_background()
            self._handle_completions()

    def _drive_until_news(self, wait_ms: int, adds: int) -> bool:
        """Run the I/O loop on this thread until a response brings records (the
        buffer's ``adds`` moved past ``adds``) or an error, :meth:`wakeup` or a
        close is called, or ``wait_ms`` passes. Buffered records the poll could
        not hand out (renewed records come first) are no news: the loop waits for
        the answer that frees them instead of spinning. False when this thread
        does not run the loop (the caller waits for the network thread)."""
        buffer = self._fetch_buffer
        thread = self._thread
        end = _now_ms() + wait_ms
        while not (buffer.adds != adds or buffer.has_background() or self._wakeup_requested
                   or self._close_requested):
            left = end - _now_ms()
            # At least one round, even for poll(0): it puts this poll's fetch on
            # the wire (nothing else would until the next poll).
            if not thread.drive(max(0, left)):
                return False
            if left <= 0:
                break
        return True

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
        timeout_ms = _timeout_ms(timeout, self._config.default_api_timeout_ms, "commit_sync")
        with self._owned():
            acks = self._commit_acks()
            if not acks:
                return {}
            event = AcknowledgeSyncEvent(deadline_ms=_now_ms() + timeout_ms, acks=acks)
            result = self._call(event)
            self._handle_completions()
            assert isinstance(result, dict)
            return result

    # -- wakeup and close -------------------------------------------------------------

    def wakeup(self) -> None:
        """Make the blocked (or next) ``poll`` or ``commit_sync`` raise ``WakeupError``.

        Safe to call from any thread, from inside the commit callback, and from
        a signal handler (e.g. SIGINT/SIGTERM to stop a worker blocked in
        ``poll``): it sets a flag and writes a byte to a pipe the blocked call
        sleeps on, taking no lock.
        """
        self._wakeup_requested = True
        self._fetch_buffer.wakeup()
        self._thread.wake_loop()  # a poll running the loop waits in its select

    def close(self, timeout: float | None = None) -> None:
        """Send pending acknowledgements, close share sessions, leave the group and
        stop the network thread, within ``timeout`` seconds (default 30, capped by
        ``request.timeout.ms``).

        Records of the last poll that were not acknowledged are released by the
        broker for other consumers. Closing twice is harmless.
        """
        timeout_ms = _timeout_ms(timeout, int(_DEFAULT_CLOSE_TIMEOUT_S * 1000), "close")
        if self._state is not _State.OPEN:
            return
        owner = self._owner
        if owner is not None and owner != threading.get_ident() and not self._in_callback:
            # Another thread is inside a call (typically a poll blocked without a
            # timeout): make that call raise WakeupError, then close once it has
            # left. Checked every few ms for at most the close timeout.
            self._close_requested = True
            self._fetch_buffer.wakeup()
            self._thread.wake_loop()  # a poll running the loop waits in its select
            give_up = time.monotonic() + min(timeout_ms, self._config.request_timeout_ms) / 1000
            while self._owner is not None and time.monotonic() < give_up:
                time.sleep(_CLOSE_HANDOVER_S)
            if self._state is not _State.OPEN:
                return
        with self._owned(allow_closing=True):
            deadline = _now_ms() + min(timeout_ms, self._config.request_timeout_ms)
            first_error: BaseException | None = None
            try:
                acks = self._close_acks()
                try:
                    self._call(AcknowledgeOnCloseEvent(deadline_ms=deadline, acks=acks),
                               wakeable=False)
                except KafkaError as exc:
                    self._log.info("acknowledgements on close did not complete: %s", exc)
                try:
                    self._call(LeaveGroupEvent(deadline_ms=deadline, on_close=True),
                               wakeable=False)
                except KafkaError as exc:
                    self._log.info("leaving the group on close did not complete: %s", exc)
                self._handle_completions()
            except BaseException as exc:  # run every step, then raise the first error
                first_error = exc
            finally:
                self._thread.stop(max(0, deadline - _now_ms()))
                self._closed()
            if first_error is not None:
                raise first_error


    def _call(self, event: CompletableEvent, *, wakeable: bool = True) -> object:
        """Submit a completable event and wait for its result (bounded by its deadline).

        The wait is a ``select`` on the wake pipe: the network thread writes to
        it when it completes the future (the done callback below runs on that
        thread), ``wakeup()`` when it is called. Nothing here waits on a lock a
        signal handler could need.
        """
        assert isinstance(event, _COMPLETABLE)
        pipe = self._fetch_buffer.wake_pipe
        event.future.add_done_callback(lambda _: pipe.wake())
        self._submit(event)
        # A little slack past the deadline: the network thread completes the
        # future by then at the latest; this only guards against a dead thread.
        give_up_ms = event.deadline_ms + 500
        while True:
            pipe.drain()  # before the checks: a byte written after them ends the wait
            remaining_ms = self._call_wait_ms(event, give_up_ms, wakeable=wakeable)
            if remaining_ms is None:
                return event.future.result()
            pipe.wait(remaining_ms / 1000.0)

    def _send_fetch_ahead(self, acks: AcksByPartition, max_records: int | None) -> None:
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
        self._submit(FetchEvent(acks, sent=sent, ahead=True, ack_deadline_ms=self._api_deadline(),
                                max_records=max_records))
        if sent is not None:
            sent.wait(_FETCH_HANDOFF_S)

