"""Long-running work in explicit mode: keep records with RENEW while a thread pool works.

Every record this consumer acquires is locked for the group's
``share.record.lock.duration.ms`` (30 s by default). Work that takes longer
would lose the lock: the broker hands the record to another consumer and the
work is done twice. Acknowledging a record with ``AcknowledgeType.RENEW``
(Kafka 4.2+) restarts its lock instead:

    python examples/long_running_renew.py --bootstrap-servers localhost:9092 \\
        --group slow-workers --topic jobs [--work-seconds 7] [--max-records N] [--timeout S]

Try it with a short lock, so the work (7 s by default) outlasts it:

    kafka-configs.sh --bootstrap-server localhost:9092 --alter --entity-type groups \\
        --entity-name slow-workers \\
        --add-config share.record.lock.duration.ms=3000,share.auto.offset.reset=earliest

The shape of the loop:

* The consumer is used from the main thread only. The slow work runs in a
  ``concurrent.futures`` thread pool and never touches the consumer.
* After each ``poll()`` the main thread waits until a job finishes or a third
  of the lock duration has passed, then acknowledges every record of that
  poll: ACCEPT if its job is done, RENEW if it is still running.
* The next ``poll()`` sends the acknowledgements. While renewals are
  outstanding it hands out no new records; it returns the renewed records
  once the broker has extended their locks, and they must be acknowledged
  again (ACCEPT or RENEW) like any other record of a poll.
* ``share.acquire.mode=record_limit`` (Kafka 4.2+) makes the broker acquire at
  most ``max.poll.records`` records per fetch, so no acquired record waits
  unprocessed (and unrenewed) in the client while the pool is busy.

Ctrl+C (SIGINT) or SIGTERM stops it: running jobs are abandoned and their
records go back to the group when the consumer leaves it.
"""

from __future__ import annotations

import argparse
import concurrent.futures
import signal
import sys
import threading
import time
from types import FrameType
from typing import Any

from kafka_share import (
    AcknowledgementCommitCallback,
    AcknowledgeType,
    ConsumerRecord,
    KafkaError,
    ShareConsumer,
    TopicIdPartition,
    WakeupError,
)

#: Records per poll, and threads in the pool: every acquired record gets a thread at once.
WORKERS = 8
#: How long poll() waits for records when there is nothing in progress.
POLL_S = 1.0
#: Renewal interval until the broker has told us the lock duration.
DEFAULT_RENEW_EVERY_S = 1.0

Key = tuple[str, int, int]  # (topic, partition, offset)


class Job:
    """One record being worked on, and how often its lock was renewed."""

    def __init__(self, record: ConsumerRecord[bytes, bytes],
                 future: concurrent.futures.Future[str]) -> None:
        self.record = record
        self.future = future
        self.renewals = 0


def slow_work(record: ConsumerRecord[bytes, bytes], work_seconds: float,
              stop: threading.Event) -> str:
    """The long-running job (simulated). Runs on a pool thread: no consumer calls here."""
    if stop.wait(work_seconds):
        raise RuntimeError("stopped before the work was finished")
    return (record.value or b"").decode("utf-8", errors="replace").upper()


def key_of(record: ConsumerRecord[Any, Any]) -> Key:
    return (record.topic, record.partition, record.offset)


def install_stop_handlers(consumer: ShareConsumer[bytes, bytes], stop: threading.Event) -> None:
    """SIGINT/SIGTERM: stop the jobs and make the blocked (or next) poll raise WakeupError."""

    def on_signal(signum: int, _frame: FrameType | None) -> None:
        print(f"received {signal.Signals(signum).name}, stopping", file=sys.stderr, flush=True)
        stop.set()
        # wakeup() is safe from any thread; calling it from a helper thread keeps
        # the handler from running consumer code in the middle of a consumer call.
        threading.Thread(target=consumer.wakeup, name="wakeup").start()

    signal.signal(signal.SIGINT, on_signal)
    signal.signal(signal.SIGTERM, on_signal)


def failed_ack_recorder(failed: set[Key]) -> AcknowledgementCommitCallback:
    """An acknowledgement commit callback that remembers offsets whose acks failed.

    A failed RENEW means the lock was already gone: the record may be with
    another consumer now, so its job's result must not be accepted.
    """

    def callback(offsets: dict[TopicIdPartition, set[int]], error: KafkaError | None) -> None:
        if error is not None:
            for tip, offs in offsets.items():
                failed.update((tip.topic, tip.partition, o) for o in offs)
                print(f"acknowledging {tip.topic}-{tip.partition} {sorted(offs)} failed: {error}",
                      file=sys.stderr, flush=True)

    return callback


def run(bootstrap_servers: str, group: str, topic: str, work_seconds: float,
        max_records: int | None, timeout_s: float | None) -> dict[str, str]:
    """Consume and process until ``max_records`` are done, ``timeout_s`` passes or a signal.

    Returns the summary fields.
    """
    consumer: ShareConsumer[bytes, bytes] = ShareConsumer(
        {
            "bootstrap.servers": bootstrap_servers,
            "group.id": group,
            "share.acknowledgement.mode": "explicit",
            "share.acquire.mode": "record_limit",
            "max.poll.records": WORKERS,
        }
    )
    stop = threading.Event()
    install_stop_handlers(consumer, stop)
    failed_acks: set[Key] = set()
    consumer.set_acknowledgement_commit_callback(failed_ack_recorder(failed_acks))
    pool = concurrent.futures.ThreadPoolExecutor(max_workers=WORKERS, thread_name_prefix="work")
    jobs: dict[Key, Job] = {}
    processed = renewals = lost = 0
    delivery_counts: set[int] = set()
    deadline = time.monotonic() + timeout_s if timeout_s is not None else None
    try:
        consumer.subscribe([topic])
        while not stop.is_set():
            if not jobs and max_records is not None and processed >= max_records:
                break
            if deadline is not None and time.monotonic() >= deadline:
                break
            try:
                # With renewals outstanding this returns the renewed records (no new
                # ones); otherwise it fetches new records.
                records = consumer.poll(timeout=POLL_S)
            except WakeupError:
                break
            held: dict[Key, ConsumerRecord[bytes, bytes]] = {}
            for record in records:
                key = key_of(record)
                job = jobs.get(key)
                if job is not None and key not in failed_acks:
                    held[key] = record  # a renewed record, back for its next acknowledgement
                    continue
                if job is not None:
                    # Its renewal failed and the group delivered it again: the first
                    # job's result must not count.
                    job.future.cancel()
                    lost += 1
                failed_acks.discard(key)
                future = pool.submit(slow_work, record, work_seconds, stop)
                jobs[key] = Job(record, future)
                held[key] = record
                delivery_counts.add(record.delivery_count)
                print(f"started partition={record.partition} offset={record.offset} "
                      f"delivery_count={record.delivery_count} "
                      f"lock_ms={consumer.acquisition_lock_timeout_ms}", flush=True)
            for key in [k for k in jobs if k in failed_acks and k not in held]:
                # The renewal failed and the record did not come back (yet).
                print(f"lost lock partition={key[1]} offset={key[2]}", file=sys.stderr, flush=True)
                jobs.pop(key).future.cancel()
                failed_acks.discard(key)
                lost += 1
            if not held:
                continue
            # Renew well before the lock runs out: a third of it leaves time for the
            # RENEW round trip and a slow poll.
            lock_ms = consumer.acquisition_lock_timeout_ms
            renew_every_s = lock_ms / 3000.0 if lock_ms else DEFAULT_RENEW_EVERY_S
            concurrent.futures.wait(
                [jobs[k].future for k in held], timeout=renew_every_s,
                return_when=concurrent.futures.FIRST_COMPLETED,
            )
            # Every record of the poll is acknowledged before the next poll.
            for key, record in held.items():
                job = jobs[key]
                if not job.future.done():
                    consumer.acknowledge(record, AcknowledgeType.RENEW)
                    job.renewals += 1
                    renewals += 1
                    continue
                del jobs[key]
                error = job.future.exception()
                if error is None:
                    consumer.acknowledge(record, AcknowledgeType.ACCEPT)
                    processed += 1
                    print(f"processed partition={record.partition} offset={record.offset} "
                          f"delivery_count={job.record.delivery_count} "
                          f"renewals={job.renewals} result={job.future.result()}", flush=True)
                else:
                    # Give it back for another attempt (by us or another consumer).
                    consumer.acknowledge(record, AcknowledgeType.RELEASE)
                    print(f"released partition={record.partition} offset={record.offset}: "
                          f"{error}", file=sys.stderr, flush=True)
        # Send the last ACCEPTs and wait for the broker's answer.
        try:
            results = consumer.commit_sync(timeout=10.0)
        except WakeupError:
            results = consumer.commit_sync(timeout=10.0)
        for partition, error in results.items():
            if error is not None:
                print(f"acknowledging {partition} failed: {error}", file=sys.stderr, flush=True)
    finally:
        stop.set()  # abandoned jobs return at once
        pool.shutdown(wait=True, cancel_futures=True)
        # Records still held (abandoned jobs) are released by the broker for others.
        consumer.close()
    return {
        "processed": str(processed),
        "renewals": str(renewals),
        "lost": str(lost),
        "delivery_counts": ",".join(str(d) for d in sorted(delivery_counts)) or "-",
        "lock_ms": str(consumer.acquisition_lock_timeout_ms),
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    parser.add_argument("--bootstrap-servers", required=True, help="host:port[,host:port]")
    parser.add_argument("--group", required=True, help="share group id")
    parser.add_argument("--topic", required=True)
    parser.add_argument("--work-seconds", type=float, default=7.0,
                        help="simulated work per record (default 7)")
    parser.add_argument("--max-records", type=int, default=None,
                        help="stop once at least this many records are processed")
    parser.add_argument("--timeout", type=float, default=None,
                        help="stop after this many seconds")
    args = parser.parse_args(argv)
    summary = run(args.bootstrap_servers, args.group, args.topic, args.work_seconds,
                  args.max_records, args.timeout)
    print("summary: " + " ".join(f"{k}={v}" for k, v in summary.items()), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
