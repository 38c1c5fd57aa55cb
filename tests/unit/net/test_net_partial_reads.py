"""Responses arriving in pieces: what a read that completes no response reports.

A read that only adds bytes to a response still incomplete tells the driver so
(``BrokerConnection.on_readable`` returns True, ``NetworkClient.poll`` returns
the time until which nothing else needs doing), and the driver then skips its
round. That is only safe if such a read never ran a handler, changed the
connection's state or left bytes to write: these tests split response streams
at every byte boundary and at random, over a real socket, and check it on every
single read. They read each piece as it comes (no receive low-water mark); the
last tests check the mark that makes a large response arrive in big reads.
"""

from __future__ import annotations

import fcntl
import itertools
import random
import select
import socket
import ssl
import struct
import sys
import termios
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from kafka_share._net.client import NetworkClient, Purpose, monotonic_ms
from kafka_share._net.connection import (
    _TLS_HELD_BYTES,
    AWAY_RECEIVE_LOW_WATER_BYTES,
    RECEIVE_LOW_WATER_BYTES,
    TLS_RECEIVE_LOW_WATER_BYTES,
    BrokerConnection,
    ConnectionState,
    receive_low_water,
)
from kafka_share._net.security import ConnectionSecurity
from kafka_share.config import SecurityProtocol
from kafka_share.protocol.headers import (
    RequestHeader,
    ResponseHeader,
    request_header_version,
    response_header_version,
)
from kafka_share.protocol.messages import (
    REQUEST_TYPES,
    RESPONSE_TYPES,
    MetadataRequest,
    MetadataResponse,
)
from tests.fakes.broker import api_versions_response, default_api_versions
from tests.fakes.pump import Outcome
from tests.unit.net.helpers import is_ready
from tests.unit.protocol.helpers import buffered_bytes

_SIZE = struct.Struct(">i")
NODE = 1


def _read_exact(sock: socket.socket, n: int) -> bytes:
    buf = bytearray()
    while len(buf) < n:
        chunk = sock.recv(n - len(buf))
        assert chunk, "client closed the connection"
        buf += chunk
    return bytes(buf)


def _read_request(sock: socket.socket) -> tuple[int, int, int]:
    """(api_key, api_version, correlation_id) of the next request frame."""
    (size,) = _SIZE.unpack(_read_exact(sock, 4))
    frame = _read_exact(sock, size)
    api_key, api_version = struct.unpack_from(">hh", frame, 0)
    flex = getattr(REQUEST_TYPES[api_key], "FLEXIBLE_MIN_VERSION", None)
    header, _ = RequestHeader.decode(
        memoryview(frame),
        request_header_version(api_key, flex is not None and api_version >= flex),
    )
    return api_key, api_version, header.correlation_id


def _response_frame(api_key: int, version: int, correlation_id: int, response: Any) -> bytes:
    cls: Any = RESPONSE_TYPES[api_key]
    flex = cls.FLEXIBLE_MIN_VERSION
    head = ResponseHeader(correlation_id=correlation_id).encode(
        response_header_version(api_key, flex is not None and version >= flex)
    )
    body = cls.encode(response, version)
    return _SIZE.pack(len(head) + len(body)) + head + body


def _metadata_response(brokers: int, tag: int) -> MetadataResponse:
    broker = MetadataResponse.MetadataResponseBroker
    return MetadataResponse(
        controller_id=tag,
        brokers=[broker(node_id=i, host="h" * 180, port=9092) for i in range(brokers)],
    )


class _Server:
    """One accepted connection, answered by hand from the test's thread."""

    def __init__(self) -> None:
        self.listener = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        self.listener.bind(("127.0.0.1", 0))
        self.listener.listen(1)
        self.sock: socket.socket | None = None

    @property
    def address(self) -> tuple[str, int]:
        host, port = self.listener.getsockname()[:2]
        return str(host), int(port)

    def accept(self) -> socket.socket:
        self.listener.settimeout(5)
        self.sock, _ = self.listener.accept()
        self.sock.settimeout(5)
        # Each piece goes out at once (Nagle would hold small ones for an ACK).
        self.sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        return self.sock

    def answer_api_versions(self) -> None:
        assert self.sock is not None
        api_key, version, cid = _read_request(self.sock)
        assert api_key == 18
        response = api_versions_response(default_api_versions())
        self.sock.sendall(_response_frame(api_key, version, cid, response))

    def close(self) -> None:
        if self.sock is not None:
            self.sock.close()
        self.listener.close()


@pytest.fixture
def server() -> Iterator[_Server]:
    s = _Server()
    yield s
    s.close()


def _wait_readable(sock: socket.socket, timeout_s: float = 5.0) -> None:
    readable, _, _ = select.select([sock], [], [], timeout_s)
    assert readable, "no bytes arrived in time"


def _ready_connection(
    server: _Server, *, low_water_bytes: int = 0, receive_buffer_bytes: int = -1
) -> BrokerConnection:
    """A READY connection; by default without a receive low-water mark, so that
    every piece the test sends is readable at once."""
    host, port = server.address
    conn = BrokerConnection(
        node_id=NODE, host=host, port=port, client_id="partial-reads",
        now_ms=monotonic_ms(), connect_timeout_ms=5000, request_timeout_ms=30_000,
        addresses=socket.getaddrinfo(host, port, type=socket.SOCK_STREAM),
        receive_low_water_bytes=low_water_bytes, receive_buffer_bytes=receive_buffer_bytes,
    )
    server.accept()
    deadline = time.monotonic() + 5
    while conn.state is ConnectionState.CONNECTING:
        assert time.monotonic() < deadline
        select.select([], [conn.sock], [], 1)
        conn.on_writable(monotonic_ms())
    server.answer_api_versions()
    while conn.state is not ConnectionState.READY:
        assert time.monotonic() < deadline
        _wait_readable(conn.sock)
        conn.on_readable(monotonic_ms())
    return conn


class _Exchange:
    """Requests pipelined on a connection and the stream of their answers."""

    def __init__(self, conn: BrokerConnection, server: _Server, sizes: list[int]) -> None:
        assert server.sock is not None
        self.outcomes = [Outcome() for _ in sizes]
        for outcome in self.outcomes:
            conn.send(MetadataRequest(topics=[]), outcome, now_ms=monotonic_ms())
        frames = []
        for tag, brokers in enumerate(sizes):
            api_key, version, cid = _read_request(server.sock)
            assert api_key == 3
            frames.append(_response_frame(api_key, version, cid, _metadata_response(brokers, tag)))
        self.frames = frames
        self.stream = b"".join(frames)

    def handled(self) -> int:
        return sum(len(o.calls) for o in self.outcomes)

    def check_answers(self) -> None:
        for tag, outcome in enumerate(self.outcomes):
            assert isinstance(outcome.response, MetadataResponse)
            assert outcome.response.controller_id == tag


def _deliver(conn: BrokerConnection, server: _Server, ex: _Exchange, cuts: list[int]) -> int:
    """Send ``ex.stream`` cut at ``cuts``, reading after each piece until the
    connection has taken it all; checks every read's report. Returns how many
    reads reported "nothing but a partial response"."""
    assert server.sock is not None
    quiet_reads = 0
    bounds = [0, *sorted(set(cuts)), len(ex.stream)]
    for start, end in itertools.pairwise(bounds):
        if start == end:
            continue
        server.sock.sendall(ex.stream[start:end])
        deadline = time.monotonic() + 5
        while True:
            done = ex.handled()
            taken = sum(len(f) for f in ex.frames[:done]) + buffered_bytes(conn._codec)
            if taken == end:
                break
            assert time.monotonic() < deadline, f"read stalled at {taken} of {end} bytes"
            _wait_readable(conn.sock)
            quiet = conn.on_readable(monotonic_ms())
            assert conn.state is ConnectionState.READY
            if quiet:
                quiet_reads += 1
                assert ex.handled() == done, "a read that ran a handler reported quiet"
            else:
                assert ex.handled() > done, "a read that completed nothing was not quiet"
    ex.check_answers()
    return quiet_reads


def test_every_split_of_two_small_responses_reports_each_read_right(server: _Server) -> None:
    conn = _ready_connection(server)
    try:
        ex = _Exchange(conn, server, [1, 2])
        assert _deliver(conn, server, ex, []) == 0  # all at once: no quiet read
        length = len(ex.stream)
        for cut in range(1, length):
            ex = _Exchange(conn, server, [1, 2])
            _deliver(conn, server, ex, [cut])
        # And one byte at a time: every read but the last of each frame is quiet.
        ex = _Exchange(conn, server, [1, 2])
        assert _deliver(conn, server, ex, list(range(1, length))) == length - 2
    finally:
        conn.close()


def test_random_chunkings_of_large_and_small_responses(server: _Server) -> None:
    """A frame larger than the scratch buffer is read in place, in many pieces."""
    conn = _ready_connection(server)
    rng = random.Random(932)
    try:
        quiet_reads = 0
        for _ in range(25):
            ex = _Exchange(conn, server, [1, 400, 3, 450])
            assert len(ex.frames[1]) > 64 * 1024
            length = len(ex.stream)
            cuts = rng.sample(range(1, length), rng.randint(1, 40))
            # Cuts right around frame boundaries and size prefixes too.
            edge = len(ex.frames[0])
            cuts += [edge + rng.randint(-3, 5), edge + 64 * 1024 + rng.randint(-2, 2)]
            quiet_reads += _deliver(conn, server, ex, [c for c in cuts if 0 < c < length])
        assert quiet_reads > 0
    finally:
        conn.close()


def _ready_client(server: _Server, **config: Any) -> tuple[NetworkClient, Outcome]:
    """A client whose connection to ``server`` is READY, with a Metadata request
    sent (the server has not read it yet) and the outcome that waits for it."""
    host, port = server.address
    client = NetworkClient(
        client_id="partial-reads", address_of=lambda node: (host, port),
        connect_timeout_ms=5000, request_timeout_ms=30_000,
        reconnect_backoff_ms=50, reconnect_backoff_max_ms=1000, **config,
    )
    out = Outcome()
    assert client.send(NODE, Purpose.CONTROL, MetadataRequest(topics=[]), out, monotonic_ms())
    sock: socket.socket | None = server.accept()
    deadline = time.monotonic() + 5
    while not is_ready(client, NODE, Purpose.CONTROL):
        assert time.monotonic() < deadline
        client.poll(20)
        if sock is not None and select.select([sock], [], [], 0)[0]:
            server.answer_api_versions()
            sock = None  # answered once
    return client, out


def test_client_poll_reports_quiet_waits_until_a_response_completes(server: _Server) -> None:
    client, out = _ready_client(server, receive_low_water_bytes=0)
    deadline = time.monotonic() + 5
    try:
        api_key, version, cid = _read_request(server.sock)  # type: ignore[arg-type]
        stream = _response_frame(api_key, version, cid, _metadata_response(400, 7))
        assert server.sock is not None
        server.sock.sendall(stream[:1000])
        due = client.poll(2000)
        assert due is not None and not out.calls
        server.sock.sendall(stream[1000:2000])
        now = monotonic_ms()
        assert client.poll_quiet(due, now) == due and not out.calls
        # A wakeup (an application event) ends the quiet wait: the round must run.
        client.wakeup()
        assert client.poll_quiet(due, monotonic_ms()) is None
        # So does a deadline passing with nothing to read.
        started = monotonic_ms()
        assert client.poll_quiet(started + 30, started) is None
        assert monotonic_ms() - started >= 25
        server.sock.sendall(stream[2000:-10])
        due = client.poll(2000)
        assert due is not None and not out.calls
        server.sock.sendall(stream[-10:])
        while not out.calls:
            assert time.monotonic() < deadline
            assert due is not None
            due = client.poll_quiet(due, monotonic_ms())
        assert due is None  # the read that completed the response
        assert out.response.controller_id == 7
    finally:
        client.close()


# -- the receive low-water mark ------------------------------------------------------


def test_receive_low_water_is_at_most_what_is_missing() -> None:
    cap = 256 * 1024
    assert receive_low_water(0, cap) == 1  # no frame in progress
    assert receive_low_water(64 * 1024, cap) == 1  # a small rest: read as it comes
    assert receive_low_water(64 * 1024 + 1, cap) == 64 * 1024 + 1  # exactly the rest
    assert receive_low_water(200_000, cap) == 200_000
    assert receive_low_water(5_000_000, cap) == cap
    assert receive_low_water(5_000_000, 0) == 1  # turned off


def _low_water(conn: BrokerConnection) -> int:
    return conn.sock.getsockopt(socket.SOL_SOCKET, socket.SO_RCVLOWAT)


def _readable_within(sock: socket.socket, timeout_s: float) -> bool:
    return bool(select.select([sock], [], [], timeout_s)[0])


def _send_in_background(sock: socket.socket, data: bytes) -> threading.Thread:
    """Send more than the socket buffers hold while the test thread reads."""
    sender = threading.Thread(target=sock.sendall, args=(data,), daemon=True)
    sender.start()
    return sender


linux_only = pytest.mark.skipif(
    not sys.platform.startswith("linux"), reason="the mark is set on Linux only"
)


@linux_only
def test_a_large_response_is_read_in_reads_of_the_low_water_mark(server: _Server) -> None:
    cap = RECEIVE_LOW_WATER_BYTES
    conn = _ready_connection(server, low_water_bytes=cap)
    try:
        assert _low_water(conn) == 1
        ex = _Exchange(conn, server, [40_000])  # a ~1.2 MB response
        frame = ex.stream
        assert len(frame) > 4 * cap
        assert server.sock is not None
        server.sock.sendall(frame[:100_000])
        _wait_readable(conn.sock)
        while buffered_bytes(conn._codec) < 100_000:
            assert conn.on_readable(monotonic_ms())
        missing = len(frame) - 100_000
        assert conn._codec.frame_missing_bytes == missing
        assert _low_water(conn) == cap
        # Fewer bytes than the mark: the socket does not count as readable.
        server.sock.sendall(frame[100_000:200_000])
        assert not _readable_within(conn.sock, 0.3)
        # The rest arrives in a few big reads, and the last one ends the frame.
        sender = _send_in_background(server.sock, frame[200_000:])
        reads = 0
        deadline = time.monotonic() + 5
        while not ex.handled():
            assert time.monotonic() < deadline, "the response never completed"
            _wait_readable(conn.sock)
            conn.on_readable(monotonic_ms())
            reads += 1
            # Never more than what is missing: the mark is always reached.
            assert _low_water(conn) <= max(1, conn._codec.frame_missing_bytes)
        sender.join()
        ex.check_answers()
        assert reads <= (len(frame) - 100_000) // cap + 3
        assert _low_water(conn) == 1  # back to any byte between frames
        # Small responses are read as they come.
        ex = _Exchange(conn, server, [1, 2])
        assert _deliver(conn, server, ex, [len(ex.frames[0]) // 2]) == 1
        assert _low_water(conn) == 1
    finally:
        conn.close()


@pytest.fixture(scope="module")
def pki(tmp_path_factory: pytest.TempPathFactory) -> Any:
    pytest.importorskip("cryptography")
    from kafka_share.testing.secure import generate_pki

    return generate_pki(Path(tmp_path_factory.mktemp("pki")))


def _ready_tls_connection(server: _Server, pki: Any, *, low_water_bytes: int) -> BrokerConnection:
    """A READY connection over TLS; the server's side is a blocking TLS socket."""
    host, port = server.address
    conn = BrokerConnection(
        node_id=NODE, host=host, port=port, client_id="partial-reads",
        now_ms=monotonic_ms(), connect_timeout_ms=5000, request_timeout_ms=30_000,
        addresses=socket.getaddrinfo(host, port, type=socket.SOCK_STREAM),
        receive_low_water_bytes=low_water_bytes,
        security=ConnectionSecurity(
            protocol=SecurityProtocol.SSL,
            ssl_context=ssl.create_default_context(cafile=str(pki.ca_file)),
        ),
    )
    raw = server.accept()
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.load_cert_chain(str(pki.broker_keystore))

    def serve() -> None:
        server.sock = context.wrap_socket(raw, server_side=True)  # the handshake
        server.answer_api_versions()

    peer = threading.Thread(target=serve, daemon=True)
    peer.start()
    deadline = time.monotonic() + 5
    while conn.state is not ConnectionState.READY:
        assert time.monotonic() < deadline, f"stuck in {conn.state}"
        want_write = conn.state is ConnectionState.CONNECTING or bool(conn._out)
        readable, writable, _ = select.select(
            [conn.sock], [conn.sock] if want_write else [], [], 0.5
        )
        if writable:
            conn.on_writable(monotonic_ms())
        if readable:
            conn.on_readable(monotonic_ms())
    peer.join(5)
    return conn


@linux_only
def test_over_tls_a_large_response_is_read_in_reads_of_the_tls_mark(
    server: _Server, pki: Any
) -> None:
    conn = _ready_tls_connection(server, pki, low_water_bytes=RECEIVE_LOW_WATER_BYTES)
    try:
        assert _low_water(conn) == 1
        ex = _Exchange(conn, server, [40_000])  # a ~1.2 MB response
        frame = ex.stream
        assert server.sock is not None
        sender = _send_in_background(server.sock, frame)
        marks = []
        deadline = time.monotonic() + 5
        while not ex.handled():
            assert time.monotonic() < deadline, "the response never completed"
            _wait_readable(conn.sock)
            conn.on_readable(monotonic_ms())
            marks.append(_low_water(conn))
            # Below what the frame misses by one TLS record the TLS object may
            # hold, so the mark is always reached. (This restates the rule; what
            # shows it holds is that the response completes before the deadline.)
            assert marks[-1] <= max(1, conn._codec.frame_missing_bytes - _TLS_HELD_BYTES)
        sender.join()
        ex.check_answers()
        assert max(marks) == TLS_RECEIVE_LOW_WATER_BYTES
        assert len(marks) <= len(frame) // TLS_RECEIVE_LOW_WATER_BYTES + 6
        assert _low_water(conn) == 1  # back to any byte between frames
        # Small responses are read as they come.
        ex = _Exchange(conn, server, [1, 2])
        server.sock.sendall(ex.stream)
        while ex.handled() < 2:
            _wait_readable(conn.sock, 1.0)
            conn.on_readable(monotonic_ms())
        ex.check_answers()
        assert _low_water(conn) == 1
    finally:
        conn.close()


@linux_only
def test_a_fixed_receive_buffer_holds_four_times_the_mark(server: _Server) -> None:
    conn = _ready_connection(
        server, low_water_bytes=RECEIVE_LOW_WATER_BYTES, receive_buffer_bytes=262_144
    )
    try:
        ex = _Exchange(conn, server, [40_000])
        assert server.sock is not None
        server.sock.sendall(ex.stream[:100_000])
        _wait_readable(conn.sock)
        conn.on_readable(monotonic_ms())
        assert _low_water(conn) == 262_144 // 4
        sender = _send_in_background(server.sock, ex.stream[100_000:])
        deadline = time.monotonic() + 5
        while not ex.handled():
            assert time.monotonic() < deadline, "the response never completed"
            _wait_readable(conn.sock)
            conn.on_readable(monotonic_ms())
        sender.join()
        ex.check_answers()
        assert _low_water(conn) == 1
    finally:
        conn.close()


class _NoLowWater:
    """The connection's socket, with SO_RCVLOWAT refused from ``fail_from`` calls on."""

    def __init__(self, sock: socket.socket, fail_from: int) -> None:
        self._sock = sock
        self._calls = 0
        self._fail_from = fail_from

    def setsockopt(self, level: int, option: int, value: int) -> None:
        if option == socket.SO_RCVLOWAT:
            self._calls += 1
            if self._calls >= self._fail_from:
                raise OSError(92, "Protocol not available")
        self._sock.setsockopt(level, option, value)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._sock, name)


def _refusing_marks(server: _Server, fail_from: int) -> tuple[BrokerConnection, socket.socket]:
    """A READY connection whose socket refuses SO_RCVLOWAT from the
    ``fail_from``-th setting on, and its real socket."""
    conn = _ready_connection(server, low_water_bytes=RECEIVE_LOW_WATER_BYTES)
    real = conn.sock
    conn.sock = _NoLowWater(real, fail_from=fail_from)  # type: ignore[assignment]
    return conn, real


@linux_only
def test_a_refused_mark_leaves_reads_as_bytes_come(server: _Server) -> None:
    conn, real = _refusing_marks(server, fail_from=1)
    try:
        ex = _Exchange(conn, server, [40_000])
        assert server.sock is not None
        sender = _send_in_background(server.sock, ex.stream)
        deadline = time.monotonic() + 5
        while not ex.handled():
            assert time.monotonic() < deadline, "the response never completed"
            _wait_readable(real)
            conn.on_readable(monotonic_ms())
        sender.join()
        ex.check_answers()
        assert real.getsockopt(socket.SOL_SOCKET, socket.SO_RCVLOWAT) == 1
        assert conn.state is ConnectionState.READY
    finally:
        conn.close()


@linux_only
def test_a_mark_that_cannot_come_down_closes_the_connection(server: _Server) -> None:
    conn, real = _refusing_marks(server, fail_from=2)  # raise: ok, lower: fails
    try:
        ex = _Exchange(conn, server, [40_000])
        assert server.sock is not None
        peer = server.sock

        def send() -> None:
            try:
                peer.sendall(ex.stream)
            except OSError:
                pass  # the client closed before the end of the response

        sender = threading.Thread(target=send, daemon=True)
        sender.start()
        deadline = time.monotonic() + 5
        while conn.state is not ConnectionState.CLOSED:
            assert time.monotonic() < deadline, "the connection never closed"
            _wait_readable(real)
            conn.on_readable(monotonic_ms())
        sender.join()
        [outcome] = ex.outcomes  # failed, not left waiting for the response
        assert "cannot lower the socket's SO_RCVLOWAT" in str(outcome.error)
        assert conn.close_reason is outcome.error
    finally:
        conn.close()


# -- the mark while the loop is away -------------------------------------------------


def _unread_bytes(sock: socket.socket) -> int:
    """What the kernel holds for ``sock`` that nobody has read (FIONREAD)."""
    (n,) = struct.unpack("i", fcntl.ioctl(sock.fileno(), termios.FIONREAD, b"\0" * 4))
    return int(n)


def _kernel_mark_cap() -> int:
    """Linux caps SO_RCVLOWAT at half the largest auto-tuned receive buffer."""
    with open("/proc/sys/net/ipv4/tcp_rmem") as f:
        return int(f.read().split()[2]) // 2


@linux_only
def test_the_mark_rises_only_while_a_response_is_awaited(server: _Server) -> None:
    conn = _ready_connection(server, low_water_bytes=RECEIVE_LOW_WATER_BYTES)
    try:
        assert not conn.raise_low_water_away()  # nothing in flight: nothing arrives
        assert _low_water(conn) == 1 and not conn.low_water_raised
        ex = _Exchange(conn, server, [1])
        assert conn.raise_low_water_away()
        assert _low_water(conn) == min(AWAY_RECEIVE_LOW_WATER_BYTES, _kernel_mark_cap())
        assert not conn.raise_low_water_away()  # raised already
        conn.restore_low_water()
        assert _low_water(conn) == 1 and not conn.low_water_raised
        conn.restore_low_water()  # nothing to restore: no change
        assert _deliver(conn, server, ex, []) == 0
    finally:
        conn.close()


@linux_only
def test_without_marks_the_away_mark_is_not_raised_either(server: _Server) -> None:
    conn = _ready_connection(server, low_water_bytes=0)
    try:
        _Exchange(conn, server, [1])
        assert not conn.raise_low_water_away()
        assert _low_water(conn) == 1
    finally:
        conn.close()


@linux_only
def test_while_the_mark_is_raised_the_whole_response_arrives_unread(server: _Server) -> None:
    """What the raised mark is for: nobody reads the socket (the application
    thread decodes), yet the kernel takes the whole response in, so the broker
    is done sending when the next read comes. At the default mark it stops at
    the receive window the kernel keeps while nobody reads."""
    conn = _ready_connection(server, low_water_bytes=RECEIVE_LOW_WATER_BYTES)
    assert server.sock is not None
    server.sock.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, 102_400)  # as the broker's
    try:
        for raised in (False, True):
            ex = _Exchange(conn, server, [15_000])  # a ~2.9 MB response
            frame = ex.stream
            if raised:
                assert conn.raise_low_water_away()
            sender = _send_in_background(server.sock, frame)
            deadline = time.monotonic() + (5 if raised else 0.3)
            while _unread_bytes(conn.sock) < len(frame) and time.monotonic() < deadline:
                time.sleep(0.005)
            unread = _unread_bytes(conn.sock)
            if raised:
                assert unread == len(frame)
            else:
                assert unread < len(frame) // 2, "the control: nobody reads, little arrives"
            conn.restore_low_water()
            while not ex.handled():
                _wait_readable(conn.sock)
                conn.on_readable(monotonic_ms())
            sender.join()
            ex.check_answers()
    finally:
        conn.close()


@linux_only
def test_a_raised_mark_that_cannot_come_down_closes_the_connection(server: _Server) -> None:
    conn, _ = _refusing_marks(server, fail_from=2)  # raise: ok, lower: fails
    try:
        ex = _Exchange(conn, server, [1])
        assert conn.raise_low_water_away()
        conn.restore_low_water()
        assert conn.state is ConnectionState.CLOSED and not conn.low_water_raised
        [outcome] = ex.outcomes  # failed, not left waiting for a response
        assert "cannot lower the socket's SO_RCVLOWAT back to 1 bytes" in str(outcome.error)
    finally:
        conn.close()


@linux_only
def test_a_refused_away_mark_changes_nothing(server: _Server) -> None:
    conn, real = _refusing_marks(server, fail_from=1)
    try:
        ex = _Exchange(conn, server, [1])
        assert not conn.raise_low_water_away()
        assert not conn.low_water_raised and conn.state is ConnectionState.READY
        conn.sock = real
        assert _deliver(conn, server, ex, []) == 0
    finally:
        conn.close()


@linux_only
def test_the_next_wait_lowers_the_mark_so_a_small_response_wakes_it(server: _Server) -> None:
    """Whichever thread waits next, a response smaller than the raised mark must
    wake it: the client lowers every raised mark before it selects."""
    client, out = _ready_client(server)
    try:
        conn = client.connection(NODE, Purpose.CONTROL)
        assert conn is not None
        for tag in range(2):
            api_key, version, cid = _read_request(server.sock)  # type: ignore[arg-type]
            client.raise_low_water_away()
            assert _low_water(conn) > 1
            assert server.sock is not None
            server.sock.sendall(_response_frame(api_key, version, cid, _metadata_response(1, tag)))
            # A wait that the response does not wake lasts its whole 30 s.
            started = time.monotonic()
            while not out.calls:
                assert time.monotonic() - started < 10.0, "the small response woke nothing"
                client.poll(30_000)
            assert _low_water(conn) == 1
            assert out.response.controller_id == tag
            out = Outcome()
            client.send(NODE, Purpose.CONTROL, MetadataRequest(topics=[]), out, monotonic_ms())
        _read_request(server.sock)  # type: ignore[arg-type]
        conn.close()
        client.raise_low_water_away()  # a closed connection is left alone
        assert not conn.low_water_raised
    finally:
        client.close()
