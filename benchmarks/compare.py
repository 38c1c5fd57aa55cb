"""Benchmark kafka-share against its peers, side by side in one run.

    python benchmarks/compare.py [--quick] [--bootstrap-servers HOST:PORT] [--profile]

Starts a single-node Kafka broker (unless ``--bootstrap-servers`` is given),
produces the data sets with confluent-kafka and consumes each with every client
in turn. Writes ``benchmarks/results/<name>.{json,md,png}``. See
``benchmarks/README.md``.
"""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from peers.runner import main

if __name__ == "__main__":
    sys.exit(main())
