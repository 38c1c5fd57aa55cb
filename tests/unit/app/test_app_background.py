"""BackgroundEvents: what the network thread reports beside the records, sorted
on the application thread."""

from __future__ import annotations

import uuid
from typing import Any

import pytest

from kafka_share._app.background import BackgroundEvents
from kafka_share._app.collector import FetchCollector
from kafka_share._app.in_flight import InFlightBatch
from kafka_share._handoff.events import CompletedShareFetch, ErrorEvent
from kafka_share._handoff.fetch_buffer import FetchBuffer
from kafka_share.errors import (
    AuthenticationError,
    GroupAuthorizationFailedError,
    KafkaError,
)
from kafka_share.metrics import ShareConsumerMetrics
from kafka_share.models import TopicIdPartition
from kafka_share.share.acknowledgements import Acknowledgements
from kafka_share.share.results import AcknowledgementCompletion

TIP = TopicIdPartition(uuid.UUID(int=1), "t", 0)


def _events() -> tuple[BackgroundEvents, FetchBuffer[CompletedShareFetch]]:
    buffer: FetchBuffer[CompletedShareFetch] = FetchBuffer()
    in_flight = InFlightBatch()
    collector: FetchCollector[Any, Any] = FetchCollector(
        buffer=buffer, in_flight=in_flight, key_deserializer=None, value_deserializer=None,
        check_crcs=True, max_poll_records=500,
        metrics=ShareConsumerMetrics(sample_window_ms=30_000, num_samples=2, created_ms=0),
    )
    return BackgroundEvents(buffer, collector, in_flight), buffer


def test_errors_are_raised_oldest_first_then_the_fatal_one_every_time() -> None:
    events, buffer = _events()
    first, second = KafkaError("first"), KafkaError("second")
    buffer.add_background(ErrorEvent(first))
    buffer.add_background(ErrorEvent(GroupAuthorizationFailedError("not allowed"), fatal=True))
    buffer.add_background(ErrorEvent(second))
    assert not events.repeats_fatal()
    for expected in (first, second):
        with pytest.raises(KafkaError) as raised:
            events.raise_error()
        assert raised.value is expected
    for _ in range(2):
        with pytest.raises(GroupAuthorizationFailedError, match="must be closed and recreated"):
            events.raise_error()
        assert events.repeats_fatal()


def test_an_authentication_error_is_taken_out_of_turn() -> None:
    events, buffer = _events()
    other = KafkaError("other")
    buffer.add_background(ErrorEvent(other))
    buffer.add_background(ErrorEvent(AuthenticationError("bad password")))
    with pytest.raises(AuthenticationError):
        events.raise_authentication_error()
    events.raise_authentication_error()  # nothing left of that kind
    with pytest.raises(KafkaError) as raised:
        events.raise_error()
    assert raised.value is other


def test_completions_are_handed_out_once() -> None:
    events, buffer = _events()
    done = AcknowledgementCompletion(TIP, Acknowledgements.from_types({3: 1}), None)
    buffer.add_background(done)
    events.drain()
    assert events.take_completions() == [done]
    assert events.take_completions() == []
    assert events.take_locks_lost() == []
