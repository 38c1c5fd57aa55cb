"""An asyncio service run as a subprocess by the ticker test (test_aio_consumer.py).

``python aio_ticker_worker.py BOOTSTRAP GROUP TOPIC TOTAL [asyncio|uvloop]``:
consumes TOTAL records with ``AsyncShareConsumer`` as fast as it can while a
task on the same loop ticks every 10 ms, and prints one JSON line with the
ticks' lateness and the garbage collector's longest pause.

Lateness is measured twice. On the wall clock it includes the time the process
was not running at all (a busy CI machine preempts it for tens of ms), which
says nothing about the consumer. In CPU time of the loop's thread it is what
the test means: how long the loop ran other work past a tick's due time, i.e.
the longest step that did not yield (a tick's CPU lateness is the thread's CPU
time from the tick's sleep to its wake-up, less the 10 ms it was asleep for).

A process of its own, as a service would be: in the test process a full
garbage collection walks pytest's whole heap (tens of ms), which says nothing
about the consumer. Like a latency-sensitive service, it calls ``gc.freeze()``
after start-up.
"""

from __future__ import annotations

import asyncio
import gc
import json
import statistics
import sys
import time

from kafka_share.aio import AsyncShareConsumer

TICK_S = 0.010


async def consume(bootstrap: str, group: str, topic: str, total: int) -> dict[str, object]:
    lateness_ms: list[float] = []
    cpu_lateness_ms: list[float] = []
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()

    async def ticker() -> None:
        while not stop.is_set():
            due = loop.time() + TICK_S
            cpu_before = time.thread_time()
            await asyncio.sleep(TICK_S)
            lateness_ms.append((loop.time() - due) * 1000)
            cpu_lateness_ms.append(max(0.0, time.thread_time() - cpu_before - TICK_S) * 1000)

    async with AsyncShareConsumer(bootstrap_servers=bootstrap, group_id=group) as consumer:
        await consumer.subscribe([topic])
        seen = 0
        deadline = time.monotonic() + 30
        while seen == 0 and time.monotonic() < deadline:  # joined, first records in
            seen += (await consumer.poll(0.5)).count()
        tick = asyncio.create_task(ticker())
        started = time.monotonic()
        while seen < total and time.monotonic() - started < 60:
            seen += (await consumer.poll(0.5)).count()
        elapsed = time.monotonic() - started
        stop.set()
        await tick
        blocked_ms = consumer.blocked_loop_max_ms
    return {
        "records": seen,
        "elapsed_s": elapsed,
        "ticks": len(lateness_ms),
        "p50_ms": statistics.median(lateness_ms),
        "p99_ms": statistics.quantiles(lateness_ms, n=100)[98],
        "max_ms": max(lateness_ms),
        "cpu_p99_ms": statistics.quantiles(cpu_lateness_ms, n=100)[98],
        "cpu_max_ms": max(cpu_lateness_ms),
        "blocked_loop_max_ms": blocked_ms,
    }


def main(argv: list[str]) -> int:
    bootstrap, group, topic, total_text = argv[:4]
    loop = argv[4] if len(argv) > 4 else "asyncio"
    pauses_ms: list[float] = []
    started = [0.0]

    def on_gc(phase: str, info: dict[str, int]) -> None:
        if phase == "start":
            started[0] = time.perf_counter()
        else:
            pauses_ms.append((time.perf_counter() - started[0]) * 1000)

    # As latency-sensitive services do: the start-up heap (modules, classes) is
    # moved out of the collector's sight, so a full collection walks only what
    # the service allocated since (see the guide's asyncio section).
    gc.freeze()
    gc.callbacks.append(on_gc)
    coro = consume(bootstrap, group, topic, int(total_text))
    if loop == "uvloop":
        import uvloop

        result = uvloop.run(coro)
    else:
        result = asyncio.run(coro)
    result["gc_max_pause_ms"] = max(pauses_ms, default=0.0)
    print(json.dumps(result), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
