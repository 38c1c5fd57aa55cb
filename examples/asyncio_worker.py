"""An asyncio share-group worker: each record is acknowledged after an awaited call.

    python examples/asyncio_worker.py --bootstrap-servers localhost:9092 \\
        --group workers --topic jobs [--concurrency 20] [--max-records N] \\
        [--timeout SECONDS] [--uvloop]

``AsyncShareConsumer`` runs on the event loop: while the handlers await their
I/O (here a simulated call to another service), the consumer's heartbeats,
fetches and acknowledgements keep flowing on the same loop.

Explicit acknowledgement: the records of one ``poll()`` are handled
concurrently (at most ``--concurrency`` at a time); each handler ACCEPTs its
record once its awaited call succeeded, or RELEASEs it (the broker delivers it
again, to this worker or another) when the call failed. The next ``poll()``
sends the acknowledgements, riding on the next fetch.

Ctrl+C (SIGINT) or SIGTERM stops the worker cleanly: the pending ``poll()`` is
interrupted with ``consumer.wakeup()``, the acknowledgements are committed and
the consumer leaves the group.

The group must read from the beginning for records produced before it first
consumed: set ``share.auto.offset.reset=earliest`` on the group once (see
``examples/README.md``).
"""

from __future__ import annotations

import argparse
import asyncio
import signal
import sys
import time

from kafka_share import AcknowledgeType, ConsumerRecord, WakeupError
from kafka_share.aio import AsyncShareConsumer


class TransientError(Exception):
    """The downstream service failed this time; the record is worth retrying."""


async def call_service(record: ConsumerRecord[bytes, bytes]) -> None:
    """The awaited work for one record: a stand-in for an HTTP call or a database
    write. A value starting with ``fail-once`` fails on its first delivery."""
    await asyncio.sleep(0.002)
    if record.value is not None and record.value.startswith(b"fail-once") and (
        record.delivery_count == 1
    ):
        raise TransientError("the service is busy")


async def handle(
    consumer: AsyncShareConsumer[bytes, bytes],
    record: ConsumerRecord[bytes, bytes],
    slots: asyncio.Semaphore,
) -> bool:
    """Handle one record and acknowledge it; True if it was processed."""
    async with slots:
        try:
            await call_service(record)
        except TransientError as exc:
            consumer.acknowledge(record, AcknowledgeType.RELEASE)
            print(f"released partition={record.partition} offset={record.offset} "
                  f"delivery_count={record.delivery_count} reason={exc}", flush=True)
            return False
    consumer.acknowledge(record, AcknowledgeType.ACCEPT)
    value = record.value.decode("utf-8", errors="replace") if record.value is not None else None
    print(f"processed partition={record.partition} offset={record.offset} "
          f"delivery_count={record.delivery_count} value={value}", flush=True)
    return True


async def run(bootstrap_servers: str, group: str, topic: str, concurrency: int,
              max_records: int | None, timeout_s: float | None) -> int:
    """Consume until ``max_records`` are processed, ``timeout_s`` passes, or a signal.

    Returns the number of records processed.
    """
    processed = 0
    slots = asyncio.Semaphore(concurrency)
    deadline = time.monotonic() + timeout_s if timeout_s is not None else None
    async with AsyncShareConsumer[bytes, bytes](
        {
            "bootstrap.servers": bootstrap_servers,
            "group.id": group,
            "share.acknowledgement.mode": "explicit",
        }
    ) as consumer:
        loop = asyncio.get_running_loop()
        for signum in (signal.SIGINT, signal.SIGTERM):
            loop.add_signal_handler(signum, consumer.wakeup)
        await consumer.subscribe([topic])
        while max_records is None or processed < max_records:
            left_s = None if deadline is None else deadline - time.monotonic()
            if left_s is not None and left_s <= 0:
                break
            try:
                records = await consumer.poll(timeout=1.0 if left_s is None else min(1.0, left_s))
            except WakeupError:
                print("stopping", file=sys.stderr, flush=True)
                break
            # Every record of the batch is acknowledged before the next poll.
            outcomes = await asyncio.gather(*(handle(consumer, r, slots) for r in records))
            processed += sum(outcomes)
        try:
            results = await consumer.commit_sync(timeout=10.0)
        except WakeupError:  # a signal after the last poll hit this call instead
            results = await consumer.commit_sync(timeout=10.0)
        for partition, error in results.items():
            if error is not None:
                print(f"acknowledging {partition} failed: {error}", file=sys.stderr)
    return processed


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--bootstrap-servers", required=True, help="host:port[,host:port]")
    parser.add_argument("--group", required=True, help="share group id")
    parser.add_argument("--topic", required=True)
    parser.add_argument("--concurrency", type=int, default=20,
                        help="records handled at the same time")
    parser.add_argument("--max-records", type=int, default=None,
                        help="stop after at least this many records (whole batches)")
    parser.add_argument("--timeout", type=float, default=None,
                        help="stop after this many seconds")
    parser.add_argument("--uvloop", action="store_true", help="run on uvloop")
    args = parser.parse_args(argv)
    coro = run(args.bootstrap_servers, args.group, args.topic, args.concurrency,
               args.max_records, args.timeout)
    if args.uvloop:
        import uvloop  # noqa: PLC0415 (optional dependency)

        processed = uvloop.run(coro)
    else:
        processed = asyncio.run(coro)
    print(f"summary: processed={processed}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
