"""Failing tests for known bugs in kafka_share/_net/connection.py.

Not collected by pytest (the file name does not match ``test_*.py``); run with
``pytest tests/unit/pending_bugs_test_connection.py``. Move each test into
tests/unit/net/test_net_client.py once its bug is fixed.
"""

from __future__ import annotations

import time

from kafka_share._net.client import NetworkClient, Purpose, monotonic_ms
from kafka_share.protocol.api_keys import API_VERSIONS_FIRST_VERSION
from kafka_share.protocol.messages import MetadataRequest, MetadataResponse
from tests.fakes.broker import FakeBroker, ReceivedRequest


def _answer(received: ReceivedRequest) -> MetadataResponse:
    return MetadataResponse()


def test_first_api_versions_request_uses_the_client_max_version() -> None:
    """BUG: BrokerConnection starts ApiVersions at ApiVersionsRequest.MAX_VERSION (5),
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
