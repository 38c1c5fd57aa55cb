"""Test helpers: reads and shortcuts the tests need and the package does not."""

from __future__ import annotations

from kafka_share.records.batch import _ATTR_CODEC, RecordBatch
from kafka_share.records.compression import CompressionType, _codec


def compression_type(batch: RecordBatch) -> CompressionType:
    """Codec of the records section; an unknown id raises ``UnsupportedCodecError``."""
    return _codec(batch.attributes & _ATTR_CODEC)


def delete_horizon_ms(batch: RecordBatch) -> int | None:
    """The delete horizon, when :attr:`has_delete_horizon`."""
    return batch.base_timestamp if batch.has_delete_horizon else None
