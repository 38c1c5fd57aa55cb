"""The consumer while no broker can be reached: it waits, it does not spin.

Regression for a busy loop: with every broker down, a polling consumer used a
whole core (4.9 s of CPU in 5 s): a requested metadata refresh had no backoff,
a request to a node in reconnect backoff failed synchronously and was rebuilt
on the next loop, and the reconnect backoff was not part of the select timeout.
"""

from __future__ import annotations

import logging
import socket
import time

import pytest

from kafka_share import ShareConsumer


def _refusing_address() -> str:
    """An address on which connections are refused at once (nothing listens)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    return f"127.0.0.1:{port}"


@pytest.mark.slow
def test_polling_with_every_broker_unreachable_uses_almost_no_cpu() -> None:
    consumer: ShareConsumer[bytes, bytes] = ShareConsumer(
        bootstrap_servers=f"{_refusing_address()},{_refusing_address()}", group_id="g"
    )
    try:
        consumer.subscribe(["t"])
        cpu0, wall0 = time.process_time(), time.monotonic()
        deadline = wall0 + 10.0
        while time.monotonic() < deadline:
            assert consumer.poll(timeout=max(0.0, deadline - time.monotonic())).count() == 0
        cpu = time.process_time() - cpu0
        wall = time.monotonic() - wall0
    finally:
        consumer.close(timeout=1.0)
    # Both threads together, over the whole 10 s: under 5 % of one core.
    print(f"CPU while unreachable: {cpu:.3f} s in {wall:.1f} s ({100 * cpu / wall:.2f} %)")
    assert cpu < 0.05 * wall, f"{cpu:.2f} s of CPU in {wall:.1f} s"


def test_an_unreachable_bootstrap_server_is_reported_at_warning(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """A wrong port must not look like an empty topic: after a while the
    consumer says at WARNING (visible with default logging) what it cannot reach."""
    address = _refusing_address()
    consumer: ShareConsumer[bytes, bytes] = ShareConsumer(
        bootstrap_servers=address, group_id="g",
        reconnect_backoff_ms=50, reconnect_backoff_max_ms=200,
    )
    try:
        with caplog.at_level(logging.WARNING, logger="kafka_share"):
            consumer.subscribe(["t"])
            deadline = time.monotonic() + 13.0
            while time.monotonic() < deadline and not any(
                "cannot reach" in r.getMessage() for r in caplog.records
            ):
                consumer.poll(timeout=0.5)
    finally:
        consumer.close(timeout=1.0)
    [first, *_] = [r for r in caplog.records if "cannot reach" in r.getMessage()]
    assert first.levelno == logging.WARNING
    message = first.getMessage()
    assert address in message and "bootstrap server" in message
    assert "refused" in message.lower() or "ECONNREFUSED" in message
