"""The asyncio I/O shell: the consumer engine driven by an event loop's callbacks.

It holds an :class:`~kafka_share._net.driver.EngineDriver` (engine, network
client, sink, waiting calls) as the network thread does, without a thread:

* sockets are watched with the loop's ``add_reader``/``add_writer``
  (:class:`LoopPoller`, plugged into the ``NetworkClient``), so it works under
  any loop that implements them (the default selector loops, uvloop);
* application events are applied at once, on the loop's thread, followed by a
  round (send what the engine wants now), so a request is on the wire when the
  call that asked for it goes on (a fetch ahead before the application decodes
  the response it holds); a wake-up from another thread schedules a round
  (``call_soon_threadsafe``, coalesced);
* one timer (``call_at``) covers the engine's next deadline
  (``time_until_next_ms``), the network client's (parked requests, request and
  connect timeouts) and the waiting calls' deadlines; it fires at least every
  :data:`WATCHDOG_MS` so a blocked loop is noticed;
* name resolution stays on the resolver's daemon thread, which wakes the loop
  with ``call_soon_threadsafe``.

Every round ends with :meth:`AsyncEngineShell._notify`, which wakes the
application's awaiting call (``poll``, ``commit_sync``...) to re-check the
fetch buffer, its background events and its futures (spurious wake-ups are
fine: callers loop and re-check, as the thread facade does).

A callback that raises (a bug) does not leave the consumer half-alive: the
shell closes, every waiting call fails and every later call raises a fatal
error that says to recreate the consumer (as when the network thread dies).
"""

from __future__ import annotations

import asyncio
import socket
import threading
from collections.abc import Callable

from kafka_share._handoff.events import ApplicationEvent, CompletedShareFetch, PollEvent
from kafka_share._handoff.fetch_buffer import FetchBuffer
from kafka_share._handoff.telemetry import TelemetryIdentity
from kafka_share.config import ShareConsumerConfig
from kafka_share.errors import KafkaError
from kafka_share.metrics import ShareConsumerMetrics
from kafka_share.models import TopicPartition
from kafka_share.share.capabilities import ShareFeature

from .client import monotonic_ms
from .connection import BrokerConnection
from .driver import EngineDriver

__all__ = ["WATCHDOG_MS", "AsyncEngineShell", "LoopPoller"]

#: The shell's timer fires at least this often: a loop blocked for longer is
#: noticed (and reported) within this much of its end.
WATCHDOG_MS = 1000
#: A loop blocked longer than this is reported even before the first heartbeat
#: response tells the interval.
DEFAULT_BLOCKED_WARN_MS = 5000


class LoopPoller:
    """A :class:`~kafka_share._net.client.Poller` on an event loop's reader and
    writer callbacks.

    Descriptors are remembered at registration: a socket is forgotten by the
    number it had (an event loop cannot look up a closed socket).
    """

    def __init__(
        self,
        loop: asyncio.AbstractEventLoop,
        on_ready: Callable[[BrokerConnection, bool, bool], None],
        on_wakeup: Callable[[], None],
    ) -> None:
        self._loop = loop
        self._on_ready = on_ready
        self._on_wakeup = on_wakeup
        #: watched sockets -> their descriptor
        self._fds: dict[socket.socket, int] = {}
        #: descriptors watched for writability
        self._writing: set[int] = set()
        self._loop_thread = threading.get_ident()

    def register(self, conn: BrokerConnection) -> None:
        sock = conn.sock
        fd = sock.fileno()
        self._fds[sock] = fd
        self._loop.add_reader(fd, self._on_ready, conn, True, False)
        self._loop.add_writer(fd, self._on_ready, conn, False, True)
        self._writing.add(fd)

    def update(self, conn: BrokerConnection, write: bool) -> None:
        fd = self._fds.get(conn.sock)
        if fd is None:
            return
        if write and fd not in self._writing:
            self._loop.add_writer(fd, self._on_ready, conn, False, True)
            self._writing.add(fd)
        elif not write and fd in self._writing:
            self._loop.remove_writer(fd)
            self._writing.discard(fd)

    def unregister(self, conn: BrokerConnection, sock: socket.socket) -> None:
        fd = self._fds.pop(sock, None)
        if fd is None:
            return
        self._loop.remove_reader(fd)
        if fd in self._writing:
            self._loop.remove_writer(fd)
            self._writing.discard(fd)

    def wakeup(self) -> None:
        """Schedule a round (from the resolver's thread or a token refresh)."""
        if threading.get_ident() == self._loop_thread:
            self._on_wakeup()
            return
        try:
            self._loop.call_soon_threadsafe(self._on_wakeup)
        except RuntimeError:
            pass  # the loop is closed: nobody is left to wake

    def close(self) -> None:
        for sock in list(self._fds):
            fd = self._fds.pop(sock)
            try:
                self._loop.remove_reader(fd)
                if fd in self._writing:
                    self._loop.remove_writer(fd)
            except RuntimeError:
                pass  # the loop is closed already
        self._writing.clear()


class AsyncEngineShell:
    """Drives one consumer's engine from the event loop it was created on."""

    def __init__(
        self,
        *,
        config: ShareConsumerConfig,
        client_id: str,
        fetch_buffer: FetchBuffer[CompletedShareFetch],
        metrics: ShareConsumerMetrics | None,
        loop: asyncio.AbstractEventLoop,
    ) -> None:
        self._loop = loop
        #: the engine, its network client and the application's waiting calls
        self._driver = driver = EngineDriver(
            config=config,
            client_id=client_id,
            fetch_buffer=fetch_buffer,
            metrics=metrics,
            poller=LoopPoller(loop, self._on_io, self._schedule_round),
        )
        self.member_id = driver.member_id
        self._client = driver.client
        self._timer: asyncio.TimerHandle | None = None
        #: when the armed timer is due (monotonic ms); a later callback means the
        #: loop was blocked
        self._timer_due_ms: int | None = None
        self._round_scheduled = False
        #: a callback to lower raised receive marks is scheduled (see _leave_loop)
        self._lowering_scheduled = False
        #: a PollEvent was applied without the round that follows events (see submit)
        self._round_owed = False
        #: the application's awaiting calls, woken after a round that gave them
        #: something to look at (data, a background event, a completed call)
        self._waiters: list[asyncio.Future[None]] = []
        self._news = False
        fetch_buffer.on_add = self._note_news
        self._loop_thread = threading.get_ident()
        #: the longest the loop was seen blocked (ms), for tests and metrics
        self.max_blocked_ms = 0

    # -- the application's side (loop thread) ---------------------------------------------

    def start(self) -> None:
        self._schedule_round()

    @property
    def pattern_matches(self) -> frozenset[str]:
        """What a pattern subscription matched at the last metadata refresh."""
        return self._driver.pattern_matches

    @property
    def assignment(self) -> frozenset[TopicPartition]:
        """The partitions assigned to the member, as of the last I/O."""
        return self._driver.assignment

    @property
    def telemetry_identity(self) -> TelemetryIdentity:
        """The client instance id once telemetry settles (any thread may wait)."""
        return self._driver.telemetry_identity

    def require(self, feature: ShareFeature) -> None:
        """Raise if the cluster's share protocol cannot do ``feature`` (unknown yet:
        the engine checks again before sending)."""
        self._driver.require(feature)

    def submit(self, event: ApplicationEvent) -> None:
        """Apply an application event and run a round at once: its requests are on
        the wire before the call goes on (a fetch ahead before the application
        decodes the response it holds), as the network thread would send them,
        whether or not the loop runs between the application's calls."""
        if self._driver.refused_dead(event):
            return
        future = getattr(event, "future", None)
        if future is not None:
            future.add_done_callback(self._note_news)
        self._guarded(self._driver.apply, event, monotonic_ms())
        if type(event) is PollEvent:
            # Nothing to send yet: the poll goes on to submit its fetch, whose
            # round covers both, or calls flush() before it waits or returns.
            self._round_owed = True
            return
        self._round_owed = False
        self._guarded(self._run_round)
        self._leave_loop()

    def flush(self) -> None:
        """Run the round owed to an event applied without one (a PollEvent)."""
        if self._round_owed:
            self._round_owed = False
            self._guarded(self._run_round)
            self._leave_loop()

    def _leave_loop(self) -> None:
        """After a round the application asked for, it goes on decoding or
        processing, and the loop reads nothing until it yields: let the responses
        on their way arrive whole meanwhile (``NetworkClient.raise_low_water_away``).
        The loop's next iteration lowers the marks again (a smaller response must
        wake its selector), and so does :meth:`wait`, before that selector runs."""
        client = self._client
        client.raise_low_water_away()
        if client.low_water_raised and not self._lowering_scheduled:
            self._lowering_scheduled = True
            self._loop.call_soon(self._lower_low_water)

    def _lower_low_water(self) -> None:
        self._lowering_scheduled = False
        self._guarded(self._client.lower_low_water)

    async def wait(self, timeout_ms: int) -> None:
        """Wait up to ``timeout_ms`` for news from a round (or :meth:`wake`). Also
        once the shell has stopped: a caller waiting out a timeout must not spin."""
        self._guarded(self._client.lower_low_water)
        waiter: asyncio.Future[None] = self._loop.create_future()
        self._waiters.append(waiter)
        timer = self._loop.call_later(max(0, timeout_ms) / 1000.0, _resolve, waiter)
        try:
            await waiter
        finally:
            timer.cancel()
            if not waiter.done():  # cancelled: forget it
                try:
                    self._waiters.remove(waiter)
                except ValueError:
                    pass

    def wake(self) -> None:
        """Wake the awaiting call. Safe from any thread and from a signal handler:
        it only schedules the wake-up (``call_soon_threadsafe``, which asyncio's own
        signal handling uses), never touches a future itself."""
        try:
            self._loop.call_soon_threadsafe(self._wake_now)
        except RuntimeError:
            pass  # the loop is closed

    def _wake_now(self) -> None:
        self._note_news()
        self._notify()

    def stop(self) -> None:
        """Close every connection and fail what still waits (close, or a consumer
        dropped without close)."""
        driver = self._driver
        if driver.died is None:
            driver.died = KafkaError("the consumer is closed")
        self._cancel_timer()
        driver.fail_calls(driver.died)
        try:
            self._client.close()
        except RuntimeError:
            pass  # the loop is closed already: the sockets were closed above it
        self._note_news()
        self._notify()

    # -- rounds (loop callbacks) ---------------------------------------------------------

    def _schedule_round(self) -> None:
        if self._round_scheduled or self._driver.died is not None:
            return
        self._round_scheduled = True
        self._loop.call_soon(self._guarded, self._scheduled_round)

    def _scheduled_round(self) -> None:
        self._round_scheduled = False
        self._run_round()

    def _on_io(self, conn: BrokerConnection, readable: bool, writable: bool) -> None:
        self._guarded(self._io_round, conn, readable, writable)

    def _io_round(self, conn: BrokerConnection, readable: bool, writable: bool) -> None:
        now = monotonic_ms()
        self._check_blocked(now)  # before the I/O: its round re-arms the timer
        quiet = self._client.on_ready(conn, readable, writable, now)
        due = self._timer_due_ms
        if quiet and due is not None and now < due:
            # Only bytes of a response still incomplete: nothing changed for the
            # engine or the client's timeouts, and the round armed for `due` stands.
            return
        self._client.finish(now)
        self._driver.after_io()
        self._run_round()

    def _on_timer(self) -> None:
        self._timer = None
        self._guarded(self._timer_round)

    def _timer_round(self) -> None:
        now = monotonic_ms()
        self._check_blocked(now)
        self._client.finish(now)
        self._driver.after_io()
        self._run_round()

    def _run_round(self) -> None:
        driver = self._driver
        if driver.died is not None:
            return
        now = monotonic_ms()
        self._check_blocked(now)  # before the timer is re-armed
        wait_ms = self._client.prepare(min(driver.round(now), WATCHDOG_MS))
        self._arm_timer(now, wait_ms)
        self._notify()

    def _arm_timer(self, now_ms: int, wait_ms: int) -> None:
        due = now_ms + wait_ms
        if self._timer is not None:
            if self._timer_due_ms == due:
                return
            self._timer.cancel()
        self._timer_due_ms = due
        self._timer = self._loop.call_at(self._loop.time() + wait_ms / 1000.0, self._on_timer)

    def _cancel_timer(self) -> None:
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
        self._timer_due_ms = None

    def _check_blocked(self, now_ms: int) -> None:
        """Report a loop that ran nothing of ours for longer than a heartbeat interval.

        The timer is due at most :data:`WATCHDOG_MS` after the previous round, so
        the lateness of whatever runs first is how long the loop was blocked (less
        at most that much).
        """
        due = self._timer_due_ms
        if due is None:
            return
        late_ms = now_ms - due
        if late_ms <= 0:
            return
        self.max_blocked_ms = max(self.max_blocked_ms, late_ms)
        driver = self._driver
        interval = driver.engine.membership.heartbeat_interval_ms or DEFAULT_BLOCKED_WARN_MS
        if late_ms >= interval:
            driver.log.warning(
                "the event loop was blocked for at least %d ms (longer than the heartbeat "
                "interval, %d ms): no heartbeat, fetch or acknowledgement could be sent "
                "meanwhile. A loop blocked for longer than the group's session timeout "
                "(group.share.session.timeout.ms, 45 s by default) gets this member fenced: "
                "the broker releases its records to other consumers and their "
                "acknowledgements fail. Move blocking work off the loop (e.g. "
                "asyncio.to_thread).", late_ms, interval,
            )
        self._timer_due_ms = None

    def _note_news(self, *_: object) -> None:
        self._news = True

    def _notify(self) -> None:
        """Wake the awaiting calls if a round gave them news (a wake-up per
        received chunk of a large response would make them re-check for nothing)."""
        if not self._news:
            return
        self._news = False
        waiters, self._waiters = self._waiters, []
        for waiter in waiters:
            _resolve(waiter)

    # -- failures -------------------------------------------------------------------------

    def _guarded(self, step: Callable[..., None], *args: object) -> None:
        """Run a step of the shell; a bug in it stops the shell (see the module doc)."""
        try:
            step(*args)
        except Exception as exc:
            if self._driver.died is not None:
                raise
            self._driver.loop_failed(exc, "event-loop driver")
            self.stop()


def _resolve(waiter: asyncio.Future[None]) -> None:
    if not waiter.done():
        waiter.set_result(None)
