"""SASL on BrokerConnection against the in-process fake broker: the handshake
order, re-authentication (KIP-368) that keeps the connection, and failures that
back off instead of storming."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from typing import Any

import pytest

from kafka_share._net.client import NetworkClient, Purpose, monotonic_ms
from kafka_share._net.security import ConnectionSecurity
from kafka_share.config import SaslMechanism, SecurityProtocol
from kafka_share.errors import SaslAuthenticationError, UnsupportedSaslMechanismError
from kafka_share.protocol.messages import (
    MetadataRequest,
    MetadataResponse,
    SaslAuthenticateRequest,
    SaslAuthenticateResponse,
    SaslHandshakeRequest,
    SaslHandshakeResponse,
)
from tests.fakes.broker import FakeBroker, ReceivedRequest

NODE = 1
PASSWORD = "pl4in-secret"


class SaslBroker:
    """A PLAIN-only fake: checks the password, gives sessions ``lifetime_ms``."""

    def __init__(self, lifetime_ms: int = 0) -> None:
        self.lifetime_ms = lifetime_ms
        self.lock = threading.Lock()
        self.handshakes = 0

    def __call__(self, received: ReceivedRequest) -> Any:
        request = received.request
        if isinstance(request, SaslHandshakeRequest):
            with self.lock:
                self.handshakes += 1
            if request.mechanism != "PLAIN":
                return SaslHandshakeResponse(error_code=33, mechanisms=["PLAIN"])
            return SaslHandshakeResponse(error_code=0, mechanisms=["PLAIN"])
        if isinstance(request, SaslAuthenticateRequest):
            if request.auth_bytes != b"\0alice\0" + PASSWORD.encode():
                return SaslAuthenticateResponse(
                    error_code=58,
                    error_message="Authentication failed: Invalid username or password",
                )
            return SaslAuthenticateResponse(
                error_code=0, error_message="", session_lifetime_ms=self.lifetime_ms
            )
        assert isinstance(request, MetadataRequest)
        return MetadataResponse(controller_id=received.header.correlation_id)


def security(password: str = PASSWORD, mechanism: SaslMechanism = SaslMechanism.PLAIN) -> Any:
    return ConnectionSecurity(
        SecurityProtocol.SASL_PLAINTEXT, None, mechanism, "alice", password
    )


@pytest.fixture
def clients() -> Iterator[list[NetworkClient]]:
    made: list[NetworkClient] = []
    yield made
    for c in made:
        c.close()


def make_client(address: tuple[str, int], sec: Any, made: list[NetworkClient]) -> NetworkClient:
    client = NetworkClient(
        client_id="unit-test",
        address_of=lambda node: address if node == NODE else None,
        connect_timeout_ms=5000,
        request_timeout_ms=5000,
        reconnect_backoff_ms=50,
        reconnect_backoff_max_ms=1000,
        security=sec,
    )
    made.append(client)
    return client


def metadata_round_trip(client: NetworkClient, timeout_s: float = 5.0) -> Any:
    result: list[tuple[Any, Any]] = []
    client.send(NODE, Purpose.CONTROL, MetadataRequest(topics=[]),
                lambda r, e: result.append((r, e)), monotonic_ms())
    deadline = time.monotonic() + timeout_s
    while not result:
        assert time.monotonic() < deadline
        client.poll(50)
    return result[0]


def test_authenticates_before_any_other_request(clients: list[NetworkClient]) -> None:
    handler = SaslBroker()
    with FakeBroker(handler) as broker:
        client = make_client(broker.address, security(), clients)
        response, error = metadata_round_trip(client)
        assert error is None and isinstance(response, MetadataResponse)
        kinds = [r.api_key for r in broker.received]
        assert kinds == [18, 17, 36, 3]  # ApiVersions, SaslHandshake, SaslAuthenticate, Metadata
        assert [r.api_version for r in broker.received[1:3]] == [1, 2]


def test_re_authenticates_on_the_same_connection_before_the_session_ends(
    clients: list[NetworkClient],
) -> None:
    handler = SaslBroker(lifetime_ms=1200)
    with FakeBroker(handler) as broker:
        client = make_client(broker.address, security(), clients)
        end = time.monotonic() + 4.0
        while time.monotonic() < end:
            _, error = metadata_round_trip(client)
            assert error is None, error
            client.poll(100)
        assert broker.accepted == 1  # one connection throughout
        conn = client.connection(NODE, Purpose.CONTROL)
        assert conn is not None and conn.authentications >= 3
        assert handler.handshakes == conn.authentications
        # Nothing but SASL between a SaslHandshake and its SaslAuthenticate.
        kinds = [r.api_key for r in broker.received]
        for i, kind in enumerate(kinds):
            if kind == 17:
                assert kinds[i + 1] == 36, kinds


def test_wrong_password_fails_the_request_and_reconnects_back_off(
    clients: list[NetworkClient],
) -> None:
    with FakeBroker(SaslBroker()) as broker:
        client = make_client(broker.address, security("wrong-pw"), clients)
        errors: list[Any] = []
        start = time.monotonic()
        while time.monotonic() - start < 3.0:
            _, error = metadata_round_trip(client, timeout_s=10)
            errors.append(error)
        assert isinstance(errors[0], SaslAuthenticationError)
        assert "Invalid username or password" in str(errors[0])
        assert "wrong-pw" not in str(errors[0])
        # 50 ms doubling up to 1 s: about 7 attempts in 3 s, not a storm.
        assert 2 <= broker.accepted <= 10, broker.accepted


def test_unsupported_mechanism_lists_the_enabled_ones(clients: list[NetworkClient]) -> None:
    with FakeBroker(SaslBroker()) as broker:
        sec = security(mechanism=SaslMechanism.SCRAM_SHA_256)
        client = make_client(broker.address, sec, clients)
        _, error = metadata_round_trip(client)
        assert isinstance(error, UnsupportedSaslMechanismError)
        assert "SCRAM-SHA-256" in str(error) and "enables: PLAIN" in str(error)
