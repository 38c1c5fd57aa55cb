"""BrokerConnection's ApiVersions negotiation against brokers that reject our version.

The fake broker answers ApiVersions with the exact bytes librdkafka's mock
cluster sends (the layout is described in
tests/unit/protocol/test_protocol_librdkafka_mock.py).
"""

from __future__ import annotations

import selectors
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from kafka_share._net.client import monotonic_ms
from kafka_share._net.connection import BrokerConnection, ConnectionState
from kafka_share.errors import KafkaError, UnsupportedVersionError
from kafka_share.protocol.api_keys import API_VERSIONS_FIRST_VERSION, ApiKey
from kafka_share.protocol.messages import ApiVersionsResponse, MetadataRequest, MetadataResponse
from tests.fakes.broker import FakeBroker, RawReply, ReceivedRequest, default_api_versions

#: What librdkafka 2.16's mock broker answers to ApiVersionsRequest v4 (body only).
MOCK_V4_UNSUPPORTED_BODY = bytes.fromhex(
    (
        Path(__file__).parents[1] / "protocol" / "fixtures"
        / "api_versions_v4_unsupported_librdkafka_mock.hex"
    ).read_text().strip()
)
_MOCK_API_VERSIONS_MAX = 2


class Outcome:
    def __init__(self) -> None:
        self.calls: list[tuple[Any, KafkaError | None]] = []

    def __call__(self, response: Any, error: KafkaError | None) -> None:
        self.calls.append((response, error))


def _state(conn: BrokerConnection) -> ConnectionState:
    return conn.state


def _pump(conn: BrokerConnection, done: Callable[[], bool], timeout_s: float = 5.0) -> None:
    sel = selectors.DefaultSelector()
    try:
        sel.register(conn.sock, selectors.EVENT_READ | selectors.EVENT_WRITE)
        deadline = time.monotonic() + timeout_s
        while not done() and _state(conn) is not ConnectionState.CLOSED:
            assert time.monotonic() < deadline, "condition not reached in time"
            events = selectors.EVENT_READ
            if conn.wants_write():
                events |= selectors.EVENT_WRITE
            sel.modify(conn.sock, events)
            for _key, mask in sel.select(0.05):
                now = monotonic_ms()
                if mask & selectors.EVENT_WRITE:
                    conn.on_writable(now)
                if mask & selectors.EVENT_READ and _state(conn) is not ConnectionState.CLOSED:
                    conn.on_readable(now)
            if _state(conn) is not ConnectionState.CLOSED:
                conn.check_timeouts(monotonic_ms())
    finally:
        sel.close()


def _connect(address: tuple[str, int]) -> BrokerConnection:
    return BrokerConnection(
        node_id=1, host=address[0], port=address[1], client_id="unit-test",
        now_ms=monotonic_ms(), connect_timeout_ms=5000, request_timeout_ms=5000,
    )


def _like_the_mock_cluster(received: ReceivedRequest) -> Any:
    """ApiVersions as librdkafka's mock broker answers it (it knows v0-v2)."""
    if received.api_version > _MOCK_API_VERSIONS_MAX:
        return RawReply(MOCK_V4_UNSUPPORTED_BODY)
    versions = default_api_versions()
    versions[int(ApiKey.API_VERSIONS)] = (0, _MOCK_API_VERSIONS_MAX)
    return ApiVersionsResponse(
        api_keys=[
            ApiVersionsResponse.ApiVersion(api_key=k, min_version=lo, max_version=hi)
            for k, (lo, hi) in sorted(versions.items())
        ]
    )


def test_unparsable_unsupported_version_answer_falls_back_to_v0_on_the_same_connection() -> None:
    with FakeBroker(
        lambda r: MetadataResponse(), api_versions_handler=_like_the_mock_cluster
    ) as broker:
        conn = _connect(broker.address)
        try:
            out = Outcome()
            conn.send(MetadataRequest(topics=[]), out, now_ms=monotonic_ms())
            _pump(conn, lambda: bool(out.calls))
            assert out.calls and out.calls[0][1] is None, out.calls or conn.close_reason
            assert isinstance(out.calls[0][0], MetadataResponse)
            assert conn.is_ready
            assert [r.api_version for r in broker.requests_of(18)] == [
                API_VERSIONS_FIRST_VERSION, 0,
            ]
            assert broker.accepted == 1  # the retry is not a reconnect
            assert conn.api_versions is not None
            assert conn.api_versions.max_version(ApiKey.API_VERSIONS) == _MOCK_API_VERSIONS_MAX
        finally:
            conn.close()


def test_broker_without_a_common_api_versions_version_closes_with_a_clear_error() -> None:
    def only_v5_to_v7(received: ReceivedRequest) -> Any:
        body = ApiVersionsResponse(
            error_code=35,
            api_keys=[ApiVersionsResponse.ApiVersion(api_key=18, min_version=5, max_version=7)],
        ).encode(0)
        return RawReply(body)

    with FakeBroker(lambda r: MetadataResponse(), api_versions_handler=only_v5_to_v7) as broker:
        conn = _connect(broker.address)
        try:
            out = Outcome()
            conn.send(MetadataRequest(topics=[]), out, now_ms=monotonic_ms())
            _pump(conn, lambda: bool(out.calls))
            assert _state(conn) is ConnectionState.CLOSED
            assert len(out.calls) == 1
            error = out.calls[0][1]
            assert isinstance(error, UnsupportedVersionError), error
            assert "ApiVersions" in str(error) and "v5-v7" in str(error)
            assert isinstance(conn.close_reason, UnsupportedVersionError)
            # One attempt: no walk down through versions the broker said it lacks.
            assert [r.api_version for r in broker.requests_of(18)] == [API_VERSIONS_FIRST_VERSION]
        finally:
            conn.close()
