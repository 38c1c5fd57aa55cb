"""Which thread's rounds raise the receive low-water marks (``_net/thread.py``).

Only the application thread leaves the loop between rounds (to decode, or to
the application) while responses are on their way, so only its rounds raise
the marks (``NetworkThread.drive``); the network thread always selects next.
The connection's and the client's side of the mark are in
``test_net_partial_reads.py``.
"""

from __future__ import annotations

import threading

import pytest

from kafka_share import ShareConsumer


def test_only_the_application_threads_rounds_raise_the_marks(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    consumer: ShareConsumer[bytes, bytes] = ShareConsumer(
        bootstrap_servers="127.0.0.1:1", group_id="g", default_api_timeout_ms=60_000,
    )
    try:
        client = consumer._thread._client
        real = client.raise_low_water_away
        callers: list[str] = []

        def recording() -> None:
            callers.append(threading.current_thread().name)
            real()

        monkeypatch.setattr(client, "raise_low_water_away", recording)
        consumer.subscribe(["t"])
        client.wakeup()  # a round on the network thread first
        for _ in range(3):
            assert consumer.poll(timeout=0.05).count() == 0
        assert callers, "the polls ran the loop and raised nothing"
        assert set(callers) == {threading.current_thread().name}
    finally:
        consumer.close(timeout=1.0)
