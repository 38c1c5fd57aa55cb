"""Start-up of one client in a fresh interpreter: import plus construction, idle memory.

    python benchmarks/peers/startup.py CLIENT BOOTSTRAP_SERVERS

Run by ``benchmarks/compare.py`` several times per client, interleaved. Prints one
line, ``STARTUP {json}``:

* ``import_construct_s``: wall time of importing the client's package and
  constructing one consumer (no subscription, nothing sent yet), the first thing
  this process does after the interpreter's own start;
* ``idle_rss_bytes``: resident set size once the process has gone quiet after
  the construction (an idle consumer in a worker process that is waiting for work).

Deliberately small: it imports only ``sys``, ``time`` and ``os`` before the
clock starts (``json`` after it stops), so the figure is what an application pays,
not what this script loads. Clients: ``kafka-share`` (``ShareConsumer``),
``kafka-share-async`` (``AsyncShareConsumer``, constructed on a running event loop,
whose creation is part of the figure), ``confluent-share`` (confluent-kafka's
``ShareConsumer``), ``confluent-classic`` (its classic ``Consumer``).
"""

from __future__ import annotations

import os
import sys
import time
from typing import Any

#: quiet: the process used less than this share of a CPU over _QUIET_STEP_S
_QUIET_CPU_SHARE = 0.05
_QUIET_STEP_S = 0.1
_QUIET_MAX_S = 3.0


def _construct(client: str, bootstrap: str) -> Any:
    """Import the client's package and construct a consumer (returned to keep it alive)."""
    config = {"bootstrap.servers": bootstrap, "group.id": "startup-probe"}
    if client == "kafka-share":
        from kafka_share import ShareConsumer

        return ShareConsumer(config)
    if client == "kafka-share-async":
        import asyncio

        from kafka_share.aio import AsyncShareConsumer

        async def create() -> Any:
            return AsyncShareConsumer(config)

        loop = asyncio.new_event_loop()
        return loop, loop.run_until_complete(create())
    if client == "confluent-share":
        from confluent_kafka import ShareConsumer as ConfluentShareConsumer

        return ConfluentShareConsumer({**config, "log_level": 3})
    if client == "confluent-classic":
        from confluent_kafka import Consumer

        return Consumer({**config, "log_level": 3})
    raise SystemExit(f"unknown client {client!r}")


def _cpu_s() -> float:
    t = os.times()
    return t.user + t.system


def _wait_until_quiet() -> None:
    """Let start-up work on other threads finish before reading the idle RSS."""
    deadline = time.monotonic() + _QUIET_MAX_S
    while time.monotonic() < deadline:
        before = _cpu_s()
        time.sleep(_QUIET_STEP_S)
        if _cpu_s() - before < _QUIET_CPU_SHARE * _QUIET_STEP_S:
            return


def _rss_bytes() -> int:
    with open("/proc/self/statm", "rb") as f:
        return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")


def main() -> int:
    if len(sys.argv) != 3:
        raise SystemExit(__doc__)
    client, bootstrap = sys.argv[1], sys.argv[2]
    started = time.perf_counter()
    keep = _construct(client, bootstrap)
    import_construct_s = time.perf_counter() - started
    _wait_until_quiet()
    idle_rss = _rss_bytes()
    import json

    print("STARTUP " + json.dumps({
        "client": client, "import_construct_s": import_construct_s,
        "idle_rss_bytes": idle_rss,
    }), flush=True)
    del keep
    os._exit(0)  # closing the consumers is not part of the probe


if __name__ == "__main__":
    sys.exit(main())
