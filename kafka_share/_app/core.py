"""The application-side core held by ``ShareConsumer`` and ``AsyncShareConsumer``.

``ConsumerCore`` holds what a consumer keeps on the application's side of the
engine (configuration, the in-flight batch, the collector, the subscription,
thread ownership) and the logic of the calls both facades share: the start and
outcome of a poll (``_start_poll``, ``_poll_outcome``), the acknowledgements a
commit or close sends, the commit callback, and the checks of ``acknowledge``.
Its parts, each holding its own state: :class:`~kafka_share._app.polling.PollRounds`
(a poll's rounds: collect, fetch, fetch ahead, send acks) and
:class:`~kafka_share._app.background.BackgroundEvents` (what the network thread
reports beside the records); the argument checks are in :mod:`kafka_share._app.checks`.

What differs between the two facades is only *how they wait*: ``ShareConsumer``
sleeps on its wake pipe while a network thread drives the engine;
``AsyncShareConsumer`` awaits while an event-loop driver does. Each facade holds
a core and hands it, in :meth:`ConsumerCore._attach`, the I/O shell
(:class:`EngineShell`) and its way of waiting (:class:`FacadeWaiting`: its guard,
how a fetch ahead reaches the shell, what a close from elsewhere says).
"""

from __future__ import annotations

import itertools
import logging
import re
import threading
from collections.abc import Callable, Collection, Mapping
from contextlib import AbstractContextManager
from typing import Any, Generic, Protocol, TypeVar

from kafka_share._app.acks import _unacknowledged_message
from kafka_share._app.background import BackgroundEvents
from kafka_share._app.checks import (
    CLOSED,
    NOT_SUBSCRIBED,
    TELEMETRY_OFF,
    WOKEN_UP,
    _check_ack_type,
    _check_max_records,
    _check_subscription,
    _now_ms,
    _timeout_ms,
)
from kafka_share._app.collector import FetchCollector
from kafka_share._app.collector import columnar_helpers as _columnar
from kafka_share._app.decoding import prepare_row_decoder
from kafka_share._app.in_flight import InFlightBatch
from kafka_share._app.ownership import _OPEN, _State
from kafka_share._app.polling import PollRounds
from kafka_share._handoff.events import (
    AcknowledgeAsyncEvent,
    AcknowledgeOnCloseEvent,
    AcknowledgeSyncEvent,
    AcksByPartition,
    ApplicationEvent,
    CompletableEvent,
    CompletedShareFetch,
    LeaveGroupEvent,
    PollEvent,
    SubscriptionChangeEvent,
)
from kafka_share._handoff.fetch_buffer import FetchBuffer
from kafka_share._handoff.telemetry import TelemetryIdentity
from kafka_share._log import ContextLogger, Logger, consumer_log_prefix, offset_ranges
from kafka_share.config import AcknowledgementMode, ShareConsumerConfig, parse_config
from kafka_share.errors import (
    IllegalStateError,
    InvalidRecordStateError,
    KafkaError,
    KafkaTimeoutError,
    WakeupError,
)
from kafka_share.metrics import ShareConsumerMetrics
from kafka_share.models import (
    AcknowledgeType,
    ConsumerRecord,
    ConsumerRecords,
    TopicIdPartition,
    TopicPartition,
)
from kafka_share.share.capabilities import ShareFeature

__all__ = ["AcknowledgementCommitCallback", "ConsumerCore", "EngineShell", "FacadeWaiting"]

log = logging.getLogger("kafka_share.consumer")

K = TypeVar("K")
V = TypeVar("V")

#: ``callback(offsets, error)``: offsets by partition of one acknowledgement batch,
#: and ``None`` on success or the error that made it fail.
AcknowledgementCommitCallback = Callable[
    [dict[TopicIdPartition, set[int]], KafkaError | None], None
]

_client_numbers = itertools.count(1)
_ACCEPT = AcknowledgeType.ACCEPT
_RELEASE = AcknowledgeType.RELEASE
_REJECT = AcknowledgeType.REJECT
#: the events an application call waits for
_COMPLETABLE = (
    SubscriptionChangeEvent, LeaveGroupEvent, AcknowledgeSyncEvent, AcknowledgeOnCloseEvent
)
_DEFAULT_CLOSE_TIMEOUT_S = 30.0
#: poll() without a timeout waits this long before raising a fatal error again
_FATAL_REPEAT_WAIT_MS = 1000
#: The longest one pass of a waiting poll sleeps before it looks again (it also
#: refreshes the poll timer then, see ConsumerCore._poll_wait_ms).
_POLL_PASS_MS = 1000


class EngineShell(Protocol):
    """What the core needs of the I/O shell driving the engine."""

    member_id: str

    @property
    def pattern_matches(self) -> frozenset[str]:
        """What a pattern subscription matched at the last metadata refresh."""
        ...

    @property
    def assignment(self) -> frozenset[TopicPartition]:
        """The partitions assigned to the member, as of the last I/O."""
        ...

    @property
    def telemetry_identity(self) -> TelemetryIdentity:
        """The client instance id once telemetry settles."""
        ...

    def submit(self, event: ApplicationEvent) -> None: ...

    def require(self, feature: ShareFeature) -> None: ...


class FacadeWaiting(Protocol):
    """What the core needs of the facade holding it: the parts that depend on how
    the facade waits (on a thread, or in an event loop's task). It never holds
    the core (the guard is handed it): no reference cycle, so a facade dropped
    without close() is freed at once (its ``__del__`` stops the I/O shell)."""

    def owned(
        self, core: ConsumerCore[Any, Any], allow_closing: bool
    ) -> AbstractContextManager[None]:
        """The guard of a call: one thread (or task) at a time, not from the
        commit callback, not closed (closing too with ``allow_closing``)."""
        ...

    def send_fetch_ahead(
        self, acks: AcksByPartition, max_records: int | None, ack_deadline_ms: int
    ) -> None:
        """Submit a fetch ahead carrying ``acks``, asking for at most ``max_records``."""
        ...

    def closed_meanwhile(self) -> str:
        """The message of the ``WakeupError`` a call gets when ``close()`` is
        called from another thread (or task) while it waits."""
        ...


class ConsumerCore(Generic[K, V]):
    """The state and logic both consumer facades share (see the module docstring)."""

    _shell: EngineShell
    _waiting: FacadeWaiting

    def __init__(
        self,
        config: Mapping[str, object] | None,
        key_deserializer: Callable[[bytes], K] | None,
        value_deserializer: Callable[[bytes], V] | None,
        kwargs: dict[str, object],
        *,
        validate: Callable[[ShareConsumerConfig], None],
        sliced_decoding: bool = False,
    ) -> None:
        # ``validate``: the I/O shell's check that the settings can be used (TLS
        # files load, SASL mechanisms exist); the facade passes it in, so this
        # layer never imports the shell.

        # Set first so __del__/close work even if parsing fails.
        self._state = _State.CLOSED
        if key_deserializer is not None:
            kwargs["key_deserializer"] = key_deserializer
        if value_deserializer is not None:
            kwargs["value_deserializer"] = value_deserializer
        self._config: ShareConsumerConfig = parse_config(config, **kwargs)
        cfg = self._config
        validate(cfg)  # e.g. SSL/SASL: refuse rather than connect in plaintext
        self._client_id = cfg.client_id or f"kafka-share-{cfg.group_id}-{next(_client_numbers)}"
        self._explicit = cfg.share_acknowledgement_mode is AcknowledgementMode.EXPLICIT
        self._fetch_buffer: FetchBuffer[CompletedShareFetch] = FetchBuffer()
        # Implicit mode accepts whole batches: their records need no entry each.
        self._in_flight = InFlightBatch(record_spans=not self._explicit)
        self._metrics = ShareConsumerMetrics(
            sample_window_ms=cfg.metrics_sample_window_ms,
            num_samples=cfg.metrics_num_samples,
            created_ms=_now_ms(),
        )
        self._collector: FetchCollector[K, V] = FetchCollector(
            buffer=self._fetch_buffer,
            in_flight=self._in_flight,
            key_deserializer=cfg.key_deserializer,
            value_deserializer=cfg.value_deserializer,
            check_crcs=cfg.check_crcs,
            max_poll_records=cfg.max_poll_records,
            sliced_decoding=sliced_decoding,
            vectorised=cfg.record_decoder == "auto",
            metrics=self._metrics,
            drop_expired=not cfg.share_auto_renew,
        )
        self._subscription: frozenset[str] = frozenset()
        #: a pattern subscription (None: by names, or none); its matches are the shell's
        self._pattern: re.Pattern[str] | None = None
        self._callback: AcknowledgementCommitCallback | None = None
        self._in_callback = False
        self._owner: int | None = None
        self._owner_depth = 0
        self._guard = threading.Lock()
        # A plain flag plus a byte on the wake pipe, not a threading.Event or a
        # Future: wakeup() must never block, and is often called from a signal
        # handler running on the very thread that waits (Event.set and
        # Future.set_result take locks that thread may hold).
        self._wakeup_requested = False
        #: close() was called by another thread while this one was in a call
        self._close_requested = False
        #: errors, completions and lost locks the network thread reported
        self._background = BackgroundEvents(self._fetch_buffer, self._collector, self._in_flight)
        #: "poll" or "poll_arrow", fixed by the first poll (None: not polled yet)
        self._poll_kind: str | None = None

    def _attach(self, shell: EngineShell, waiting: FacadeWaiting) -> None:
        """Take the I/O shell (created with this core's buffer and metrics) and the
        facade's way of waiting."""
        self._shell = shell
        self._waiting = waiting
        self._rounds: PollRounds[K, V] = PollRounds(
            self._config, self._fetch_buffer, self._in_flight, self._collector, self._metrics,
            shell, waiting,
        )
        self._log: Logger = ContextLogger(
            log, consumer_log_prefix(self._client_id, self._config.group_id, shell.member_id)
        )
        self._collector.log = self._log

    # -- subscription ----------------------------------------------------------

    def subscription(self) -> frozenset[str]:
        """``subscription`` of the facades (its docstring is there)."""
        with self._owned():
            if self._pattern is not None:
                return self._shell.pattern_matches
            return self._subscription

    def assignment(self) -> frozenset[TopicPartition]:
        """``assignment`` of the facades (its docstring is there)."""
        with self._owned():
            return self._shell.assignment if self._subscribed else frozenset()

    @property
    def _subscribed(self) -> bool:
        """Subscribed by names, or by a pattern (even one matching nothing yet)."""
        return bool(self._subscription) or self._pattern is not None

    def _subscribe_event(
        self, topics: Collection[str] | None, pattern: object
    ) -> SubscriptionChangeEvent | None:
        """The event of a ``subscribe`` call, its arguments checked; None for an
        empty collection of names (that is ``unsubscribe``)."""
        wanted = _check_subscription(topics, pattern)
        if not wanted:
            return None
        prepare_row_decoder()  # while the group join takes its second or more
        if isinstance(wanted, re.Pattern):
            return SubscriptionChangeEvent(deadline_ms=self._api_deadline(), pattern=wanted)
        return SubscriptionChangeEvent(deadline_ms=self._api_deadline(), topics=wanted)

    def _set_subscription(self, event: SubscriptionChangeEvent | None) -> None:
        """The network side applied ``event`` (None: left the group)."""
        self._subscription = event.topics if event is not None else frozenset()
        self._pattern = event.pattern if event is not None else None

    # -- polling -------------------------------------------------------------------

    def _poll_wait_ms(self, remaining_ms: int) -> int:
        """How long one pass of a waiting poll may sleep: at most
        :data:`_POLL_PASS_MS`, and under half of ``max.poll.interval.ms``, so the
        next pass refreshes the poll timer (:meth:`_poll_still_waiting`) well
        before it could expire."""
        return min(remaining_ms, _POLL_PASS_MS, max(1, self._config.max_poll_interval_ms // 2))

    def _poll_still_waiting(self) -> None:
        """A poll that waits is asking for records: the liveness timer
        (``max.poll.interval.ms``) counts from now, as Java's consumer sends a
        poll event on each pass of its wait loop. Without it a ``poll()`` with no
        timeout on a quiet topic left the group after the interval and never
        came back (it rejoins only on a poll that starts)."""
        self._submit(PollEvent(now_ms=_now_ms()))

    def _poll_outcome(
        self, records: ConsumerRecords[K, V] | None, deadline_ms: int
    ) -> tuple[ConsumerRecords[K, V] | None, int]:
        """After a round of a poll: the records to return (completions handled),
        or None and how long the poll may still wait."""
        if records is not None:
            self._handle_completions()
            return records, 0
        remaining = deadline_ms - _now_ms()
        if remaining <= 0:
            self._handle_completions()
            return self._no_records(), 0
        return None, remaining

    def _no_records(self) -> ConsumerRecords[K, V]:
        """An empty poll result of this consumer's kind."""
        if self._poll_kind == "poll_arrow":
            return _columnar().ColumnarRecords()  # type: ignore[no-any-return]
        return ConsumerRecords()

    def _prefetch_acks(self, max_records: object) -> tuple[AcksByPartition, int | None] | None:
        """The checks of ``prefetch``: the acks to send with it and its cap, or
        None when it has nothing to do (records are buffered or being renewed)."""
        cap = _check_max_records(max_records)
        self._check_open()
        if not self._subscribed:
            raise IllegalStateError(NOT_SUBSCRIBED)
        self._background.raise_error()
        if self._collector.has_buffered() or self._in_flight.has_renewing():
            return None
        return self._rounds.take_acks(), self._rounds.fetch_cap(cap)

    def _check_poll_kind(self, kind: str) -> None:
        """A consumer delivers either ConsumerRecords (``poll``) or Arrow record
        batches (``poll_arrow``), fixed by its first poll: the two keep their
        in-flight records differently, and mixing them in one batch of
        acknowledgements would be an accident waiting to happen."""
        if self._poll_kind == kind:
            return
        if self._poll_kind is not None:
            raise IllegalStateError(
                f"this consumer was polled with {self._poll_kind}(); {kind}() cannot be "
                "mixed with it on the same consumer (use one consumer per style)"
            )
        if kind == "poll_arrow":
            cfg = self._config
            if cfg.key_deserializer is not None or cfg.value_deserializer is not None:
                raise IllegalStateError(
                    "poll_arrow() returns keys and values as raw bytes: create the "
                    "consumer without key_deserializer/value_deserializer to use it"
                )
            try:
                _columnar()
            except ImportError as exc:
                raise ImportError(
                    "poll_arrow() needs pyarrow and numpy: pip install 'kafka-share[arrow]' "
                    f"({exc})"
                ) from exc
            self._collector.columnar = True
        self._poll_kind = kind

    def _acknowledge_arrow_rows(self, batch: object, type: object) -> None:
        """Check and record acknowledgements of ``poll_arrow`` rows (see
        :meth:`acknowledge_arrow`)."""
        if not self._explicit:
            self._check_ack_type(AcknowledgeType.ACCEPT)  # raises: implicit mode
        self._in_flight.acknowledge_rows(_columnar().rows_to_acknowledge(batch, type))

    def _start_poll(self) -> None:
        """What every poll does first: errors, the last batch's acks, the checks."""
        self._background.raise_error()
        self._handle_completions()
        # Failed records whose error the last poll raised get their default
        # RELEASE/REJECT now, unless acknowledged by coordinates meanwhile.
        self._in_flight.settle_failed()
        rounds = self._rounds
        if rounds.pending_error is not None:
            err, rounds.pending_error = rounds.pending_error, None
            self._in_flight.mark_failed_raised()
            raise err
        if self._explicit:
            if not self._in_flight.all_acknowledged():
                raise IllegalStateError(_unacknowledged_message(
                    self._in_flight.unacknowledged_by_partition()
                ))
        else:
            self._in_flight.acknowledge_all(AcknowledgeType.ACCEPT)
        if not self._subscribed:
            raise IllegalStateError(NOT_SUBSCRIBED)
        self._submit(PollEvent(now_ms=_now_ms()))

    def metrics(self) -> dict[str, float]:
        """``metrics`` of the facades (its docstring is there)."""
        return self._metrics.snapshot(_now_ms())

    def telemetry_identity(self, timeout: float | None) -> tuple[TelemetryIdentity, float]:
        """``client_instance_id``'s checks; the identity to wait on and the wait in
        seconds. No ownership needed: any thread may ask (as in Java)."""
        if not self._config.enable_metrics_push:
            raise IllegalStateError(TELEMETRY_OFF)
        self._check_open()
        timeout_ms = _timeout_ms(timeout, self._config.default_api_timeout_ms,
                                 "client_instance_id")
        return self._shell.telemetry_identity, timeout_ms / 1000

    def prefetch(self, max_records: int | None = None) -> bool:
        """``prefetch`` of the facades (its docstring is there)."""
        with self._owned():
            planned = self._prefetch_acks(max_records)
            if planned is None:
                return False
            acks, cap = planned
            self._rounds.send_fetch_ahead(acks, cap)
            return True

    # -- acknowledging ---------------------------------------------------------------

    def acknowledge(
        self, record: ConsumerRecord[K, V], type: AcknowledgeType = AcknowledgeType.ACCEPT
    ) -> None:
        """``ShareConsumer.acknowledge`` (documented there): both facades bind this
        method on their instances, so the per-record call is one call deep."""
        # Fast path for the per-record hot loop: the common call (ACCEPT or RELEASE
        # or REJECT in explicit mode, by the owning thread, outside the callback)
        # skips the full guard. acknowledge() never blocks, so a lock-free check of
        # the owner is enough to refuse a second thread inside a blocking call.
        owner = self._owner
        if (
            # Identity tests: hashing an Enum member runs Python code.
            (type is _ACCEPT or type is _RELEASE or type is _REJECT)
            and self._explicit
            and self._state is _OPEN
            and not self._in_callback
            and (owner is None or owner == threading.get_ident())
        ):
            # InFlightBatch.acknowledge's own first step, inlined (a Python call
            # is a fifth of this path): the record handed out, by identity, in
            # the span acknowledged last; anything else goes the whole way.
            span = self._in_flight.hit
            i = record[2] - span.first
            if 0 <= i < span.size and span.records[i] is record:
                span.types[i] = type
                return
            self._in_flight.acknowledge_searched(record, type)
            return
        with self._owned():
            ack_type = self._check_ack_type(type)
            self._in_flight.acknowledge(record, ack_type)

    def acknowledge_offset(
        self,
        topic: str,
        partition: int,
        offset: int,
        type: AcknowledgeType = AcknowledgeType.ACCEPT,
    ) -> None:
        """``acknowledge_offset`` of the facades (its docstring is there)."""
        with self._owned():
            ack_type = self._check_ack_type(type)
            self._in_flight.acknowledge_offset(topic, partition, offset, ack_type)

    def acknowledge_arrow(
        self, batch: Any, type: Any = AcknowledgeType.ACCEPT
    ) -> None:
        """``acknowledge_arrow`` of the facades (its docstring is there)."""
        with self._owned():
            self._acknowledge_arrow_rows(batch, type)

    def _check_ack_type(self, type: object) -> AcknowledgeType:
        ack_type = _check_ack_type(type, explicit=self._explicit)
        if ack_type is AcknowledgeType.RENEW:
            self._shell.require(ShareFeature.RENEW)
        return ack_type

    def _close_acks(self) -> AcksByPartition:
        """What ``close`` sends: the acks given so far (and failed records' defaults).
        Implicit mode accepts nothing here: the broker releases the last batch."""
        self._state = _State.CLOSING
        self._in_flight.settle_failed(everything=True)
        return self._rounds.take_acks()

    def _closed(self) -> None:
        self._state = _State.CLOSED
        self._in_flight.clear()
        self._fetch_buffer.close()

    def _commit_acks(self) -> AcksByPartition:
        """What ``commit_sync`` and ``commit_async`` send: every pending ack (in
        implicit mode the whole last batch accepted first)."""
        self._handle_completions()
        if not self._explicit:
            self._in_flight.acknowledge_all(AcknowledgeType.ACCEPT)
        self._in_flight.settle_failed()
        return self._rounds.take_acks()

    def commit_async(self) -> None:
        """``commit_async`` of the facades (its docstring is there)."""
        with self._owned():
            acks = self._commit_acks()
            if acks:
                self._submit(AcknowledgeAsyncEvent(acks, self._api_deadline()))

    def set_acknowledgement_commit_callback(
        self, callback: AcknowledgementCommitCallback | None
    ) -> None:
        """``set_acknowledgement_commit_callback`` of the facades (its docstring is there)."""
        with self._owned():
            if callback is not None and not callable(callback):
                raise TypeError(f"the callback must be callable, got {callback!r}")
            # Completions always come back (RENEW needs them); without a callback
            # they are simply not reported.
            self._callback = callback

    # -- internals: thread ownership ----------------------------------------------------

    def _owned(self, *, allow_closing: bool = False) -> AbstractContextManager[None]:
        return self._waiting.owned(self, allow_closing)

    def _check_open(self) -> None:
        if self._state is not _State.OPEN:
            raise IllegalStateError(CLOSED)

    # -- internals: events ------------------------------------------------------------

    def _api_deadline(self) -> int:
        return _now_ms() + self._config.default_api_timeout_ms

    def _submit(self, event: ApplicationEvent) -> None:
        self._shell.submit(event)

    def _call_wait_ms(
        self, event: CompletableEvent, give_up_ms: int, *, wakeable: bool
    ) -> int | None:
        """A waiting call's check: None once ``event`` is done, else how long it may
        still wait. Raises ``WakeupError`` (if ``wakeable``) or, past ``give_up_ms``
        (a little after the event's deadline, by which the I/O shell completes it;
        only a dead shell misses it), ``KafkaTimeoutError``."""
        if event.future.done():
            return None
        if wakeable:
            self._maybe_raise_wakeup()
            self._background.raise_authentication_error()
        remaining_ms = give_up_ms - _now_ms()
        if remaining_ms <= 0:
            raise KafkaTimeoutError(
                f"{type(event).__name__} did not complete before its deadline"
            )
        return remaining_ms

    def _maybe_raise_wakeup(self) -> None:
        if self._close_requested:
            raise WakeupError(self._waiting.closed_meanwhile())
        if self._wakeup_requested:
            self._wakeup_requested = False
            raise WakeupError(WOKEN_UP)

    def _handle_completions(self) -> None:
        """Apply acknowledgement results: return renewed records, run the callback."""
        self._background.drain()
        self._tell_locks_lost()
        completions = self._background.take_completions()
        for c in completions:
            if c.renewed_offsets or (c.error is not None and c.offsets):
                failed = c.offsets - c.renewed_offsets if c.error is not None else frozenset()
                self._in_flight.on_renew_completed(c.partition, c.renewed_offsets, failed)
            if c.acquisition_lock_timeout_ms is not None and c.renewed_offsets:
                self._rounds.note_lock_timeout(c.acquisition_lock_timeout_ms)
            if self._callback is not None:
                self._run_callback({c.partition: set(c.offsets)}, c.error)

    def _tell_locks_lost(self) -> None:
        """Records the application holds whose locks auto-renewal gave up on: the
        acknowledgement commit callback hears of them now (at the poll or commit
        after it happened), with an error saying why, or a warning says so; not
        only when their acknowledgement fails later."""
        lost = self._background.take_locks_lost()
        for event, held in lost:
            tip = event.partition
            error = InvalidRecordStateError(
                f"{len(held)} record(s) of {tip.topic}-{tip.partition} this consumer holds "
                f"(offsets {offset_ranges(held)}) are no longer locked to it: "
                f"{event.reason}. The broker delivers them again, possibly to another "
                "consumer; acknowledging them now fails"
            )
            if self._callback is not None:
                self._run_callback({tip: set(held)}, error)
            else:
                self._log.warning("%s", error)

    def _run_callback(
        self, offsets: dict[TopicIdPartition, set[int]], error: KafkaError | None
    ) -> None:
        assert self._callback is not None
        self._in_callback = True
        try:
            self._callback(offsets, error)
        except Exception:
            self._log.exception("Exception thrown by acknowledgement commit callback")
        finally:
            self._in_callback = False

    def _repr(self, facade: str) -> str:
        """The facade's ``repr``."""
        return (
            f"{facade}(client_id={self._client_id!r}, "
            f"group_id={self._config.group_id!r}, state={self._state.value})"
        )
