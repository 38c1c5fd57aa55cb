"""Answers from librdkafka's mock cluster that the codec must tolerate.

ApiVersions (KIP-511): a broker that does not know the ApiVersions version we
sent answers error 35. Apache Kafka writes that answer in the v0 layout;
librdkafka's mock cluster writes it in a layout that is neither v0 nor the
request's version. Java parses what it can and otherwise retries at v0; so
must we, instead of treating the answer as a corrupt frame and reconnecting
forever.

Bytes after a complete body: the mock ends some flexible responses with a
second empty tagged-field section. Java and librdkafka read no further than
the fields they know; so must the codec (strict ``decode`` still reports them).
"""

from __future__ import annotations

import struct
from pathlib import Path

import pytest

from kafka_share.errors import CorruptMessageError, UnsupportedVersionError
from kafka_share.protocol import messages as m
from kafka_share.protocol.api_keys import (
    API_VERSIONS_FIRST_VERSION,
    api_versions_retry_version,
)
from kafka_share.protocol.codec import NEED_DATA, KafkaCodec
from tests.unit.protocol.helpers import receive_data

#: The body (no size, no header) that librdkafka 2.16's mock broker sends for
#: ApiVersionsRequest v4, captured from a socket: ErrorCode 35, a one-byte count
#: 0x01 (its flexible-request branch writes the raw count, not count + 1), one
#: entry ApiKey 18 v0-v2 without tagged fields, ThrottleTimeMs 0, and no tagged
#: fields. Not valid at v0 (the int32 count reads 0x01001200) nor at v4 (trailing
#: bytes).
MOCK_V4_UNSUPPORTED_BODY = bytes.fromhex(
    (Path(__file__).parent / "fixtures" / "api_versions_v4_unsupported_librdkafka_mock.hex")
    .read_text()
    .strip()
)


def _frame(correlation_id: int, body: bytes) -> bytes:
    # ApiVersions responses always use response header v0 (correlation id only).
    payload = struct.pack(">i", correlation_id) + body
    return struct.pack(">i", len(payload)) + payload


def _answer(codec: KafkaCodec, body: bytes) -> m.ApiVersionsResponse:
    cid, _ = codec.send_request(m.ApiVersionsRequest(), API_VERSIONS_FIRST_VERSION)
    receive_data(codec, _frame(cid, body))
    item = codec.next_response()
    assert item is not NEED_DATA and not isinstance(item, type(NEED_DATA))
    response = item[1]
    assert isinstance(response, m.ApiVersionsResponse)
    return response


def test_the_mock_cluster_body_is_really_unparsable_at_v0_and_v4() -> None:
    with pytest.raises(CorruptMessageError):
        m.ApiVersionsResponse.decode(MOCK_V4_UNSUPPORTED_BODY, 0)
    with pytest.raises(CorruptMessageError):
        m.ApiVersionsResponse.decode(MOCK_V4_UNSUPPORTED_BODY, API_VERSIONS_FIRST_VERSION)


def test_unparsable_unsupported_version_answer_is_an_error_35_response_not_corruption() -> None:
    codec = KafkaCodec("c")
    response = _answer(codec, MOCK_V4_UNSUPPORTED_BODY)
    assert response.error_code == 35
    assert response.api_keys == []
    # Nothing parsable was listed: retry at v0, as Java does.
    assert api_versions_retry_version(response, API_VERSIONS_FIRST_VERSION) == 0
    # The codec is still usable for the retry on the same connection.
    cid, _ = codec.send_request(m.ApiVersionsRequest(), 0)
    ok = m.ApiVersionsResponse(
        api_keys=[m.ApiVersionsResponse.ApiVersion(api_key=18, min_version=0, max_version=2)]
    )
    receive_data(codec, _frame(cid, ok.encode(0)))
    item = codec.next_response()
    assert item is not NEED_DATA and not isinstance(item, type(NEED_DATA))
    assert item[1] == ok


def test_unsupported_version_answer_in_the_request_layout_is_parsed_at_that_version() -> None:
    # A broker that answers in the request's own (flexible) layout instead of v0.
    body = m.ApiVersionsResponse(
        error_code=35,
        api_keys=[m.ApiVersionsResponse.ApiVersion(api_key=18, min_version=0, max_version=3)],
    ).encode(API_VERSIONS_FIRST_VERSION)
    with pytest.raises(CorruptMessageError):
        m.ApiVersionsResponse.decode(body, 0)
    response = _answer(KafkaCodec("c"), body)
    assert response.error_code == 35
    assert api_versions_retry_version(response, API_VERSIONS_FIRST_VERSION) == 3


def test_v0_layout_answer_still_gives_the_listed_version() -> None:
    body = m.ApiVersionsResponse(
        error_code=35,
        api_keys=[m.ApiVersionsResponse.ApiVersion(api_key=18, min_version=0, max_version=2)],
    ).encode(0)
    response = _answer(KafkaCodec("c"), body)
    assert api_versions_retry_version(response, API_VERSIONS_FIRST_VERSION) == 2


def test_other_api_versions_errors_are_decoded_as_before() -> None:
    body = m.ApiVersionsResponse(error_code=1).encode(API_VERSIONS_FIRST_VERSION)
    response = _answer(KafkaCodec("c"), body)
    assert response.error_code == 1
    assert api_versions_retry_version(response, API_VERSIONS_FIRST_VERSION) is None


def test_a_truncated_frame_of_another_api_is_still_corruption() -> None:
    codec = KafkaCodec("c")
    cid, _ = codec.send_request(m.SaslHandshakeRequest(), 0)
    receive_data(codec, _frame(cid, b"\x00\x23\x01"))
    with pytest.raises(CorruptMessageError):
        codec.next_response()


def test_no_common_api_versions_version_is_a_clear_error() -> None:
    # The broker only speaks ApiVersions v5-v7; this client speaks v0-v4.
    response = m.ApiVersionsResponse(
        error_code=35,
        api_keys=[m.ApiVersionsResponse.ApiVersion(api_key=18, min_version=5, max_version=7)],
    )
    with pytest.raises(UnsupportedVersionError, match=r"ApiVersions.*v5-v7.*v0-v4"):
        api_versions_retry_version(response, API_VERSIONS_FIRST_VERSION)


def test_unsupported_version_at_v0_is_a_clear_error_not_a_retry() -> None:
    response = m.ApiVersionsResponse(error_code=35)
    with pytest.raises(UnsupportedVersionError, match="v0"):
        api_versions_retry_version(response, 0)


# -- bytes after a complete body ----------------------------------------------------

#: MetadataResponse v12 body from librdkafka 2.16's mock cluster (3 brokers, topic
#: "t1" with 2 partitions), captured from a socket. Its last byte is a second
#: empty tagged-field section (the mock writes the top-level tags twice); Java and
#: librdkafka ignore bytes after a complete body.
MOCK_METADATA_V12_BODY = bytes.fromhex(
    (Path(__file__).parent / "fixtures" / "metadata_v12_response_librdkafka_mock.hex")
    .read_text()
    .strip()
)


def test_strict_decode_still_reports_trailing_bytes() -> None:
    with pytest.raises(CorruptMessageError, match="1 unexpected trailing bytes"):
        m.MetadataResponse.decode(MOCK_METADATA_V12_BODY, 12)


def test_codec_accepts_a_response_with_bytes_after_a_complete_body() -> None:
    codec = KafkaCodec("c")
    cid, _ = codec.send_request(m.MetadataRequest(topics=[]), 12)
    # Metadata v12 is flexible: response header v1 (correlation id + empty tags).
    payload = struct.pack(">i", cid) + b"\x00" + MOCK_METADATA_V12_BODY
    receive_data(codec, struct.pack(">i", len(payload)) + payload)
    item = codec.next_response()
    assert item is not NEED_DATA and not isinstance(item, type(NEED_DATA))
    response = item[1]
    assert isinstance(response, m.MetadataResponse)
    assert sorted(b.node_id for b in response.brokers) == [1, 2, 3]
    (topic,) = response.topics
    assert topic.name == "t1"
    assert [(p.partition_index, p.leader_id) for p in topic.partitions] == [(0, 1), (1, 2)]
    # The stream stays in sync: the next response decodes normally.
    cid2, _ = codec.send_request(m.SaslHandshakeRequest(), 1)
    body2 = m.SaslHandshakeResponse(mechanisms=["PLAIN"]).encode(1)
    payload2 = struct.pack(">i", cid2) + body2
    receive_data(codec, struct.pack(">i", len(payload2)) + payload2)
    item2 = codec.next_response()
    assert item2 is not NEED_DATA and not isinstance(item2, type(NEED_DATA))
    assert item2[1] == m.SaslHandshakeResponse(mechanisms=["PLAIN"])
