"""A share-group worker in a few lines: ``kafka_share.workers.ShareWorker``.

    python examples/share_worker.py --bootstrap-servers localhost:9092 \\
        --group workers --topic jobs [--concurrency 16] [--max-records N] \\
        [--timeout SECONDS] [--idle-timeout SECONDS] [--retries N]

The worker polls, runs ``handle`` for each record in ``--concurrency`` threads
and acknowledges each record as its handler finishes: ACCEPT when it returns,
RELEASE when it raises ``ServiceBusyError`` (a retryable error: the record is
delivered again, with ``delivery_count + 1``), REJECT for anything else (a
poison record). Locks of records being handled are renewed
(``share.auto.renew``, Kafka 4.2+), so a slow handler keeps its records.

``--retries N`` retries a busy service in place (a ``tenacity`` policy, if
tenacity is installed) before the record is released.

Ctrl+C (SIGINT) or SIGTERM stops it in order: records not started are
released at once, running handlers finish (15 s at most), the acknowledgements
are committed. A second Ctrl+C stops at once.

Values starting with ``fail-once`` fail on their first delivery; values
starting with ``poison`` always fail. The group must read from the beginning
for records produced before it first consumed: set
``share.auto.offset.reset=earliest`` on the group once (see ``examples/README.md``).
"""

from __future__ import annotations

import argparse
import sys
import threading
import time
from typing import Any

from kafka_share import ConsumerRecord
from kafka_share.workers import ShareWorker

_print_lock = threading.Lock()


class ServiceBusyError(Exception):
    """The downstream service cannot take the record now; worth retrying."""


def say(text: str) -> None:
    with _print_lock:  # handlers run in several threads: one line at a time
        print(text, flush=True)


def handle(record: ConsumerRecord[bytes, bytes]) -> str:
    """The work for one record: a stand-in for a call to another service."""
    where = (f"partition={record.partition} offset={record.offset} "
             f"delivery_count={record.delivery_count}")
    value = record.value.decode("utf-8", errors="replace") if record.value is not None else ""
    time.sleep(0.005)
    if value.startswith("poison"):
        say(f"rejected {where}")
        raise ValueError(f"cannot handle {value!r}")
    if value.startswith("fail-once") and record.delivery_count == 1:
        say(f"released {where}")
        raise ServiceBusyError("the service is busy")
    say(f"processed {where} value={value}")
    return value


def retry_policy(retries: int) -> Any:
    """Retries in place before a record is released (needs tenacity)."""
    if retries == 0:
        return None
    import tenacity  # noqa: PLC0415 (optional dependency)

    return tenacity.Retrying(stop=tenacity.stop_after_attempt(retries + 1),
                             wait=tenacity.wait_exponential(multiplier=0.05, max=1))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--bootstrap-servers", required=True, help="host:port[,host:port]")
    parser.add_argument("--group", required=True, help="share group id")
    parser.add_argument("--topic", required=True)
    parser.add_argument("--concurrency", type=int, default=16,
                        help="records handled at the same time")
    parser.add_argument("--max-records", type=int, default=None,
                        help="stop after this many records")
    parser.add_argument("--timeout", type=float, default=None,
                        help="stop after this many seconds")
    parser.add_argument("--idle-timeout", type=float, default=None,
                        help="stop after this many seconds without a record")
    parser.add_argument("--retries", type=int, default=0,
                        help="retries in place of a busy service (needs tenacity)")
    args = parser.parse_args(argv)
    worker: ShareWorker[bytes, bytes] = ShareWorker(
        handle,
        {"bootstrap.servers": args.bootstrap_servers, "group.id": args.group},
        topics=[args.topic],
        concurrency=args.concurrency,
        retryable=(ServiceBusyError,),
        retry=retry_policy(args.retries),
    )
    summary = worker.run(max_records=args.max_records, max_seconds=args.timeout,
                         idle_timeout_s=args.idle_timeout)
    metrics = worker.metrics()
    print(f"summary: accepted={summary.accepted} released={summary.released} "
          f"rejected={summary.rejected} released_on_stop={summary.released_on_stop} "
          f"stopped_by={summary.stopped_by} "
          f"handler_ms_avg={metrics['handler-time-avg']:.1f}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
