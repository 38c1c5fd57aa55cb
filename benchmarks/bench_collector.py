"""Collector benchmark: microseconds per record from completed fetch to poll's records.

Drives ``FetchCollector.collect`` the way a poll does (no broker): 20 completed
fetches of 967 records (about a 1 MiB fetch of 1 KiB records), 16-byte keys,
100-byte and 1 KiB values, no headers, every offset acquired, 500 records per
poll. Only the ``collect`` calls are timed, in CPU time of the thread
(``time.thread_time``: other processes on a busy machine do not count); the
acknowledgements the in-flight batch collects are taken between them, untimed.
Best of 7 runs per case.

Batch layouts: ``16k``, record batches of about 16 KiB (the producer's default
``batch.size``: many small batches, so per-batch costs show), and ``one``, the
whole fetch in one batch (decoded in pieces of ``_DECODE_CHUNK_RECORDS``).

Modes: ``rows`` (``poll``, numpy-backed decoding of large batches of small
records when numpy is installed), ``python`` (``record.decoder=python``),
``deser`` (``rows`` with a value deserializer: one call per record),
``sliced`` (``rows`` decoded a slice at a time, as the asyncio consumer does)
and ``columnar`` (``poll_arrow``; needs the ``arrow`` extra).

    python benchmarks/bench_collector.py
    python benchmarks/bench_collector.py --runs 3 --mode rows
"""

from __future__ import annotations

import argparse
import os
import platform
import sys
import time
import uuid
from typing import Any

from kafka_share._app.collector import FetchCollector
from kafka_share._app.in_flight import InFlightBatch
from kafka_share._handoff.events import CompletedShareFetch
from kafka_share._handoff.fetch_buffer import FetchBuffer
from kafka_share.models import AcknowledgeType, TopicIdPartition
from kafka_share.records.builder import NewRecord, build_batch

FETCHES = 20
RECORDS_PER_FETCH = 967
MAX_POLL_RECORDS = 500
PRODUCER_BATCH_BYTES = 16384
KEY_BYTES = 16
TIP = TopicIdPartition(uuid.UUID(int=7), "bench", 0)
NODE = 1
MODES = ("rows", "python", "deser", "sliced", "columnar")
LAYOUTS = ("16k", "one")


def make_fetches(value_size: int, layout: str) -> list[tuple[bytes, int]]:
    """(records section, base offset) of each fetch, offsets following on."""
    per_batch = (
        RECORDS_PER_FETCH if layout == "one"
        else max(1, PRODUCER_BATCH_BYTES // (value_size + KEY_BYTES + 10))
    )
    fetches = []
    offset = 0
    for _ in range(FETCHES):
        base = offset
        batches = []
        left = RECORDS_PER_FETCH
        while left:
            n = min(per_batch, left)
            recs = [
                NewRecord(
                    key=os.urandom(KEY_BYTES // 2).hex().encode(),
                    value=os.urandom(value_size),
                    timestamp=1_700_000_000_000 + offset + i,
                )
                for i in range(n)
            ]
            batches.append(build_batch(recs, base_offset=offset))
            offset += n
            left -= n
        fetches.append((b"".join(batches), base))
    return fetches


def run_once(fetches: list[tuple[bytes, int]], mode: str) -> float:
    """CPU seconds spent in ``collect`` delivering every record of ``fetches`` once."""
    buffer: FetchBuffer[CompletedShareFetch] = FetchBuffer()
    in_flight = InFlightBatch(record_spans=True)
    collector: FetchCollector[Any, Any] = FetchCollector(
        buffer=buffer,
        in_flight=in_flight,
        key_deserializer=None,
        value_deserializer=(lambda b: b) if mode == "deser" else None,
        check_crcs=True,
        max_poll_records=MAX_POLL_RECORDS,
        sliced_decoding=mode == "sliced",
        vectorised=mode != "python",
    )
    collector.columnar = mode == "columnar"
    buffer.add_all([
        CompletedShareFetch(
            NODE, TIP, memoryview(data), [(base, base + RECORDS_PER_FETCH - 1, 1)]
        )
        for data, base in fetches
    ])
    delivered = 0
    elapsed = 0.0
    clock = time.thread_time
    while collector.has_buffered():
        t0 = clock()
        result = collector.collect()
        elapsed += clock() - t0
        delivered += result.records.count()
        in_flight.acknowledge_all(AcknowledgeType.ACCEPT)
        in_flight.take_acknowledgements()
    assert delivered == FETCHES * RECORDS_PER_FETCH, delivered
    return elapsed


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=7, help="runs per case (the best counts)")
    parser.add_argument("--mode", choices=MODES, action="append", help="only these modes")
    args = parser.parse_args(argv)
    modes = args.mode or list(MODES)
    if "columnar" in modes:
        try:
            import pyarrow  # noqa: F401
        except ImportError:
            print("(columnar skipped: it needs the 'arrow' extra)")
            modes.remove("columnar")
    print(
        f"Python {platform.python_version()} ({platform.python_implementation()}), "
        f"{FETCHES} fetches x {RECORDS_PER_FETCH} records, best of {args.runs}, µs/record"
    )
    header = f"{'value':>6} {'batches':>7} " + " ".join(f"{m:>9}" for m in modes)
    print(header)
    print("-" * len(header))
    total = FETCHES * RECORDS_PER_FETCH
    for value_size in (100, 1024):
        for layout in LAYOUTS:
            fetches = make_fetches(value_size, layout)
            cells = []
            for mode in modes:
                best = min(run_once(fetches, mode) for _ in range(args.runs))
                cells.append(f"{best / total * 1e6:>9.3f}")
            print(f"{value_size:>6} {layout:>7} " + " ".join(cells))
    return 0


if __name__ == "__main__":
    sys.exit(main())
