"""The network client: connections by (node, purpose) and their readiness poller.

Only the thread driving the client calls into this module, except
:meth:`NetworkClient.wakeup`, which any thread may call to end a blocking
:meth:`NetworkClient.poll` early (or, under an event loop, to schedule a round).

*How* the client waits for socket readiness is pluggable (:class:`Poller`): the
network thread uses :class:`SelectorPoller` (one ``selectors`` selector and a
wake socketpair) and blocks in :meth:`NetworkClient.poll`; the asyncio shell
(``kafka_share._net.aio``) registers the same sockets with the event loop's
reader/writer callbacks and calls the three steps of ``poll`` itself:
:meth:`NetworkClient.prepare` (send parked requests, compute how long it may
wait), :meth:`NetworkClient.on_ready` (one ready connection) and
:meth:`NetworkClient.finish` (timeouts, idle and closed connections).

A large response arrives over many reads, and only the one completing it gives
the driver anything new: :meth:`NetworkClient.on_ready` says when a read did no
more than add bytes to a response still incomplete, :meth:`NetworkClient.poll`
then returns the time until which nothing else needs doing, and the network
thread waits on with :meth:`NetworkClient.poll_quiet` (no engine round, no
timeout checks) until something completes, a wakeup comes or that time is up.

Connections are kept per *purpose* as well as per node. Share traffic (ShareFetch,
ShareAcknowledge) gets its own connection because the broker ties a share session
to the connection it was opened on and answers requests on one connection in order:
a ShareFetch long-polling for ``fetch.max.wait.ms`` would otherwise delay the
heartbeats queued behind it. Group traffic (FindCoordinator, ShareGroupHeartbeat)
and metadata use the ``CONTROL`` connection.

A request for a node that cannot be connected to right now (its reconnect
backoff has not passed) is *parked*: it waits here, once, until the backoff has
passed and then goes out on a new connection, or fails when its deadline passes.
The engine never sees a synchronous failure it would answer by building the same
request again, and :meth:`NetworkClient.poll` sleeps until the earliest backoff
or deadline instead of spinning.

Reconnects back off exponentially with jitter (``reconnect.backoff.ms`` up to
``reconnect.backoff.max.ms``), and the connection setup timeout grows the same
way (``socket.connection.setup.timeout.ms`` up to ``.max.ms``), as in Java.
A broker that stays unreachable is reported at WARNING once it has lasted
``UNREACHABLE_WARN_MS`` (single failures are routine during restarts and are
logged at DEBUG/INFO), and its recovery at INFO.
"""

from __future__ import annotations

import enum
import logging
import selectors
import socket
import time
from collections import deque
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, Protocol

import attrs

from kafka_share._log import Logger
from kafka_share._reprs import attrs_repr
from kafka_share.config import SecurityProtocol, ShareConsumerConfig
from kafka_share.errors import KafkaError, KafkaTimeoutError, NetworkError
from kafka_share.protocol.api_keys import ApiVersionsTable
from kafka_share.share.backoff import ExponentialBackoff

from .connection import (
    RECEIVE_LOW_WATER_BYTES,
    BrokerConnection,
    ConnectionState,
    ResponseHandler,
)
from .resolver import Resolver
from .security_checks import cleartext_credentials_warning

if TYPE_CHECKING:
    from .security import ConnectionSecurity

__all__ = ["NetworkClient", "Poller", "Purpose", "SelectorPoller", "monotonic_ms"]

log = logging.getLogger("kafka_share.net")


def _security(config: ShareConsumerConfig) -> ConnectionSecurity | None:
    """The TLS context and SASL credentials of ``config`` (None: PLAINTEXT, for
    which the TLS and SASL modules are never imported)."""
    if config.security_protocol is SecurityProtocol.PLAINTEXT:
        return None
    from .security import security_from_config  # noqa: PLC0415

    return security_from_config(config)


def monotonic_ms() -> int:
    return time.monotonic_ns() // 1_000_000


#: How long a node must have been unreachable before it is reported at WARNING.
UNREACHABLE_WARN_MS = 10_000
#: How often a node that stays unreachable is reported again at WARNING.
UNREACHABLE_REPEAT_MS = 60_000


@attrs_repr
@attrs.define(eq=False, repr=False)
class _Parked:
    request: Any
    handler: ResponseHandler
    version: int | None
    timeout_ms: int | None
    deadline_ms: int


@attrs_repr
@attrs.define(eq=False, repr=False)
class _NodeHealth:
    """Reconnect bookkeeping of one node."""

    #: consecutive connection attempts that never got ready
    failures: int = 0
    #: no new connection before this time
    not_before_ms: int = 0
    #: when the current run of failures started (None: reachable)
    down_since_ms: int | None = None
    last_warning_ms: int | None = None
    last_error: str = ""


class Purpose(enum.Enum):
    CONTROL = "control"
    SHARE = "share"


AddressLookup = Callable[[int], tuple[str, int] | None]


class Poller(Protocol):
    """Tells the client's driver when a connection's socket is ready."""

    def register(self, conn: BrokerConnection) -> None:
        """Watch ``conn.sock`` (readable and writable until told otherwise)."""

    def update(self, conn: BrokerConnection, write: bool) -> None:
        """Watch ``conn.sock`` for readability, and for writability if ``write``."""

    def unregister(self, conn: BrokerConnection, sock: socket.socket) -> None:
        """Stop watching ``sock`` (still open; unknown sockets are ignored)."""

    def wakeup(self) -> None:
        """End the driver's wait early. Safe from any thread."""

    def close(self) -> None:
        """Release what the poller holds."""


class SelectorPoller:
    """A ``selectors`` selector plus a wake socketpair, for a thread blocking in
    :meth:`select`."""

    def __init__(self) -> None:
        self._selector = selectors.DefaultSelector()
        self._wake_r, self._wake_w = socket.socketpair()
        self._wake_r.setblocking(False)
        self._wake_w.setblocking(False)
        self._selector.register(self._wake_r, selectors.EVENT_READ, None)
        #: Whether the last :meth:`select` was ended by :meth:`wakeup`.
        self.woken = False
        #: The events each connection's socket is registered for.
        self._events: dict[socket.socket, int] = {}

    def register(self, conn: BrokerConnection) -> None:
        events = selectors.EVENT_READ | selectors.EVENT_WRITE
        self._selector.register(conn.sock, events, conn)
        self._events[conn.sock] = events

    def update(self, conn: BrokerConnection, write: bool) -> None:
        events = selectors.EVENT_READ | selectors.EVENT_WRITE if write else selectors.EVENT_READ
        # Every round asks, for every connection: answered from this poller's own
        # record of what it registered (the selector's get_key is five Python calls).
        registered = self._events.get(conn.sock)
        if registered is None or registered == events:
            return
        try:
            self._selector.modify(conn.sock, events, conn)
        except (KeyError, ValueError):  # closed meanwhile, as get_key would have said
            self._events.pop(conn.sock, None)
            return
        self._events[conn.sock] = events

    def unregister(self, conn: BrokerConnection, sock: socket.socket) -> None:
        self._events.pop(sock, None)
        try:
            self._selector.unregister(sock)
        except (KeyError, ValueError):
            pass

    def select(self, timeout_ms: int) -> list[tuple[BrokerConnection, bool, bool]]:
        """Wait up to ``timeout_ms``; the ready connections as (conn, readable, writable).
        :attr:`woken` tells whether :meth:`wakeup` ended the wait."""
        ready: list[tuple[BrokerConnection, bool, bool]] = []
        self.woken = False
        for key, mask in self._selector.select(max(0.0, timeout_ms / 1000.0)):
            conn = key.data
            if conn is None:
                self.woken = True
                self._drain_wakeups()
                continue
            ready.append(
                (conn, bool(mask & selectors.EVENT_READ), bool(mask & selectors.EVENT_WRITE))
            )
        return ready

    def wakeup(self) -> None:
        try:
            self._wake_w.send(b"\x00")
        except (BlockingIOError, OSError):
            # A full pipe already guarantees a wakeup; a closed one means shutdown.
            pass

    def _drain_wakeups(self) -> None:
        try:
            while self._wake_r.recv(4096):
                pass
        except (BlockingIOError, OSError):
            pass

    def close(self) -> None:
        self._selector.close()
        self._wake_r.close()
        self._wake_w.close()


class NetworkClient:
    """Owns every socket of one consumer."""

    @classmethod
    def from_config(
        cls,
        config: ShareConsumerConfig,
        *,
        client_id: str,
        address_of: AddressLookup,
        logger: Logger | None = None,
        poller: Poller | None = None,
    ) -> NetworkClient:
        """A client with the connection settings of ``config``, security (TLS, SASL)
        included: the one transport the consumers and the admin client share."""
        warning = cleartext_credentials_warning(config)
        if warning is not None:
            (logger or log).warning(warning)  # once per client
        return cls(
            client_id=client_id,
            address_of=address_of,
            connect_timeout_ms=config.socket_connection_setup_timeout_ms,
            connect_timeout_max_ms=config.socket_connection_setup_timeout_max_ms,
            request_timeout_ms=config.request_timeout_ms,
            reconnect_backoff_ms=config.reconnect_backoff_ms,
            reconnect_backoff_max_ms=config.reconnect_backoff_max_ms,
            receive_buffer_bytes=config.receive_buffer_bytes,
            send_buffer_bytes=config.send_buffer_bytes,
            connections_max_idle_ms=config.connections_max_idle_ms,
            dns_lookup=config.client_dns_lookup,
            logger=logger,
            security=_security(config),
            poller=poller,
        )

    def __init__(
        self,
        *,
        client_id: str,
        address_of: AddressLookup,
        connect_timeout_ms: int,
        request_timeout_ms: int,
        connect_timeout_max_ms: int | None = None,
        reconnect_backoff_ms: int,
        reconnect_backoff_max_ms: int,
        receive_buffer_bytes: int = -1,
        send_buffer_bytes: int = -1,
        receive_low_water_bytes: int = RECEIVE_LOW_WATER_BYTES,
        connections_max_idle_ms: int = -1,
        dns_lookup: str = "use_all_dns_ips",
        logger: Logger | None = None,
        security: ConnectionSecurity | None = None,
        poller: Poller | None = None,
    ) -> None:
        self._client_id = client_id
        #: True while the loop waits in ``select`` (see ``_wait``)
        self.waiting = False
        #: TLS context and SASL credentials of every connection (None: PLAINTEXT).
        self._security = security
        self._receive_buffer_bytes = receive_buffer_bytes
        self._send_buffer_bytes = send_buffer_bytes
        self._receive_low_water_bytes = receive_low_water_bytes
        #: some connection's SO_RCVLOWAT is raised (see raise_low_water_away)
        self.low_water_raised = False
        self._log: Logger = logger or log
        self._address_of = address_of
        self._connect_timeout_ms = connect_timeout_ms
        self._request_timeout_ms = request_timeout_ms
        self._reconnect_backoff = ExponentialBackoff(
            reconnect_backoff_ms, max(reconnect_backoff_ms, reconnect_backoff_max_ms)
        )
        self._connect_timeout = ExponentialBackoff(
            connect_timeout_ms, max(connect_timeout_ms, connect_timeout_max_ms or 0)
        )
        self._poller: Poller = poller if poller is not None else SelectorPoller()
        self._resolver = Resolver(self.wakeup, dns_lookup=dns_lookup)
        if security is not None and security.token_source is not None:
            # A connection waiting for an OAUTHBEARER token goes on when it arrives.
            security.token_source.on_update = self.wakeup
        #: nodes whose name is being resolved (the resolver wakes the loop when done)
        self._resolving: set[int] = set()
        self._max_idle_ms = connections_max_idle_ms
        self._connections: dict[tuple[int, Purpose], BrokerConnection] = {}
        self._health: dict[int, _NodeHealth] = {}
        #: requests waiting for a node's reconnect backoff to pass
        self._parked: dict[tuple[int, Purpose], deque[_Parked]] = {}
        #: Called with (node_id, purpose, reason) after a connection closes.
        self.on_disconnect: Callable[[int, Purpose, KafkaError], None] | None = None

    # -- connection management -----------------------------------------------

    def connection(self, node_id: int, purpose: Purpose) -> BrokerConnection | None:
        conn = self._connections.get((node_id, purpose))
        if conn is not None and conn.state is ConnectionState.CLOSED:
            return None
        return conn

    def api_versions(self, node_id: int, purpose: Purpose) -> ApiVersionsTable | None:
        conn = self.connection(node_id, purpose)
        return conn.api_versions if conn is not None else None

    def any_api_versions(self) -> ApiVersionsTable | None:
        """The versions negotiated on any ready connection (brokers of one cluster
        run one release, and ApiVersions lists every API, whatever the purpose)."""
        for conn in self._connections.values():
            if conn.api_versions is not None:
                return conn.api_versions
        return None

    def can_connect(self, node_id: int, now_ms: int) -> bool:
        health = self._health.get(node_id)
        return health is None or now_ms >= health.not_before_ms

    def ensure_connection(
        self, node_id: int, purpose: Purpose, now_ms: int
    ) -> BrokerConnection | None:
        """The live connection, starting one if allowed; None while backing off."""
        conn = self.connection(node_id, purpose)
        if conn is not None:
            return conn
        if not self.can_connect(node_id, now_ms):
            return None
        # A connection that closed since the last poll (e.g. while sending) must be
        # reaped first: its disconnect must reach the managers before it is replaced.
        self._reap_closed(now_ms)
        if not self.can_connect(node_id, now_ms):
            return None
        address = self._address_of(node_id)
        if address is None:
            return None
        host, port = address
        health = self._health.get(node_id)
        attempts = health.failures if health is not None else 0
        try:
            # Resolution runs off this thread: a slow DNS must not stall heartbeats.
            addresses = self._resolver.lookup(host, port, bootstrap=node_id < 0)
            if addresses is None:
                self._resolving.add(node_id)
                return None
            self._resolving.discard(node_id)
            conn = BrokerConnection(
                node_id=node_id,
                host=host,
                port=port,
                client_id=self._client_id,
                now_ms=now_ms,
                addresses=addresses,
                connect_timeout_ms=self._connect_timeout.backoff_ms(attempts),
                request_timeout_ms=self._request_timeout_ms,
                receive_buffer_bytes=self._receive_buffer_bytes,
                send_buffer_bytes=self._send_buffer_bytes,
                receive_low_water_bytes=self._receive_low_water_bytes,
                logger=self._log,
                security=self._security,
            )
        except KafkaError as exc:
            self._resolving.discard(node_id)
            self._log.debug("cannot connect to node %s at %s:%s: %s", node_id, host, port, exc)
            self._note_failure(node_id, f"{host}:{port}", str(exc), now_ms)
            return None
        self._connections[(node_id, purpose)] = conn
        conn.on_close = self._unregister
        conn.on_socket_change = self._reregister
        self._poller.register(conn)
        return conn

    def _unregister(self, conn: BrokerConnection) -> None:
        self._poller.unregister(conn, conn.sock)

    def _reregister(self, conn: BrokerConnection, old: socket.socket) -> None:
        self._poller.unregister(conn, old)
        self._poller.register(conn)

    def send(
        self,
        node_id: int,
        purpose: Purpose,
        request: Any,
        handler: ResponseHandler,
        now_ms: int,
        *,
        version: int | None = None,
        timeout_ms: int | None = None,
    ) -> bool:
        """Send ``request``, or park it until the node may be connected to again.

        Returns False (the handler already called with a NetworkError) only when
        the node's address is unknown.
        """
        key = (node_id, purpose)
        conn = self.ensure_connection(node_id, purpose, now_ms)
        if conn is None:
            if self._address_of(node_id) is None:
                handler(None, NetworkError(f"the address of node {node_id} is not known"))
                return False
            deadline = now_ms + (self._request_timeout_ms if timeout_ms is None else timeout_ms)
            self._parked.setdefault(key, deque()).append(
                _Parked(request, handler, version, timeout_ms, deadline)
            )
            return True
        conn.send(request, handler, now_ms=now_ms, version=version, timeout_ms=timeout_ms)
        self._update_interest(conn)
        return True

    def _unpark(self, now_ms: int) -> None:
        """Send parked requests whose node may be connected to now; fail those whose
        deadline has passed."""
        for key in list(self._parked):
            queue = self._parked[key]
            node_id, purpose = key
            while queue and now_ms >= queue[0].deadline_ms:
                p = queue.popleft()
                health = self._health.get(node_id)
                why = f": {health.last_error}" if health is not None and health.last_error else ""
                p.handler(None, KafkaTimeoutError(
                    f"request {type(p.request).__name__} could not be sent: node {node_id} "
                    f"could not be reached before the request timed out{why}"
                ))
            if not queue:
                del self._parked[key]
                continue
            if not self.can_connect(node_id, now_ms):
                continue
            conn = self.ensure_connection(node_id, purpose, now_ms)
            if conn is None:
                if self._address_of(node_id) is None:
                    del self._parked[key]
                    for p in queue:
                        p.handler(None, NetworkError(f"the address of node {node_id} is not known"))
                continue
            del self._parked[key]
            for p in queue:
                conn.send(p.request, p.handler, now_ms=now_ms, version=p.version,
                          timeout_ms=p.timeout_ms)
            self._update_interest(conn)

    def _next_parked_ms(self, now_ms: int) -> int | None:
        """When a parked request next needs attention (its node's backoff ends or its
        deadline passes)."""
        times: list[int] = []
        for (node_id, _purpose), queue in self._parked.items():
            if queue:
                times.append(queue[0].deadline_ms)
                if node_id in self._resolving:
                    continue  # the resolver wakes the loop
                health = self._health.get(node_id)
                times.append(health.not_before_ms if health is not None else now_ms)
        return min(times) if times else None

    def close(self) -> None:
        parked = [p for q in self._parked.values() for p in q]
        self._parked.clear()
        for p in parked:
            p.handler(None, NetworkError("the consumer is closing"))
        for conn in list(self._connections.values()):
            conn.close(NetworkError("the consumer is closing"))
        self._reap_closed(monotonic_ms())
        self._poller.close()

    # -- the loop ---------------------------------------------------------------

    def wakeup(self) -> None:
        """Make a blocked :meth:`poll` return early. Safe from any thread."""
        self._poller.wakeup()

    def poll(self, timeout_ms: int) -> int | None:
        """Wait for I/O up to ``timeout_ms`` and run every ready connection's handlers
        (a :class:`SelectorPoller` only; an event loop calls the steps itself).

        Returns None, or, when all the wait brought was bytes of responses that
        are not complete yet (see :meth:`BrokerConnection.on_readable`), the time
        until which nothing but :meth:`poll_quiet` is needed: no handler ran and
        no application wakeup came, so the driver's round, this client's
        timeouts, parked requests and socket interests all stand as they were.
        """
        now = monotonic_ms()
        timeout_ms = self.prepare(timeout_ms, now)
        return self._wait(now + timeout_ms, timeout_ms)

    def poll_quiet(self, due_ms: int, now_ms: int) -> int | None:
        """The next wait after :meth:`poll` (or this) returned ``due_ms``: the same
        wait, without recomputing what cannot have changed. ``now_ms`` must be
        before ``due_ms``; returns as :meth:`poll`."""
        return self._wait(due_ms, due_ms - now_ms)

    def raise_low_water_away(self) -> None:
        """The loop's thread leaves it (the application thread, to decode or hand
        records out): every connection awaiting a response lets it arrive whole
        meanwhile (:meth:`BrokerConnection.raise_low_water_away`). The next wait
        lowers the marks again before it selects; a shell whose loop selects
        elsewhere (asyncio's) calls :meth:`lower_low_water` before that."""
        for conn in self._connections.values():
            if conn.raise_low_water_away():
                self.low_water_raised = True

    def lower_low_water(self) -> None:
        """Undo :meth:`raise_low_water_away` (nothing if nothing is raised)."""
        if not self.low_water_raised:
            return
        self.low_water_raised = False
        for conn in list(self._connections.values()):
            conn.restore_low_water()

    def _wait(self, due_ms: int, timeout_ms: int) -> int | None:
        poller = self._poller
        assert isinstance(poller, SelectorPoller)
        if self.low_water_raised:
            # Whichever thread waits now, it must be woken by any response.
            self.lower_low_water()
        # Set while nothing is half done: an exception out of the wait (a
        # KeyboardInterrupt on the application thread) leaves the loop intact.
        self.waiting = True
        ready = poller.select(timeout_ms)
        self.waiting = False
        now = monotonic_ms()
        # Nothing ready means a deadline (or the caller's timeout) is up.
        quiet = bool(ready) and not poller.woken and now < due_ms
        for conn, readable, writable in ready:
            if not self.on_ready(conn, readable, writable, now):
                quiet = False
        if quiet:
            # Skipping finish(): every deadline it checks is at or after due_ms,
            # and nothing was closed. Idle connections wait at most until due_ms.
            return due_ms
        self.finish(now)
        return None

    def prepare(self, timeout_ms: int, now_ms: int | None = None) -> int:
        """Send parked requests that may go now and bring every socket's interest up
        to date; returns how long the driver may wait (at most ``timeout_ms``)."""
        now = monotonic_ms() if now_ms is None else now_ms
        self._unpark(now)
        parked = self._next_parked_ms(now)
        if parked is not None:
            timeout_ms = min(timeout_ms, max(0, parked - now))
        for conn in self._connections.values():
            deadline = conn.next_deadline_ms()
            if deadline is not None:
                timeout_ms = min(timeout_ms, max(0, deadline - now))
        for conn in self._connections.values():
            self._update_interest(conn)
        return timeout_ms

    def on_ready(
        self, conn: BrokerConnection, readable: bool, writable: bool, now_ms: int
    ) -> bool:
        """Run one ready connection's I/O (and the handlers of its responses).
        True when it only read bytes of a response that is not complete yet
        (nothing changed for the driver: see :meth:`BrokerConnection.on_readable`)."""
        if conn.state is ConnectionState.CLOSED:
            return False
        if writable:
            conn.on_writable(now_ms)
            if readable and conn.is_open():
                conn.on_readable(now_ms)
            return False
        return readable and conn.on_readable(now_ms)

    def finish(self, now_ms: int) -> None:
        """After I/O: request and connect timeouts, idle and closed connections,
        parked requests whose node may be connected to now."""
        for conn in list(self._connections.values()):
            if conn.state is not ConnectionState.CLOSED:
                conn.check_timeouts(now_ms)
        self._close_idle(now_ms)
        self._reap_closed(now_ms)
        self._unpark(now_ms)

    def _close_idle(self, now_ms: int) -> None:
        """``connections.max.idle.ms``: close a connection with nothing in flight that
        has seen no traffic for that long (Java's selector does the same). A new one
        opens on the next request. (A share connection is never idle that long while
        the member polls: its ShareFetch long-polls every ``fetch.max.wait.ms``.)"""
        if self._max_idle_ms < 0:
            return
        for conn in list(self._connections.values()):
            if (
                conn.is_ready
                and conn.in_flight_count == 0
                and now_ms - conn.last_activity_ms >= self._max_idle_ms
            ):
                self._log.debug("closing connection to node %s: idle for %d ms",
                                conn.node_id, now_ms - conn.last_activity_ms)
                conn.close(NetworkError(f"connection to node {conn.node_id} closed: idle"))
    # -- internals ----------------------------------------------------------------

    def _update_interest(self, conn: BrokerConnection) -> None:
        if conn.state is ConnectionState.CLOSED:
            return
        self._poller.update(conn, conn.wants_write())

    def _note_failure(self, node_id: int, address: str, error: str, now_ms: int) -> None:
        health = self._health.setdefault(node_id, _NodeHealth())
        health.not_before_ms = now_ms + self._reconnect_backoff.backoff_ms(health.failures)
        health.failures += 1
        health.last_error = error
        if health.down_since_ms is None:
            health.down_since_ms = now_ms
        down_ms = now_ms - health.down_since_ms
        if down_ms >= UNREACHABLE_WARN_MS and (
            health.last_warning_ms is None
            or now_ms - health.last_warning_ms >= UNREACHABLE_REPEAT_MS
        ):
            health.last_warning_ms = now_ms
            what = "bootstrap server" if node_id < 0 else f"broker {node_id}"
            self._log.warning(
                "cannot reach %s at %s for %.0f s (%d attempts, retrying every %d ms at "
                "most): %s", what, address, down_ms / 1000, health.failures,
                self._reconnect_backoff.backoff_ms(health.failures), error,
            )

    def _note_ready(self, conn: BrokerConnection, now_ms: int) -> None:
        health = self._health.pop(conn.node_id, None)
        if health is not None and health.last_warning_ms is not None:
            down_ms = now_ms - (health.down_since_ms or now_ms)
            what = "bootstrap server" if conn.node_id < 0 else f"broker {conn.node_id}"
            self._log.info(
                "connected to %s at %s again after %.0f s", what, conn.address, down_ms / 1000
            )

    def _reap_closed(self, now_ms: int) -> None:
        for key, conn in list(self._connections.items()):
            if conn.state is not ConnectionState.CLOSED:
                if conn.is_ready and conn.node_id in self._health:
                    self._note_ready(conn, now_ms)
                continue
            del self._connections[key]
            if not conn.was_ready or conn.responses < 2:
                # Never got ready (TLS, SASL or ApiVersions failures included), or
                # closed before answering anything else: reconnecting at once would
                # only repeat it (wrong credentials must not storm the broker), so
                # back off as for a refused connection.
                reason = conn.close_reason or NetworkError("connection closed")
                self._note_failure(conn.node_id, conn.address, str(reason), now_ms)
            if self.on_disconnect is not None:
                reason = conn.close_reason or NetworkError("connection closed")
                self.on_disconnect(key[0], key[1], reason)
