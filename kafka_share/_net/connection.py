"""One TCP connection to one broker: non-blocking socket + the sans-IO codec.

Lifecycle (:data:`TRANSITIONS`): CONNECTING -> (socket connected) ->
NEGOTIATING (ApiVersions in flight) -> READY -> CLOSED. Requests queued before
READY wait and go out in order once versions are known, so every request is
encoded at the highest version both sides support. Connection setup is a
sequence of steps between the TCP connect and READY (today: ApiVersions); a TLS
handshake goes before it and SASL authentication after it, each a state of its
own in the table.

The name is resolved before the connection is made (see ``resolver.py``), and
the connection tries every address of it in order (``client.dns.lookup=
use_all_dns_ips``): "localhost" is often ``::1`` first while a broker listens
on ``127.0.0.1`` only.

Everything here runs on the network thread; nothing blocks. A request that
gets no answer within ``request_timeout_ms`` closes the connection, as in
Java's NetworkClient, because the broker answers in order and a missing
answer means the connection can no longer be trusted.
"""

from __future__ import annotations

import enum
import errno
import logging
import socket
from collections import deque
from collections.abc import Callable
from typing import Any

import attrs

from kafka_share._log import Logger
from kafka_share._version import __version__
from kafka_share.errors import (
    IllegalStateError,
    KafkaError,
    KafkaTimeoutError,
    NetworkError,
    UnsupportedVersionError,
)
from kafka_share.protocol.api_keys import (
    API_VERSIONS_FIRST_VERSION,
    ApiKey,
    ApiVersionsTable,
    api_versions_retry_version,
)
from kafka_share.protocol.codec import NEED_DATA, KafkaCodec
from kafka_share.protocol.messages import ApiVersionsRequest, ApiVersionsResponse
from kafka_share.share.unsent import VersionedRequest

from .resolver import AddressInfo

__all__ = ["TRANSITIONS", "BrokerConnection", "ConnectionState", "ResponseHandler"]

log = logging.getLogger("kafka_share.net")

#: Called with (response, None) on success or (None, error) on failure.
ResponseHandler = Callable[[Any, KafkaError | None], None]


class ConnectionState(enum.Enum):
    CONNECTING = "connecting"
    NEGOTIATING = "negotiating"
    READY = "ready"
    CLOSED = "closed"


#: The only state changes a connection makes; anything else is a bug.
TRANSITIONS: dict[ConnectionState, frozenset[ConnectionState]] = {
    ConnectionState.CONNECTING: frozenset({ConnectionState.NEGOTIATING, ConnectionState.CLOSED}),
    ConnectionState.NEGOTIATING: frozenset({ConnectionState.READY, ConnectionState.CLOSED}),
    ConnectionState.READY: frozenset({ConnectionState.CLOSED}),
    ConnectionState.CLOSED: frozenset(),
}


@attrs.define(eq=False)
class _Pending:
    request: Any
    handler: ResponseHandler
    version: int | None
    deadline_ms: int
    sent_ms: int = 0


class BrokerConnection:
    """A connection to ``host:port`` identified by ``node_id`` (negative for bootstrap)."""

    def __init__(
        self,
        *,
        node_id: int,
        host: str,
        port: int,
        client_id: str,
        now_ms: int,
        addresses: list[AddressInfo] | None = None,
        connect_timeout_ms: int,
        request_timeout_ms: int,
        max_frame_bytes: int = 104857600,
        receive_buffer_bytes: int = -1,
        send_buffer_bytes: int = -1,
        logger: Logger | None = None,
    ) -> None:
        self.node_id = node_id
        self._receive_buffer_bytes = receive_buffer_bytes
        self._send_buffer_bytes = send_buffer_bytes
        self._log: Logger = logger or log
        self.host = host
        self.port = port
        self.state = ConnectionState.CONNECTING
        self.api_versions: ApiVersionsTable | None = None
        self.close_reason: KafkaError | None = None
        self._client_id = client_id
        self._codec = KafkaCodec(client_id=client_id, max_frame_bytes=max_frame_bytes)
        self._request_timeout_ms = request_timeout_ms
        self._connect_deadline_ms = now_ms + connect_timeout_ms
        self._queued: deque[_Pending] = deque()
        self._in_flight: dict[int, _Pending] = {}
        self._out = bytearray()
        self._api_versions_version = API_VERSIONS_FIRST_VERSION
        self.last_activity_ms = now_ms
        #: responses received (ApiVersions included): a connection that closes
        #: before answering anything else did not work, whatever its state said
        self.responses = 0
        #: Called once, just before the socket is closed (the client unregisters it
        #: from its selector then: a new socket may soon reuse the descriptor number).
        self.on_close: Callable[[BrokerConnection], None] | None = None
        #: Called with the old socket when the connection moves on to the next
        #: address of the broker's name (the client re-registers the new one).
        self.on_socket_change: Callable[[BrokerConnection, socket.socket], None] | None = None
        if addresses is None:
            addresses = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)
        self._addresses = list(addresses)
        self._failures: list[str] = []
        self._current_ip = ""
        self._connect_timeout_ms = connect_timeout_ms
        self.sock = self._open_next_socket()

    def _transition(self, new: ConnectionState) -> None:
        if new not in TRANSITIONS[self.state]:
            raise IllegalStateError(
                f"connection to {self.address}: no transition {self.state.name} -> {new.name}"
            )
        self.state = new

    # -- socket setup -----------------------------------------------------

    def _open_next_socket(self) -> socket.socket:
        """A socket connecting to the next address that does not fail at once."""
        while self._addresses:
            family, socktype, proto, _, addr = self._addresses.pop(0)
            self._current_ip = ":".join(str(part) for part in addr[:2])
            try:
                return self._open_socket(family, socktype, proto, addr)
            except NetworkError as exc:
                self._failures.append(str(exc))
        raise NetworkError("; ".join(self._failures) or f"no address for {self.address}")

    def _next_address(self, error: str) -> bool:
        """The connect to the current address failed: move on to the next one.
        False when there is none left."""
        self._failures.append(error)
        old = self.sock
        try:
            self.sock = self._open_next_socket()
        except NetworkError:
            return False
        try:
            old.close()
        except OSError:
            pass
        if self.on_socket_change is not None:
            self.on_socket_change(self, old)
        return True

    def _open_socket(self, family: Any, socktype: Any, proto: int, addr: Any) -> socket.socket:
        sock = socket.socket(family, socktype, proto)
        sock.setblocking(False)
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        # A size fixed here turns off the kernel's auto-tuning for that direction.
        # Receiving defaults to -1 (auto-tuned): responses are large. Sending keeps
        # Java's 128 KiB: requests are small.
        if self._receive_buffer_bytes >= 0:
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, self._receive_buffer_bytes)
        if self._send_buffer_bytes >= 0:
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, self._send_buffer_bytes)
        err = sock.connect_ex(addr)
        if err not in (0, errno.EINPROGRESS, errno.EWOULDBLOCK, errno.EAGAIN):
            sock.close()
            raise NetworkError(
                f"cannot connect to broker {self.host}:{self.port} ({addr[0]}): "
                f"{errno.errorcode.get(err, err)}"
            )
        return sock

    # -- public API ---------------------------------------------------------

    @property
    def address(self) -> str:
        return f"{self.host}:{self.port}"

    @property
    def is_ready(self) -> bool:
        return self.state is ConnectionState.READY

    @property
    def in_flight_count(self) -> int:
        return len(self._in_flight) + len(self._queued)

    def wants_write(self) -> bool:
        return self.state is ConnectionState.CONNECTING or bool(self._out)

    def send(
        self,
        request: Any,
        handler: ResponseHandler,
        *,
        now_ms: int,
        version: int | None = None,
        timeout_ms: int | None = None,
    ) -> None:
        """Queue ``request``; ``handler`` is called exactly once with the outcome."""
        if self.state is ConnectionState.CLOSED:
            handler(None, self.close_reason or NetworkError(f"connection to {self.address} closed"))
            return
        deadline = now_ms + (self._request_timeout_ms if timeout_ms is None else timeout_ms)
        pending = _Pending(request, handler, version, deadline)
        if self.state is ConnectionState.READY:
            self._encode(pending, now_ms)
        else:
            self._queued.append(pending)

    def on_writable(self, now_ms: int) -> None:
        if self.state is ConnectionState.CONNECTING:
            err = self.sock.getsockopt(socket.SOL_SOCKET, socket.SO_ERROR)
            if err != 0:
                message = (
                    f"cannot connect to broker {self.address} ({self._current_ip}): "
                    f"{errno.errorcode.get(err, err)}"
                )
                if not self._next_address(message):
                    self.close(NetworkError("; ".join(self._failures)))
                return
            self._transition(ConnectionState.NEGOTIATING)
            self._send_api_versions(now_ms)
        self._flush()

    def on_readable(self, now_ms: int) -> None:
        if self.state is ConnectionState.CONNECTING:
            # A refused connect can show as readable first: settle the connect
            # (and move on to the next address) before reading anything.
            self.on_writable(now_ms)
            return
        codec = self._codec
        try:
            # The kernel writes straight into the codec's buffer: for a large
            # response that is the frame's own buffer, so its bytes are copied once.
            with codec.get_buffer() as buf:
                nbytes = self.sock.recv_into(buf)
        except (BlockingIOError, InterruptedError):
            return
        except KafkaError as exc:
            self.close(exc)
            return
        except OSError as exc:
            self.close(NetworkError(f"connection to {self.address} failed: {exc}"))
            return
        if not nbytes:
            self.close(NetworkError(f"connection to broker {self.address} was closed by the peer"))
            return
        self.last_activity_ms = now_ms
        try:
            codec.buffer_updated(nbytes)
            while True:
                event = codec.next_response()
                if event is NEED_DATA:
                    break
                in_flight, response = event
                pending = self._in_flight.pop(in_flight.correlation_id, None)
                if pending is None:
                    continue
                self.responses += 1
                pending.handler(response, None)
                if self.state is ConnectionState.CLOSED:
                    return
        except KafkaError as exc:
            self.close(exc)

    def check_timeouts(self, now_ms: int) -> None:
        if self.state is ConnectionState.CONNECTING and now_ms >= self._connect_deadline_ms:
            message = f"connecting to broker {self.address} ({self._current_ip}) timed out"
            if self._next_address(message):
                self._connect_deadline_ms = now_ms + self._connect_timeout_ms
                return
            self.close(KafkaTimeoutError("; ".join(self._failures)))
            return
        for pending in self._in_flight.values():
            if now_ms >= pending.deadline_ms:
                self.close(KafkaTimeoutError(
                    f"request {type(pending.request).__name__} to broker {self.address} "
                    f"got no response within {pending.deadline_ms - pending.sent_ms} ms"
                ))
                return
        for pending in list(self._queued):
            if now_ms >= pending.deadline_ms:
                self._queued.remove(pending)
                pending.handler(None, KafkaTimeoutError(
                    f"request {type(pending.request).__name__} to broker {self.address} "
                    "timed out before the connection was ready"
                ))

    def next_deadline_ms(self) -> int | None:
        deadlines = [p.deadline_ms for p in self._in_flight.values()]
        deadlines.extend(p.deadline_ms for p in self._queued)
        if self.state is ConnectionState.CONNECTING:
            deadlines.append(self._connect_deadline_ms)
        return min(deadlines) if deadlines else None

    def close(self, reason: KafkaError | None = None) -> None:
        """Close the socket and fail everything pending with ``reason``."""
        if self.state is ConnectionState.CLOSED:
            return
        self._transition(ConnectionState.CLOSED)
        self.close_reason = reason or NetworkError(f"connection to {self.address} closed")
        if self.on_close is not None:
            try:
                self.on_close(self)
            except Exception:
                self._log.exception("connection close hook failed")
        if reason is not None:
            self._log.info(
                "connection to node %s (%s) closed: %s", self.node_id, self.address, reason
            )
        try:
            self.sock.close()
        except OSError:
            pass
        pending = list(self._in_flight.values()) + list(self._queued)
        self._in_flight.clear()
        self._queued.clear()
        for p in pending:
            try:
                p.handler(None, self.close_reason)
            except Exception:  # a handler bug must not stop the others from completing
                self._log.exception("response handler failed while closing connection")

    # -- internals ------------------------------------------------------------

    def _send_api_versions(self, now_ms: int) -> None:
        request = ApiVersionsRequest(
            client_software_name="kafka-share", client_software_version=_version()
        )
        pending = _Pending(
            request, self._on_api_versions, self._api_versions_version,
            now_ms + self._request_timeout_ms,
        )
        self._encode(pending, now_ms)

    def _on_api_versions(self, response: Any, error: KafkaError | None) -> None:
        if error is not None:
            self.close(error)
            return
        assert isinstance(response, ApiVersionsResponse)
        try:
            retry = api_versions_retry_version(response, self._api_versions_version)
        except KafkaError as exc:
            # No ApiVersions version in common: say so once, do not walk down.
            self._log.warning("broker %s: %s", self.address, exc)
            self.close(exc)
            return
        if retry is not None:
            # The broker does not know our ApiVersions version; retry on this
            # connection at the version it listed, else v0 (KIP-511).
            self._log.debug(
                "broker %s rejected ApiVersions v%d; retrying at v%d",
                self.address, self._api_versions_version, retry,
            )
            self._api_versions_version = retry
            self._send_api_versions(self.last_activity_ms)
            self._flush()
            return
        try:
            self.api_versions = ApiVersionsTable.from_response(response)
        except KafkaError as exc:
            self.close(exc)
            return
        self._transition(ConnectionState.READY)
        queued = list(self._queued)
        self._queued.clear()
        for pending in queued:
            self._encode(pending, self.last_activity_ms)
        self._flush()

    def _encode(self, pending: _Pending, now_ms: int) -> None:
        request = pending.request
        try:
            versioned = isinstance(request, VersionedRequest)
            api_key = request.api_key if versioned else request.API_KEY
            if pending.version is not None:
                version = pending.version
            else:
                assert self.api_versions is not None
                version = self.api_versions.version_for(ApiKey(api_key))
            if versioned:
                request = request.build(version)
                pending.request = request
            correlation_id, frame = self._codec.send_request(request, version)
        except (KafkaError, ValueError) as exc:
            err = exc if isinstance(exc, KafkaError) else UnsupportedVersionError(str(exc))
            pending.handler(None, err)
            return
        pending.sent_ms = now_ms
        self._in_flight[correlation_id] = pending
        self._out += frame
        self._flush()

    def _flush(self) -> None:
        if not self._out or self.state in (ConnectionState.CONNECTING, ConnectionState.CLOSED):
            return
        try:
            sent = self.sock.send(self._out)
        except (BlockingIOError, InterruptedError):
            return
        except OSError as exc:
            self.close(NetworkError(f"sending to broker {self.address} failed: {exc}"))
            return
        del self._out[:sent]


def _version() -> str:
    # ApiVersions requires [a-zA-Z0-9](?:[a-zA-Z0-9\-.]*[a-zA-Z0-9])?
    return "".join(c if c.isalnum() or c in "-." else "-" for c in __version__)
