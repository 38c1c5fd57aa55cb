"""Reading a staged chunk's records back from the topics (exact replay).

A share group cannot hand the same records out twice, but the log can: a
re-run slot reads the offsets its chunks name with plain Fetch requests
(:meth:`kafka_share.admin.Admin.read_log`) and keeps exactly those records,
with the delivery counts staged with them. Records whose offsets are no longer
in the log (retention, compaction) fail the read with :class:`DataLossError`
naming them, or, with ``failOnDataLoss=false``, are skipped with a warning.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from typing import Any

import pyarrow as pa

from kafka_share._log import offset_ranges
from kafka_share.admin import Admin, OffsetSpec
from kafka_share.errors import KafkaError, OffsetOutOfRangeError
from kafka_share.models import TopicPartition
from kafka_share.records import iter_batches
from kafka_share.spark._arrow import arrow_schema
from kafka_share.spark._staging import Span

__all__ = ["DataLossError", "replay_spans"]

log = logging.getLogger("kafka_share.spark")

#: Bytes asked for per Fetch while replaying.
_FETCH_BYTES = 4 << 20
#: How long one Fetch (with its retries) of a replay may take.
_FETCH_TIMEOUT_S = 60.0


class DataLossError(KafkaError):
    """Records of a staged batch are gone from the log (retention or compaction)."""


class _Rows:
    """Columns of the source's Arrow schema, filled row by row."""

    def __init__(self) -> None:
        self.cols: dict[str, list[Any]] = {n: [] for n in (
            "key", "value", "topic", "partition", "offset", "timestamp", "timestampType",
            "headers", "deliveryCount")}

    def add(self, topic: str, partition: int, record: Any, ts_type: int, count: int) -> None:
        offset, timestamp, key, value, headers = record
        c = self.cols
        c["key"].append(key)
        c["value"].append(value)
        c["topic"].append(topic)
        c["partition"].append(partition)
        c["offset"].append(offset)
        c["timestamp"].append(timestamp * 1000 if timestamp >= 0 else None)
        c["timestampType"].append(ts_type)
        c["headers"].append([{"key": k, "value": v} for k, v in headers])
        c["deliveryCount"].append(count)

    def table(self, include_headers: bool) -> Any:
        schema = arrow_schema(include_headers)
        return pa.Table.from_arrays(
            [pa.array(self.cols[f.name], type=f.type) for f in schema], schema=schema
        )


def _wanted(spans: Sequence[Span]) -> dict[TopicPartition, dict[int, int]]:
    """Offset -> delivery count, by partition."""
    out: dict[TopicPartition, dict[int, int]] = {}
    for topic, partition, first, last, count in spans:
        offsets = out.setdefault(TopicPartition(topic, partition), {})
        for offset in range(first, last + 1):
            offsets[offset] = count
    return out


def replay_spans(
    admin: Admin,
    spans: Sequence[Span],
    *,
    include_headers: bool,
    fail_on_data_loss: bool,
    check_crcs: bool = True,
) -> Any:
    """The records of ``spans`` as one Arrow table of the source's schema.

    Raises:
        DataLossError: some of the offsets are no longer in the log (unless
            ``fail_on_data_loss`` is False: then they are skipped, with a warning).
    """
    rows = _Rows()
    for tp, wanted in sorted(_wanted(spans).items()):
        missing = _read_partition(admin, tp, wanted, rows, check_crcs)
        if missing:
            _lost(tp, missing, fail_on_data_loss)
    return rows.table(include_headers)


def _read_partition(
    admin: Admin, tp: TopicPartition, wanted: dict[int, int], rows: _Rows, check_crcs: bool
) -> list[int]:
    """Add the wanted records of one partition to ``rows``; the offsets not found."""
    found: set[int] = set()
    last_wanted = max(wanted)
    position = min(wanted)
    while position <= last_wanted:
        try:
            # read_uncommitted: only staged offsets are kept, and those were all
            # delivered under the group's isolation level already.
            piece = admin.read_log(tp, position, max_bytes=_FETCH_BYTES,
                                   timeout=_FETCH_TIMEOUT_S)
        except OffsetOutOfRangeError:
            start = admin.list_offsets({tp: OffsetSpec.earliest()},
                                       timeout=_FETCH_TIMEOUT_S)[tp].offset
            if start <= position:
                raise  # past the end: the log was truncated (unclean leader election)
            position = start  # deleted by retention up to `start`
            continue
        next_position = position
        for batch in iter_batches(piece.records, check_crcs=check_crcs):
            next_position = max(next_position, batch.next_offset)
            if batch.is_control or batch.next_offset <= position:
                continue
            ts_type = int(batch.timestamp_type)
            for record in batch.records():
                count = wanted.get(record[0])
                if count is not None and record[0] not in found:
                    found.add(record[0])
                    rows.add(tp.topic, tp.partition, record, ts_type, count)
        if next_position == position:
            break  # nothing more in the log
        position = next_position
    return sorted(set(wanted) - found)


def _lost(tp: TopicPartition, missing: list[int], fail: bool) -> None:
    ranges = offset_ranges(missing)
    text = (
        f"{len(missing)} records of a staged batch are no longer in the log of {tp} "
        f"(offsets {ranges}): deleted by retention or compaction before the batch was re-run"
    )
    if fail:
        raise DataLossError(
            f"{text}. The re-run batch cannot hold the rows it had; set the source option "
            "failOnDataLoss=false to skip them (with a warning), or raise the topic's retention"
        )
    log.warning("%s; skipped (failOnDataLoss=false)", text)
