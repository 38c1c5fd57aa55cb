"""The network thread: the I/O shell that drives the sans-IO consumer engine.

Theory of operation
-------------------
One loop (:meth:`NetworkThread._run_once`):

1. drain application events (subscribe, poll, fetch, acknowledgements, close)
   and turn each into a call on the :class:`~kafka_share.share.engine.ConsumerEngine`;
2. ask the engine for the requests to send now and hand them to the
   :class:`~kafka_share._net.client.NetworkClient` (which queues a request for a
   node it cannot reach yet until the reconnect backoff has passed);
3. wait in ``select`` until I/O, a wakeup from the application thread, or the
   engine's next deadline (every backoff is in it, so nothing spins while
   brokers are down).

A wait that only brought bytes of a response still incomplete (a 1 MiB+
ShareFetch response takes many reads) skips steps 1 and 2 and the client's
timeout checks next time round: nothing they look at has changed, and the
deadline they computed still stands (``NetworkClient.poll_quiet``).

Responses run their handlers inside step 3, on this thread, so the engine needs
no locks. Each handler is called through ``EngineDriver._isolated``: a bug in one
handler is logged with its stack and reported to the application, and fails
that request only; the connection and the thread carry on. If the thread dies
anyway, every waiting call fails at once and every later call fails straight
away with an error that says so.

The engine's results (plain values) reach the application through the fetch
buffer; the futures of the application's waiting calls are completed here.
Everything but the thread, its event queue and who runs the loop is the
:class:`EngineDriver` (``_net/driver.py``) it holds, as the asyncio shell holds
one: the thread runs its rounds, and is told of a stop by ``on_stop``.
"""

from __future__ import annotations

import queue
import threading

from kafka_share._handoff.events import (
    ApplicationEvent,
    CompletableEvent,
    CompletedShareFetch,
    FetchEvent,
    PollEvent,
    StopEvent,
)
from kafka_share._handoff.fetch_buffer import FetchBuffer
from kafka_share._handoff.telemetry import TelemetryIdentity
from kafka_share.config import ShareConsumerConfig
from kafka_share.errors import KafkaError
from kafka_share.metrics import ShareConsumerMetrics
from kafka_share.models import TopicPartition
from kafka_share.share.capabilities import ShareFeature
from kafka_share.share.engine import MAX_WAIT_MS

from .client import monotonic_ms
from .driver import EngineDriver
from .loop_owner import LoopOwner, LoopOwnership

__all__ = ["NetworkThread"]

#: how often an application waiting for the loop checks that the network thread lives
_HANDOVER_CHECK_S = 0.05


class NetworkThread:
    """Owns the sockets of one consumer and drives its engine from its own thread."""

    def __init__(
        self,
        *,
        config: ShareConsumerConfig,
        client_id: str,
        fetch_buffer: FetchBuffer[CompletedShareFetch],
        metrics: ShareConsumerMetrics | None = None,
    ) -> None:
        #: the engine, its network client and the application's waiting calls
        self._driver = driver = EngineDriver(
            config=config, client_id=client_id, fetch_buffer=fetch_buffer, metrics=metrics,
            on_stop=self._on_stop,
        )
        self.member_id = driver.member_id
        self._client = driver.client
        self._events: queue.SimpleQueue[ApplicationEvent] = queue.SimpleQueue()
        self._stop = threading.Event()
        #: a PollEvent was queued without waking the thread (see submit)
        self._wake_owed = False
        #: a FetchEvent was queued without the round that sends it (see submit)
        self._round_owed = False
        #: until when the loop may skip its round (see _run_once); None: it may not
        self._quiet_due_ms: int | None = None
        #: when the loop last went round (either thread; monotonic ms)
        self.last_round_ms = 0
        #: which thread runs the loop (see _net/loop_owner.py): moved under
        #: _owner_lock, its owner read without it (only the application thread
        #: moves the loop out of APPLICATION, only the network thread out of
        #: NETWORK and HANDING_OVER toward the application)
        self._ownership = LoopOwnership()
        self._owner_lock = threading.Lock()
        #: set when the loop is handed over to the application thread
        self._handed = threading.Event()
        #: set when the network thread should look at the owner again (a release, stop)
        self._owner_changed = threading.Event()
        self._thread = threading.Thread(
            target=self._run, name=f"kafka-share-network-{client_id}", daemon=True
        )

    # -- application-thread API ------------------------------------------------------

    def start(self) -> None:
        self._thread.start()

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
        if self._driver.refused_dead(event):
            return  # nobody drains the queue any more
        self._events.put(event)
        owner = self._ownership.owner
        if owner is LoopOwner.APPLICATION:
            # This thread runs the loop: its next round applies the event. A
            # fetch goes on the wire now, as the network thread would send it
            # (a fetch ahead before the application decodes what it holds).
            if type(event) is FetchEvent:
                if event.then_waits:
                    # The poll waits next, and its first round sends it (or
                    # run_owed_round, if the poll ends instead): one round less
                    # per response, a round being 50-100 µs of CPU.
                    self._round_owed = True
                else:
                    self.drive(0)
            return
        if owner is LoopOwner.AWAY and not isinstance(event, (CompletableEvent, StopEvent)):
            # Nothing waits on it: the next poll applies it, or the network
            # thread once it takes the loop back (AWAY_MS).
            return
        self.release_loop()
        if type(event) is PollEvent:
            # The poll that queued it goes on to submit its fetch, which wakes the
            # thread for both, or calls flush() before it waits or returns: one
            # wakeup per poll instead of two, each a hand-over of the GIL to
            # this thread while the application thread is on its way to the fetch.
            self._wake_owed = True
        else:
            self._wake_owed = False
            self._client.wakeup()
        died = self._driver.died
        if died is not None:  # died while we were putting it
            self._fail_pending(died)

    def run_owed_round(self) -> None:
        """Run the round a FetchEvent queued without one is owed (a poll returns
        without having waited: its timeout ran out), so the fetch is on the wire
        before the application goes on (application thread, running the loop)."""
        if self._round_owed:
            self.drive(0)

    def flush(self) -> None:
        """Wake the thread for an event queued without a wakeup (a PollEvent).
        The application thread calls it before it waits and when a poll returns."""
        if self._wake_owed:
            self._wake_owed = False
            self._client.wakeup()

    # -- the loop on the application thread ------------------------------------------

    def enter_loop(self) -> bool:
        """A poll starts: take the loop (application thread). True when this
        thread runs it until :meth:`leave_loop`; False when it cannot (the
        network thread has stopped): wait as before, it completes nothing."""
        if self._driver.died is not None:
            return False
        with self._owner_lock:
            runs = self._ownership.enter()
            if not runs:
                self._handed.clear()
        if runs:
            return True
        self._client.wakeup()  # out of select: it hands over after its round
        try:
            while not self._handed.wait(_HANDOVER_CHECK_S):
                if self._driver.died is not None or not self._thread.is_alive():
                    with self._owner_lock:
                        gave_up = self._ownership.cancel()
                    if gave_up:
                        return False
        except BaseException:
            # Interrupted while waiting (a KeyboardInterrupt): this poll will not
            # run the loop. Left asked for, or handed over to a thread that does
            # not run it, the loop would stop (no heartbeats) and the next poll
            # could not ask again; so give it back, whichever side of the
            # hand-over this is on.
            with self._owner_lock:
                withdrawn = self._ownership.cancel()
            if not withdrawn:
                self.release_loop()
            raise
        return True

    def leave_loop(self) -> None:
        """A poll returns or raises: keep the loop until the next one (or until
        the network thread takes it back, see ``AWAY_MS``)."""
        with self._owner_lock:
            self._ownership.leave(monotonic_ms())
        if self._round_owed:
            # The poll raised before the wait that was to send its fetch: the
            # network thread sends it now rather than once it takes the loop back.
            self.release_loop()

    def release_loop(self) -> None:
        """Let the network thread run the loop (before a call it completes)."""
        if self._ownership.owner is LoopOwner.NETWORK:
            return
        with self._owner_lock:
            woken = self._ownership.release()
        if woken:
            self._owner_changed.set()

    def drive(self, max_wait_ms: int) -> bool:
        """One round of the loop on the application thread, waiting at most
        ``max_wait_ms`` for I/O. False (nothing done) unless this thread runs
        the loop (:meth:`enter_loop`).

        An exception out of the round (a ``KeyboardInterrupt``) leaves the
        consumer usable if it came while the loop waited for I/O (nothing was
        half done): the network thread takes the loop back. Anywhere else the
        engine may be half way through a change, as when the network thread's
        loop fails: the consumer cannot continue.
        """
        if self._ownership.owner is not LoopOwner.APPLICATION:
            return False
        client = self._client
        try:
            self._run_once(max_wait_ms)
        except BaseException as exc:
            if client.waiting:
                client.waiting = False
                self.release_loop()
            else:
                self._fail_loop(exc)
                # Stopped before released: the network thread only closes down.
                self._stop.set()
                self.release_loop()
            raise
        # This thread goes on to decode or to the application, reading nothing
        # until its next round: let the responses on their way arrive whole.
        client.raise_low_water_away()
        return True

    @property
    def runs_loop(self) -> bool:
        """Whether the application thread runs the loop now (application thread)."""
        return self._ownership.owner is LoopOwner.APPLICATION

    def wake_loop(self) -> None:
        """End the loop's wait in ``select``, whichever thread runs it (any
        thread, or a signal handler: one byte to a socket)."""
        self._client.wakeup()

    def stop(self, timeout_ms: int) -> None:
        """Stop the loop and wait up to ``timeout_ms`` for the thread to end."""
        self.submit(StopEvent())
        self._thread.join(max(0.05, timeout_ms / 1000.0))
        if self._thread.is_alive():
            self._stop.set()
            self._client.wakeup()
            self._thread.join(1.0)

    def stop_now(self) -> None:
        self._stop.set()
        self._owner_changed.set()
        self._client.wakeup()

    def _on_stop(self) -> None:
        """The driver applied a StopEvent (close has flushed what it could)."""
        self._stop.set()
        self._owner_changed.set()

    # -- the loop ------------------------------------------------------------------------

    def _run(self) -> None:
        try:
            while not self._stop.is_set():
                if self._ownership.owner in (LoopOwner.APPLICATION, LoopOwner.AWAY):
                    # The application thread holds the loop: take it back once
                    # it has been away long enough, else look again later.
                    with self._owner_lock:
                        now = monotonic_ms()
                        mine = self._ownership.reclaim(now)
                        sleep_ms = self._ownership.check_after_ms(now)
                    if not mine:
                        self._owner_changed.wait(sleep_ms / 1000.0)
                        self._owner_changed.clear()
                        continue
                self._run_once()
                if self._ownership.owner is LoopOwner.HANDING_OVER:
                    with self._owner_lock:
                        handed = self._ownership.hand_over()
                    if handed:
                        self._handed.set()
        except BaseException as exc:  # the app must learn the engine died, not hang
            self._fail_loop(exc)
        finally:
            driver = self._driver
            if driver.died is None:
                driver.died = KafkaError("the consumer is closed")
            self._fail_pending(driver.died)
            self._client.close()

    def _fail_loop(self, exc: BaseException) -> None:
        """The loop raised (on either thread): the engine may be half way through a
        change, so the consumer cannot go on; every waiting and later call fails."""
        self._fail_pending(self._driver.loop_failed(exc, "network thread"))

    def _run_once(self, max_wait_ms: int = MAX_WAIT_MS) -> None:
        now = monotonic_ms()
        self.last_round_ms = now
        quiet_due = self._quiet_due_ms
        if quiet_due is not None and now < quiet_due and self._events.empty():
            quiet_due = min(quiet_due, now + max_wait_ms)
            # The last wait only brought bytes of a response still incomplete: the
            # engine has nothing new (no response, no event, no deadline reached),
            # so its round would only repeat itself. Wait on.
            self._quiet_due_ms = self._client.poll_quiet(quiet_due, now)
            if self._quiet_due_ms is None:
                self._driver.after_io()
            return
        self._drain_events(now)
        if self._stop.is_set():
            return
        driver = self._driver
        self._quiet_due_ms = self._client.poll(min(driver.round(now), max_wait_ms))
        driver.after_io()

    def _drain_events(self, now_ms: int) -> None:
        self._round_owed = False  # this round applies the events and sends
        driver = self._driver
        while True:
            try:
                event = self._events.get_nowait()
            except queue.Empty:
                return
            driver.apply(event, now_ms)

    def _fail_pending(self, error: KafkaError) -> None:
        self._driver.fail_calls(error)
        while True:
            try:
                ev = self._events.get_nowait()
            except queue.Empty:
                break
            fut = getattr(ev, "future", None)
            if fut is not None and not fut.done():
                fut.set_exception(error)
