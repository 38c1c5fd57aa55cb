"""What both I/O shells of the consumer do around the sans-IO engine.

An I/O shell owns a :class:`~kafka_share.share.engine.ConsumerEngine` and a
:class:`~kafka_share._net.client.NetworkClient`, turns application events into
engine calls, the engine's requests into ``NetworkClient.send`` (each handler
isolated), and the engine's results into the fetch buffer and the futures of the
application's waiting calls, which it completes by their deadlines.

:class:`EngineDriver` is all of that, with no opinion on *where* it runs. Each
shell holds one: the network thread (``_net/thread.py``) drives it from its own
loop, blocking in ``select``; the asyncio shell (``_net/aio.py``) from event-loop
callbacks. What differs between them reaches the driver as objects it is given,
not as overridden methods: how the loop waits and is woken (the ``poller`` of the
network client) and what a stop does (``on_stop``). When rounds run is the
shell's: one round is :meth:`EngineDriver.round`, send what the engine wants
now, expire waiting calls, and say how long the shell may wait for I/O, then
:meth:`EngineDriver.after_io` once the I/O is done.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from typing import Any

from kafka_share._handoff.events import (
    AcknowledgeAsyncEvent,
    AcknowledgementCompletion,
    AcknowledgeOnCloseEvent,
    AcknowledgeSyncEvent,
    AcksByPartition,
    ApplicationEvent,
    CompletableEvent,
    CompletedShareFetch,
    ErrorEvent,
    FetchEvent,
    LeaveGroupEvent,
    PollEvent,
    StopEvent,
    SubscriptionChangeEvent,
)
from kafka_share._handoff.fetch_buffer import FetchBuffer
from kafka_share._handoff.telemetry import TelemetryIdentity
from kafka_share._log import ContextLogger, Logger, consumer_log_prefix
from kafka_share.config import ShareConsumerConfig
from kafka_share.errors import KafkaError, KafkaTimeoutError
from kafka_share.metrics import ShareConsumerMetrics
from kafka_share.models import TopicPartition
from kafka_share.protocol.api_keys import ApiKey
from kafka_share.share.acknowledgements import Acknowledgements
from kafka_share.share.capabilities import ShareFeature
from kafka_share.share.consume import ACK_LINGER_MS
from kafka_share.share.engine import MAX_WAIT_MS, ConsumerEngine
from kafka_share.share.membership import generate_member_id
from kafka_share.share.results import LocksLost, SessionReplaced
from kafka_share.share.unsent import AckResults, Channel, UnsentRequest

from .client import NetworkClient, Poller, Purpose, monotonic_ms
from .connection import ResponseHandler as ConnectionHandler

__all__ = ["EngineDriver"]

log = logging.getLogger("kafka_share.network")

_PURPOSE = {Channel.SHARE: Purpose.SHARE, Channel.CONTROL: Purpose.CONTROL}
_CHANNEL = {Purpose.SHARE: Channel.SHARE, Purpose.CONTROL: Channel.CONTROL}


class _Sink:
    """Delivers engine results to the application thread and completes its futures."""

    def __init__(self, driver: EngineDriver) -> None:
        self._driver = driver
        self._buffer = driver._buffer

    def add_fetches(self, fetches: list[CompletedShareFetch]) -> None:
        self._buffer.add_all(fetches)

    def ack_completed(self, completion: AcknowledgementCompletion) -> None:
        self._buffer.add_background(completion)

    def commit_completed(self, token: object, results: AckResults, *, timed_out: bool) -> None:
        assert isinstance(token, AcknowledgeSyncEvent | AcknowledgeOnCloseEvent)
        if token.future.done():
            return
        if timed_out:
            # Acknowledgements not sent by now stay pending: a retried commit_sync
            # (or the next poll) sends them, so the error says it is safe to retry.
            token.future.set_exception(KafkaTimeoutError(
                f"{_call_name(token)} did not complete within its timeout; acknowledgements "
                "not answered by then are still pending and go with the next poll or "
                "commit (calling commit_sync again is safe)"
            ))
        else:
            token.future.set_result(results)

    def session_replaced(self, node_id: int, generation: int) -> None:
        self._buffer.add_background(SessionReplaced(node_id, generation))

    def locks_lost(self, lost: LocksLost) -> None:
        self._buffer.add_background(lost)

    def leave_completed(self) -> None:
        self._driver._complete_leaves()

    def subscription_changed(self, topics: frozenset[str]) -> None:
        self._driver.pattern_matches = topics

    def error(self, error: KafkaError, *, fatal: bool = False) -> None:
        self._buffer.add_background(ErrorEvent(error, fatal))


def _call_name(event: CompletableEvent) -> str:
    if isinstance(event, AcknowledgeSyncEvent):
        return "commit_sync()"
    if isinstance(event, AcknowledgeOnCloseEvent):
        return "close()"
    if isinstance(event, LeaveGroupEvent):
        return "unsubscribe()"
    return "subscribe()"


def _nothing() -> None:
    pass


class EngineDriver:
    """The engine, its network client and the application's waiting calls (see the
    module docstring); the shell that holds it decides when rounds run.

    ``poller`` watches the client's sockets (a selector when omitted); ``on_stop``
    is called on the loop's thread once a :class:`StopEvent` has been applied
    (close has flushed what it could).
    """

    def __init__(
        self,
        *,
        config: ShareConsumerConfig,
        client_id: str,
        fetch_buffer: FetchBuffer[CompletedShareFetch],
        metrics: ShareConsumerMetrics | None = None,
        poller: Poller | None = None,
        on_stop: Callable[[], None] = _nothing,
    ) -> None:
        self._config = config
        self._client_id = client_id
        self._buffer = fetch_buffer
        self.member_id = generate_member_id()
        self.log: Logger = ContextLogger(
            log, consumer_log_prefix(client_id, config.group_id, self.member_id)
        )
        self.engine = ConsumerEngine(
            config,
            member_id=self.member_id,
            sink=_Sink(self),
            share_fetch_version=self._share_fetch_version,
            metrics=metrics,
            logger=self.log,
            unix_offset_ms=round(time.time() * 1000) - monotonic_ms(),
        )
        self.client = NetworkClient.from_config(
            config,
            client_id=client_id,
            address_of=self.engine.cluster.address_of,
            logger=self.log,
            poller=poller,
        )
        self.client.on_disconnect = self._on_disconnect
        self._on_stop = on_stop
        self._pending: list[CompletableEvent] = []
        #: why the shell stopped or its loop failed, once it has (every later call
        #: fails with it)
        self.died: KafkaError | None = None
        #: FetchEvent.sent flags to set once this round's requests are written
        self._fetch_waiters: list[threading.Event] = []
        self._leave_events: list[LeaveGroupEvent] = []
        #: what a pattern subscription matched at the last metadata refresh: written
        #: by the loop's holder, replaced whole, read by the application thread
        self.pattern_matches: frozenset[str] = frozenset()
        #: the partitions assigned to the member: written by the loop's holder
        #: after I/O, replaced whole, read by the application thread
        self.assignment: frozenset[TopicPartition] = frozenset()
        self._assigned_seen: object = None
        #: the client instance id once telemetry settles (read by any thread)
        self.telemetry_identity = TelemetryIdentity()
        if self.engine.telemetry is None:
            self.telemetry_identity.settle(None, None)

    def require(self, feature: ShareFeature) -> None:
        """Raise if the cluster's share protocol cannot do ``feature`` (unknown yet:
        the engine checks again before sending)."""
        caps = self.engine.capabilities
        if caps is not None:
            caps.require(feature)

    # -- one round -----------------------------------------------------------------------

    def round(self, now: int) -> int:
        """Send what the engine wants now, expire waiting calls; returns how long
        the shell may wait for I/O (the network client may shorten it)."""
        for req in self.engine.poll(now):
            self._send(req, now)
        if self._fetch_waiters:
            # The fetches these events asked for are written (or queued for a
            # node being connected); the waiting application thread may go on.
            for sent in self._fetch_waiters:
                sent.set()
            self._fetch_waiters.clear()
        self._expire_pending(now)
        wait = self.engine.time_until_next_ms(now)
        for event in self._pending:
            wait = min(wait, max(0, event.deadline_ms - now))
        return max(0, min(MAX_WAIT_MS, wait))

    def after_io(self) -> None:
        """After I/O: learn the share protocol version from the first negotiation,
        the client instance id from the first telemetry answer, and publish the
        member's assignment when the engine replaced it."""
        assigned = self.engine.consume.assigned
        if assigned is not self._assigned_seen:
            # The engine replaces the list whole on each change: an identity
            # check costs nothing on the rounds where nothing changed.
            self._assigned_seen = assigned
            self.assignment = frozenset(TopicPartition(t.topic, t.partition) for t in assigned)
        if self.engine.capabilities is None:
            table = self.client.any_api_versions()
            if table is not None:
                self.engine.on_share_fetch_versions(table.max_version(ApiKey.SHARE_FETCH))
        telemetry = self.engine.telemetry
        if (telemetry is not None and not self.telemetry_identity.settled.is_set()
                and (telemetry.client_instance_id is not None or telemetry.disabled is not None)):
            self.telemetry_identity.settle(telemetry.client_instance_id, telemetry.disabled)

    def _send(self, req: UnsentRequest[Any], now_ms: int) -> None:
        self.client.send(
            req.node_id, _PURPOSE[req.channel], req.request, self._isolated(req), now_ms
        )

    def _isolated(self, req: UnsentRequest[Any]) -> ConnectionHandler:
        """Wrap an engine handler: pass it the time, and keep a bug in it from
        closing a healthy connection (dropping the responses buffered on it) or
        killing the shell's loop. The request whose handler failed is the only casualty."""

        def call(response: Any, error: KafkaError | None) -> None:
            try:
                req.answer(response, error, monotonic_ms())
            except Exception as exc:
                name = type(response).__name__ if response is not None else "failed request"
                self.log.exception("internal error while handling a %s", name)
                failure = KafkaError(
                    f"internal error in kafka-share while handling a {name}: "
                    f"{type(exc).__name__}: {exc} (the request failed; please report this)"
                )
                failure.__cause__ = exc
                self._buffer.add_background(ErrorEvent(failure))

        return call

    # -- application events --------------------------------------------------------------

    def apply(self, event: ApplicationEvent, now_ms: int) -> None:
        """Turn one application event into engine calls (on the loop's thread)."""
        engine = self.engine
        if isinstance(event, PollEvent):
            engine.on_app_poll(event.now_ms)
        elif isinstance(event, FetchEvent):
            self._apply_fetch(event, now_ms)
        elif isinstance(event, AcknowledgeAsyncEvent):
            engine.acknowledge_async(
                _node_acks(event.acks), event.deadline_ms,
                now_ms + event.linger_ms if event.linger_ms else 0,
            )
        elif isinstance(event, AcknowledgeSyncEvent):
            self._pending.append(event)
            engine.commit_sync(_node_acks(event.acks), event.deadline_ms, event)
        elif isinstance(event, AcknowledgeOnCloseEvent):
            self._pending.append(event)
            engine.close(_node_acks(event.acks), event.deadline_ms, event)
        elif isinstance(event, SubscriptionChangeEvent):
            if event.pattern is not None:
                engine.subscribe_pattern(event.pattern)
            else:
                engine.subscribe(event.topics)
            event.future.set_result(None)
        elif isinstance(event, LeaveGroupEvent):
            self._apply_leave(event)
        elif isinstance(event, StopEvent):
            self._on_stop()

    def _apply_fetch(self, event: FetchEvent, now_ms: int) -> None:
        engine = self.engine
        if event.ahead and not self._buffer.is_empty():
            # A response arrived after the application asked: fetching more
            # now would put a third response's records under lock.
            if event.acks:
                engine.acknowledge_async(
                    _node_acks(event.acks), event.ack_deadline_ms, now_ms + ACK_LINGER_MS
                )
        else:
            engine.fetch(
                _node_acks(event.acks), ahead=event.ahead, max_records=event.max_records,
                until_ms=event.until_ms,
            )
        if event.sent is not None:
            self._fetch_waiters.append(event.sent)

    def _apply_leave(self, event: LeaveGroupEvent) -> None:
        if self.engine.unsubscribe():
            self._leave_events.append(event)
            self._pending.append(event)
        elif self._awaits_telemetry(event):
            self._pending.append(event)  # done in _expire_pending
        else:
            event.future.set_result(None)

    def _awaits_telemetry(self, event: LeaveGroupEvent) -> bool:
        """The close's leave also waits for the terminating telemetry push to be
        answered (bounded by the close's deadline), so it is not cut off by the
        stop that follows."""
        return event.on_close and not self.engine.telemetry_closed

    def _complete_leaves(self) -> None:
        leaves, self._leave_events = self._leave_events, []
        for event in leaves:
            if not event.future.done() and not self._awaits_telemetry(event):
                event.future.set_result(None)

    # -- connections -------------------------------------------------------------------

    def _share_fetch_version(self, node_id: int) -> int | None:
        table = self.client.api_versions(node_id, Purpose.SHARE)
        return None if table is None else table.max_version(ApiKey.SHARE_FETCH)

    def _on_disconnect(self, node_id: int, purpose: Purpose, reason: KafkaError) -> None:
        self.engine.on_disconnect(node_id, _CHANNEL[purpose], reason)

    # -- deadlines -------------------------------------------------------------------------

    def _expire_pending(self, now_ms: int) -> None:
        still: list[CompletableEvent] = []
        for event in self._pending:
            if event.future.done():
                continue
            if isinstance(event, AcknowledgeOnCloseEvent) and self.engine.close_done:
                event.future.set_result({})
                continue
            if (isinstance(event, LeaveGroupEvent) and event not in self._leave_events
                    and not self._awaits_telemetry(event)):
                event.future.set_result(None)
                continue
            if now_ms >= event.deadline_ms:
                if isinstance(event, LeaveGroupEvent):
                    event.future.set_result(None)  # a leave that cannot be confirmed is done
                    continue
                if isinstance(event, AcknowledgeSyncEvent | AcknowledgeOnCloseEvent):
                    # The engine reports these through the sink when it sees the deadline.
                    self.engine.poll(now_ms)
                    if event.future.done():
                        continue
                event.future.set_exception(KafkaTimeoutError(
                    f"{_call_name(event)} did not complete before its deadline"
                ))
                continue
            still.append(event)
        self._pending = still

    def loop_failed(self, exc: BaseException, what: str) -> KafkaError:
        """``what`` (the shell's loop) raised: the engine may be half way through a
        change, so the consumer cannot go on. Logs it, records it as why the shell
        died (before the application can see it), reports it to the application
        as fatal, and returns it."""
        self.log.exception("the %s of %s failed", what, self._client_id)
        err = KafkaError(
            f"the consumer's {what} failed ({type(exc).__name__}: {exc}); the "
            "consumer cannot continue: close it and create a new one"
        )
        err.__cause__ = exc
        self.died = err
        self._buffer.add_background(ErrorEvent(err, fatal=True))
        return err

    def refused_dead(self, event: ApplicationEvent) -> bool:
        """Whether the loop has died: then ``event``'s call fails now with the
        cause (nobody will apply it), not at its deadline."""
        died = self.died
        if died is None:
            return False
        future = getattr(event, "future", None)
        if future is not None and not future.done():
            future.set_exception(died)
        return True

    def fail_calls(self, error: KafkaError) -> None:
        """Fail every waiting call with ``error`` (the shell is going away)."""
        for event in self._pending:
            if not event.future.done():
                event.future.set_exception(error)
        self._pending = []


def _node_acks(acks: AcksByPartition) -> dict[Any, tuple[int, Acknowledgements]]:
    return {tip: (na.node_id, na.acknowledgements) for tip, na in acks.items()}
