"""A share-group worker in implicit acknowledgement mode.

Run as many copies as you like against the same topic and group: the share
group hands every record to one worker at a time, even on a single partition.

    python examples/implicit_worker.py --bootstrap-servers localhost:9092 \\
        --group workers --topic jobs [--max-records N] [--timeout SECONDS]

Implicit mode means: every record returned by ``poll()`` is ACCEPTed
(acknowledged as processed, never delivered again) by the *next* ``poll()``,
``commit_sync()`` or ``close()``. So the rule for a correct worker is simple:
finish processing a whole batch before polling again. A worker that dies
mid-batch never acknowledges it, and the broker hands those records to
another worker once their acquisition lock expires.

Ctrl+C (SIGINT) or SIGTERM stops the worker cleanly: the blocked ``poll()``
is interrupted with ``consumer.wakeup()``, the last batch is committed and the
consumer leaves the group.

The group must read from the beginning for records produced before it first
consumed; set that once on the group (a group config, not a client config):

    kafka-configs.sh --bootstrap-server localhost:9092 --alter --entity-type groups \\
        --entity-name workers --add-config share.auto.offset.reset=earliest
"""

from __future__ import annotations

import argparse
import signal
import sys
import threading
import time
from types import FrameType

from kafka_share import ConsumerRecord, ShareConsumer, WakeupError


def process(record: ConsumerRecord[bytes, bytes]) -> None:
    """The worker's job for one record; here it just prints it.

    Raising here would propagate out of the poll loop: in implicit mode there
    is no per-record failure path (see explicit_poison.py for one).
    """
    value = record.value.decode("utf-8", errors="replace") if record.value is not None else None
    print(
        f"processed partition={record.partition} offset={record.offset} "
        f"delivery_count={record.delivery_count} value={value}",
        flush=True,
    )


def install_stop_handlers(consumer: ShareConsumer[bytes, bytes]) -> None:
    """SIGINT and SIGTERM make the blocked (or next) ``poll()`` raise WakeupError."""

    def on_signal(signum: int, _frame: FrameType | None) -> None:
        print(f"received {signal.Signals(signum).name}, stopping", file=sys.stderr, flush=True)
        # wakeup() is safe from any thread. It is called from a helper thread
        # rather than from the handler itself because a Python signal handler
        # interrupts the main thread at an arbitrary point, possibly while that
        # thread holds one of the consumer's internal locks.
        threading.Thread(target=consumer.wakeup, name="wakeup").start()

    signal.signal(signal.SIGINT, on_signal)
    signal.signal(signal.SIGTERM, on_signal)


def run(bootstrap_servers: str, group: str, topic: str, max_records: int | None,
        timeout_s: float | None) -> int:
    """Consume until ``max_records`` are processed, ``timeout_s`` passes, or a signal.

    Returns the number of records processed.
    """
    consumer: ShareConsumer[bytes, bytes] = ShareConsumer(
        {
            "bootstrap.servers": bootstrap_servers,
            "group.id": group,
            # The default; spelled out because it is the point of this example.
            "share.acknowledgement.mode": "implicit",
        }
    )
    install_stop_handlers(consumer)
    processed = 0
    deadline = time.monotonic() + timeout_s if timeout_s is not None else None
    try:
        consumer.subscribe([topic])
        while max_records is None or processed < max_records:
            wait_s = 1.0
            if deadline is not None:
                wait_s = min(wait_s, deadline - time.monotonic())
                if wait_s <= 0:
                    break
            try:
                # Polling again is what accepts the previous batch. The first
                # records can take a few seconds: the member joins the group and
                # the broker initialises the partition's share state.
                records = consumer.poll(timeout=wait_s)
            except WakeupError:
                break  # SIGINT/SIGTERM
            # Process the WHOLE batch, even past max_records: every record of
            # it will be accepted by the next poll or by the commit below.
            for record in records:
                process(record)
                processed += 1
        # Accept the last batch and wait for the broker to confirm, so nothing
        # processed here is delivered to another worker.
        try:
            results = consumer.commit_sync(timeout=10.0)
        except WakeupError:
            # A signal arrived after the last poll: its wakeup hit this call instead.
            results = consumer.commit_sync(timeout=10.0)
        for partition, error in results.items():
            if error is not None:
                print(f"acknowledging {partition} failed: {error}", file=sys.stderr)
    finally:
        # Leaves the group; unacknowledged records (none here) would be released.
        consumer.close()
    return processed


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--bootstrap-servers", required=True, help="host:port[,host:port]")
    parser.add_argument("--group", required=True, help="share group id")
    parser.add_argument("--topic", required=True)
    parser.add_argument("--max-records", type=int, default=None,
                        help="stop after at least this many records (whole batches)")
    parser.add_argument("--timeout", type=float, default=None,
                        help="stop after this many seconds")
    args = parser.parse_args(argv)
    processed = run(args.bootstrap_servers, args.group, args.topic, args.max_records,
                    args.timeout)
    print(f"summary: processed={processed}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
