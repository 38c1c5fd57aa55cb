"""One TCP connection to one broker: non-blocking socket + the sans-IO codec.

Lifecycle (:data:`TRANSITIONS`): CONNECTING -> (socket connected) ->
[HANDSHAKING_TLS] -> NEGOTIATING (ApiVersions in flight) -> [AUTHENTICATING
(SaslHandshake v1 + SaslAuthenticate v2)] -> READY -> CLOSED, and READY <->
REAUTHENTICATING when the broker gave the SASL session a lifetime (KIP-368).
Requests queued before READY wait and go out in order once versions are known
and the connection is authenticated, so every request is encoded at the
highest version both sides support.

TLS runs through a sans-IO :class:`~kafka_share._net.tls.TlsSession`: the
socket stays a plain non-blocking socket and decrypted bytes go straight into
the codec's receive buffer.

Re-authentication: at a jittered 85-95 % of the session lifetime (as Java) the
connection stops writing application requests (they wait in the queue, their
handlers untouched), sends SaslHandshake right behind whatever is in flight
(the broker answers in order), authenticates again and then writes the queue.
The connection, and the share session the broker ties to it, stay up.

The name is resolved before the connection is made (see ``resolver.py``), and
the connection tries every address of it in order (``client.dns.lookup=
use_all_dns_ips``): "localhost" is often ``::1`` first while a broker listens
on ``127.0.0.1`` only.

Receive low-water marks (Linux): a large response is read in reads of up to
:data:`RECEIVE_LOW_WATER_BYTES` (``SO_RCVLOWAT`` follows what the frame
misses), and while the thread that runs the loop is away from it the mark of a
connection awaiting a response is raised, so the kernel acknowledges what
arrives and the broker sends the whole response meanwhile
(:meth:`BrokerConnection.raise_low_water_away`); whoever waits next lowers it
first (``NetworkClient._wait``).

Everything here runs on the network thread; nothing blocks. A request that
gets no answer within ``request_timeout_ms`` closes the connection, as in
Java's NetworkClient, because the broker answers in order and a missing
answer means the connection can no longer be trusted.
"""

from __future__ import annotations

import enum
import errno
import logging
import random as _random
import socket
import sys
from collections import deque
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import attrs

from kafka_share._log import Logger
from kafka_share._reprs import attrs_repr
from kafka_share._version import __version__
from kafka_share.errors import (
    IllegalSaslStateError,
    IllegalStateError,
    KafkaError,
    KafkaTimeoutError,
    NetworkError,
    SaslAuthenticationFailedError,
    SslAuthenticationError,
    UnsupportedSaslMechanismError,
    UnsupportedVersionError,
    error_for_code,
)
from kafka_share.protocol.api_keys import (
    API_VERSIONS_FIRST_VERSION,
    ApiKey,
    ApiVersionsTable,
    api_versions_retry_version,
)
from kafka_share.protocol.codec import NEED_DATA, KafkaCodec
from kafka_share.protocol.messages import (
    ApiVersionsRequest,
    ApiVersionsResponse,
    SaslAuthenticateRequest,
    SaslAuthenticateResponse,
    SaslHandshakeRequest,
    SaslHandshakeResponse,
)
from kafka_share.share.unsent import VersionedRequest

from .resolver import AddressInfo

if TYPE_CHECKING:
    # Imported where used: a PLAINTEXT client never loads ssl, TLS or SASL code.
    from .sasl import SaslClientMechanism
    from .security import ConnectionSecurity
    from .tls import TlsSession

__all__ = ["TRANSITIONS", "BrokerConnection", "ConnectionState", "ResponseHandler"]

log = logging.getLogger("kafka_share.net")

#: Called with (response, None) on success or (None, error) on failure.
ResponseHandler = Callable[[Any, KafkaError | None], None]


#: The most bytes a read of a large response waits for (``SO_RCVLOWAT``) before
#: the socket counts as readable. Without it the loop wakes for every few dozen
#: KiB the broker's writes deliver (a 6 MB ShareFetch response took ~30 reads),
#: and each wake, read and ACK costs more than the bytes it brings: 256 KiB
#: halved the reads of 1 GB of 10 KiB records (5,100 to 2,300) and cut CPU per
#: record 5-10 % in interleaved runs against a real broker; 512 KiB and 1 MiB
#: lowered throughput. Linux only: there the kernel also wakes the reader below
#: the mark when its receive memory is under pressure or the peer closed, so the
#: mark can delay a read but never stall it (elsewhere those guarantees differ,
#: and 0 turns it off).
RECEIVE_LOW_WATER_BYTES = 256 * 1024 if sys.platform.startswith("linux") else 0
#: A frame with fewer missing bytes than this is read as its bytes come.
_LOW_WATER_MIN_MISSING = 64 * 1024
#: ``SO_RCVLOWAT`` while the thread that runs the loop is away from it (decoding,
#: or in the application) and a response is on its way (see
#: :meth:`BrokerConnection.raise_low_water_away`). Linux acknowledges incoming
#: data at once while less than the mark is unread (``__tcp_ack_snd_check``);
#: at the default mark it delays the ACKs of a request/response connection whose
#: reader does not read, and the broker's send stops at its congestion window:
#: measured, 0.45-0.52 MB of a 1 MB ShareFetch response arrived while the
#: consumer decoded the one before, the rest only once it read again (or after
#: the 40 ms delayed-ACK timer). The kernel caps the mark at half the largest
#: receive buffer (``tcp_rmem``, or half a fixed ``SO_RCVBUF``).
AWAY_RECEIVE_LOW_WATER_BYTES = 64 * 1024 * 1024
#: The mark's cap over TLS. There the broker encrypts as it sends, and 256 KiB
#: left its writes waiting: 10 KiB records fell from 46.6k to 38.0k records/s.
#: 128 KiB kept throughput and cut CPU per 10 KiB record about 10 % (16.7 to
#: 15.0 µs in interleaved runs against a real SSL listener; 1 KiB and 100 B
#: unchanged).
TLS_RECEIVE_LOW_WATER_BYTES = 128 * 1024
#: Ciphertext the TLS object may hold that the socket no longer counts: one
#: incomplete record (a read decrypts every complete one), at most a TLS 1.2
#: record's 2**14 + 2048 bytes and its 5-byte header. The mark over TLS stays
#: this far below what the frame misses, so it is still always reached.
_TLS_HELD_BYTES = 2**14 + 2048 + 5


def receive_low_water(missing_bytes: int, cap_bytes: int) -> int:
    """The ``SO_RCVLOWAT`` for the next read when ``missing_bytes`` of the frame
    being received are still to come: at most what is missing (the rest of the
    frame always arrives without the client doing anything, so the mark is
    always reached), and 1 (the default: any byte) outside a large frame."""
    if cap_bytes <= 0 or missing_bytes <= _LOW_WATER_MIN_MISSING:
        return 1
    return min(missing_bytes, cap_bytes)


class ConnectionState(enum.Enum):
    CONNECTING = "connecting"
    HANDSHAKING_TLS = "handshaking_tls"
    NEGOTIATING = "negotiating"
    AUTHENTICATING = "authenticating"
    READY = "ready"
    REAUTHENTICATING = "reauthenticating"
    CLOSED = "closed"


_S = ConnectionState
#: The only state changes a connection makes; anything else is a bug.
TRANSITIONS: dict[ConnectionState, frozenset[ConnectionState]] = {
    _S.CONNECTING: frozenset({_S.HANDSHAKING_TLS, _S.NEGOTIATING, _S.CLOSED}),
    _S.HANDSHAKING_TLS: frozenset({_S.NEGOTIATING, _S.CLOSED}),
    _S.NEGOTIATING: frozenset({_S.AUTHENTICATING, _S.READY, _S.CLOSED}),
    _S.AUTHENTICATING: frozenset({_S.READY, _S.CLOSED}),
    _S.READY: frozenset({_S.REAUTHENTICATING, _S.CLOSED}),
    _S.REAUTHENTICATING: frozenset({_S.READY, _S.CLOSED}),
    _S.CLOSED: frozenset(),
}

#: Raw bytes read from a TLS socket at a time.
_TLS_READ_BYTES = 256 * 1024
#: SaslHandshake v1 / SaslAuthenticate v2 (brokers with share groups have both).
_SASL_HANDSHAKE_VERSION = 1
_SASL_AUTHENTICATE_VERSION = 2
#: The broker allows one re-authentication per second.
_MIN_REAUTH_MS = 1000


@attrs_repr
@attrs.define(eq=False, repr=False)
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
        receive_low_water_bytes: int = RECEIVE_LOW_WATER_BYTES,
        logger: Logger | None = None,
        security: ConnectionSecurity | None = None,
        random: Callable[[], float] | None = None,
    ) -> None:
        self.node_id = node_id
        self._security = security
        self._tls: TlsSession | None = None
        self._sasl: SaslClientMechanism | None = None
        self._random = random or _default_random
        #: When re-authentication is due (None: the session has no lifetime).
        self.reauth_due_ms: int | None = None
        #: Completed authentications (the first one and every re-authentication).
        self.authentications = 0
        #: Set once the connection was READY (a failure before that counts for backoff).
        self.was_ready = False
        self._awaiting_token = False
        self._receive_buffer_bytes = receive_buffer_bytes
        self._send_buffer_bytes = send_buffer_bytes
        if receive_buffer_bytes > 0:
            # A fixed receive buffer must hold the mark with room to spare (the
            # kernel's window is about half of it).
            receive_low_water_bytes = min(receive_low_water_bytes, receive_buffer_bytes // 4)
        #: The cap of the socket's SO_RCVLOWAT (0: left at its default); over TLS
        #: at most TLS_RECEIVE_LOW_WATER_BYTES (see _read_tls).
        self._low_water_cap = receive_low_water_bytes
        #: The socket's SO_RCVLOWAT, as the reads of frames want it
        self._low_water = 1
        #: SO_RCVLOWAT is at AWAY_RECEIVE_LOW_WATER_BYTES instead (see raise_low_water_away)
        self.low_water_raised = False
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
            self._low_water = 1  # a new socket's default
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
        # The hook first: a poller must forget the old socket while it is open
        # (an event loop's selector cannot unregister a closed descriptor, and
        # the new socket may get the same number).
        if self.on_socket_change is not None:
            self.on_socket_change(self, old)
        try:
            old.close()
        except OSError:
            pass
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
        """Usable for requests (while re-authenticating they wait in the queue)."""
        return self.state in (ConnectionState.READY, ConnectionState.REAUTHENTICATING)

    def is_open(self) -> bool:
        """Not CLOSED (a method, so that type checkers do not narrow the state
        across calls that may close the connection)."""
        return self.state is not ConnectionState.CLOSED

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
        self._maybe_reauthenticate(now_ms)
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
            if self._security is not None and self._security.ssl_context is not None:
                from .tls import TlsSession  # noqa: PLC0415

                self._transition(ConnectionState.HANDSHAKING_TLS)
                self._tls = TlsSession(self._security.ssl_context, self.host)
                self._tls_handshake(now_ms)
                return
            self._transition(ConnectionState.NEGOTIATING)
            self._send_api_versions(now_ms)
        self._flush()

    def on_readable(self, now_ms: int) -> bool:
        """Read what the socket has and run the handlers of the responses it
        completes.

        Returns True when the read changed nothing but the fill of a response
        that is not complete yet: no handler ran, the state and the write
        interest are as before, so the driver has nothing new to act on (a
        1 MiB+ ShareFetch response arrives over many reads, and only the one
        completing it matters to the engine).
        """
        # One function, no helper calls on the plaintext path: it runs on every
        # read (the many reads of a large response included).
        state = self.state
        if state is ConnectionState.CONNECTING:
            # A refused connect can show as readable first: settle the connect
            # (and move on to the next address) before reading anything.
            self.on_writable(now_ms)
            return False
        codec = self._codec
        tls = self._tls
        if tls is not None and not self._read_tls(now_ms):
            return self.state is state and not self._out
        quiet = True
        # A KafkaError out of the codec (a frame that does not decode) or out of
        # a handler closes the connection.
        try:
            if tls is None:
                try:
                    # The kernel writes straight into the codec's buffer: for a large
                    # response that is the frame's own buffer, so its bytes are copied once.
                    with codec.get_buffer() as buf:
                        nbytes = self.sock.recv_into(buf)
                except (BlockingIOError, InterruptedError):
                    return True
                except OSError as exc:
                    self.close(NetworkError(f"connection to {self.address} failed: {exc}"))
                    return False
                if not nbytes:
                    self.close(self._peer_closed_error())
                    return False
                self.last_activity_ms = now_ms
                codec.buffer_updated(nbytes)
                if not self._follow_low_water(codec.frame_missing_bytes, self._low_water_cap):
                    return False
            while (event := codec.next_response()) is not NEED_DATA:
                quiet = False
                in_flight, response = event
                pending = self._in_flight.pop(in_flight.correlation_id, None)
                if pending is None:
                    continue
                self.responses += 1
                pending.handler(response, None)
                if self.state is ConnectionState.CLOSED:
                    return False
        except KafkaError as exc:
            self.close(exc)
            return False
        return quiet and self.state is state and not self._out

    def _follow_low_water(self, missing_bytes: int, cap_bytes: int) -> bool:
        """Move the socket's SO_RCVLOWAT to :func:`receive_low_water` of what
        the frame misses (nothing while the mark is off); False when that closed
        the connection (see :meth:`_set_low_water`)."""
        if not self._low_water_cap:
            return True
        want = receive_low_water(missing_bytes, cap_bytes)
        return want == self._low_water or self._set_low_water(want)

    def _set_low_water(self, nbytes: int) -> bool:
        """Set the socket's SO_RCVLOWAT; False when that failed with the mark
        raised, which closes the connection."""
        try:
            self.sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVLOWAT, nbytes)
        except OSError as exc:
            if self._low_water == 1:
                # Never raised: only slower without it; read as bytes come from now on.
                self._log.debug("connection to %s: no SO_RCVLOWAT (%s)", self.address, exc)
                self._low_water_cap = 0
                return True
            # Raised and stuck: the next, smaller response might never reach it.
            self.close(NetworkError(
                f"connection to {self.address}: cannot lower the socket's SO_RCVLOWAT "
                f"from {self._low_water} to {nbytes} bytes ({exc})"
            ))
            return False
        self._low_water = nbytes
        return True

    def raise_low_water_away(self) -> bool:
        """The thread that runs the loop leaves it for a while (to decode, or to
        the application) and this connection awaits a response: raise the
        socket's ``SO_RCVLOWAT`` to :data:`AWAY_RECEIVE_LOW_WATER_BYTES`, so that
        the kernel keeps acknowledging what arrives and the broker sends the
        whole response meanwhile, instead of stopping half way until the next
        read. True when raised: :meth:`restore_low_water` must run before
        anything waits for this socket to become readable (a response smaller
        than the mark would never wake it). Plaintext and TLS alike: the mark
        is the raw socket's."""
        if (
            not self._low_water_cap
            or self.low_water_raised
            or self.state is not ConnectionState.READY
            or not self._in_flight
        ):
            return False
        try:
            self.sock.setsockopt(
                socket.SOL_SOCKET, socket.SO_RCVLOWAT, AWAY_RECEIVE_LOW_WATER_BYTES
            )
        except OSError:
            return False  # nothing changed: the response comes as before
        self.low_water_raised = True
        return True

    def restore_low_water(self) -> None:
        """Put ``SO_RCVLOWAT`` back to what the reads want after
        :meth:`raise_low_water_away`; if that fails the connection closes (a mark
        stuck high could leave a small response unread)."""
        if not self.low_water_raised:
            return
        self.low_water_raised = False
        if self.state is ConnectionState.CLOSED:
            return
        try:
            self.sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVLOWAT, self._low_water)
        except OSError as exc:
            self.close(NetworkError(
                f"connection to {self.address}: cannot lower the socket's SO_RCVLOWAT "
                f"back to {self._low_water} bytes ({exc})"
            ))

    def check_timeouts(self, now_ms: int) -> None:
        if self._awaiting_token and self.state in (
            ConnectionState.AUTHENTICATING, ConnectionState.REAUTHENTICATING
        ):
            self._start_sasl(now_ms)
        self._maybe_reauthenticate(now_ms)
        if self.state is ConnectionState.CLOSED:
            return
        setup = (ConnectionState.HANDSHAKING_TLS, ConnectionState.AUTHENTICATING)
        if self.state in setup and now_ms >= self._connect_deadline_ms:
            # socket.connection.setup.timeout.ms covers TLS and SASL too.
            self.close(KafkaTimeoutError(
                f"setting up the connection to broker {self.address} timed out while "
                f"{self.state.value.replace('_', ' ')}"
            ))
            return
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
        if self.state in (
            ConnectionState.CONNECTING, ConnectionState.HANDSHAKING_TLS,
            ConnectionState.AUTHENTICATING,
        ):
            deadlines.append(self._connect_deadline_ms)
        if self.state is ConnectionState.READY and self.reauth_due_ms is not None:
            deadlines.append(self.reauth_due_ms)
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

    # -- TLS ------------------------------------------------------------------

    def _tls_failed(self, exc: BaseException) -> None:
        """Close on a TLS error, saying what it means for this broker."""
        from .tls import describe_ssl_error  # noqa: PLC0415  (on failure only)

        self.close(SslAuthenticationError(describe_ssl_error(exc, self.address, self.host)))

    def _tls_handshake(self, now_ms: int) -> None:
        import ssl  # noqa: PLC0415  (loaded already: the client made an SSLContext)

        tls = self._tls
        assert tls is not None
        try:
            done = tls.do_handshake()
        except ssl.SSLError as exc:
            self._flush()  # the alert telling the broker why
            self._tls_failed(exc)
            return
        self._flush()
        if done and self.state is ConnectionState.HANDSHAKING_TLS:
            self._log.debug("TLS (%s) established with broker %s", tls.version, self.address)
            self._transition(ConnectionState.NEGOTIATING)
            self._send_api_versions(now_ms)

    def _read_tls(self, now_ms: int) -> bool:
        """Read from the socket and decrypt into the codec's buffer; True when
        the codec got bytes."""
        import ssl  # noqa: PLC0415  (loaded already: the client made an SSLContext)

        tls = self._tls
        assert tls is not None
        try:
            data = self.sock.recv(_TLS_READ_BYTES)
        except (BlockingIOError, InterruptedError):
            return False
        except OSError as exc:
            self.close(NetworkError(f"connection to {self.address} failed: {exc}"))
            return False
        if not data:
            self.close(self._peer_closed_error())
            return False
        self.last_activity_ms = now_ms
        tls.feed(data)
        if self.state is ConnectionState.HANDSHAKING_TLS:
            self._tls_handshake(now_ms)
            if not self._negotiating():
                return False
        codec = self._codec
        got = False
        try:
            while True:
                with codec.get_buffer() as buf:
                    nbytes = tls.read_into(buf)
                if not nbytes:
                    break
                codec.buffer_updated(nbytes)
                got = True
        except ssl.SSLZeroReturnError:
            self.close(self._peer_closed_error())
            return False
        except ssl.SSLError as exc:
            # Under TLS 1.3 a refused client certificate shows up here, on the
            # first read after the handshake.
            self._tls_failed(exc)
            return False
        except KafkaError as exc:
            self.close(exc)
            return False
        self._flush()  # reading may produce TLS records (key updates)
        # What the frame misses, less what the TLS object may already hold.
        if not self._follow_low_water(
            codec.frame_missing_bytes - _TLS_HELD_BYTES,
            min(self._low_water_cap, TLS_RECEIVE_LOW_WATER_BYTES),
        ):
            return False
        return got

    def _negotiating(self) -> bool:
        # A method, so that type checkers do not narrow self.state across calls.
        return self.state is ConnectionState.NEGOTIATING

    def _peer_closed_error(self) -> KafkaError:
        where = f"broker {self.address}"
        if self.state is ConnectionState.HANDSHAKING_TLS:
            return SslAuthenticationError(
                f"{where} closed the connection during the TLS handshake: is this listener "
                "TLS (security.protocol SSL/SASL_SSL)? Does it require a client certificate?"
            )
        uses_tls = self._security is not None and self._security.ssl_context is not None
        if self.state is ConnectionState.NEGOTIATING and not uses_tls:
            return NetworkError(
                f"{where} closed the connection before answering ApiVersions: if this "
                "listener uses TLS, set security.protocol to SSL or SASL_SSL"
            )
        if self.state is ConnectionState.AUTHENTICATING:
            return NetworkError(f"{where} closed the connection during SASL authentication")
        return NetworkError(f"connection to broker {self.address} was closed by the peer")

    # -- SASL -----------------------------------------------------------------

    def _start_sasl(self, now_ms: int) -> None:
        security = self._security
        assert security is not None
        try:
            mechanism = security.new_mechanism(self.host)
        except KafkaError as exc:
            self.close(exc)
            return
        if mechanism is None:
            self._awaiting_token = True  # the token source wakes the client when it has one
            return
        self._awaiting_token = False
        self._sasl = mechanism
        self._encode(_Pending(
            SaslHandshakeRequest(mechanism=mechanism.name), self._on_sasl_handshake,
            self._sasl_version(ApiKey.SASL_HANDSHAKE, _SASL_HANDSHAKE_VERSION),
            now_ms + self._request_timeout_ms,
        ), now_ms)

    def _sasl_version(self, api_key: ApiKey, wanted: int) -> int:
        table = self.api_versions
        top = table.max_version(api_key) if table is not None else None
        return wanted if top is None else min(wanted, top)

    def _send_sasl_bytes(self, payload: bytes, now_ms: int) -> None:
        self._encode(_Pending(
            SaslAuthenticateRequest(auth_bytes=payload), self._on_sasl_authenticate,
            self._sasl_version(ApiKey.SASL_AUTHENTICATE, _SASL_AUTHENTICATE_VERSION),
            now_ms + self._request_timeout_ms,
        ), now_ms)

    def _on_sasl_handshake(self, response: Any, error: KafkaError | None) -> None:
        if error is not None:
            self.close(error)
            return
        assert isinstance(response, SaslHandshakeResponse)
        mechanism = self._sasl
        assert mechanism is not None
        if response.error_code == UnsupportedSaslMechanismError.code:
            self.close(UnsupportedSaslMechanismError(
                f"broker {self.address} does not enable SASL mechanism {mechanism.name} on "
                f"this listener; it enables: {', '.join(response.mechanisms) or 'none'}"
            ))
            return
        if response.error_code != 0:
            self.close(error_for_code(
                response.error_code, f"SaslHandshake with broker {self.address} failed"
            ))
            return
        try:
            first = mechanism.start()
        except KafkaError as exc:
            self.close(exc)
            return
        self._send_sasl_bytes(first, self.last_activity_ms)

    def _on_sasl_authenticate(self, response: Any, error: KafkaError | None) -> None:
        if error is not None:
            self.close(error)
            return
        assert isinstance(response, SaslAuthenticateResponse)
        mechanism = self._sasl
        assert mechanism is not None
        if response.error_code != 0:
            message = response.error_message or "no reason given"
            failure: KafkaError
            if response.error_code == SaslAuthenticationFailedError.code:
                failure = SaslAuthenticationFailedError(
                    f"SASL {mechanism.name} authentication to broker {self.address} failed: "
                    f"{message}"
                )
            elif response.error_code == IllegalSaslStateError.code:
                failure = IllegalSaslStateError(
                    f"SASL {mechanism.name} with broker {self.address}: {message}"
                )
            else:
                failure = error_for_code(response.error_code, message)
            self.close(failure)
            return
        try:
            reply = mechanism.step(response.auth_bytes)
        except KafkaError as exc:
            self.close(exc)
            return
        if reply is not None:
            from .sasl import OAuthBearerMechanism  # noqa: PLC0415

            if isinstance(mechanism, OAuthBearerMechanism) and mechanism.challenge is not None:
                self._log.debug(
                    "broker %s rejected the OAUTHBEARER token: %s", self.address,
                    mechanism.challenge,
                )
            self._send_sasl_bytes(reply, self.last_activity_ms)
            return
        self._sasl = None
        now = self.last_activity_ms
        lifetime = response.session_lifetime_ms
        self.authentications += 1
        if lifetime > 0:
            # Java's window: 85-95 % of the lifetime, jittered so that a fleet of
            # clients does not re-authenticate in lockstep.
            share = 0.85 + 0.10 * self._random()
            self.reauth_due_ms = now + max(_MIN_REAUTH_MS, int(lifetime * share))
        else:
            self.reauth_due_ms = None
        self._log.debug(
            "%s as %s with broker %s (session lifetime %d ms)",
            "re-authenticated" if self.state is ConnectionState.REAUTHENTICATING
            else "authenticated", mechanism.name, self.address, lifetime,
        )
        self._become_ready()

    def _maybe_reauthenticate(self, now_ms: int) -> None:
        """KIP-368: from the due time on, no application request is written until
        the session is renewed (the broker would close the connection at expiry)."""
        due = self.reauth_due_ms
        if self.state is ConnectionState.READY and due is not None and now_ms >= due:
            self.reauth_due_ms = None
            self._transition(ConnectionState.REAUTHENTICATING)
            self._start_sasl(now_ms)

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
        if self._security is not None and self._security.protocol.uses_sasl:
            self._transition(ConnectionState.AUTHENTICATING)
            self._start_sasl(self.last_activity_ms)
            return
        self._become_ready()

    def _become_ready(self) -> None:
        self._transition(ConnectionState.READY)
        self.was_ready = True
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
        if self._tls is not None:
            self._tls.encrypt(frame)
        else:
            self._out += frame
        self._flush()

    def _flush(self) -> None:
        if self.state in (ConnectionState.CONNECTING, ConnectionState.CLOSED):
            return
        if self._tls is not None:
            self._out += self._tls.take_outgoing()
        if not self._out:
            return
        try:
            sent = self.sock.send(self._out)
        except (BlockingIOError, InterruptedError):
            return
        except OSError as exc:
            self.close(NetworkError(f"sending to broker {self.address} failed: {exc}"))
            return
        del self._out[:sent]


def _default_random() -> float:
    return _random.random()


def _version() -> str:
    # ApiVersions requires [a-zA-Z0-9](?:[a-zA-Z0-9\-.]*[a-zA-Z0-9])?
    return "".join(c if c.isalnum() or c in "-." else "-" for c in __version__)
