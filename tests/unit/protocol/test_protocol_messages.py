"""Round trips, golden bytes and decoder robustness for every generated message."""

from __future__ import annotations

import uuid
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from protocol_strategies import message_strategy, message_versions

from kafka_share.errors import CorruptMessageError, UnsupportedVersionError
from kafka_share.protocol import messages as m

PAIRS = message_versions()
IDS = [f"{cls.__name__}-v{v}" for cls, v in PAIRS]
FAST = settings(max_examples=15, deadline=None, suppress_health_check=list(HealthCheck))


def test_every_requested_message_and_version_is_covered() -> None:
    have = {(cls.__name__, v) for cls, v in PAIRS}
    expected = {
        ("ApiVersionsRequest", 0), ("ApiVersionsRequest", 4), ("ApiVersionsResponse", 3),
        ("MetadataRequest", 9), ("MetadataResponse", 13), ("FindCoordinatorRequest", 6),
        ("FindCoordinatorResponse", 4), ("ShareGroupHeartbeatRequest", 1),
        ("ShareGroupDescribeResponse", 1), ("ShareFetchRequest", 1), ("ShareFetchResponse", 2),
        ("ShareAcknowledgeRequest", 2), ("SaslHandshakeRequest", 1),
        ("SaslAuthenticateResponse", 2), ("DescribeConfigsResponse", 4),
        ("IncrementalAlterConfigsRequest", 1), ("ListGroupsResponse", 5),
        ("DescribeShareGroupOffsetsResponse", 1), ("AlterShareGroupOffsetsRequest", 0),
        ("DeleteShareGroupOffsetsResponse", 0),
    }
    assert expected <= have
    assert m.ShareFetchRequest.RESPONSE_TYPE is m.ShareFetchResponse
    assert m.ShareFetchRequest.API_KEY == 78
    assert m.ShareFetchRequest.FLEXIBLE_MIN_VERSION == 0
    assert m.SaslHandshakeRequest.FLEXIBLE_MIN_VERSION is None


@pytest.mark.parametrize(("cls", "version"), PAIRS, ids=IDS)
def test_round_trip(cls: type[Any], version: int) -> None:
    @FAST
    @given(message_strategy(cls, version))
    def check(msg: Any) -> None:
        data = msg.encode(version)
        decoded = cls.decode(data, version)
        assert decoded == msg
        assert decoded.encode(version) == data

    check()


@pytest.mark.parametrize(("cls", "version"), PAIRS, ids=IDS)
def test_random_bytes_only_raise_corrupt(cls: type[Any], version: int) -> None:
    @FAST
    @given(st.binary(max_size=64))
    def check(data: bytes) -> None:
        try:
            cls.decode(data, version)
        except CorruptMessageError:
            pass

    check()


@pytest.mark.parametrize(("cls", "version"), PAIRS, ids=IDS)
def test_mutated_encodings_only_raise_corrupt(cls: type[Any], version: int) -> None:
    @FAST
    @given(message_strategy(cls, version), st.data())
    def check(msg: Any, data: st.DataObject) -> None:
        raw = bytearray(msg.encode(version))
        for _ in range(data.draw(st.integers(1, 4))):
            if not raw:
                break
            i = data.draw(st.integers(0, len(raw) - 1))
            raw[i] = data.draw(st.integers(0, 255))
        cut = data.draw(st.integers(0, len(raw)))
        for blob in (bytes(raw), bytes(raw[:cut])):
            try:
                cls.decode(blob, version)
            except CorruptMessageError:
                pass

    check()


def test_version_out_of_range() -> None:
    with pytest.raises(UnsupportedVersionError, match=r"ShareFetchRequest version 0"):
        m.ShareFetchRequest().encode(0)
    with pytest.raises(UnsupportedVersionError, match=r"valid versions 1-2"):
        m.ShareFetchResponse.decode(b"", 3)


def test_field_missing_from_version_is_refused() -> None:
    # ShareAcquireMode is ignorable (silently dropped in v1); IsRenewAck is not.
    req = m.ShareFetchRequest(share_acquire_mode=1)
    assert m.ShareFetchRequest.decode(req.encode(1), 1).share_acquire_mode == 0
    with pytest.raises(UnsupportedVersionError, match="is_renew_ack"):
        m.ShareFetchRequest(is_renew_ack=True).encode(1)


def test_null_in_non_nullable_version_is_refused() -> None:
    # Metadata topics are nullable from v1 only.
    with pytest.raises(ValueError, match="topics cannot be null in version 0"):
        m.MetadataRequest(topics=None).encode(0)
    assert m.MetadataRequest.decode(m.MetadataRequest(topics=None).encode(1), 1).topics is None


def test_unencodable_value_is_value_error() -> None:
    with pytest.raises(ValueError, match="cannot encode ShareFetchRequest v1"):
        m.ShareFetchRequest(max_wait_ms=2**40).encode(1)


# -- golden bytes, assembled by hand from the Kafka protocol rules ---------------------------------


def test_golden_api_versions_v0() -> None:
    assert m.ApiVersionsRequest().encode(0) == b""
    body = bytes.fromhex("0000" "00000002" "0012" "0000" "0004" "004e" "0001" "0001")
    resp = m.ApiVersionsResponse.decode(body, 0)
    assert resp.error_code == 0
    assert [(k.api_key, k.min_version, k.max_version) for k in resp.api_keys] == [
        (18, 0, 4),
        (78, 1, 1),
    ]
    assert resp.encode(0) == body


def test_golden_api_versions_v3() -> None:
    req = m.ApiVersionsRequest(client_software_name="ks", client_software_version="1.0")
    assert req.encode(3) == bytes.fromhex("03" "6b73" "04" "312e30" "00")
    body = bytes.fromhex(
        "0000"  # error_code
        "02" "0012" "0000" "0004" "00"  # 1 api key (compact len 2), its empty tagged fields
        "00000064"  # throttle_time_ms = 100
        "02"  # 2 tagged fields
        "01" "08" "0000000000000007"  # tag 1 finalized_features_epoch = 7
        "02" "14" "02" "0e" "73686172652e76657273696f6e" "0001" "0001" "00"  # tag 2 features
    )
    resp = m.ApiVersionsResponse.decode(body, 3)
    assert resp.throttle_time_ms == 100
    assert resp.finalized_features_epoch == 7
    feat = resp.finalized_features[0]
    assert (feat.name, feat.max_version_level, feat.min_version_level) == ("share.version", 1, 1)
    assert resp.encode(3) == body


def test_unknown_tagged_fields_are_skipped() -> None:
    body = bytes.fromhex("0000" "01" "00000000" "01" "63" "03" "aabbcc")  # tag 99, 3 bytes
    resp = m.ApiVersionsResponse.decode(body, 3)
    assert resp.api_keys == [] and resp.finalized_features_epoch == -1


def test_golden_share_fetch_v1_request() -> None:
    topic_id = uuid.UUID("0123456789abcdef0123456789abcdef")
    req = m.ShareFetchRequest(
        group_id="g",
        member_id="m",
        share_session_epoch=0,
        max_wait_ms=500,
        min_bytes=1,
        max_records=500,
        batch_size=500,
        topics=[
            m.ShareFetchRequest.FetchTopic(
                topic_id=topic_id,
                partitions=[
                    m.ShareFetchRequest.FetchPartition(
                        partition_index=0,
                        acknowledgement_batches=[
                            m.ShareFetchRequest.AcknowledgementBatch(
                                first_offset=0, last_offset=4, acknowledge_types=[1]
                            )
                        ],
                    )
                ],
            )
        ],
    )
    expected = bytes.fromhex(
        "0267" "026d"  # group_id "g", member_id "m" (compact strings)
        "00000000" "000001f4" "00000001" "7fffffff"  # epoch, max_wait, min_bytes, max_bytes
        "000001f4" "000001f4"  # max_records, batch_size (v1+)
        "02" "0123456789abcdef0123456789abcdef"  # 1 topic, topic id
        "02" "00000000"  # 1 partition, index 0
        "02" "0000000000000000" "0000000000000004" "0201" "00"  # 1 ack batch [0..4] ACCEPT
        "00" "00"  # partition and topic tagged fields
        "01"  # forgotten_topics_data: empty
        "00"  # top-level tagged fields
    )
    assert req.encode(1) == expected
    assert m.ShareFetchRequest.decode(expected, 1) == req


def test_records_decode_zero_copy() -> None:
    payload = b"x" * 100
    resp = m.ShareFetchResponse(
        responses=[
            m.ShareFetchResponse.ShareFetchableTopicResponse(
                partitions=[m.ShareFetchResponse.PartitionData(records=payload)]
            )
        ]
    )
    data = resp.encode(2)
    view = memoryview(data)
    out = m.ShareFetchResponse.decode(view, 2)
    records = out.responses[0].partitions[0].records
    assert isinstance(records, memoryview)
    assert records.obj is data  # a slice of the input, not a copy
    assert bytes(records) == payload
    # encode accepts the memoryview back
    assert out.encode(2) == data


def test_corrupt_error_names_message_field_and_offset() -> None:
    resp = m.ShareFetchResponse(
        responses=[
            m.ShareFetchResponse.ShareFetchableTopicResponse(
                partitions=[m.ShareFetchResponse.PartitionData(records=b"abcdef")]
            )
        ]
    )
    data = bytearray(resp.encode(1))
    idx = data.index(b"abcdef") - 1
    data[idx] = 0x7F  # records length prefix now claims 126 bytes
    with pytest.raises(CorruptMessageError) as info:
        m.ShareFetchResponse.decode(bytes(data), 1)
    text = str(info.value)
    assert "ShareFetchResponse v1" in text
    assert "PartitionData.records" in text
    assert f"offset {idx + 1}" in text


def test_huge_array_length_does_not_allocate() -> None:
    body = bytes.fromhex("0000" "7fffffff")  # ApiVersions v0: 2**31-1 api keys in 4 bytes
    with pytest.raises(CorruptMessageError, match="exceeds"):
        m.ApiVersionsResponse.decode(body, 0)


def test_trailing_bytes_rejected() -> None:
    with pytest.raises(CorruptMessageError, match="trailing"):
        m.SaslHandshakeRequest.decode(m.SaslHandshakeRequest(mechanism="PLAIN").encode(1) + b"!", 1)
