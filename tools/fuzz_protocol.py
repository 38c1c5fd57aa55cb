#!/usr/bin/env python3
"""Time-bounded mutation fuzzer for the generated protocol decoders.

Builds random valid messages for every (message, version) from the TOML
schemas, encodes them, mutates the bytes (flips, overwrites, truncation,
insertion, length-prefix extremes) and feeds them to ``decode``. The only
acceptable outcomes are a decoded value or ``CorruptMessageError``; anything
else is counted and printed as a failure. Each input is timed: one slower than
``--bound-base-ms`` plus ``--bound-us-per-kib`` per KiB of input (a length
field that makes the decoder loop or allocate past what the input holds) is a
failure too; the report names the slowest.

Usage: python tools/fuzz_protocol.py --seconds 60 [--seed N]
"""

from __future__ import annotations

import argparse
import random
import re
import sys
import time
import tomllib
import traceback
import uuid
from pathlib import Path
from typing import Any

from kafka_share.errors import CorruptMessageError
from kafka_share.protocol import messages

SCHEMA_DIR = Path(messages.__file__).parent / "schemas"
_INTS = {
    "int8": (-(2**7), 2**7 - 1),
    "int16": (-(2**15), 2**15 - 1),
    "int32": (-(2**31), 2**31 - 1),
    "int64": (-(2**63), 2**63 - 1),
    "uint16": (0, 2**16 - 1),
    "uint32": (0, 2**32 - 1),
}


def _in(spec: str | None, v: int) -> bool:
    if spec is None or spec == "none":
        return False
    if spec.endswith("+"):
        return v >= int(spec[:-1])
    if "-" in spec:
        a, b = spec.split("-")
        return int(a) <= v <= int(b)
    return v == int(spec)


def _snake(name: str) -> str:
    s = re.sub(r"([A-Z]+)([A-Z][a-z])", r"\1_\2", name)
    return re.sub(r"([a-z0-9])([A-Z])", r"\1_\2", s).lower()


def _scalar(rng: random.Random, t: str) -> Any:
    if t in _INTS:
        lo, hi = _INTS[t]
        if lo < 0:
            return rng.choice([0, -1, 1, lo, hi, rng.randint(lo, hi)])
        return rng.randint(lo, hi)
    if t == "bool":
        return rng.random() < 0.5
    if t == "float64":
        return rng.uniform(-1e9, 1e9)
    if t == "string":
        return "".join(rng.choice("abcé_.-") for _ in range(rng.randint(0, 10)))
    if t in ("bytes", "records"):
        return rng.randbytes(rng.randint(0, 30))
    if t == "uuid":
        return uuid.UUID(int=rng.getrandbits(128))
    raise AssertionError(t)


def random_message(rng: random.Random, schema: dict[str, Any], version: int) -> Any:
    cls = getattr(messages, schema["name"])
    commons = {c["name"]: c for c in schema.get("common_structs", [])}

    def build(pycls: Any, fields: list[dict[str, Any]], depth: int) -> Any:
        kw: dict[str, Any] = {}
        for f in fields:
            if not _in(f["versions"], version):
                continue
            t: str = f["type"]
            elem = t[2:] if t.startswith("[]") else t
            if _in(f.get("nullable_versions"), version) and rng.random() < 0.2:
                kw[_snake(f["name"])] = None
                continue

            def one(elem: str = elem, f: dict[str, Any] = f) -> Any:
                if "fields" in f or elem in commons:
                    sub = f.get("fields") or commons[elem]["fields"]
                    return build(getattr(cls, elem), sub, depth + 1)
                return _scalar(rng, elem)

            if t.startswith("[]"):
                count = rng.randint(0, 3 if depth < 3 else 1)
                kw[_snake(f["name"])] = [one() for _ in range(count)]
            else:
                kw[_snake(f["name"])] = one()
        return pycls(**kw)

    return build(cls, schema["fields"], 0)


def mutate(rng: random.Random, data: bytes) -> bytes:
    buf = bytearray(data)
    for _ in range(rng.randint(1, 4)):
        op = rng.randrange(6)
        if op == 0 and buf:
            buf[rng.randrange(len(buf))] ^= 1 << rng.randrange(8)
        elif op == 1 and buf:
            buf[rng.randrange(len(buf))] = rng.choice([0x00, 0x7F, 0x80, 0xFF, rng.randrange(256)])
        elif op == 2:
            del buf[rng.randint(0, len(buf)) :]
        elif op == 3:
            i = rng.randint(0, len(buf))
            buf[i:i] = rng.randbytes(rng.randint(1, 8))
        elif op == 4 and len(buf) >= 4:
            i = rng.randrange(len(buf) - 3)
            extremes = [b"\x7f\xff\xff\xff", b"\xff\xff\xff\xfe", b"\xff\xff\xff\x0f"]
            buf[i : i + 4] = rng.choice(extremes)
        elif op == 5 and buf:
            i = rng.randrange(len(buf))
            del buf[i : i + rng.randint(1, 8)]
    return bytes(buf)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="Fuzz the protocol decoders.")
    parser.add_argument("--seconds", type=float, default=60.0)
    parser.add_argument("--seed", type=int, default=None)
    parser.add_argument("--bound-base-ms", type=float, default=20.0)
    parser.add_argument("--bound-us-per-kib", type=float, default=200.0)
    args = parser.parse_args(argv)
    seed = args.seed if args.seed is not None else random.randrange(2**32)
    rng = random.Random(seed)
    schemas = [tomllib.loads(p.read_text()) for p in sorted(SCHEMA_DIR.glob("*.toml"))]
    targets: list[tuple[dict[str, Any], Any, int]] = []
    for s in schemas:
        cls = getattr(messages, s["name"])
        targets += [(s, cls, v) for v in range(cls.MIN_VERSION, cls.MAX_VERSION + 1)]
    inputs = decoded = rejected = 0
    failures: list[str] = []
    #: (seconds, input bytes, message and version) of the slowest inputs
    worst: list[tuple[float, int, str]] = []
    deadline = time.monotonic() + args.seconds
    start = time.monotonic()
    while time.monotonic() < deadline:
        schema, cls, version = rng.choice(targets)
        valid = random_message(rng, schema, version).encode(version)
        for _ in range(50):
            data = mutate(rng, valid)
            inputs += 1
            t0 = time.perf_counter()
            try:
                cls.decode(data, version)
                decoded += 1
            except CorruptMessageError:
                rejected += 1
            except Exception:
                failures.append(
                    f"{cls.__name__} v{version} input={data.hex()}\n{traceback.format_exc()}"
                )
            took = time.perf_counter() - t0
            bound = args.bound_base_ms / 1e3 + args.bound_us_per_kib / 1e6 * len(data) / 1024
            if took > bound:
                failures.append(f"{cls.__name__} v{version}: {took * 1e3:.1f} ms for "
                                f"{len(data)} B (bound {bound * 1e3:.1f} ms) input={data.hex()}")
            if not worst or took > worst[-1][0]:
                worst = sorted([*worst, (took, len(data), f"{cls.__name__} v{version}")],
                               reverse=True)[:5]
    elapsed = time.monotonic() - start
    print(
        f"seed={seed} targets={len(targets)} inputs={inputs} in {elapsed:.1f}s "
        f"({inputs / elapsed:,.0f} inputs/s): decoded={decoded} "
        f"CorruptMessageError={rejected} failures (other exceptions, too slow)={len(failures)}"
    )
    print("slowest inputs: " + "; ".join(
        f"{t * 1e3:.2f} ms for {n:,} B ({what})" for t, n, what in worst
    ))
    for f in failures[:5]:
        print(f, file=sys.stderr)
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
