"""Property tests: builder -> decoder round trips; arbitrary and mutated input
never escapes as anything but CorruptMessageError."""

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from kafka_share.errors import CorruptMessageError
from kafka_share.models import TimestampType
from kafka_share.records import CompressionType, iter_batches
from kafka_share.records.builder import NewRecord, build_batch, build_legacy_message_set

maybe_bytes = st.none() | st.binary(max_size=300)
headers = st.lists(st.tuples(st.text(max_size=10), maybe_bytes), max_size=4)
timestamps = st.integers(min_value=-(2**40), max_value=2**40)
records = st.lists(
    st.builds(NewRecord, key=maybe_bytes, value=maybe_bytes, headers=headers, timestamp=timestamps),
    max_size=30,
)


@settings(max_examples=300, deadline=None)
@given(
    recs=records,
    base_offset=st.integers(min_value=0, max_value=2**62),
    codec=st.sampled_from(list(CompressionType)),
    log_append=st.booleans(),
    leader_epoch=st.integers(min_value=-1, max_value=2**31 - 1),
)
def test_round_trip(
    recs: list[NewRecord], base_offset: int, codec: int, log_append: bool, leader_epoch: int
) -> None:
    ts_type = TimestampType.LOG_APPEND_TIME if log_append else TimestampType.CREATE_TIME
    data = build_batch(
        recs,
        base_offset=base_offset,
        compression=codec,
        timestamp_type=ts_type,
        log_append_time=123,
        partition_leader_epoch=leader_epoch,
    )
    [batch] = list(iter_batches(data, check_crcs=True))
    assert batch.partition_leader_epoch == leader_epoch
    assert batch.record_count == len(recs)
    decoded = batch.records()
    expected = [
        (
            base_offset + i,
            123 if log_append else r.timestamp,
            r.key,
            r.value,
            tuple(r.headers),
        )
        for i, r in enumerate(recs)
    ]
    assert decoded == expected


def _decode_all(data: bytes, check_crcs: bool) -> None:
    it = iter_batches(data, check_crcs=check_crcs, max_decompressed_bytes=1 << 20)
    while True:
        try:
            batch = next(it)
        except StopIteration:
            return
        except CorruptMessageError:
            continue  # CRC errors allow continuing; framing errors end the iterator
        try:
            batch.records()
            if batch.is_control:
                batch.control_records()
            _ = (batch.timestamp_type, batch.last_offset, batch.leader_epoch)
        except CorruptMessageError:
            pass


@settings(max_examples=500, deadline=None)
@given(data=st.binary(max_size=2000), check_crcs=st.booleans())
def test_random_bytes_only_corrupt_message_error(data: bytes, check_crcs: bool) -> None:
    _decode_all(data, check_crcs)


@st.composite
def valid_inputs(draw: st.DrawFn) -> bytes:
    kind = draw(st.sampled_from(["v2", "v2", "v2", "legacy"]))
    recs = draw(records.filter(bool))
    if kind == "v2":
        return build_batch(recs, compression=draw(st.sampled_from(list(CompressionType))))
    return build_legacy_message_set(
        [(r.key, r.value, r.timestamp or 0) for r in recs],
        magic=draw(st.sampled_from([0, 1])),
        compression=draw(st.sampled_from([0, 1, 2, 3])),
    )


@settings(max_examples=500, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    valid=valid_inputs(),
    edits=st.lists(
        st.tuples(st.integers(min_value=0), st.integers(min_value=0, max_value=255)),
        min_size=1,
        max_size=8,
    ),
    cut=st.none() | st.integers(min_value=0),
    check_crcs=st.booleans(),
)
def test_mutated_batches_only_corrupt_message_error(
    valid: bytes, edits: list[tuple[int, int]], cut: int | None, check_crcs: bool
) -> None:
    data = bytearray(valid)
    for pos, value in edits:
        data[pos % len(data)] = value
    if cut is not None:
        data = data[: cut % (len(data) + 1)]
    _decode_all(bytes(data), check_crcs)


@pytest.mark.parametrize("codec", list(CompressionType))
def test_every_single_byte_mutation_is_handled(codec: int) -> None:
    valid = build_batch(
        [NewRecord(key=b"key", value=b"value" * 10, headers=[("h", b"v")])] * 3,
        compression=codec,
    )
    for pos in range(len(valid)):
        for value in (0x00, 0x7F, 0x80, 0xFF, valid[pos] ^ 0x01):
            data = bytearray(valid)
            data[pos] = value
            _decode_all(bytes(data), check_crcs=False)
