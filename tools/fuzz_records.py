"""Time-bounded mutation fuzzing of the record batch decoder.

Builds valid inputs (RecordBatch v2 for every codec, control batches, legacy
v0/v1 message sets, several batches per input), mutates them (byte flips,
random bytes, truncation, splices, length-field edits) and decodes them.
Anything other than records or ``CorruptMessageError`` is an unexpected
exception: it is printed with the input in hex, and the exit status is 1.

Every input is timed too: decoding must take time linear in what it reads and
writes (the input, and the decompressed bytes, capped at 4 MiB per batch). An
input slower than ``--bound-us-per-kib`` microseconds per KiB of input plus
decompressed bytes (after a fixed ``--bound-base-ms``) is a failure as well;
the report gives the worst inputs' sizes and times.

    python tools/fuzz_records.py --seconds 60 [--seed N]
"""

from __future__ import annotations

import argparse
import random
import struct
import sys
import time
import traceback

from kafka_share.errors import CorruptMessageError
from kafka_share.records import CompressionType, ControlRecordType, iter_batches
from kafka_share.records.builder import (
    NewRecord,
    build_batch,
    build_control_batch,
    build_legacy_message_set,
)

# Per-batch cap during fuzzing: keeps mutated length fields from inflating far.
_CAP = 4 * 1024 * 1024


def _random_record(rng: random.Random) -> NewRecord:
    def blob() -> bytes | None:
        return None if rng.random() < 0.1 else rng.randbytes(rng.choice([0, 1, 5, 60, 300]))

    headers = [(f"h{i}", blob()) for i in range(rng.choice([0, 0, 1, 3]))]
    return NewRecord(
        key=blob(), value=blob(), headers=headers, timestamp=rng.randint(-(2**33), 2**41)
    )


def make_corpus(rng: random.Random, size: int = 200) -> list[bytes]:
    """Valid inputs covering every codec and batch kind."""
    corpus = []
    for i in range(size):
        kind = i % 5
        recs = [_random_record(rng) for _ in range(rng.randint(1, 12))]
        if kind in (0, 1, 2):
            data = build_batch(
                recs,
                base_offset=rng.randint(0, 2**40),
                compression=CompressionType(i % 5),
                is_transactional=rng.random() < 0.3,
                partition_leader_epoch=rng.randint(-1, 100),
            )
            data += build_batch(recs[:2], base_offset=rng.randint(0, 2**40))
        elif kind == 3:
            data = build_control_batch(
                base_offset=rng.randint(0, 2**40),
                control_type=rng.choice(list(ControlRecordType)),
            )
        else:
            data = build_legacy_message_set(
                [(r.key, r.value, r.timestamp or 0) for r in recs],
                magic=rng.choice([0, 1]),
                compression=rng.choice([0, 1, 2, 3]),
            )
        corpus.append(data)
    # A few large inputs (hundreds of KiB, every codec): time per input must
    # grow with the size, not faster.
    for codec in CompressionType:
        recs = [NewRecord(value=rng.randbytes(64) * rng.randint(1, 8)) for _ in range(2_000)]
        corpus.append(build_batch(recs, base_offset=rng.randint(0, 2**40), compression=codec))
    return corpus


def mutate(rng: random.Random, data: bytes, corpus: list[bytes]) -> bytes:
    buf = bytearray(data)
    for _ in range(rng.randint(1, 4)):
        if not buf:
            break
        op = rng.randrange(7)
        pos = rng.randrange(len(buf))
        if op == 0:
            buf[pos] ^= 1 << rng.randrange(8)
        elif op == 1:
            buf[pos] = rng.choice([0x00, 0x01, 0x7F, 0x80, 0xFF, rng.randrange(256)])
        elif op == 2:
            del buf[pos:]
        elif op == 3:
            other = rng.choice(corpus)
            start = rng.randrange(len(other))
            buf[pos:pos] = other[start : start + rng.randint(1, 64)]
        elif op == 4 and len(buf) >= 12:
            # Rewrite a batch length or record count with an edge value.
            field = rng.choice([8, 57]) if len(buf) >= 61 else 8
            struct.pack_into(
                ">i", buf, field, rng.choice([-1, 0, 1, 48, 49, 2**31 - 1, rng.randrange(2**16)])
            )
        elif op == 5:
            buf[pos : pos + rng.randint(1, 16)] = rng.randbytes(rng.randint(0, 16))
        else:
            del buf[pos : pos + rng.randint(1, 8)]
    return bytes(buf)


def decode_all(data: bytes, check_crcs: bool) -> tuple[int, int]:
    """Decode everything; return the number of records and the bytes their
    keys, values and headers hold. Raises only unexpected errors."""
    n = 0
    size = 0
    it = iter_batches(data, check_crcs=check_crcs, max_decompressed_bytes=_CAP)
    while True:
        try:
            batch = next(it)
        except StopIteration:
            return n, size
        except CorruptMessageError:
            continue
        try:
            records = batch.records()
            n += len(records)
            size += sum(len(r[2] or b"") + len(r[3] or b"") for r in records)
            if batch.is_control:
                batch.control_records()
            _ = (batch.timestamp_type, batch.last_offset, batch.leader_epoch, repr(batch))
        except CorruptMessageError:
            pass


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--seconds", type=float, default=10.0, help="how long to run")
    parser.add_argument("--seed", type=int, default=None, help="random seed (default: random)")
    parser.add_argument("--bound-base-ms", type=float, default=20.0,
                        help="fixed time allowed per input (interpreter noise, GC)")
    parser.add_argument("--bound-us-per-kib", type=float, default=200.0,
                        help="time allowed per KiB read or produced by an input")
    args = parser.parse_args(argv)
    seed = args.seed if args.seed is not None else random.randrange(2**32)
    rng = random.Random(seed)
    corpus = make_corpus(rng)
    for data in corpus:  # sanity: the corpus itself decodes cleanly
        decode_all(data, check_crcs=True)

    inputs = 0
    records = 0
    unexpected = 0
    too_slow = 0
    #: (seconds, input bytes, decoded bytes) of the slowest inputs
    worst: list[tuple[float, int, int]] = []
    start = time.perf_counter()
    deadline = start + args.seconds
    while time.perf_counter() < deadline:
        data = mutate(rng, rng.choice(corpus), corpus)
        check = rng.random() < 0.5
        t0 = time.perf_counter()
        decoded = 0
        try:
            n, decoded = decode_all(data, check)
            records += n
        except Exception:
            unexpected += 1
            print(f"UNEXPECTED exception (check_crcs={check}) for input {data.hex()}")
            traceback.print_exc()
            if unexpected >= 10:
                break
        took = time.perf_counter() - t0
        bound = (args.bound_base_ms / 1e3
                 + args.bound_us_per_kib / 1e6 * (len(data) + decoded) / 1024)
        if took > bound:
            too_slow += 1
            print(f"TOO SLOW: {took * 1e3:.1f} ms (bound {bound * 1e3:.1f} ms) for "
                  f"{len(data)} B in, {decoded} B decoded: {data.hex()}")
        worst = sorted([*worst, (took, len(data), decoded)], reverse=True)[:5]
        inputs += 1
    elapsed = time.perf_counter() - start
    print(
        f"seed {seed}: {inputs} inputs in {elapsed:.1f} s ({inputs / elapsed:,.0f} inputs/s), "
        f"{records} records decoded, unexpected exceptions: {unexpected}, "
        f"slower than the bound: {too_slow}"
    )
    print("slowest inputs: " + "; ".join(
        f"{t * 1e3:.1f} ms for {n_in:,} B in, {n_out:,} B decoded" for t, n_in, n_out in worst
    ))
    return 1 if unexpected or too_slow else 0


if __name__ == "__main__":
    sys.exit(main())
