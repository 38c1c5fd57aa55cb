"""ExponentialBackoff, RequestState and CoordinatorManager with a fake clock."""

from __future__ import annotations

import pytest

from kafka_share.protocol.error_codes import ErrorCode
from kafka_share.share.backoff import ExponentialBackoff, RequestState
from kafka_share.share.coordinator import (
    COORDINATOR_KEY_TYPE_GROUP,
    CoordinatorManager,
    CoordinatorNode,
)


def fixed(value: float) -> ExponentialBackoff:
    return ExponentialBackoff(100, 1_000, random_source=lambda: value)


def test_backoff_doubles_then_caps() -> None:
    b = fixed(0.5)  # jitter factor 1.0
    assert [b.backoff_ms(n) for n in range(6)] == [100, 200, 400, 800, 1_000, 1_000]
    assert b.backoff_ms(-3) == 100


def test_backoff_jitter_bounds() -> None:
    low = fixed(0.0)
    high = fixed(0.999999)
    assert low.backoff_ms(0) == 80  # 100 * 0.8
    assert high.backoff_ms(0) == 119  # just under 100 * 1.2
    assert low.backoff_ms(2) == 320
    assert high.backoff_ms(10) == 1_000  # jitter never exceeds the cap


def test_backoff_without_jitter_and_degenerate_ranges() -> None:
    b = ExponentialBackoff(50, 50, jitter=0)
    assert [b.backoff_ms(n) for n in range(3)] == [50, 50, 50]
    zero = ExponentialBackoff(0, 0)
    assert zero.backoff_ms(5) == 0


def test_backoff_rejects_bad_parameters() -> None:
    with pytest.raises(ValueError, match=">= 0"):
        ExponentialBackoff(-1, 10)
    with pytest.raises(ValueError, match="multiplier"):
        ExponentialBackoff(1, 10, multiplier=0.5)
    with pytest.raises(ValueError, match="jitter"):
        ExponentialBackoff(1, 10, jitter=1.0)


def test_request_state_cycle() -> None:
    state = RequestState(fixed(0.5))
    assert state.can_send(0)
    state.on_send(0)
    assert state.in_flight
    assert not state.can_send(10_000)
    state.on_failure(10)
    assert state.attempts == 1
    assert state.remaining_backoff_ms(10) == 100
    assert state.remaining_backoff_ms(60) == 50
    assert not state.can_send(109)
    assert state.can_send(110)
    state.on_send(110)
    state.on_failure(120)
    assert state.remaining_backoff_ms(120) == 200
    state.on_send(320)
    state.on_success(330)
    assert state.attempts == 0
    assert state.remaining_backoff_ms(330) == 0
    assert state.can_send(330)


def test_request_state_reset() -> None:
    state = RequestState(fixed(0.5))
    state.on_send(0)
    state.on_failure(0)
    state.reset()
    assert state.can_send(0)
    assert state.attempts == 0
    assert not state.in_flight


def coordinator() -> CoordinatorManager:
    return CoordinatorManager("g", retry_backoff_ms=100, random_source=lambda: 0.5)


def test_lookup_once_then_known() -> None:
    c = coordinator()
    assert c.key == "g"
    assert c.key_type == COORDINATOR_KEY_TYPE_GROUP == 0
    assert not c.known
    assert c.time_until_next_lookup_ms(0) == 0
    assert c.poll(0) is True
    assert c.poll(1) is False  # in flight
    assert c.on_response(5, 0, 3, "broker3", 9092) is None
    assert c.known
    assert c.coordinator == CoordinatorNode(3, "broker3", 9092)
    assert c.poll(6) is False
    assert c.time_until_next_lookup_ms(6) > 10**9


def test_retriable_error_backs_off() -> None:
    c = coordinator()
    c.poll(0)
    assert c.on_response(0, ErrorCode.COORDINATOR_NOT_AVAILABLE, -1, "", -1) is None
    assert not c.known
    assert c.time_until_next_lookup_ms(40) == 60
    assert c.poll(99) is False
    assert c.poll(100) is True
    c.on_failure(100)  # transport failure: longer backoff
    assert c.poll(299) is False
    assert c.poll(300) is True


def test_fatal_lookup_error_is_returned() -> None:
    c = coordinator()
    c.poll(0)
    assert c.on_response(0, ErrorCode.GROUP_AUTHORIZATION_FAILED, -1, "", -1) == (
        ErrorCode.GROUP_AUTHORIZATION_FAILED
    )
    assert not c.known


def test_unusable_answer_is_retried() -> None:
    c = coordinator()
    c.poll(0)
    assert c.on_response(0, 0, -1, "", 0) is None
    assert not c.known
    assert c.poll(50) is False
    assert c.poll(100) is True


def test_mark_unknown_triggers_rediscovery() -> None:
    c = coordinator()
    c.poll(0)
    c.on_response(0, 0, 1, "h", 1)
    c.mark_unknown()
    assert not c.known
    assert c.coordinator is None
    assert c.poll(0) is True  # a success leaves no backoff behind


def test_empty_group_id_rejected() -> None:
    with pytest.raises(ValueError, match="group_id"):
        CoordinatorManager("")
