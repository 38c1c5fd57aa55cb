"""UnsentRequest.answer: the one place a response's type is checked."""

from __future__ import annotations

from kafka_share.errors import KafkaError, NetworkError
from kafka_share.protocol.messages import MetadataResponse, ShareFetchResponse
from kafka_share.share.unsent import Channel, UnsentRequest


def _request(
    answered: list[tuple[MetadataResponse, int]], failed: list[tuple[KafkaError, int]]
) -> UnsentRequest[MetadataResponse]:
    return UnsentRequest(
        1, Channel.CONTROL, object(), MetadataResponse,
        lambda r, now_ms: answered.append((r, now_ms)),
        lambda e, now_ms: failed.append((e, now_ms)),
    )


def test_a_response_of_the_expected_type_goes_to_on_response() -> None:
    answered: list[tuple[MetadataResponse, int]] = []
    failed: list[tuple[KafkaError, int]] = []
    response = MetadataResponse()
    _request(answered, failed).answer(response, None, 7)
    assert answered == [(response, 7)] and failed == []


def test_a_failure_goes_to_on_error() -> None:
    answered: list[tuple[MetadataResponse, int]] = []
    failed: list[tuple[KafkaError, int]] = []
    error = NetworkError("gone")
    _request(answered, failed).answer(None, error, 8)
    assert answered == [] and failed == [(error, 8)]


def test_a_response_of_another_type_fails_the_request_naming_both_types() -> None:
    answered: list[tuple[MetadataResponse, int]] = []
    failed: list[tuple[KafkaError, int]] = []
    _request(answered, failed).answer(ShareFetchResponse(), None, 9)
    assert answered == []
    [(error, now_ms)] = failed
    assert now_ms == 9
    assert "ShareFetchResponse" in str(error) and "MetadataResponse" in str(error)
