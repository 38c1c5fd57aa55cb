"""Name resolution off the network thread, and connections that try every address."""

from __future__ import annotations

import socket
import threading
import time

import pytest

from kafka_share._net.client import NetworkClient, Purpose, monotonic_ms
from kafka_share._net.resolver import AddressInfo, Resolver
from kafka_share.errors import NetworkError
from tests.fakes.broker import FakeBroker, free_port
from tests.unit.net.test_net_client import Outcome, metadata, metadata_handler, run_until


def _info(port: int) -> AddressInfo:
    return (socket.AF_INET, socket.SOCK_STREAM, 6, "", ("127.0.0.1", port))


def test_an_ip_literal_is_resolved_at_once_without_a_thread() -> None:
    woken = threading.Event()
    resolver = Resolver(woken.set, getaddrinfo=lambda h, p: pytest.fail("no lookup"))
    [info] = [i for i in resolver.lookup("127.0.0.1", 9092) or []][:1]
    assert info[4] == ("127.0.0.1", 9092)
    assert not woken.is_set()


def test_a_slow_name_lookup_does_not_block_and_wakes_the_loop_when_done() -> None:
    release = threading.Event()
    woken = threading.Event()

    def slow(host: str, port: int) -> list[AddressInfo]:
        release.wait(5)
        return [_info(port)]

    resolver = Resolver(woken.set, getaddrinfo=slow)
    started = time.monotonic()
    assert resolver.lookup("broker.example", 9092) is None
    assert resolver.lookup("broker.example", 9092) is None  # still pending, one lookup
    assert time.monotonic() - started < 0.1
    release.set()
    assert woken.wait(5)
    [info] = resolver.lookup("broker.example", 9092) or []
    assert info[4] == ("127.0.0.1", 9092)


def test_a_name_that_cannot_be_resolved_is_a_network_error_naming_it() -> None:
    woken = threading.Event()

    def fail(host: str, port: int) -> list[AddressInfo]:
        raise socket.gaierror(socket.EAI_NONAME, "Name or service not known")

    resolver = Resolver(woken.set, getaddrinfo=fail)
    assert resolver.lookup("no-such-broker", 9092) is None
    assert woken.wait(5)
    with pytest.raises(NetworkError, match="no-such-broker:9092"):
        resolver.lookup("no-such-broker", 9092)


def test_the_connection_tries_every_address_of_the_name() -> None:
    """``client.dns.lookup=use_all_dns_ips``: "localhost" is often ``::1`` first
    while the broker listens on 127.0.0.1 only."""
    with FakeBroker(metadata_handler) as broker:
        dead = free_port()
        client = NetworkClient(
            client_id="unit-test",
            address_of=lambda node: ("broker.example", 9092),
            connect_timeout_ms=5000,
            request_timeout_ms=5000,
            reconnect_backoff_ms=50,
            reconnect_backoff_max_ms=1000,
        )
        client._resolver = Resolver(
            client.wakeup, getaddrinfo=lambda h, p: [_info(dead), _info(broker.port)]
        )
        try:
            out = Outcome()
            assert client.send(1, Purpose.CONTROL, metadata(), out, monotonic_ms())
            run_until(client, lambda: out.done)
            [(response, error)] = out.calls
            assert error is None and response is not None
        finally:
            client.close()


def test_a_name_resolving_to_nothing_reachable_fails_with_every_address_tried() -> None:
    dead1, dead2 = free_port(), free_port()
    client = NetworkClient(
        client_id="unit-test",
        address_of=lambda node: ("broker.example", 9092),
        connect_timeout_ms=5000,
        request_timeout_ms=5000,
        reconnect_backoff_ms=50,
        reconnect_backoff_max_ms=1000,
    )
    client._resolver = Resolver(
        client.wakeup, getaddrinfo=lambda h, p: [_info(dead1), _info(dead2)]
    )
    try:
        out = Outcome()
        client.send(1, Purpose.CONTROL, metadata(), out, monotonic_ms())
        run_until(client, lambda: out.done)
        [(_, error)] = out.calls
        assert isinstance(error, NetworkError)
        assert str(dead1) in str(error) or "ECONNREFUSED" in str(error)
    finally:
        client.close()
