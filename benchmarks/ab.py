"""Interleaved A/B of two checkouts of kafka-share: CPU per record and records/s.

For a change that must not make the client slower (a refactor, a clean-up):
both checkouts consume the same data sets on one broker through
``compare.py``, alternating A, B, B, A, A, B... so that drift of the machine
(other jobs, thermal, the broker's JIT) falls on both alike. Each round is one
``compare.py --repetitions 1`` run per checkout, with that checkout's own
``benchmarks/`` and ``kafka_share/`` (``PYTHONPATH``). The report gives, per
data set and client, the median over the rounds of CPU seconds per million
records and of records/s, B's ratio to A, and each side's spread (min-max), so
a difference can be told from noise.

    python benchmarks/ab.py --base ../old-checkout --new . --rounds 8 \\
        --bootstrap-servers HOST:PORT

``--bootstrap-servers`` is required (start one with ``kafka-share broker start``):
one broker serves every round. Arguments after ``--`` go to ``compare.py``
(default: ``--quick --scale 15 --data-sets 100B-1p,1KiB-1p,1KiB-6p --clients
kafka-share-implicit,kafka-share-explicit --latency-seconds 0 --memory-records 0``).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

DEFAULT_COMPARE_ARGS = [
    "--quick", "--scale", "15", "--data-sets", "100B-1p,1KiB-1p,1KiB-6p",
    "--clients", "kafka-share-implicit,kafka-share-explicit",
    "--latency-seconds", "0", "--memory-records", "0",
]
METRICS = ("cpu_s_per_million", "records_per_s")


def _checkout(path: str) -> Path:
    root = Path(path).resolve()
    if not (root / "kafka_share" / "__init__.py").is_file():
        raise SystemExit(f"{root} is not a kafka-share checkout (no kafka_share/__init__.py)")
    if not (root / "benchmarks" / "compare.py").is_file():
        raise SystemExit(f"{root} has no benchmarks/compare.py")
    return root


def _run(root: Path, bootstrap: str, extra: list[str], out_dir: Path, name: str) -> Path:
    """One compare.py run of the checkout at ``root``; the path of its JSON results."""
    env = dict(os.environ, PYTHONPATH=str(root))
    argv = [
        sys.executable, str(root / "benchmarks" / "compare.py"),
        "--bootstrap-servers", bootstrap, "--repetitions", "1", "--quiet",
        "--output-dir", str(out_dir), "--name", name, *extra,
    ]
    done = subprocess.run(argv, cwd=root, env=env, capture_output=True, text=True, check=False)
    if done.returncode != 0:
        raise SystemExit(f"{name} failed ({done.returncode}):\n{done.stdout}\n{done.stderr}")
    return out_dir / f"{name}.json"


def _collect(results: list[Path]) -> dict[tuple[str, str, str], list[float]]:
    """(data set, client, metric) -> the round medians."""
    values: dict[tuple[str, str, str], list[float]] = {}
    for path in results:
        summary = json.loads(path.read_text())["summary"]
        for data_set, clients in summary.items():
            for client, stats in clients.items():
                for metric in METRICS:
                    median = (stats.get(metric) or {}).get("median")
                    if median is not None:
                        values.setdefault((data_set, client, metric), []).append(median)
    return values


def report(base: list[Path], new: list[Path]) -> str:
    """The Markdown table of B against A."""
    a, b = _collect(base), _collect(new)
    lines = [
        "| data set | client | metric | A median (min-max) | B median (min-max) | B / A |",
        "|---|---|---|---|---|---|",
    ]
    for key in sorted(a):
        if key not in b:
            continue
        va, vb = a[key], b[key]
        ma, mb = statistics.median(va), statistics.median(vb)
        digits = 2 if key[2] == "cpu_s_per_million" else 0
        lines.append(
            f"| {key[0]} | {key[1]} | {key[2]} | {ma:.{digits}f} ({min(va):.{digits}f}-"
            f"{max(va):.{digits}f}) | {mb:.{digits}f} ({min(vb):.{digits}f}-"
            f"{max(vb):.{digits}f}) | {mb / ma:.3f} |"
        )
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    args_in = list(sys.argv[1:] if argv is None else argv)
    extra = DEFAULT_COMPARE_ARGS
    if "--" in args_in:
        cut = args_in.index("--")
        args_in, extra = args_in[:cut], args_in[cut + 1:]
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--base", required=True, help="checkout A (the reference)")
    parser.add_argument("--new", required=True, help="checkout B (the change)")
    parser.add_argument("--rounds", type=int, default=8)
    parser.add_argument("--bootstrap-servers", required=True)
    parser.add_argument("--output-dir", help="keep every run's results here")
    args = parser.parse_args(args_in)
    if args.rounds < 1:
        parser.error("--rounds must be at least 1")
    base, new = _checkout(args.base), _checkout(args.new)
    out_dir = Path(args.output_dir or tempfile.mkdtemp(prefix="kafka-share-ab-"))
    out_dir.mkdir(parents=True, exist_ok=True)
    runs: dict[str, list[Path]] = {"A": [], "B": []}
    for i in range(args.rounds):
        order = (("A", base), ("B", new)) if i % 2 == 0 else (("B", new), ("A", base))
        for side, root in order:
            runs[side].append(_run(root, args.bootstrap_servers, extra, out_dir, f"{side}-{i}"))
            print(f"round {i + 1}/{args.rounds}: {side} done", file=sys.stderr)
    table = report(runs["A"], runs["B"])
    print(f"A: {base}\nB: {new}\n{args.rounds} rounds, results in {out_dir}\n\n{table}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
