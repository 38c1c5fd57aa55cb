"""Record batch decode benchmark: records/s and microseconds per record.

Decodes batches of 500 records (100-byte and 1 KiB values, 16-byte keys, no
headers) the way the share consumer does: iter_batches() then records() for
every batch, for each codec with CRC checking on and off.

A second table (when numpy and pyarrow are installed) compares the columnar
decoder, ``decode_columns`` (the arrow path), with the row decoders
``records()`` and ``shaped_records()`` (ConsumerRecord tuples, what poll()
builds) on 500-record batches of 100 B, 1 KiB and 10 KiB values, CRC off.

    python benchmarks/bench_records.py          # full table
    python benchmarks/bench_records.py --quick  # fewer repetitions
    python benchmarks/bench_records.py --columnar-only
"""

from __future__ import annotations

import argparse
import os
import platform
import sys
import time
from collections.abc import Callable
from typing import Any

from kafka_share.models import ConsumerRecord, TimestampType
from kafka_share.records import CompressionType, RecordBatch, RecordShape, iter_batches
from kafka_share.records.builder import NewRecord, build_batch
from kafka_share.records.crc32c import accelerated

RECORDS_PER_BATCH = 500
BATCHES_PER_RESPONSE = 4


def make_response(value_size: int, codec: CompressionType) -> bytes:
    batches = []
    offset = 0
    for _ in range(BATCHES_PER_RESPONSE):
        recs = [
            # Half random, half repeated bytes: compresses roughly 2:1, like
            # typical JSON-ish payloads.
            NewRecord(
                key=os.urandom(8).hex().encode(),
                value=os.urandom(value_size // 2) + b"x" * (value_size - value_size // 2),
                timestamp=1_700_000_000_000 + i,
            )
            for i in range(RECORDS_PER_BATCH)
        ]
        batches.append(build_batch(recs, base_offset=offset, compression=codec))
        offset += RECORDS_PER_BATCH
    return b"".join(batches)


def decode(data: bytes | memoryview, check_crcs: bool) -> int:
    n = 0
    for batch in iter_batches(data, check_crcs=check_crcs):
        n += len(batch.records())
    return n


def measure(data: bytes | memoryview, check_crcs: bool, min_seconds: float) -> float:
    """Best µs per record over repeated runs lasting at least min_seconds."""
    best = float("inf")
    total_records = BATCHES_PER_RESPONSE * RECORDS_PER_BATCH
    deadline = time.perf_counter() + min_seconds
    runs = 0
    while runs < 5 or time.perf_counter() < deadline:
        t0 = time.perf_counter()
        n = decode(data, check_crcs)
        elapsed = time.perf_counter() - t0
        assert n == total_records
        best = min(best, elapsed / n)
        runs += 1
    return best * 1e6


def measure_batches(
    batches: list[RecordBatch], decode: Callable[[RecordBatch], Any], min_seconds: float
) -> tuple[float, float]:
    """(best, median) µs per record of ``decode`` over every batch, repeated."""
    total = sum(b.record_count for b in batches)
    times: list[float] = []
    deadline = time.perf_counter() + min_seconds
    while len(times) < 5 or time.perf_counter() < deadline:
        t0 = time.perf_counter()
        for batch in batches:
            decode(batch)
        times.append((time.perf_counter() - t0) / total * 1e6)
    times.sort()
    return times[0], times[len(times) // 2]


def columnar_table(min_seconds: float) -> None:
    try:
        from kafka_share.records.columnar import decode_columns
    except ImportError as exc:
        print(f"\n(columnar decoder skipped: {exc}; it needs the 'arrow' extra)")
        return
    shape = RecordShape(ConsumerRecord, "topic", 0, TimestampType.CREATE_TIME, None, 1)
    decoders: list[tuple[str, Callable[[RecordBatch], Any]]] = [
        ("records", RecordBatch.records),
        ("shaped", lambda b: b.shaped_records(shape)),
        ("columns", decode_columns),
    ]
    print(
        f"\ncolumnar vs row decoding, {RECORDS_PER_BATCH} records/batch, crc off, "
        "µs/record best (median)"
    )
    header = f"{'value':>6} {'codec':>6} " + " ".join(f"{name:>16}" for name, _ in decoders)
    print(header)
    print("-" * len(header))
    cases = [(100, CompressionType.NONE), (1024, CompressionType.NONE)]
    cases += [(10240, CompressionType.NONE), (1024, CompressionType.LZ4)]
    for value_size, codec in cases:
        batches = list(iter_batches(make_response(value_size, codec), check_crcs=False))
        cells = []
        for _, decode in decoders:
            best, median = measure_batches(batches, decode, min_seconds)
            cells.append(f"{best:>7.3f} ({median:>6.3f})")
        print(f"{value_size:>6} {codec.name.lower():>6} " + " ".join(cells))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="short runs (about 3 s in total)")
    parser.add_argument(
        "--columnar-only", action="store_true", help="only the columnar vs row table"
    )
    args = parser.parse_args(argv)
    min_seconds = 0.1 if args.quick else 1.0
    if args.columnar_only:
        columnar_table(min_seconds)
        return 0

    print(
        f"Python {platform.python_version()} ({platform.python_implementation()}), "
        f"{RECORDS_PER_BATCH} records/batch, crc32c accelerated: {accelerated()}"
    )
    header = (
        f"{'value':>6} {'codec':>6} {'input':>10} {'crc':>4} {'us/record':>10} {'records/s':>12}"
    )
    print(header)
    print("-" * len(header))
    for value_size in (100, 1024):
        for codec in (CompressionType.NONE, CompressionType.LZ4, CompressionType.ZSTD):
            data = make_response(value_size, codec)
            inputs: list[tuple[str, bytes | memoryview]] = [("bytes", data)]
            if codec is CompressionType.NONE:
                inputs.append(("memoryview", memoryview(data)))
            for label, buf in inputs:
                for check_crcs in (False, True):
                    us = measure(buf, check_crcs, min_seconds)
                    print(
                        f"{value_size:>6} {codec.name.lower():>6} {label:>10} "
                        f"{'on' if check_crcs else 'off':>4} {us:>10.3f} {1e6 / us:>12,.0f}"
                    )
    columnar_table(min_seconds)
    return 0


if __name__ == "__main__":
    sys.exit(main())
