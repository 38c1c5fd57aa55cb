"""The failure tests' TCP proxy on its own (no broker): forwarding, cuts, bounds."""

from __future__ import annotations

import socket
import struct
import threading
import time
from collections.abc import Iterator

import pytest

from kafka_share.testing.proxy import TcpProxy


@pytest.fixture
def echo_server() -> Iterator[tuple[str, int]]:
    """A loopback echo server (one thread per connection), closed after the test."""
    server = socket.create_server(("127.0.0.1", 0))
    server.settimeout(0.2)
    stop = threading.Event()

    def serve(conn: socket.socket) -> None:
        with conn:
            while True:
                try:
                    data = conn.recv(65536)
                    if not data:
                        return
                    conn.sendall(data)
                except OSError:
                    return

    def accept_loop() -> None:
        while not stop.is_set():
            try:
                conn, _ = server.accept()
            except TimeoutError:
                continue
            except OSError:
                return
            threading.Thread(target=serve, args=(conn,), daemon=True).start()

    t = threading.Thread(target=accept_loop, daemon=True)
    t.start()
    yield server.getsockname()[:2]
    stop.set()
    t.join(2)
    server.close()


def _connect(proxy: TcpProxy) -> socket.socket:
    s = socket.create_connection((proxy.host, proxy.port), timeout=5)
    return s


def _assert_reset_on_connect(proxy: TcpProxy) -> None:
    """A new connection through ``proxy`` is reset (at connect, or at the first read)."""
    with pytest.raises(OSError), _connect(proxy) as c:
        c.settimeout(3)
        if c.recv(10) == b"":
            raise ConnectionResetError("EOF")


def _echo(s: socket.socket, payload: bytes) -> bytes:
    s.sendall(payload)
    got = b""
    while len(got) < len(payload):
        chunk = s.recv(65536)
        if not chunk:
            break
        got += chunk
    return got


def _wait(cond: object, timeout_s: float = 5.0) -> bool:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if callable(cond) and cond():
            return True
        time.sleep(0.02)
    return False


def test_forwards_both_ways_including_large_payloads(echo_server: tuple[str, int]) -> None:
    with TcpProxy(echo_server) as proxy:
        with _connect(proxy) as s:
            assert _echo(s, b"hello") == b"hello"
            big = bytes(range(256)) * 40_000  # 10 MB: exercises backpressure
            done: list[bytes] = []
            reader = threading.Thread(
                target=lambda: done.append(_recv_exactly(s, len(big))), daemon=True
            )
            reader.start()
            s.sendall(big)
            reader.join(20)
            assert done and done[0] == big
        assert proxy.accepted == 1


def _recv_exactly(s: socket.socket, n: int) -> bytes:
    parts: list[bytes] = []
    got = 0
    while got < n:
        chunk = s.recv(min(1 << 20, n - got))
        if not chunk:
            break
        parts.append(chunk)
        got += len(chunk)
    return b"".join(parts)


def test_cut_all_resets_every_connection_and_new_ones_still_work(
    echo_server: tuple[str, int],
) -> None:
    with TcpProxy(echo_server) as proxy:
        clients = [_connect(proxy) for _ in range(3)]
        for c in clients:
            assert _echo(c, b"ping") == b"ping"
        assert _wait(lambda: proxy.connection_count == 3)
        assert proxy.cut_all() == 3
        for c in clients:
            with pytest.raises(OSError):
                # A reset connection: recv raises, or returns EOF and the send fails.
                if c.recv(10) == b"":
                    raise ConnectionResetError("EOF")
            c.close()
        assert proxy.cuts == 3
        assert proxy.connection_count == 0
        with _connect(proxy) as again:
            assert _echo(again, b"after") == b"after"


def test_cut_random_cuts_a_fraction(echo_server: tuple[str, int]) -> None:
    with TcpProxy(echo_server, seed=7) as proxy:
        clients = [_connect(proxy) for _ in range(4)]
        for c in clients:
            _echo(c, b"x")
        assert proxy.cut_random(0.5) == 2
        assert proxy.connection_count == 2
        assert proxy.cut_random(0.01) == 1  # at least one when any are live
        for c in clients:
            c.close()


def test_chaos_cuts_repeatedly_and_stops_by_itself(echo_server: tuple[str, int]) -> None:
    with TcpProxy(echo_server, seed=1) as proxy:
        proxy.start_chaos(min_interval_s=0.1, max_interval_s=0.2, duration_s=1.5)
        assert proxy.chaos_running
        cut_seen = 0
        deadline = time.monotonic() + 1.5
        while time.monotonic() < deadline:
            try:
                with _connect(proxy) as c:
                    while time.monotonic() < deadline:
                        if _echo(c, b"y") != b"y":
                            raise ConnectionResetError
            except OSError:
                cut_seen += 1
        assert _wait(lambda: not proxy.chaos_running, 3.0), "chaos did not stop by itself"
        assert cut_seen >= 3, cut_seen
        assert proxy.cuts >= 3


def test_target_down_resets_the_client(echo_server: tuple[str, int]) -> None:
    dead = socket.socket()
    dead.bind(("127.0.0.1", 0))
    port = dead.getsockname()[1]
    dead.close()  # nothing listens there now
    with TcpProxy(("127.0.0.1", port)) as proxy:
        _assert_reset_on_connect(proxy)
        assert _wait(lambda: proxy.refused == 1)


def test_bounds_and_validation(echo_server: tuple[str, int]) -> None:
    with pytest.raises(ValueError, match="loopback"):
        TcpProxy(("192.0.2.1", 9092))
    with pytest.raises(ValueError, match="host:port"):
        TcpProxy("no-port")
    with pytest.raises(ValueError, match="max_connections"):
        TcpProxy(echo_server, max_connections=0)
    started = time.monotonic()
    proxy = TcpProxy(echo_server, max_lifetime_s=0.5, max_connections=1).start()
    try:
        first = _connect(proxy)
        assert _echo(first, b"a") == b"a"
        _assert_reset_on_connect(proxy)  # over the bound: reset at once
        assert _wait(lambda: not proxy.running, 3.0), "the proxy outlived max_lifetime_s"
        assert time.monotonic() - started < 3.0
        first.close()
    finally:
        proxy.stop()
    proxy.stop()  # twice is harmless


def _frame(correlation_id: int, body: bytes) -> bytes:
    return struct.pack(">ii", 4 + len(body), correlation_id) + body


def _read(s: socket.socket, n: int) -> bytes:
    got = b""
    while len(got) < n:
        chunk = s.recv(n - len(got))
        if not chunk:
            break
        got += chunk
    return got


def test_tamper_breaks_exactly_the_next_response_frame(echo_server: tuple[str, int]) -> None:
    # The echo server's answers are the "responses": frames, as a broker's.
    second, third = _frame(2, b"b" * 100), _frame(3, b"c" * 10)
    with TcpProxy(echo_server) as proxy, _connect(proxy) as c:
        c.settimeout(3)
        # The first "request" names the client: client id "bench" (int16 length).
        first = _frame(1, struct.pack(">hhh", 18, 0, 5) + b"bench" + b"a" * 100)
        assert _echo(c, first) == first  # untouched until armed
        proxy.tamper("correlation", client_id_prefix="other")
        assert _echo(c, first) == first  # another client's connection: untouched
        proxy.tamper("correlation")
        got = _echo(c, second + third)
        assert got[:4] == second[:4] and got[8:] == second[8:] + third
        assert struct.unpack(">i", got[4:8])[0] not in (2, 3)
        proxy.tamper("huge")
        got = _echo(c, second)
        assert struct.unpack(">i", got[:4])[0] >= 2**31 - 16 and got[4:] == second[4:]
        proxy.tamper("truncate")
        c.sendall(second + third)
        # The prefix still promises 104 bytes; 52 come, then the next frame.
        assert _read(c, 56 + len(third)) == second[:56] + third
        proxy.tamper("stall")
        c.sendall(second + third)
        assert _read(c, 56) == second[:56]
        c.settimeout(0.5)
        with pytest.raises(TimeoutError):
            c.recv(1)  # nothing more, and the connection stays open
        assert proxy.tampered == 4
        with pytest.raises(ValueError, match="kind must be one of"):
            proxy.tamper("scramble")
