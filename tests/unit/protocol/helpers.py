"""Test helpers: reads and shortcuts the tests need and the package does not."""

from __future__ import annotations

from kafka_share.errors import UnsupportedVersionError
from kafka_share.protocol.api_keys import (
    _SHARE_HINT,
    SHARE_API_KEYS,
    SHARE_VERSION_FEATURE,
    ApiKey,
    ApiVersionsTable,
)
from kafka_share.protocol.codec import KafkaCodec


def require_share_groups(table: ApiVersionsTable) -> None:
    """Check the broker can serve share groups before the first heartbeat.

    Raises:
        UnsupportedVersionError: a share RPC has no common version, or the
            broker reports finalized features and ``share.version`` is not >= 1.
    """
    for key in sorted(SHARE_API_KEYS):
        if key in (ApiKey.SHARE_GROUP_DESCRIBE,):
            continue  # admin only; not needed by a consumer
        table.version_for(key)
    if table.finalized_features and table.finalized_features.get(SHARE_VERSION_FEATURE, 0) < 1:
        raise UnsupportedVersionError(
            f"the cluster's finalized {SHARE_VERSION_FEATURE} is "
            f"{table.finalized_features.get(SHARE_VERSION_FEATURE, 0)}; {_SHARE_HINT}"
        )


def receive_data(codec: KafkaCodec, data: bytes | bytearray | memoryview) -> None:
    """Buffer bytes read from the socket (any chunk size, including empty)."""
    codec._check_usable()
    with memoryview(data) as view:
        pos = 0
        total = len(view)
        while pos < total and codec._deferred is None:
            with codec.get_buffer() as buf:
                n = min(len(buf), total - pos)
                buf[:n] = view[pos : pos + n]
            codec.buffer_updated(n)
            pos += n


def receive_eof(codec: KafkaCodec) -> None:
    """Tell the codec the peer closed the connection.

    Raises:
        CorruptMessageError: the connection closed in the middle of a frame.
    """
    if codec._broken is None and buffered_bytes(codec):
        codec._fail(
            f"connection closed with {buffered_bytes(codec)} bytes of an incomplete frame"
        )


def in_flight_count(codec: KafkaCodec) -> int:
    """Requests sent whose responses have not been returned yet."""
    return len(codec._in_flight)


def buffered_bytes(codec: KafkaCodec) -> int:
    """Received bytes not yet consumed as a complete response."""
    pending = codec._ready_bytes + codec._s_end - codec._s_start
    if codec._frame is not None:
        pending += 4 + codec._frame_fill
    return pending
