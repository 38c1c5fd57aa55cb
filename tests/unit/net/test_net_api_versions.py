"""BrokerConnection's ApiVersions negotiation against brokers that reject our version.

The fake broker answers ApiVersions with the exact bytes librdkafka's mock
cluster sends (the layout is described in
tests/unit/protocol/test_protocol_librdkafka_mock.py).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from kafka_share._net.client import monotonic_ms
from kafka_share._net.connection import BrokerConnection, ConnectionState
from kafka_share.errors import UnsupportedVersionError
from kafka_share.protocol.api_keys import API_VERSIONS_FIRST_VERSION, ApiKey
from kafka_share.protocol.messages import ApiVersionsResponse, MetadataRequest, MetadataResponse
from tests.fakes.broker import FakeBroker, RawReply, ReceivedRequest, default_api_versions
from tests.fakes.pump import Outcome, pump, state_of

#: What librdkafka 2.16's mock broker answers to ApiVersionsRequest v4 (body only).
MOCK_V4_UNSUPPORTED_BODY = bytes.fromhex(
    (
        Path(__file__).parents[1] / "protocol" / "fixtures"
        / "api_versions_v4_unsupported_librdkafka_mock.hex"
    ).read_text().strip()
)
_MOCK_API_VERSIONS_MAX = 2


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
            pump(conn, lambda: bool(out.calls))
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
            pump(conn, lambda: bool(out.calls))
            assert state_of(conn) is ConnectionState.CLOSED
            assert len(out.calls) == 1
            error = out.calls[0][1]
            assert isinstance(error, UnsupportedVersionError), error
            assert "ApiVersions" in str(error) and "v5-v7" in str(error)
            assert isinstance(conn.close_reason, UnsupportedVersionError)
            # One attempt: no walk down through versions the broker said it lacks.
            assert [r.api_version for r in broker.requests_of(18)] == [API_VERSIONS_FIRST_VERSION]
        finally:
            conn.close()
