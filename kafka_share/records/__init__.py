"""Sans-IO Kafka record batches: decoding, CRC32C, compression and a builder.

* :mod:`~kafka_share.records.batch`: :func:`iter_batches` over a fetch
  response's ``records`` bytes, :class:`RecordBatch`, the error classes.
* :mod:`~kafka_share.records.row_decoder`: the records of a v2 batch, one tuple
  each (what :meth:`RecordBatch.records` calls).
* :mod:`~kafka_share.records.legacy`: legacy (magic 0 and 1) message sets.
* :mod:`~kafka_share.records.compression`: codecs with a decompressed-size cap.
* :mod:`~kafka_share.records.crc32c`: CRC32C (C accelerated, pure fallback).
* :mod:`~kafka_share.records.builder`: encoder for tests and fakes.
"""

from kafka_share.records.batch import (
    BatchCrcError,
    BatchIterator,
    ControlRecord,
    ControlRecordType,
    CorruptBatchError,
    Header,
    Record,
    RecordBatch,
    RecordShape,
    iter_batches,
)
from kafka_share.records.compression import (
    DEFAULT_MAX_DECOMPRESSED_BYTES,
    CompressionType,
    UnsupportedCodecError,
)

__all__ = [
    "DEFAULT_MAX_DECOMPRESSED_BYTES",
    "BatchCrcError",
    "BatchIterator",
    "CompressionType",
    "ControlRecord",
    "ControlRecordType",
    "CorruptBatchError",
    "Header",
    "Record",
    "RecordBatch",
    "RecordShape",
    "UnsupportedCodecError",
    "iter_batches",
]
