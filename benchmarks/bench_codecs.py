"""Decompression libraries side by side: which one should decode each codec?

kafka-share decodes snappy with cramjam, lz4 with ``lz4.frame`` and zstd with
``zstandard`` (gzip with the standard library's zlib). cramjam can also decode
lz4 and zstd, so the two extra dependencies are only worth keeping while they
are measurably faster on the consumer's hot path. This prints microseconds per
MiB of decompressed data (best of many runs) for:

* ``kafka-share``: :func:`kafka_share.records.compression.decompress`, the
  bounded decoder the consumer runs (it enforces the decompressed-size cap);
* the codec library's plain one-shot call (no cap), for reference;
* cramjam's one-shot call, converted to ``bytes`` as the decoder needs.

The payload is 1 MiB of JSON-like records with long padded fields (it compresses
about 18:1 with lz4; the compressed sizes are printed).

    python benchmarks/bench_codecs.py
"""

from __future__ import annotations

import argparse
import json
import platform
import random
import sys
import time
from collections.abc import Callable

import cramjam
import lz4.frame
import zstandard

from kafka_share.records.compression import (
    DEFAULT_MAX_DECOMPRESSED_BYTES,
    CompressionType,
    compress,
    decompress,
)

MIB = 1 << 20


def payload() -> bytes:
    rng = random.Random(1)
    parts = []
    size = 0
    i = 0
    while size < MIB:
        part = json.dumps({
            "id": i,
            "user": f"user{rng.randrange(10_000)}",
            "score": rng.random(),
            "note": "x" * rng.randrange(200, 900),
        }).encode()
        parts.append(part)
        size += len(part)
        i += 1
    return b"".join(parts)[:MIB]


def best_us(fn: Callable[[], object], min_seconds: float) -> float:
    best = float("inf")
    runs = 0
    deadline = time.perf_counter() + min_seconds
    while runs < 10 or time.perf_counter() < deadline:
        t0 = time.perf_counter()
        fn()
        best = min(best, time.perf_counter() - t0)
        runs += 1
    return best * 1e6


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seconds", type=float, default=1.0, help="per measurement")
    args = parser.parse_args(argv)
    data = payload()
    cap = DEFAULT_MAX_DECOMPRESSED_BYTES
    lz4_frame = compress(CompressionType.LZ4, data)
    zstd_frame = compress(CompressionType.ZSTD, data)
    snappy_framed = compress(CompressionType.SNAPPY, data)
    rows: list[tuple[str, str, Callable[[], object]]] = [
        ("lz4", "kafka-share (lz4.frame, capped)",
         lambda: decompress(CompressionType.LZ4, lz4_frame, cap)),
        ("lz4", "lz4.frame.decompress", lambda: lz4.frame.decompress(lz4_frame)),
        ("lz4", "cramjam.lz4.decompress", lambda: bytes(cramjam.lz4.decompress(lz4_frame))),
        ("zstd", "kafka-share (zstandard, capped)",
         lambda: decompress(CompressionType.ZSTD, zstd_frame, cap)),
        ("zstd", "zstandard one-shot",
         lambda: zstandard.ZstdDecompressor().decompress(zstd_frame)),
        ("zstd", "cramjam.zstd.decompress", lambda: bytes(cramjam.zstd.decompress(zstd_frame))),
        ("snappy", "kafka-share (cramjam, xerial framing, capped)",
         lambda: decompress(CompressionType.SNAPPY, snappy_framed, cap)),
    ]
    print(f"Python {platform.python_version()}, {platform.machine()}; 1 MiB payload; "
          f"lz4 {len(lz4_frame):,} B, zstd {len(zstd_frame):,} B, "
          f"snappy {len(snappy_framed):,} B compressed")
    print(f"{'codec':7} {'decoder':48} {'us/MiB':>9}")
    for codec, name, fn in rows:
        assert bytes(fn()) == data  # type: ignore[call-overload]
        print(f"{codec:7} {name:48} {best_us(fn, args.seconds):9.1f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
