"""Failure isolation in the network thread.

Regressions: a ``KafkaError`` raised by a response handler closed a healthy
connection and dropped the responses buffered on it; any other exception killed
the network thread for good, after which every blocking call waited out its
whole deadline; a KeyboardInterrupt while a poll waited for the loop's hand-over
left the loop with nobody running it.
"""

from __future__ import annotations

import time
from typing import Any

import pytest

from kafka_share import KafkaError, ShareConsumer
from kafka_share._net.loop_owner import LoopOwner
from kafka_share.protocol.messages import (
    FindCoordinatorRequest,
    FindCoordinatorResponse,
    MetadataRequest,
    MetadataResponse,
)
from kafka_share.share.engine import ConsumerEngine
from tests.fakes.broker import FakeBroker, ReceivedRequest


def _cluster_handler(port: list[int]) -> Any:
    def handle(received: ReceivedRequest) -> Any:
        if isinstance(received.request, MetadataRequest):
            return MetadataResponse(
                brokers=[MetadataResponse.MetadataResponseBroker(
                    node_id=1, host="127.0.0.1", port=port[0])],
                topics=[MetadataResponse.MetadataResponseTopic(name="t", error_code=3)],
            )
        if isinstance(received.request, FindCoordinatorRequest):
            return FindCoordinatorResponse(coordinators=[FindCoordinatorResponse.Coordinator(
                key="g", error_code=15)])  # COORDINATOR_NOT_AVAILABLE: keep looking
        raise AssertionError(received.request)

    return handle


@pytest.mark.parametrize("bug", [RuntimeError("boom"), KafkaError("engine bug")])
def test_a_failing_response_handler_fails_only_its_request(
    monkeypatch: pytest.MonkeyPatch, bug: Exception
) -> None:
    calls = []
    real = ConsumerEngine._on_metadata

    def buggy(self: ConsumerEngine, now_ms: int, response: MetadataResponse) -> None:
        calls.append(now_ms)
        if len(calls) == 1:
            raise bug
        real(self, now_ms, response)

    monkeypatch.setattr(ConsumerEngine, "_on_metadata", buggy)
    port = [0]
    with FakeBroker(_cluster_handler(port)) as broker:
        port[0] = broker.port
        consumer: ShareConsumer[bytes, bytes] = ShareConsumer(
            bootstrap_servers=f"127.0.0.1:{broker.port}", group_id="g",
            retry_backoff_ms=20, retry_backoff_max_ms=50,
        )
        try:
            consumer.subscribe(["t"])
            # The bug is reported to the application, once, as an error it can read.
            with pytest.raises(KafkaError, match="internal error"):
                deadline = time.monotonic() + 10
                while time.monotonic() < deadline:
                    consumer.poll(timeout=0.2)
            # ... and the thread goes on: more Metadata requests are answered and
            # handled, over the same connection (it was not closed for the bug).
            deadline = time.monotonic() + 10
            while len(calls) < 2 and time.monotonic() < deadline:
                consumer.poll(timeout=0.2)
            assert len(calls) >= 2
            assert consumer._thread._thread.is_alive()
            connections = {r.connection_index for r in broker.received
                           if isinstance(r.request, MetadataRequest)}
            assert len(connections) == 1
        finally:
            consumer.close(timeout=1.0)


def test_a_dead_network_thread_fails_every_waiting_call_at_once(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    consumer: ShareConsumer[bytes, bytes] = ShareConsumer(
        bootstrap_servers="127.0.0.1:1", group_id="g", default_api_timeout_ms=60_000,
    )
    try:
        def crash(now_ms: int) -> int:
            raise RuntimeError("engine bug outside any handler")

        monkeypatch.setattr(consumer._thread._driver.engine, "time_until_next_ms", crash)
        consumer._thread._client.wakeup()
        consumer._thread._thread.join(5)
        assert not consumer._thread._thread.is_alive()
        started = time.monotonic()
        with pytest.raises(KafkaError, match=r"network thread failed.*create a new one"):
            consumer.subscribe(["t"])
            consumer.poll(timeout=5)
        assert time.monotonic() - started < 1.0
    finally:
        consumer.close(timeout=1.0)


@pytest.mark.parametrize("handed_over", [False, True])
def test_an_interrupt_while_a_poll_waits_for_the_loop_gives_the_loop_back(
    monkeypatch: pytest.MonkeyPatch, handed_over: bool
) -> None:
    """A KeyboardInterrupt while the poll waits for the network thread to hand
    the loop over (before or after it did): the network thread keeps running
    the loop, and the next poll asks for it again."""
    consumer: ShareConsumer[bytes, bytes] = ShareConsumer(
        bootstrap_servers="127.0.0.1:1", group_id="g", default_api_timeout_ms=60_000,
    )
    try:
        consumer.subscribe(["t"])
        thread = consumer._thread
        handed = thread._handed
        real_wait = handed.wait
        calls: list[float | None] = []

        def interrupted(timeout: float | None = None) -> bool:
            calls.append(timeout)
            if len(calls) == 1:
                if handed_over:
                    assert real_wait(5.0)  # the network thread hands over first
                raise KeyboardInterrupt
            return real_wait(timeout)

        monkeypatch.setattr(handed, "wait", interrupted)
        with pytest.raises(KeyboardInterrupt):
            consumer.poll(timeout=0.2)
        assert thread._ownership.owner is LoopOwner.NETWORK
        assert thread._driver.died is None
        started = time.monotonic()
        assert list(consumer.poll(timeout=0.2)) == []  # asks again, runs the loop
        assert time.monotonic() - started < 2.0
        assert len(calls) >= 2
        assert thread._thread.is_alive() and thread._driver.died is None
    finally:
        consumer.close(timeout=1.0)
