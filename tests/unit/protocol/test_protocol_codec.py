"""KafkaCodec framing, correlation, limits, and ApiVersions negotiation."""

from __future__ import annotations

import platform
import struct
import subprocess
import sys

import pytest

from kafka_share.errors import CorruptMessageError, UnsupportedVersionError
from kafka_share.protocol import messages as m
from kafka_share.protocol.api_keys import (
    API_VERSIONS_FIRST_VERSION,
    ApiKey,
    ApiVersionsTable,
    api_versions_retry_version,
)
from kafka_share.protocol.codec import NEED_DATA, InFlightRequest, KafkaCodec
from kafka_share.protocol.headers import RequestHeader, ResponseHeader
from tests.unit.protocol.helpers import (
    buffered_bytes,
    in_flight_count,
    receive_data,
    receive_eof,
    require_share_groups,
)


def frame(correlation_id: int, body: bytes, header_version: int) -> bytes:
    payload = ResponseHeader(correlation_id=correlation_id).encode(header_version) + body
    return struct.pack(">i", len(payload)) + payload


def test_request_framing_uses_header_v2_for_flexible() -> None:
    codec = KafkaCodec("client-1", first_correlation_id=7)
    cid, data = codec.send_request(m.ShareGroupHeartbeatRequest(group_id="g"), 1)
    assert cid == 7
    (size,) = struct.unpack_from(">i", data)
    assert size == len(data) - 4
    header, pos = RequestHeader.decode(memoryview(data)[4:], 2)
    assert (header.request_api_key, header.request_api_version) == (76, 1)
    assert header.correlation_id == 7 and header.client_id == "client-1"
    body = m.ShareGroupHeartbeatRequest.decode(memoryview(data)[4 + pos :], 1)
    assert body.group_id == "g"
    # Non-flexible request: header v1, no tagged-field byte.
    _, data0 = codec.send_request(m.SaslHandshakeRequest(mechanism="PLAIN"), 1)
    header0, pos0 = RequestHeader.decode(memoryview(data0)[4:], 1)
    assert header0.correlation_id == 8
    assert m.SaslHandshakeRequest.decode(memoryview(data0)[4 + pos0 :], 1).mechanism == "PLAIN"
    assert in_flight_count(codec) == 2


def test_one_byte_chunks_and_in_order_matching() -> None:
    codec = KafkaCodec(None)
    c1, _ = codec.send_request(m.ShareGroupHeartbeatRequest(), 1, tag="hb")
    c2, _ = codec.send_request(m.FindCoordinatorRequest(key="g"), 0)
    hb = m.ShareGroupHeartbeatResponse(member_id="abc", member_epoch=3)
    fc = m.FindCoordinatorResponse(node_id=2, host="h", port=9092)
    stream = frame(c1, hb.encode(1), 1) + frame(c2, fc.encode(0), 0)
    got: list[tuple[InFlightRequest, object]] = []
    for b in stream:
        receive_data(codec, bytes([b]))
        while (item := codec.next_response()) is not NEED_DATA:
            assert not isinstance(item, type(NEED_DATA))
            got.append(item)
    assert [(r.correlation_id, r.tag) for r, _ in got] == [(c1, "hb"), (c2, None)]
    assert got[0][1] == hb and got[1][1] == fc
    assert in_flight_count(codec) == 0 and buffered_bytes(codec) == 0


def test_correlation_mismatch() -> None:
    codec = KafkaCodec("c")
    cid, _ = codec.send_request(m.SaslHandshakeRequest(), 0)
    receive_data(codec, frame(cid + 5, m.SaslHandshakeResponse().encode(0), 0))
    with pytest.raises(CorruptMessageError, match="correlation id mismatch"):
        codec.next_response()
    with pytest.raises(CorruptMessageError, match="unusable"):
        codec.next_response()


def test_response_without_request() -> None:
    codec = KafkaCodec("c")
    receive_data(codec, frame(0, b"", 0))
    with pytest.raises(CorruptMessageError, match="no request in flight"):
        codec.next_response()


def test_oversized_frame_rejected_before_buffering() -> None:
    codec = KafkaCodec("c", max_frame_bytes=1000)
    codec.send_request(m.SaslHandshakeRequest(), 0)
    receive_data(codec, struct.pack(">i", 1001))
    with pytest.raises(CorruptMessageError, match="max_frame_bytes"):
        codec.next_response()


def test_truncated_frame_body() -> None:
    codec = KafkaCodec("c")
    cid, _ = codec.send_request(m.ShareFetchRequest(), 1)
    body = m.ShareFetchResponse().encode(1)[:-3]
    receive_data(codec, frame(cid, body, 1))
    with pytest.raises(CorruptMessageError, match="ShareFetchResponse v1"):
        codec.next_response()


def test_eof_mid_frame() -> None:
    codec = KafkaCodec("c")
    codec.send_request(m.SaslHandshakeRequest(), 0)
    receive_data(codec, b"\x00\x00\x00\x10\x00")
    assert codec.next_response() is NEED_DATA
    with pytest.raises(CorruptMessageError, match="incomplete frame"):
        receive_eof(codec)


def test_api_versions_response_uses_header_v0_and_fallback_to_v0_body() -> None:
    codec = KafkaCodec("c")
    cid, _ = codec.send_request(m.ApiVersionsRequest(), API_VERSIONS_FIRST_VERSION)
    # An older broker rejects v4 with a v0-format body listing ApiVersions v0-2.
    fallback = m.ApiVersionsResponse(
        error_code=35,
        api_keys=[m.ApiVersionsResponse.ApiVersion(api_key=18, min_version=0, max_version=2)],
    ).encode(0)
    receive_data(codec, frame(cid, fallback, 0))
    item = codec.next_response()
    assert item is not NEED_DATA and not isinstance(item, type(NEED_DATA))
    resp = item[1]
    assert isinstance(resp, m.ApiVersionsResponse)
    assert api_versions_retry_version(resp, API_VERSIONS_FIRST_VERSION) == 2
    # Retry at v2, then the normal (header v0) v3 path.
    cid2, _ = codec.send_request(m.ApiVersionsRequest(), 3)
    ok = m.ApiVersionsResponse(
        api_keys=[m.ApiVersionsResponse.ApiVersion(api_key=78, min_version=1, max_version=2)]
    )
    receive_data(codec, frame(cid2, ok.encode(3), 0))
    item2 = codec.next_response()
    assert item2 is not NEED_DATA and not isinstance(item2, type(NEED_DATA))
    assert item2[1] == ok
    assert api_versions_retry_version(ok, 3) is None


def test_retry_version_terminates() -> None:
    resp = m.ApiVersionsResponse(error_code=35)
    assert api_versions_retry_version(resp, 4) == 0
    # Nothing below v0: a clear error instead of another round trip.
    with pytest.raises(UnsupportedVersionError, match="ApiVersions v0"):
        api_versions_retry_version(resp, 0)
    odd = m.ApiVersionsResponse(
        error_code=35,
        api_keys=[m.ApiVersionsResponse.ApiVersion(api_key=18, min_version=0, max_version=9)],
    )
    assert api_versions_retry_version(odd, 3) == 2


def _table(versions: dict[int, tuple[int, int]], **features: int) -> ApiVersionsTable:
    resp = m.ApiVersionsResponse(
        api_keys=[
            m.ApiVersionsResponse.ApiVersion(api_key=k, min_version=lo, max_version=hi)
            for k, (lo, hi) in versions.items()
        ],
        finalized_features_epoch=1 if features else -1,
        finalized_features=[
            m.ApiVersionsResponse.FinalizedFeatureKey(name=n.replace("_", "."), max_version_level=v)
            for n, v in features.items()
        ],
    )
    return ApiVersionsTable.from_response(resp)


def test_version_negotiation() -> None:
    table = _table({78: (1, 1), 3: (0, 12), 10: (0, 6)}, share_version=1)
    assert table.version_for(ApiKey.SHARE_FETCH) == 1
    assert table.version_for(ApiKey.METADATA) == 12
    assert table.max_version(ApiKey.SHARE_ACKNOWLEDGE) is None
    assert table.supports(ApiKey.FIND_COORDINATOR, 4)
    assert not table.supports(ApiKey.SHARE_FETCH, 2)
    assert table.finalized_features == {"share.version": 1}
    with pytest.raises(UnsupportedVersionError, match=r"LIST_GROUPS.*broker none"):
        table.version_for(ApiKey.LIST_GROUPS)


def test_share_v0_only_broker_is_refused_with_guidance() -> None:
    table = _table({76: (0, 0), 78: (0, 0), 79: (0, 0)})
    with pytest.raises(UnsupportedVersionError) as info:
        table.version_for(ApiKey.SHARE_FETCH)
    text = str(info.value)
    assert "SHARE_FETCH" in text and "v1-v2" in text and "v0-v0" in text
    assert "Kafka >= 4.1" in text and "share.version=1" in text
    with pytest.raises(UnsupportedVersionError, match=r"share\.version"):
        _table({}).version_for(ApiKey.SHARE_GROUP_HEARTBEAT)


def test_require_share_groups_checks_feature() -> None:
    apis = {76: (1, 1), 78: (1, 2), 79: (1, 2)}
    require_share_groups(_table(apis, share_version=1))
    with pytest.raises(UnsupportedVersionError, match=r"finalized share\.version is 0"):
        require_share_groups(_table(apis, metadata_version=27))


def test_headers_round_trip() -> None:
    h = RequestHeader(request_api_key=3, request_api_version=12, correlation_id=9, client_id=None)
    assert h.encode(1) == bytes.fromhex("0003000c00000009ffff")
    assert h.encode(2) == bytes.fromhex("0003000c00000009ffff00")
    assert RequestHeader.decode(memoryview(h.encode(2)), 2) == (h, 11)
    assert ResponseHeader.decode(memoryview(b"\x00\x00\x00\x05\x00"), 1)[0].correlation_id == 5
    with pytest.raises(CorruptMessageError):
        ResponseHeader.decode(memoryview(b"\x00"), 0)


# -- receiving into the codec's buffers (recv_into) -------------------------------------


def share_fetch_frame(cid: int, payload: bytes) -> bytes:
    resp = m.ShareFetchResponse(
        responses=[m.ShareFetchResponse.ShareFetchableTopicResponse(
            partitions=[m.ShareFetchResponse.PartitionData(partition_index=0, records=payload)],
        )],
    )
    return frame(cid, resp.encode(1), 1)


def feed(codec: KafkaCodec, stream: bytes, cuts: list[int]) -> list[object]:
    """Deliver ``stream`` as a socket would: reads of at most the given sizes."""
    got: list[object] = []
    pos = 0
    sizes = iter(cuts)
    while pos < len(stream):
        buf = codec.get_buffer()
        n = min(len(buf), next(sizes, len(stream)), len(stream) - pos)
        buf[:n] = stream[pos : pos + n]
        codec.buffer_updated(n)
        pos += n
        while (item := codec.next_response()) is not NEED_DATA:
            assert not isinstance(item, type(NEED_DATA))
            got.append(item[1])
    return got


def records_of(resp: object) -> memoryview:
    assert isinstance(resp, m.ShareFetchResponse)
    records = resp.responses[0].partitions[0].records
    assert isinstance(records, memoryview)
    return records


def test_a_large_frame_is_read_straight_into_its_own_buffer_and_never_copied() -> None:
    codec = KafkaCodec("c")
    cid, _ = codec.send_request(m.ShareFetchRequest(), 1)
    payload = bytes(range(256)) * 1024  # 256 KiB: bigger than the scratch buffer
    stream = share_fetch_frame(cid, payload)
    first = codec.get_buffer()
    first[:100] = stream[:100]
    codec.buffer_updated(100)
    assert codec.next_response() is NEED_DATA
    rest = codec.get_buffer()
    # The next read may take exactly the rest of this frame, and no more.
    assert len(rest) == len(stream) - 100
    frame_buffer = rest.obj
    rest[:] = stream[100:]
    codec.buffer_updated(len(rest))
    rest.release()
    item = codec.next_response()
    assert item is not NEED_DATA and not isinstance(item, type(NEED_DATA))
    records = records_of(item[1])
    assert records.obj is frame_buffer  # a view of the buffer the socket wrote
    assert records.readonly and bytes(records) == payload
    assert buffered_bytes(codec) == 0


@pytest.mark.parametrize("read_size", [1, 3, 4, 5, 1000, 65536, 70000, 1 << 20])
def test_any_read_size_yields_the_same_responses(read_size: int) -> None:
    codec = KafkaCodec("c")
    payloads = [b"x" * 10, bytes(100_000), b"", b"y" * 65_000, b"z" * 3]
    stream = b""
    for p in payloads:
        cid, _ = codec.send_request(m.ShareFetchRequest(), 1)
        stream += share_fetch_frame(cid, p)
    got = feed(codec, stream, [read_size] * len(stream))
    assert [bytes(records_of(r)) for r in got] == payloads
    assert in_flight_count(codec) == 0 and buffered_bytes(codec) == 0


def test_random_read_sizes_yield_the_same_responses() -> None:
    from hypothesis import given, settings
    from hypothesis import strategies as st

    @settings(max_examples=60, deadline=None)
    @given(
        sizes=st.lists(st.integers(0, 120_000), min_size=1, max_size=6),
        cuts=st.lists(st.integers(1, 90_000), max_size=40),
    )
    def check(sizes: list[int], cuts: list[int]) -> None:
        codec = KafkaCodec("c")
        payloads = [bytes([i % 251]) * n for i, n in enumerate(sizes)]
        stream = b""
        for p in payloads:
            cid, _ = codec.send_request(m.ShareFetchRequest(), 1)
            stream += share_fetch_frame(cid, p)
        got = feed(codec, stream, cuts)
        assert [bytes(records_of(r)) for r in got] == payloads

    check()


def test_bad_size_after_good_frames_is_reported_after_those_frames() -> None:
    codec = KafkaCodec("c", max_frame_bytes=1000)
    c1, _ = codec.send_request(m.SaslHandshakeRequest(), 0)
    codec.send_request(m.SaslHandshakeRequest(), 0)
    good = frame(c1, m.SaslHandshakeResponse().encode(0), 0)
    receive_data(codec, good + struct.pack(">i", -7) + b"junk")
    item = codec.next_response()
    assert item is not NEED_DATA and not isinstance(item, type(NEED_DATA))
    assert item[0].correlation_id == c1
    with pytest.raises(CorruptMessageError, match="frame size -7"):
        codec.next_response()
    with pytest.raises(CorruptMessageError, match="unusable"):
        codec.get_buffer()


def test_buffered_bytes_counts_a_partial_large_frame() -> None:
    codec = KafkaCodec("c")
    cid, _ = codec.send_request(m.ShareFetchRequest(), 1)
    stream = share_fetch_frame(cid, bytes(200_000))
    receive_data(codec, stream[:150_000])
    assert buffered_bytes(codec) == 150_000
    with pytest.raises(CorruptMessageError, match="150000 bytes of an incomplete frame"):
        receive_eof(codec)


def test_frame_missing_bytes_counts_down_to_zero_as_the_frame_fills() -> None:
    codec = KafkaCodec("c")
    cid, _ = codec.send_request(m.ShareFetchRequest(), 1)
    stream = share_fetch_frame(cid, bytes(200_000))
    assert codec.frame_missing_bytes == 0
    receive_data(codec, stream[:2])  # half a size prefix: no frame yet
    assert codec.frame_missing_bytes == 0
    receive_data(codec, stream[2:150_000])
    assert codec.frame_missing_bytes == len(stream) - 150_000
    receive_data(codec, stream[150_000:])
    assert codec.frame_missing_bytes == 0
    assert isinstance(codec.next_response(), tuple)


def _one_response(codec: KafkaCodec, payload: bytes) -> m.ShareFetchResponse:
    cid, _ = codec.send_request(m.ShareFetchRequest(), 1)
    [resp] = feed(codec, share_fetch_frame(cid, payload), [70_000] * 100)
    assert isinstance(resp, m.ShareFetchResponse)
    return resp


def test_a_frame_buffer_is_reused_only_once_no_view_of_it_is_left() -> None:
    codec = KafkaCodec("c")
    first = _one_response(codec, b"a" * 200_000)
    first_buffer = records_of(first).obj
    # A view of the first response is alive (only a slice of it, from another
    # object): the next frame must get a buffer of its own.
    kept = records_of(first)[1000:1010]
    del first
    second = _one_response(codec, b"b" * 150_000)
    assert records_of(second).obj is not first_buffer
    assert bytes(kept) == b"a" * 10
    del kept
    # Nothing views the first buffer any more: the next frame that fits reuses it,
    # and the second response, still held, is untouched.
    third = _one_response(codec, b"c" * 180_000)
    assert records_of(third).obj is first_buffer
    assert bytes(records_of(third)) == b"c" * 180_000
    assert bytes(records_of(second)) == b"b" * 150_000
    # A frame larger than every free buffer gets a new one.
    del second
    fourth = _one_response(codec, b"d" * 300_000)
    assert records_of(fourth).obj is not first_buffer
    assert bytes(records_of(fourth)) == b"d" * 300_000
    assert bytes(records_of(third)) == b"c" * 180_000


def test_frame_buffers_above_the_reuse_limit_are_not_kept(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    import kafka_share.protocol.codec as codec_module

    monkeypatch.setattr(codec_module, "MAX_REUSED_FRAME_BYTES", 100_000)
    codec = KafkaCodec("c")
    first = _one_response(codec, b"a" * 200_000)
    first_buffer = records_of(first).obj
    del first
    second = _one_response(codec, b"b" * 150_000)
    assert records_of(second).obj is not first_buffer


_ALLOCATOR_CHURN = r"""
import resource, struct, sys
from kafka_share.protocol import codec as codec_module
from kafka_share.protocol.codec import KafkaCodec
if sys.argv[1] == "unshown":
    codec_module._show_allocator = lambda size: None
codec = KafkaCodec("c")
# A 6 MB response starts: its frame buffer is allocated (and kept for reuse).
buf = codec.get_buffer()
buf[:8] = struct.pack(">ii", 6 * 1024 * 1024, 1)
codec.buffer_updated(8)
before = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
for _ in range(40):  # the values of 40 polls of 500 x 10 KiB, made and dropped
    values = [bytes(10240) + b"x" for _ in range(500)]
    del values
print(resource.getrusage(resource.RUSAGE_SELF).ru_minflt - before)
"""


@pytest.mark.skipif(platform.libc_ver()[0] != "glibc", reason="glibc's malloc thresholds")
def test_a_large_frame_keeps_the_values_of_each_poll_from_being_trimmed_and_faulted_back() -> None:
    # Without the freed block, glibc trims the ~5 MB the values of one poll
    # leave free at the top of its heap, and the next poll faults them back in
    # (~1,250 faults a poll); with it, the heap keeps them.
    def faults(mode: str) -> int:
        done = subprocess.run([sys.executable, "-c", _ALLOCATOR_CHURN, mode],
                              capture_output=True, text=True, check=True, timeout=60)
        return int(done.stdout)

    assert faults("unshown") > 20_000
    assert faults("shown") < 5_000
