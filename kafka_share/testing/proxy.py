"""A small TCP proxy for failure tests: forward to a local broker, cut connections on demand.

Kafka clients connect to the addresses brokers *advertise*, so to put the proxy
between a client and a broker, start the proxy first and make the broker
advertise the proxy's port (``advertised.listeners``)::

    proxy = TcpProxy(("127.0.0.1", broker_port)).start()
    cluster = LocalKafkaCluster(
        broker_ports=[broker_port],
        extra_config={"advertised.listeners": f"PLAINTEXT://{proxy.bootstrap}"},
    )

Then :meth:`TcpProxy.cut_all`, :meth:`TcpProxy.cut_random` or a bounded
:meth:`TcpProxy.start_chaos` reset client connections (RST on both sides) at
chosen moments, and :meth:`TcpProxy.tamper` makes the broker look broken: the
next response frame arrives truncated, with a wrong correlation id, with a 2 GiB
size prefix, or never completes.

The proxy only forwards to loopback addresses, accepts a bounded number of
connections, and stops by itself after ``max_lifetime_s``: a test that forgets
:meth:`TcpProxy.stop` leaves nothing running for long.
"""

from __future__ import annotations

import contextlib
import ipaddress
import random
import selectors
import socket
import struct
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field

__all__ = ["TAMPER_KINDS", "TcpProxy"]

#: What :meth:`TcpProxy.tamper` can do to the next response frame:
#: ``truncate`` (its size prefix promises more than comes: the stream's later
#: frames are read as its rest), ``correlation`` (a correlation id no request
#: has), ``huge`` (a size prefix of about 2 GiB), ``stall`` (part of it, then
#: nothing more on that connection, which stays open).
TAMPER_KINDS = ("truncate", "correlation", "huge", "stall")
_SIZE = struct.Struct(">i")

_CHUNK = 64 * 1024
# Stop reading from one side while this much is still queued for the other.
_MAX_PENDING = 4 * 1024 * 1024
_CONNECT_TIMEOUT_S = 2.0


@dataclass(eq=False)
class _Pipe:
    """One side of a proxied connection: a socket and the bytes waiting to be written to it."""

    sock: socket.socket
    pending: bytearray = field(default_factory=bytearray)
    peer: _Pipe | None = None
    is_client: bool = False
    closed: bool = False
    #: broker side: the size prefix read so far of the next response frame,
    #: and how much of the current frame is still to come
    head: bytearray = field(default_factory=bytearray)
    frame_left: int = 0
    #: a frame being held back whole, to be tampered with once complete
    capture: bytearray | None = None
    capture_kind: str = ""
    #: ``stall``: nothing more is forwarded to the client on this connection
    stalled: bool = False
    #: client side: the client id of the connection's first request (None: not
    #: read yet), and the bytes of it seen so far
    client_id: str | None = None
    first_request: bytearray = field(default_factory=bytearray)


class TcpProxy:
    """Forward TCP connections from ``listen_host:listen_port`` to ``target``.

    ``target`` is ``(host, port)`` or ``"host:port"`` and must be a loopback
    address. ``listen_port=0`` picks a free port (see :attr:`port`).
    ``max_connections`` bounds the live connection pairs (extra clients are
    closed at once); after ``max_lifetime_s`` the proxy stops by itself.
    ``seed`` makes :meth:`cut_random` and :meth:`start_chaos` reproducible.

    Thread-safe: the forwarding runs on one background thread; the ``cut_*``
    methods hand their work to it and wait until it is done.
    """

    def __init__(
        self,
        target: tuple[str, int] | str,
        *,
        listen_host: str = "127.0.0.1",
        listen_port: int = 0,
        max_connections: int = 64,
        max_lifetime_s: float = 600.0,
        seed: int | None = None,
    ) -> None:
        host, port = _parse_target(target)
        _require_loopback(host, "target")
        _require_loopback(listen_host, "listen_host")
        if max_connections < 1:
            raise ValueError(f"max_connections must be at least 1, got {max_connections}")
        if max_lifetime_s <= 0:
            raise ValueError(f"max_lifetime_s must be positive, got {max_lifetime_s}")
        self.target = (host, port)
        self.max_connections = max_connections
        self.max_lifetime_s = max_lifetime_s
        self._random = random.Random(seed)
        self._listener = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        self._listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self._listener.bind((listen_host, listen_port))
        self._listener.listen(64)
        self._listener.setblocking(False)
        self._wake_r, self._wake_w = socket.socketpair()
        self._wake_r.setblocking(False)
        self._selector = selectors.DefaultSelector()
        self._pipes: set[_Pipe] = set()
        self._commands: list[tuple[Callable[[], int], threading.Event, list[int]]] = []
        self._lock = threading.Lock()
        self._stopping = threading.Event()
        self._thread: threading.Thread | None = None
        self._chaos_thread: threading.Thread | None = None
        self._chaos_stop = threading.Event()
        #: Client connections accepted and forwarded so far.
        self.accepted = 0
        #: Client connections refused (target down, or over ``max_connections``).
        self.refused = 0
        #: Connection pairs cut by :meth:`cut_all` / :meth:`cut_random` / chaos.
        self.cuts = 0
        #: the tampering armed for the next response frame, and the client id
        #: prefix of the connections it may hit (see :meth:`tamper`)
        self._armed: tuple[str, str] | None = None
        #: Response frames tampered with so far.
        self.tampered = 0

    # ------------------------------------------------------------------ addresses

    @property
    def host(self) -> str:
        return str(self._listener.getsockname()[0])

    @property
    def port(self) -> int:
        return int(self._listener.getsockname()[1])

    @property
    def bootstrap(self) -> str:
        """``host:port`` where clients should connect."""
        return f"{self.host}:{self.port}"

    @property
    def running(self) -> bool:
        return self._thread is not None and self._thread.is_alive()

    @property
    def connection_count(self) -> int:
        """Live proxied connections (client-side sockets)."""
        with self._lock:
            return sum(1 for p in self._pipes if p.is_client and not p.closed)

    # ------------------------------------------------------------------ lifecycle

    def start(self) -> TcpProxy:
        """Start forwarding on a background thread; returns ``self``."""
        if self._thread is not None:
            raise RuntimeError("this TcpProxy was already started")
        self._selector.register(self._listener, selectors.EVENT_READ, None)
        self._selector.register(self._wake_r, selectors.EVENT_READ, None)
        self._thread = threading.Thread(
            target=self._run, name=f"tcp-proxy-{self.port}", daemon=True
        )
        self._thread.start()
        return self

    def stop(self, timeout_s: float = 5.0) -> None:
        """Stop chaos and forwarding, close every socket. Stopping twice is harmless."""
        self.stop_chaos()
        self._stopping.set()
        self._wake()
        if self._thread is not None:
            self._thread.join(timeout_s)
        else:
            self._close_everything()

    def __enter__(self) -> TcpProxy:
        return self.start() if self._thread is None else self

    def __exit__(self, *exc: object) -> None:
        self.stop()

    # ------------------------------------------------------------------ faults

    def cut_all(self) -> int:
        """Reset every live connection (both sides); returns how many pairs were cut."""
        return self._run_command(lambda: self._cut(self._live_client_pipes()))

    def cut_random(self, fraction: float = 0.5) -> int:
        """Reset a random ``fraction`` of the live connections (at least one if any)."""
        if not 0 < fraction <= 1:
            raise ValueError(f"fraction must be in (0, 1], got {fraction}")

        def pick() -> int:
            live = self._live_client_pipes()
            if not live:
                return 0
            count = max(1, round(len(live) * fraction))
            return self._cut(self._random.sample(live, count))

        return self._run_command(pick)

    def start_chaos(
        self,
        *,
        min_interval_s: float = 0.5,
        max_interval_s: float = 2.0,
        duration_s: float = 20.0,
        fraction: float = 1.0,
    ) -> None:
        """Cut connections at random intervals for ``duration_s``, then stop by itself.

        Every ``uniform(min_interval_s, max_interval_s)`` seconds, ``cut_all``
        (``fraction=1``) or ``cut_random(fraction)``.
        """
        if not 0 < min_interval_s <= max_interval_s:
            raise ValueError(
                f"need 0 < min_interval_s <= max_interval_s, got {min_interval_s}, {max_interval_s}"
            )
        if duration_s <= 0 or duration_s > self.max_lifetime_s:
            raise ValueError(f"duration_s must be in (0, {self.max_lifetime_s}], got {duration_s}")
        if self._chaos_thread is not None and self._chaos_thread.is_alive():
            raise RuntimeError("chaos is already running")
        self._chaos_stop.clear()
        end = time.monotonic() + duration_s

        def chaos() -> None:
            while not self._chaos_stop.is_set() and not self._stopping.is_set():
                wait = self._random.uniform(min_interval_s, max_interval_s)
                if time.monotonic() + wait >= end or self._chaos_stop.wait(wait):
                    return
                if fraction >= 1:
                    self.cut_all()
                else:
                    self.cut_random(fraction)

        self._chaos_thread = threading.Thread(target=chaos, name="tcp-proxy-chaos", daemon=True)
        self._chaos_thread.start()

    def stop_chaos(self) -> None:
        """Stop a running :meth:`start_chaos` early (no-op if none)."""
        self._chaos_stop.set()
        if self._chaos_thread is not None:
            self._chaos_thread.join(5.0)

    @property
    def chaos_running(self) -> bool:
        return self._chaos_thread is not None and self._chaos_thread.is_alive()

    def tamper(self, kind: str, *, client_id_prefix: str = "") -> None:
        """Tamper with the next response frame a broker sends through this proxy
        (one of :data:`TAMPER_KINDS`), on a connection whose client sent a client
        id starting with ``client_id_prefix``: a broker that advertises the proxy
        reaches itself through it too, and must not be hit. :attr:`tampered`
        counts the frames done."""
        if kind not in TAMPER_KINDS:
            raise ValueError(f"kind must be one of {TAMPER_KINDS}, got {kind!r}")
        with self._lock:
            self._armed = (kind, client_id_prefix)

    def _take_armed(self, pipe: _Pipe) -> str | None:
        client = pipe.peer
        with self._lock:
            armed = self._armed
            if armed is None or client is None or client.client_id is None:
                return None
            kind, prefix = armed
            if not client.client_id.startswith(prefix):
                return None
            self._armed = None
            return kind

    # ------------------------------------------------------------------ internals

    def _wake(self) -> None:
        with contextlib.suppress(OSError):
            self._wake_w.send(b"x")

    def _run_command(self, command: Callable[[], int]) -> int:
        if not self.running:
            return 0
        done = threading.Event()
        result: list[int] = []
        with self._lock:
            self._commands.append((command, done, result))
        self._wake()
        done.wait(5.0)
        return result[0] if result else 0

    def _live_client_pipes(self) -> list[_Pipe]:
        with self._lock:
            return [p for p in self._pipes if p.is_client and not p.closed]

    def _cut(self, client_pipes: list[_Pipe]) -> int:
        for pipe in client_pipes:
            self._close_pair(pipe, reset=True)
        self.cuts += len(client_pipes)
        return len(client_pipes)

    def _run(self) -> None:
        deadline = time.monotonic() + self.max_lifetime_s
        try:
            while not self._stopping.is_set():
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    break  # bounded: a forgotten proxy stops by itself
                for key, events in self._selector.select(min(remaining, 0.5)):
                    sock = key.fileobj
                    if sock is self._listener:
                        self._accept()
                    elif sock is self._wake_r:
                        with contextlib.suppress(OSError):
                            self._wake_r.recv(4096)
                    else:
                        pipe = key.data
                        assert isinstance(pipe, _Pipe)
                        if events & selectors.EVENT_READ and not pipe.closed:
                            self._on_readable(pipe)
                        if events & selectors.EVENT_WRITE and not pipe.closed:
                            self._on_writable(pipe)
                self._run_commands()
        finally:
            self._stopping.set()
            self._run_commands()
            self._close_everything()

    def _run_commands(self) -> None:
        with self._lock:
            commands, self._commands = self._commands, []
        for command, done, result in commands:
            try:
                result.append(command())
            finally:
                done.set()

    def _accept(self) -> None:
        try:
            client, _ = self._listener.accept()
        except (BlockingIOError, InterruptedError):
            return
        if len(self._live_client_pipes()) >= self.max_connections:
            self.refused += 1
            _reset(client)
            return
        try:
            upstream = socket.create_connection(self.target, timeout=_CONNECT_TIMEOUT_S)
        except OSError:
            # The broker is down: the client sees its connection reset, as it would
            # see a refused connection without the proxy.
            self.refused += 1
            _reset(client)
            return
        for s in (client, upstream):
            s.setblocking(False)
            s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        a, b = _Pipe(client, is_client=True), _Pipe(upstream)
        a.peer, b.peer = b, a
        with self._lock:
            self._pipes.update((a, b))
        self._selector.register(client, selectors.EVENT_READ, a)
        self._selector.register(upstream, selectors.EVENT_READ, b)
        self.accepted += 1

    def _on_readable(self, pipe: _Pipe) -> None:
        peer = pipe.peer
        assert peer is not None
        try:
            data = pipe.sock.recv(_CHUNK)
        except (BlockingIOError, InterruptedError):
            return
        except OSError:
            self._close_pair(pipe, reset=True)
            return
        if not data:
            # Orderly close from one side: flush what is queued, then close both.
            self._close_pair(pipe, reset=False)
            return
        if not pipe.is_client:
            data = self._responses(pipe, data)
        elif pipe.client_id is None:
            _note_client_id(pipe, data)
        peer.pending += data
        self._flush(peer)

    def _responses(self, pipe: _Pipe, data: bytes) -> bytes:
        """What of a broker's bytes goes on to the client: all of it, but for a
        frame being tampered with (see :meth:`tamper`). Follows the frames of the
        stream to know where the next one starts."""
        if pipe.stalled:
            return b""
        out = bytearray()
        view = memoryview(data)
        while view:
            if len(pipe.head) < 4:
                if not pipe.head and pipe.capture is None:  # a frame starts
                    kind = self._take_armed(pipe)
                    if kind is not None:
                        pipe.capture, pipe.capture_kind = bytearray(), kind
                n = min(4 - len(pipe.head), len(view))
                pipe.head += view[:n]
                (out if pipe.capture is None else pipe.capture).extend(view[:n])
                view = view[n:]
                if len(pipe.head) < 4:
                    continue
                # Not a Kafka stream (a negative size): no body to follow.
                pipe.frame_left = max(0, _SIZE.unpack(pipe.head)[0])
            else:
                n = min(pipe.frame_left, len(view))
                (out if pipe.capture is None else pipe.capture).extend(view[:n])
                pipe.frame_left -= n
                view = view[n:]
            if pipe.frame_left == 0:  # the frame is complete
                pipe.head = bytearray()
                if pipe.capture is not None:
                    out += self._tampered(pipe, bytes(pipe.capture))
                    pipe.capture = None
                    if pipe.stalled:
                        break
        return bytes(out)

    def _tampered(self, pipe: _Pipe, frame: bytes) -> bytes:
        """``frame`` (size prefix included) as the armed tampering leaves it."""
        self.tampered += 1
        kind, body = pipe.capture_kind, frame[4:]
        if kind == "truncate":
            return frame[: 4 + len(body) // 2]
        if kind == "correlation":
            (correlation_id,) = _SIZE.unpack_from(body, 0)
            return frame[:4] + _SIZE.pack(correlation_id ^ 0x5A5A) + body[4:]
        if kind == "huge":
            return _SIZE.pack(0x7FFF_FFF0) + body
        pipe.stalled = True  # stall: a part, then silence
        return frame[: 4 + len(body) // 2]

    def _on_writable(self, pipe: _Pipe) -> None:
        self._flush(pipe)

    def _flush(self, pipe: _Pipe) -> None:
        if pipe.closed:
            return
        try:
            while pipe.pending:
                sent = pipe.sock.send(pipe.pending)
                del pipe.pending[:sent]
        except (BlockingIOError, InterruptedError):
            pass
        except OSError:
            self._close_pair(pipe, reset=True)
            return
        self._update_interest(pipe)
        if pipe.peer is not None:
            self._update_interest(pipe.peer)

    def _update_interest(self, pipe: _Pipe) -> None:
        if pipe.closed:
            return
        events = 0
        peer = pipe.peer
        # Backpressure: stop reading while the other side has a large backlog.
        if peer is None or len(peer.pending) < _MAX_PENDING:
            events |= selectors.EVENT_READ
        if pipe.pending:
            events |= selectors.EVENT_WRITE
        if events == 0:
            events = selectors.EVENT_WRITE if pipe.pending else selectors.EVENT_READ
        with contextlib.suppress(KeyError, ValueError):
            self._selector.modify(pipe.sock, events, pipe)

    def _close_pair(self, pipe: _Pipe, *, reset: bool) -> None:
        for p in (pipe, pipe.peer):
            if p is None or p.closed:
                continue
            p.closed = True
            with contextlib.suppress(KeyError, ValueError):
                self._selector.unregister(p.sock)
            if not reset and p.pending:
                with contextlib.suppress(OSError):
                    p.sock.setblocking(True)
                    p.sock.settimeout(0.5)
                    p.sock.sendall(p.pending)
            if reset:
                _reset(p.sock)
            else:
                with contextlib.suppress(OSError):
                    p.sock.close()
            with self._lock:
                self._pipes.discard(p)

    def _close_everything(self) -> None:
        for pipe in list(self._pipes):
            self._close_pair(pipe, reset=True)
        for s in (self._listener, self._wake_r, self._wake_w):
            with contextlib.suppress(OSError):
                s.close()
        with contextlib.suppress(Exception):
            self._selector.close()


def _note_client_id(pipe: _Pipe, data: bytes) -> None:
    """Read the client id of a connection's first request (a request header:
    size, api key, api version, correlation id, then the client id as an int16
    length and its bytes)."""
    first = pipe.first_request
    first += data[: 4096 - len(first)]
    if len(first) < 14:
        return
    (length,) = struct.unpack_from(">h", first, 12)
    if length < 0:
        pipe.client_id = ""
    elif len(first) >= 14 + length:
        pipe.client_id = first[14 : 14 + length].decode(errors="replace")
    elif len(first) >= 4096:
        pipe.client_id = ""
    if pipe.client_id is not None:
        pipe.first_request = bytearray()


def _reset(sock: socket.socket) -> None:
    """Close with RST (SO_LINGER 0): the peer sees ECONNRESET, like a dropped link."""
    with contextlib.suppress(OSError):
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
    with contextlib.suppress(OSError):
        sock.close()


def _parse_target(target: tuple[str, int] | str) -> tuple[str, int]:
    if isinstance(target, str):
        host, sep, port_text = target.rpartition(":")
        if not sep or not host or not port_text.isdigit():
            raise ValueError(f"target must be 'host:port' or (host, port), got {target!r}")
        return host, int(port_text)
    host, port = target
    if not isinstance(port, int) or not 0 < port < 65536:
        raise ValueError(f"target port must be 1..65535, got {port!r}")
    return host, port


def _require_loopback(host: str, what: str) -> None:
    # Test traffic must never leave the machine.
    name = "127.0.0.1" if host == "localhost" else host
    try:
        loopback = ipaddress.ip_address(name).is_loopback
    except ValueError:
        loopback = False
    if not loopback:
        raise ValueError(f"{what} must be a loopback address (127.0.0.0/8 or ::1), got {host!r}")
