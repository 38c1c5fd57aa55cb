"""Where a client's CPU goes, by native layer: the ``perf record`` file a worker
wrote over the steady part of its run (``worker.py --perf-record``), read back
as CPU microseconds per record in the kernel, the C library, the Python
interpreter, librdkafka and the rest, with the symbols that cost most.

This answers what a profile of Python code cannot: whether a client pays more
than another for the same work (the kernel's copy of received bytes, copying
values into ``bytes`` objects) or for work only it does (interpreting Python).
Needs ``perf`` (Linux) and the permission to attach to a process.
"""

from __future__ import annotations

import bisect
import shutil
import subprocess
from collections import Counter
from typing import Any

#: (layer, what a sample's DSO path contains), first match wins
_LAYERS = (
    ("kernel", "[kernel"),
    ("interpreter", "libpython"),
    ("librdkafka", "librdkafka"),
    ("librdkafka", "confluent_kafka"),
    ("C library", "libc.so"),
    ("C library", "libc-"),
)
LAYER_NAMES = ("kernel", "C library", "interpreter", "librdkafka", "other")
_TOP_SYMBOLS = 6


def perf_missing() -> str | None:
    """Why ``perf`` cannot be used here, or None."""
    if shutil.which("perf") is None:
        return "perf is not installed"
    return None


def layer_of(dso: str) -> str:
    for layer, needle in _LAYERS:
        if needle in dso:
            return layer
    return "other"


def _samples(path: str) -> list[tuple[float, str, str]]:
    """(time, symbol, DSO) of each sample in ``path``."""
    out = subprocess.run(
        ["perf", "script", "-i", path, "-F", "time,ip,sym,dso"],
        capture_output=True, text=True, check=True,
    ).stdout
    samples = []
    for line in out.splitlines():
        # "  33369.663515:      7f40f5b75d16 float_richcompare (/path/libpython3.11.so)"
        stamp, _, rest = line.strip().partition(":")
        fields = rest.split()
        if len(fields) < 2:
            continue
        dso = fields[-1].strip("()")
        symbol = fields[1] if len(fields) > 2 else "[unknown]"
        samples.append((float(stamp), symbol, dso))
    return samples


def _records_between(trajectory: list[list[float]], start: float, end: float) -> float:
    """Records consumed between two monotonic times, interpolated along
    ``trajectory`` ((time, records so far) pairs)."""
    times = [t for t, _ in trajectory]

    def at(moment: float) -> float:
        i = bisect.bisect_left(times, moment)
        if i <= 0:
            return trajectory[0][1]
        if i >= len(times):
            return trajectory[-1][1]
        (t0, c0), (t1, c1) = trajectory[i - 1], trajectory[i]
        return c0 + (c1 - c0) * (moment - t0) / (t1 - t0) if t1 > t0 else c1

    return at(end) - at(start)


def layers(perf: dict[str, Any]) -> dict[str, Any]:
    """µs of CPU per record by layer and for the costliest symbols, from a
    worker's ``perf`` result (its file, sampling rate and trajectory)."""
    if perf.get("error"):
        raise RuntimeError(perf["error"])
    samples = _samples(perf["path"])
    if len(samples) < 100 or len(perf["trajectory"]) < 2:
        raise RuntimeError(f"too few samples ({len(samples)}) to tell the layers apart")
    records = _records_between(perf["trajectory"], samples[0][0], samples[-1][0])
    us_per_sample = 1e6 / perf["hz"] / records
    by_layer: Counter[str] = Counter()
    by_symbol: Counter[tuple[str, str]] = Counter()
    for _, symbol, dso in samples:
        layer = layer_of(dso)
        by_layer[layer] += 1
        by_symbol[(symbol, layer)] += 1
    return {
        "records": records,
        "samples": len(samples),
        "us_per_record": len(samples) * us_per_sample,
        "layers": {name: by_layer[name] * us_per_sample for name in LAYER_NAMES},
        "top_symbols": [
            {"symbol": symbol, "layer": layer, "us_per_record": n * us_per_sample}
            for (symbol, layer), n in by_symbol.most_common(_TOP_SYMBOLS)
        ],
    }
