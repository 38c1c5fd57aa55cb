"""EngineDriver: how application events reach the share engine (no shell runs it)."""

from __future__ import annotations

import threading
import uuid
from collections.abc import Iterator

import pytest

from kafka_share._handoff.events import (
    AcksByPartition,
    CompletedShareFetch,
    FetchEvent,
    NodeAcknowledgements,
    StopEvent,
)
from kafka_share._handoff.fetch_buffer import FetchBuffer
from kafka_share._net.driver import EngineDriver
from kafka_share.config import parse_config
from kafka_share.models import AcknowledgeType, TopicIdPartition
from kafka_share.share.acknowledgements import Acknowledgements

TIP = TopicIdPartition(uuid.UUID(int=9), "t", 0)


@pytest.fixture
def engine() -> Iterator[tuple[EngineDriver, FetchBuffer[CompletedShareFetch]]]:
    buffer: FetchBuffer[CompletedShareFetch] = FetchBuffer()
    config = parse_config({"bootstrap.servers": "127.0.0.1:1", "group.id": "g"})
    driver = EngineDriver(config=config, client_id="c", fetch_buffer=buffer)
    yield driver, buffer
    driver.client.close()


def _acks() -> AcksByPartition:
    a = Acknowledgements()
    a.add(5, AcknowledgeType.ACCEPT)
    return {TIP: NodeAcknowledgements(1, a)}


def test_fetch_ahead_is_dropped_when_a_response_is_already_queued(
    engine: tuple[EngineDriver, FetchBuffer[CompletedShareFetch]],
) -> None:
    driver, buffer = engine
    buffer.add_all([CompletedShareFetch(1, TIP, b"", [(0, 0, 1)])])
    sent = threading.Event()
    driver.apply(
        FetchEvent(_acks(), sent=sent, ahead=True, ack_deadline_ms=10_000), now_ms=1_000
    )
    consume = driver.engine.consume
    assert consume.fetch_more is False
    # The acks are not lost: they wait briefly for a fetch, then go out alone.
    state = consume._ctx.nodes[1]
    assert TIP in state.async_acks and state.async_deadline_ms == 10_000
    assert state.async_linger_until_ms == 1_050
    assert not state.piggyback
    assert driver._fetch_waiters == [sent]


def test_fetch_ahead_with_an_empty_buffer_asks_for_records(
    engine: tuple[EngineDriver, FetchBuffer[CompletedShareFetch]],
) -> None:
    driver, _ = engine
    driver.apply(FetchEvent(_acks(), ahead=True, ack_deadline_ms=10_000), now_ms=1_000)
    consume = driver.engine.consume
    assert consume.fetch_more is True and consume._fetcher.ahead is True
    assert TIP in consume._ctx.nodes[1].piggyback


def test_a_stop_event_reaches_the_shell_through_on_stop() -> None:
    """The shell holding the driver learns of a stop from the callback it gave."""
    stops: list[None] = []
    buffer: FetchBuffer[CompletedShareFetch] = FetchBuffer()
    config = parse_config({"bootstrap.servers": "127.0.0.1:1", "group.id": "g"})
    driver = EngineDriver(
        config=config, client_id="c", fetch_buffer=buffer, on_stop=lambda: stops.append(None)
    )
    try:
        driver.apply(FetchEvent(_acks(), ahead=True, ack_deadline_ms=10_000), now_ms=1_000)
        assert stops == []
        driver.apply(StopEvent(), now_ms=1_000)
        assert stops == [None]
    finally:
        driver.client.close()
