"""NetworkClient and BrokerConnection against the in-process fake broker."""

from __future__ import annotations

import socket
import threading
import time
from collections.abc import Callable, Iterator
from typing import Any

import pytest

from kafka_share._net.client import NetworkClient, Purpose, monotonic_ms
from kafka_share._net.connection import BrokerConnection, ConnectionState
from kafka_share.errors import (
    KafkaError,
    KafkaTimeoutError,
    NetworkError,
    UnsupportedVersionError,
)
from kafka_share.protocol.api_keys import API_VERSIONS_FIRST_VERSION, ApiKey
from kafka_share.protocol.messages import (
    ApiVersionsRequest,
    MetadataRequest,
    MetadataResponse,
    ShareFetchRequest,
)
from tests.fakes.broker import (
    CLOSE,
    NO_REPLY,
    FakeBroker,
    ReceivedRequest,
    default_api_versions,
    free_port,
)
from tests.fakes.pump import Outcome, pump, state_of
from tests.unit.net.helpers import close_node, has_in_flight, is_ready

NODE = 1


def metadata_handler(received: ReceivedRequest) -> Any:
    assert isinstance(received.request, MetadataRequest)
    return MetadataResponse(controller_id=received.header.correlation_id)


def make_client(
    address: tuple[str, int],
    *,
    request_timeout_ms: int = 5000,
    connect_timeout_ms: int = 5000,
    reconnect_backoff_ms: int = 50,
    reconnect_backoff_max_ms: int = 1000,
) -> NetworkClient:
    return NetworkClient(
        client_id="unit-test",
        address_of=lambda node: address if node == NODE else None,
        connect_timeout_ms=connect_timeout_ms,
        request_timeout_ms=request_timeout_ms,
        reconnect_backoff_ms=reconnect_backoff_ms,
        reconnect_backoff_max_ms=reconnect_backoff_max_ms,
    )


@pytest.fixture
def clients() -> Iterator[list[NetworkClient]]:
    made: list[NetworkClient] = []
    yield made
    for c in made:
        c.close()


def run_until(client: NetworkClient, done: Callable[[], bool], timeout_s: float = 5.0) -> None:
    deadline = time.monotonic() + timeout_s
    while not done():
        assert time.monotonic() < deadline, "condition not reached in time"
        client.poll(50)


def metadata() -> MetadataRequest:
    return MetadataRequest(topics=[])


# -- negotiation -----------------------------------------------------------------------


def test_negotiates_api_versions_then_sends_queued_request_at_highest_common_version(
    clients: list[NetworkClient],
) -> None:
    versions = default_api_versions()
    versions[int(ApiKey.METADATA)] = (0, 9)
    with FakeBroker(metadata_handler, api_versions=versions) as broker:
        client = make_client(broker.address)
        clients.append(client)
        out = Outcome()
        assert client.send(NODE, Purpose.CONTROL, metadata(), out, monotonic_ms())
        assert not is_ready(client, NODE, Purpose.CONTROL)
        run_until(client, lambda: out.done)
        assert isinstance(out.response, MetadataResponse)
        assert is_ready(client, NODE, Purpose.CONTROL)
        table = client.api_versions(NODE, Purpose.CONTROL)
        assert table is not None and table.max_version(ApiKey.METADATA) == 9
        kinds = [(r.api_key, r.api_version) for r in broker.received]
        # ApiVersions first (possibly retried, see the fallback test), then Metadata.
        assert kinds[-2:] == [(18, 4), (3, 9)]
        assert {k for k, _ in kinds[:-1]} == {18}
        assert broker.received[0].header.client_id == "unit-test"
        assert isinstance(broker.received[0].request, ApiVersionsRequest)
        assert broker.received[0].request.client_software_name == "kafka-share"
        assert not broker.errors


def test_api_versions_unsupported_version_falls_back_to_the_version_the_broker_lists(
    clients: list[NetworkClient],
) -> None:
    with FakeBroker(metadata_handler, api_versions_max_version=2) as broker:
        client = make_client(broker.address)
        clients.append(client)
        out = Outcome()
        client.send(NODE, Purpose.CONTROL, metadata(), out, monotonic_ms())
        run_until(client, lambda: out.done)
        assert isinstance(out.response, MetadataResponse)
        api_versions = [r.api_version for r in broker.requests_of(18)]
        assert len(api_versions) == 2
        assert api_versions[0] > 2 and api_versions[1] == 2
        # Both attempts on the same connection: the fallback is not a reconnect.
        assert broker.accepted == 1
        assert is_ready(client, NODE, Purpose.CONTROL)


def test_no_common_version_fails_the_request_with_unsupported_version(
    clients: list[NetworkClient],
) -> None:
    versions = default_api_versions()
    versions[int(ApiKey.SHARE_FETCH)] = (0, 0)  # a Kafka 4.0 early-access broker
    with FakeBroker(api_versions=versions) as broker:
        client = make_client(broker.address)
        clients.append(client)
        out = Outcome()
        client.send(NODE, Purpose.SHARE, ShareFetchRequest(group_id="g"), out, monotonic_ms())
        run_until(client, lambda: out.done)
        assert isinstance(out.error, UnsupportedVersionError)
        assert "ShareFetch" in str(out.error) or "SHARE_FETCH" in str(out.error)
        assert broker.requests_of(78) == []
        # The connection itself is fine.
        assert is_ready(client, NODE, Purpose.SHARE)


def test_control_and_share_traffic_use_separate_connections(
    clients: list[NetworkClient],
) -> None:
    with FakeBroker(metadata_handler) as broker:
        client = make_client(broker.address)
        clients.append(client)
        a, b = Outcome(), Outcome()
        client.send(NODE, Purpose.CONTROL, metadata(), a, monotonic_ms())
        client.send(NODE, Purpose.SHARE, metadata(), b, monotonic_ms())
        run_until(client, lambda: a.done and b.done)
        assert broker.accepted == 2
        assert {r.connection_index for r in broker.requests_of(3)} == {0, 1}


def test_responses_are_matched_to_their_handlers_in_order(
    clients: list[NetworkClient],
) -> None:
    with FakeBroker(metadata_handler) as broker:
        client = make_client(broker.address)
        clients.append(client)
        outs = [Outcome() for _ in range(5)]
        for out in outs:
            client.send(NODE, Purpose.CONTROL, metadata(), out, monotonic_ms())
        run_until(client, lambda: all(o.done for o in outs))
        # The fake broker echoes each correlation id in controller_id.
        ids = [o.response.controller_id for o in outs]
        assert ids == sorted(ids) and len(set(ids)) == 5
        assert not has_in_flight(client)


# -- failures --------------------------------------------------------------------------


def test_request_timeout_closes_the_connection_and_fails_every_pending_handler(
    clients: list[NetworkClient],
) -> None:
    with FakeBroker(lambda r: NO_REPLY) as broker:
        client = make_client(broker.address, request_timeout_ms=300)
        clients.append(client)
        disconnects: list[tuple[int, Purpose, KafkaError]] = []
        client.on_disconnect = lambda n, p, e: disconnects.append((n, p, e))
        first, second = Outcome(), Outcome()
        start = time.monotonic()
        client.send(NODE, Purpose.CONTROL, metadata(), first, monotonic_ms())
        run_until(client, lambda: is_ready(client, NODE, Purpose.CONTROL))
        client.send(NODE, Purpose.CONTROL, metadata(), second, monotonic_ms())
        run_until(client, lambda: first.done and second.done)
        elapsed = time.monotonic() - start
        assert isinstance(first.error, KafkaTimeoutError)
        assert "no response" in str(first.error)
        # The second request was still in flight behind the first: it fails too.
        assert isinstance(second.error, KafkaTimeoutError)
        assert 0.25 <= elapsed < 3.0
        assert client.connection(NODE, Purpose.CONTROL) is None
        assert [(n, p) for n, p, _ in disconnects] == [(NODE, Purpose.CONTROL)]
        assert isinstance(disconnects[0][2], KafkaTimeoutError)


def test_peer_close_fails_the_in_flight_request_with_a_network_error(
    clients: list[NetworkClient],
) -> None:
    with FakeBroker(lambda r: CLOSE) as broker:
        client = make_client(broker.address)
        clients.append(client)
        disconnects: list[int] = []
        client.on_disconnect = lambda n, p, e: disconnects.append(n)
        out = Outcome()
        client.send(NODE, Purpose.CONTROL, metadata(), out, monotonic_ms())
        run_until(client, lambda: out.done)
        assert isinstance(out.error, NetworkError)
        assert "closed by the peer" in str(out.error)
        assert client.connection(NODE, Purpose.CONTROL) is None
        assert disconnects == [NODE]
        # Closed right after negotiating, before answering anything: reconnecting
        # at once would only repeat it (a broker that drops every request would
        # get a reconnect per loop), so it backs off like a refused connect.
        assert not client.can_connect(NODE, monotonic_ms())


def test_a_connection_that_worked_and_then_dropped_may_reconnect_at_once(
    clients: list[NetworkClient],
) -> None:
    answered: list[int] = []

    def answer_once(received: ReceivedRequest) -> Any:
        answered.append(1)
        return metadata_handler(received) if len(answered) == 1 else CLOSE

    with FakeBroker(answer_once) as broker:
        client = make_client(broker.address)
        clients.append(client)
        first, second = Outcome(), Outcome()
        client.send(NODE, Purpose.CONTROL, metadata(), first, monotonic_ms())
        run_until(client, lambda: first.done)
        client.send(NODE, Purpose.CONTROL, metadata(), second, monotonic_ms())
        run_until(client, lambda: second.done)
        assert first.calls[0][1] is None and isinstance(second.error, NetworkError)
        assert client.can_connect(NODE, monotonic_ms())


def test_connect_refused_fails_the_request_and_backs_off_exponentially(
    clients: list[NetworkClient],
) -> None:
    client = make_client(
        ("127.0.0.1", free_port()), reconnect_backoff_ms=10_000,
        reconnect_backoff_max_ms=25_000,
    )
    clients.append(client)
    out = Outcome()
    before = monotonic_ms()
    assert client.send(NODE, Purpose.CONTROL, metadata(), out, before)
    run_until(client, lambda: out.done)
    assert isinstance(out.error, NetworkError)
    after = monotonic_ms()
    # Backing off (10 s, jittered by up to 20 %): no new connection is attempted;
    # a request sent meanwhile is parked, not failed (the engine would only build
    # it again), and waits for the backoff.
    assert not client.can_connect(NODE, after)
    parked = Outcome()
    assert client.send(NODE, Purpose.CONTROL, metadata(), parked, after)
    client.poll(20)
    assert not parked.done
    assert has_in_flight(client)
    assert client.ensure_connection(NODE, Purpose.CONTROL, after) is None
    assert not client.can_connect(NODE, after + 7_999)
    assert client.can_connect(NODE, after + 12_001)
    # A second failure doubles the delay.
    later = after + 12_001
    out2 = Outcome()
    assert client.send(NODE, Purpose.CONTROL, metadata(), out2, later)
    run_until(client, lambda: out2.done)
    now = monotonic_ms()
    assert not client.can_connect(NODE, now + 15_999)
    assert client.can_connect(NODE, now + 24_001)


def test_reconnect_after_backoff_reaches_a_broker_that_came_up(
    clients: list[NetworkClient],
) -> None:
    with FakeBroker(metadata_handler) as broker:
        port = [free_port()]
        client = NetworkClient(
            client_id="unit-test",
            address_of=lambda node: ("127.0.0.1", port[0]),
            connect_timeout_ms=5000,
            request_timeout_ms=5000,
            reconnect_backoff_ms=20,
            reconnect_backoff_max_ms=100,
        )
        clients.append(client)
        out = Outcome()
        client.send(NODE, Purpose.CONTROL, metadata(), out, monotonic_ms())
        run_until(client, lambda: out.done)
        assert isinstance(out.error, NetworkError)
        port[0] = broker.port  # the "broker" is now reachable
        ok = Outcome()
        deadline = time.monotonic() + 3
        while not client.send(NODE, Purpose.CONTROL, metadata(), ok, monotonic_ms()):
            assert time.monotonic() < deadline
            client.poll(10)
        run_until(client, lambda: ok.done)
        assert isinstance(ok.response, MetadataResponse)
        assert client.can_connect(NODE, monotonic_ms())


def test_unknown_node_cannot_be_sent_to(clients: list[NetworkClient]) -> None:
    client = make_client(("127.0.0.1", free_port()))
    clients.append(client)
    out = Outcome()
    assert not client.send(99, Purpose.CONTROL, metadata(), out, monotonic_ms())
    # The handler hears of it at once: a request nobody answers would leave the
    # engine waiting for it forever.
    assert out.done and isinstance(out.error, NetworkError)
    assert "node 99" in str(out.error)


def test_close_node_fails_pending_requests(clients: list[NetworkClient]) -> None:
    with FakeBroker(lambda r: NO_REPLY) as broker:
        client = make_client(broker.address)
        clients.append(client)
        out = Outcome()
        client.send(NODE, Purpose.SHARE, metadata(), out, monotonic_ms())
        run_until(client, lambda: is_ready(client, NODE, Purpose.SHARE)
                  and broker.requests_of(3) != [])
        close_node(client, NODE)
        assert isinstance(out.error, NetworkError)
        assert client.connection(NODE, Purpose.SHARE) is None


# -- wakeup ----------------------------------------------------------------------------


def test_wakeup_from_another_thread_ends_poll_early(clients: list[NetworkClient]) -> None:
    client = make_client(("127.0.0.1", free_port()))
    clients.append(client)
    timer = threading.Timer(0.1, client.wakeup)
    start = time.monotonic()
    timer.start()
    try:
        client.poll(5000)
    finally:
        timer.join()
    assert time.monotonic() - start < 2.0


def test_wakeup_before_poll_is_not_lost(clients: list[NetworkClient]) -> None:
    client = make_client(("127.0.0.1", free_port()))
    clients.append(client)
    client.wakeup()
    start = time.monotonic()
    client.poll(5000)
    assert time.monotonic() - start < 1.0
    # ...and it is consumed: the next poll waits again.
    start = time.monotonic()
    client.poll(200)
    assert time.monotonic() - start >= 0.15


# -- BrokerConnection directly -----------------------------------------------------------


def new_connection(address: tuple[str, int], **kw: int) -> BrokerConnection:
    return BrokerConnection(
        node_id=NODE,
        host=address[0],
        port=address[1],
        client_id="unit-test",
        now_ms=monotonic_ms(),
        connect_timeout_ms=kw.get("connect_timeout_ms", 5000),
        request_timeout_ms=kw.get("request_timeout_ms", 5000),
        receive_buffer_bytes=kw.get("receive_buffer_bytes", -1),
        send_buffer_bytes=kw.get("send_buffer_bytes", -1),
    )


def test_socket_buffer_sizes_are_applied_when_configured() -> None:
    with FakeBroker(lambda r: NO_REPLY) as broker:
        default = new_connection(broker.address)
        sized = new_connection(
            broker.address, receive_buffer_bytes=300_000, send_buffer_bytes=40_000
        )
        try:
            rcv = sized.sock.getsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF)
            snd = sized.sock.getsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF)
            # The kernel may double the value (Linux) or cap it at rmem_max/wmem_max.
            assert rcv != default.sock.getsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF)
            assert 40_000 <= snd <= 2 * 40_000
            assert rcv >= min(300_000, _sysctl_int("/proc/sys/net/core/rmem_max", 300_000))
        finally:
            default.close()
            sized.close()


def _sysctl_int(path: str, fallback: int) -> int:
    try:
        with open(path) as f:
            return int(f.read().split()[0])
    except OSError:
        return fallback


def test_connection_states_and_close_fails_pending_exactly_once() -> None:
    with FakeBroker(lambda r: NO_REPLY) as broker:
        conn = new_connection(broker.address)
        try:
            assert state_of(conn) is ConnectionState.CONNECTING
            out = Outcome()
            conn.send(metadata(), out, now_ms=monotonic_ms())
            assert conn.in_flight_count == 1
            pump(conn, lambda: conn.is_ready and broker.requests_of(3) != [])
            assert conn.api_versions is not None
            reason = NetworkError("shutting down")
            conn.close(reason)
            conn.close(NetworkError("again"))
            assert out.calls == [(None, reason)]
            assert state_of(conn) is ConnectionState.CLOSED
            late = Outcome()
            conn.send(metadata(), late, now_ms=monotonic_ms())
            assert late.calls == [(None, reason)]
        finally:
            conn.close()


def test_queued_request_times_out_before_the_connection_is_ready() -> None:
    with FakeBroker(api_versions_handler=lambda r: NO_REPLY) as broker:
        conn = new_connection(broker.address, request_timeout_ms=5000)
        try:
            out = Outcome()
            conn.send(metadata(), out, now_ms=monotonic_ms(), timeout_ms=150)
            pump(conn, lambda: out.done)
            assert isinstance(out.error, KafkaTimeoutError)
            assert "before the connection was ready" in str(out.error)
            # Only the queued request expired; negotiation is still under way.
            assert state_of(conn) is ConnectionState.NEGOTIATING
        finally:
            conn.close()


def test_connect_timeout_closes_a_connection_that_never_connects() -> None:
    # 10.255.255.1 is unroutable: the connect stays pending.
    conn = BrokerConnection(
        node_id=NODE, host="10.255.255.1", port=9092, client_id="t", now_ms=monotonic_ms(),
        connect_timeout_ms=100, request_timeout_ms=5000,
    )
    try:
        out = Outcome()
        conn.send(metadata(), out, now_ms=monotonic_ms())
        pump(conn, lambda: out.done, timeout_s=3)
        assert out.done
        assert isinstance(out.error, KafkaError)
        assert state_of(conn) is ConnectionState.CLOSED
    finally:
        conn.close()

def _answer(received: ReceivedRequest) -> MetadataResponse:
    return MetadataResponse()


def test_first_api_versions_request_uses_the_client_max_version() -> None:
    """Regression: BrokerConnection starts ApiVersions at ApiVersionsRequest.MAX_VERSION (5),
    not at API_VERSIONS_FIRST_VERSION (4, CLIENT_VERSIONS' max; v5 is deliberately
    unused). Against a broker that only knows v0-v4 every new connection costs an
    extra UNSUPPORTED_VERSION round trip, and against one that knows v5 the client
    speaks a version it says it does not support.
    """
    with FakeBroker(_answer, api_versions_max_version=4) as broker:
        client = NetworkClient(
            client_id="t", address_of=lambda n: broker.address, connect_timeout_ms=5000,
            request_timeout_ms=5000, reconnect_backoff_ms=50, reconnect_backoff_max_ms=1000,
        )
        try:
            done: list[object] = []
            client.send(1, Purpose.CONTROL, MetadataRequest(topics=[]),
                        lambda r, e: done.append(r), monotonic_ms())
            deadline = time.monotonic() + 5
            while not done:
                assert time.monotonic() < deadline
                client.poll(50)
            versions = [r.api_version for r in broker.requests_of(18)]
            assert versions == [API_VERSIONS_FIRST_VERSION]
        finally:
            client.close()
