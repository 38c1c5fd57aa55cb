"""The network client: connections by (node, purpose), one selector, one wake pipe.

Only the network thread calls into this module, except :meth:`NetworkClient.wakeup`,
which any thread may call to end a blocking :meth:`NetworkClient.poll` early.

Connections are kept per *purpose* as well as per node. Share traffic (ShareFetch,
ShareAcknowledge) gets its own connection because the broker ties a share session
to the connection it was opened on and answers requests on one connection in order:
a ShareFetch long-polling for ``fetch.max.wait.ms`` would otherwise delay the
heartbeats queued behind it. Group traffic (FindCoordinator, ShareGroupHeartbeat)
and metadata use the ``CONTROL`` connection.
"""

from __future__ import annotations

import enum
import logging
import selectors
import socket
import time
from collections.abc import Callable
from typing import Any

from kafka_share._log import Logger
from kafka_share.errors import KafkaError, NetworkError
from kafka_share.protocol.api_keys import ApiVersionsTable

from .connection import BrokerConnection, ConnectionState, ResponseHandler

__all__ = ["NetworkClient", "Purpose", "monotonic_ms"]

log = logging.getLogger("kafka_share.net")


def monotonic_ms() -> int:
    return time.monotonic_ns() // 1_000_000


class Purpose(enum.Enum):
    CONTROL = "control"
    SHARE = "share"


AddressLookup = Callable[[int], tuple[str, int] | None]


class NetworkClient:
    """Owns every socket of one consumer."""

    def __init__(
        self,
        *,
        client_id: str,
        address_of: AddressLookup,
        connect_timeout_ms: int,
        request_timeout_ms: int,
        reconnect_backoff_ms: int,
        reconnect_backoff_max_ms: int,
        receive_buffer_bytes: int = -1,
        send_buffer_bytes: int = -1,
        logger: Logger | None = None,
    ) -> None:
        self._client_id = client_id
        self._receive_buffer_bytes = receive_buffer_bytes
        self._send_buffer_bytes = send_buffer_bytes
        self._log: Logger = logger or log
        self._address_of = address_of
        self._connect_timeout_ms = connect_timeout_ms
        self._request_timeout_ms = request_timeout_ms
        self._reconnect_backoff_ms = reconnect_backoff_ms
        self._reconnect_backoff_max_ms = reconnect_backoff_max_ms
        self._selector = selectors.DefaultSelector()
        self._wake_r, self._wake_w = socket.socketpair()
        self._wake_r.setblocking(False)
        self._wake_w.setblocking(False)
        self._selector.register(self._wake_r, selectors.EVENT_READ, None)
        self._connections: dict[tuple[int, Purpose], BrokerConnection] = {}
        # node -> (earliest next attempt, consecutive failures)
        self._backoff: dict[int, tuple[int, int]] = {}
        #: Called with (node_id, purpose, reason) after a connection closes.
        self.on_disconnect: Callable[[int, Purpose, KafkaError], None] | None = None

    # -- connection management -----------------------------------------------

    def connection(self, node_id: int, purpose: Purpose) -> BrokerConnection | None:
        conn = self._connections.get((node_id, purpose))
        if conn is not None and conn.state is ConnectionState.CLOSED:
            return None
        return conn

    def is_ready(self, node_id: int, purpose: Purpose) -> bool:
        conn = self.connection(node_id, purpose)
        return conn is not None and conn.is_ready

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
        until, _ = self._backoff.get(node_id, (0, 0))
        return now_ms >= until

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
        try:
            conn = BrokerConnection(
                node_id=node_id,
                host=host,
                port=port,
                client_id=self._client_id,
                now_ms=now_ms,
                connect_timeout_ms=self._connect_timeout_ms,
                request_timeout_ms=self._request_timeout_ms,
                receive_buffer_bytes=self._receive_buffer_bytes,
                send_buffer_bytes=self._send_buffer_bytes,
                logger=self._log,
            )
        except KafkaError as exc:
            self._note_failure(node_id, now_ms)
            self._log.warning("cannot connect to node %s at %s:%s: %s", node_id, host, port, exc)
            return None
        self._connections[(node_id, purpose)] = conn
        conn.on_close = self._unregister
        self._selector.register(conn.sock, selectors.EVENT_READ | selectors.EVENT_WRITE, conn)
        return conn

    def _unregister(self, conn: BrokerConnection) -> None:
        try:
            self._selector.unregister(conn.sock)
        except (KeyError, ValueError):
            pass

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
        """Send ``request``; False (handler not called) when no connection can be made now."""
        conn = self.ensure_connection(node_id, purpose, now_ms)
        if conn is None:
            return False
        conn.send(request, handler, now_ms=now_ms, version=version, timeout_ms=timeout_ms)
        self._update_interest(conn)
        return True

    def close_node(self, node_id: int, reason: KafkaError | None = None) -> None:
        for (nid, _purpose), conn in list(self._connections.items()):
            if nid == node_id:
                conn.close(reason or NetworkError(f"connection to node {node_id} closed"))
        self._reap_closed(monotonic_ms())

    def close(self) -> None:
        for conn in list(self._connections.values()):
            conn.close(NetworkError("the consumer is closing"))
        self._reap_closed(monotonic_ms())
        self._selector.close()
        self._wake_r.close()
        self._wake_w.close()

    def has_in_flight(self) -> bool:
        return any(c.in_flight_count for c in self._connections.values())

    # -- the loop ---------------------------------------------------------------

    def wakeup(self) -> None:
        """Make a blocked :meth:`poll` return early. Safe from any thread."""
        try:
            self._wake_w.send(b"\x00")
        except (BlockingIOError, OSError):
            # A full pipe already guarantees a wakeup; a closed one means shutdown.
            pass

    def poll(self, timeout_ms: int) -> None:
        """Wait for I/O up to ``timeout_ms`` and run every ready connection's handlers."""
        now = monotonic_ms()
        for conn in self._connections.values():
            deadline = conn.next_deadline_ms()
            if deadline is not None:
                timeout_ms = min(timeout_ms, max(0, deadline - now))
        for conn in self._connections.values():
            self._update_interest(conn)
        events = self._selector.select(max(0.0, timeout_ms / 1000.0))
        now = monotonic_ms()
        for key, mask in events:
            conn = key.data
            if conn is None:
                self._drain_wakeups()
                continue
            assert isinstance(conn, BrokerConnection)
            if mask & selectors.EVENT_WRITE and conn.state is not ConnectionState.CLOSED:
                conn.on_writable(now)
            if mask & selectors.EVENT_READ and conn.state is not ConnectionState.CLOSED:
                conn.on_readable(now)
        for conn in list(self._connections.values()):
            if conn.state is not ConnectionState.CLOSED:
                conn.check_timeouts(now)
        self._reap_closed(now)

    # -- internals ----------------------------------------------------------------

    def _drain_wakeups(self) -> None:
        try:
            while self._wake_r.recv(4096):
                pass
        except (BlockingIOError, OSError):
            pass

    def _update_interest(self, conn: BrokerConnection) -> None:
        if conn.state is ConnectionState.CLOSED:
            return
        events = selectors.EVENT_READ
        if conn.wants_write():
            events |= selectors.EVENT_WRITE
        try:
            key = self._selector.get_key(conn.sock)
        except (KeyError, ValueError):
            return
        if key.events != events:
            self._selector.modify(conn.sock, events, conn)

    def _note_failure(self, node_id: int, now_ms: int) -> None:
        _, failures = self._backoff.get(node_id, (0, 0))
        delay = min(self._reconnect_backoff_max_ms, self._reconnect_backoff_ms * (2**failures))
        self._backoff[node_id] = (now_ms + delay, failures + 1)

    def _reap_closed(self, now_ms: int) -> None:
        for key, conn in list(self._connections.items()):
            if conn.state is not ConnectionState.CLOSED:
                if conn.is_ready:
                    self._backoff.pop(conn.node_id, None)
                continue
            del self._connections[key]
            try:
                self._selector.unregister(conn.sock)
            except (KeyError, ValueError):
                pass
            if conn.api_versions is None:
                self._note_failure(conn.node_id, now_ms)
            if self.on_disconnect is not None:
                reason = conn.close_reason or NetworkError("connection closed")
                self.on_disconnect(key[0], key[1], reason)
